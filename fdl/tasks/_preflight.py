"""What fdl checks before a project command starts cargo or CMake on this machine, and what
it says when cargo fails.

A build that cannot succeed is stopped before it starts, with the fix, where cargo or
CMake would fail late and without naming fdl: no cargo on PATH, a rustc older than the
crate's ``rust-version``, an active libtorch the project's framework cannot compile
against. Only facts known for sure stop a command: a probe that cannot tell lets it run.
Commands in a container (``docker:``) are not checked here: their tools are the image's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from fdl.errors import EnvironmentProblem, FdlError, Location
from fdl.manifest import Manifest
from fdl.runner import Runner
from fdl.tasks._libtorch_env import LibtorchState, active_libtorch
from fdl.tasks._plan import CommandPlan

__all__ = ["build_tools", "check_before_run", "failure_note", "rust_version"]

# A build tool at a command position of the script: its start, or after ; & | ( or a
# newline, past `VAR=value` assignments and `exec`/`time`/`env`.
_TOOL = re.compile(
    r"(?:^|[;&|(\n])\s*(?:(?:\w+=\S*|exec|time|env)\s+)*(cargo|cmake)(?=\s|$|;|&|\|)", re.M
)
_RUST_VERSION = re.compile(r'^\s*rust-version\s*=\s*"([^"]+)"', re.M)
_RUSTC = re.compile(r"rustc (\d+\.\d+(?:\.\d+)?)")
# Where Rust comes from when rustup cannot help (no network to static.rust-lang.org, a
# distribution's rustc): the standalone installers of each release.
STANDALONE = "https://forge.rust-lang.org/infra/other-installation-methods.html"


def build_tools(script: str) -> frozenset[str]:
    """The build tools (``cargo``, ``cmake``) ``script`` runs."""
    return frozenset(found.group(1) for found in _TOOL.finditer(script))


def rust_version(crate: Path) -> tuple[str, Location] | None:
    """The ``rust-version`` of the crate in ``crate`` (its ``Cargo.toml``, or the
    ``[workspace.package]`` one it inherits from the same file), and where it is said."""
    path = crate / "Cargo.toml"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    found = _RUST_VERSION.search(text)
    if found is None:
        return None
    line = text.count("\n", 0, found.start(1)) + 1
    column = found.start(1) - text.rfind("\n", 0, found.start(1))
    return found.group(1), Location("Cargo.toml", line, column, path)


def _rustc(runner: Runner, cwd: Path, env: Mapping[str, str]) -> tuple[str, str] | None:
    """(version, path) of the rustc cargo will use in ``cwd`` (rustup's proxy honours
    ``rust-toolchain.toml`` there), or None when it cannot tell."""
    path = runner.which("rustc")
    if path is None:
        return None
    # a pinned toolchain rustup lacks is not installed by this probe (cargo will, or say why)
    probe_env = {**env, "RUSTUP_AUTO_INSTALL": "0"}
    try:
        done = runner.run(["rustc", "--version"], cwd=cwd, env=probe_env, check=False, timeout=30)
    except Exception:  # a probe that fails tells nothing
        return None
    found = _RUSTC.search(done.stdout or "")
    return (found.group(1), path) if done.returncode == 0 and found else None


def _check_cargo(plan: CommandPlan, runner: Runner, env: Mapping[str, str]) -> None:
    if runner.which("cargo") is None:
        raise EnvironmentProblem(
            f"`fdl {plan.name}` runs cargo, which is not on PATH",
            hint=(
                "install Rust: curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh "
                f"(without network to rustup: a standalone installer from {STANDALONE}), "
                "then open a new shell or add ~/.cargo/bin to PATH"
            ),
        )
    wanted = rust_version(plan.cwd)
    if wanted is None:
        return
    have = _rustc(runner, plan.cwd, env)
    if have is None:
        return
    from fdl.compat import version_key

    try:
        older = version_key(have[0]) < version_key(wanted[0])
    except ValueError:
        return
    if not older:
        return
    rustup = "/.cargo/bin/" in have[1] or runner.which("rustup") is not None
    fix = (
        f"rustup update stable (or pin {wanted[0]} or newer in rust-toolchain.toml)"
        if rustup
        else f"install Rust {wanted[0]} or newer: rustup (https://rustup.rs), or where rustup "
        f"cannot reach its server a standalone installer from {STANDALONE} "
        "(./install.sh --prefix=$HOME/rust), then put its bin/ first on PATH"
    )
    raise EnvironmentProblem(
        f"rust-version {wanted[0]}: the crate needs rustc {wanted[0]} or newer; "
        f"this rustc is {have[0]} ({have[1]})",
        hint=fix,
        location=wanted[1],
    )


def _check_libtorch(plan: CommandPlan, root: Manifest, state: LibtorchState) -> None:
    active = state.active
    if active is None or not active.torch:
        return
    from fdl.libtorch import CHECK_KEY, framework_torch

    try:
        decision = framework_torch(root)
    except FdlError:
        # a framework release fdl does not know, or a pin that contradicts it: the
        # libtorch commands say so at its line; the build is not fdl's to stop for it
        return
    reason = decision.refusal(active.torch)
    if reason is None:
        return
    from fdl.libtorch import variants
    from fdl.paths import resolve_context

    wanted = decision.torch
    fits = []
    for name in variants.list_variants(resolve_context(root.directory)):
        info = variants.read_info(state.directory / name, name)
        if info.torch and decision.refusal(info.torch) is None:
            fits.append(name)
    if fits:
        fix = f"fdl libtorch activate {fits[0]} (torch {wanted or 'that fits'})"
    elif wanted:
        fix = f"fdl setup (installs torch {wanted} for this machine), or fdl libtorch install --from-wheel --cpu"
    else:
        fix = "fdl setup"
    raise EnvironmentProblem(
        f"`fdl {plan.name}` would build against the active libtorch {active.name} "
        f"(torch {active.torch}): {reason}",
        hint=f"{fix}; to build against torch {active.torch} anyway: "
        f"fdl --set {CHECK_KEY}=false {plan.name}",
    )


def check_before_run(
    plan: CommandPlan, root: Manifest, runner: Runner, environ: Mapping[str, str]
) -> None:
    """Stop ``plan`` before it starts when the build it runs cannot succeed.

    Args:
        plan: The command, planned to run on this machine.
        root: The project's root manifest (its framework decides the torch release).
        runner: Finds and probes the tools.
        environ: The environment the command runs in.

    Raises:
        EnvironmentProblem: cargo is missing, rustc is older than the crate's
            ``rust-version``, or the active libtorch is a release the project's
            framework cannot compile against (each with the fix).
    """
    if plan.docker is not None:
        return
    tools = build_tools(plan.script)
    if not tools:
        return
    if "cargo" in tools:
        _check_cargo(plan, runner, plan.environ(environ))
    _check_libtorch(plan, root, active_libtorch(root.directory, environ))


def failure_note(plan: CommandPlan, status: int) -> str | None:
    """One line after a cargo command that failed (not one that was interrupted): its
    messages are above, and what to do about the usual causes."""
    if (
        plan.docker is not None
        or status in (0, 130, 143)
        or "cargo" not in build_tools(plan.script)
    ):
        return None
    return (
        f"`fdl {plan.name}` failed: cargo exited with status {status} (its messages are above: "
        "a compile error names the file and line; `failed to download`/`failed to query` "
        "means crates.io did not answer: check the network or the registry mirror in "
        "$CARGO_HOME/config.toml, or build with `cargo --offline` once the crates are fetched)"
    )
