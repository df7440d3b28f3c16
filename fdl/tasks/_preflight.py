"""What fdl checks before a project command starts cargo or CMake on this machine, and what
it says when cargo fails.

A build that cannot succeed is stopped before it starts, with the fix, where cargo or
CMake would fail late and without naming fdl: no cargo on PATH, a rustc older than the
crate's ``rust-version``, a toolchain file rustup would hang on. (An active libtorch the
project's framework cannot compile against is refused by the planner:
``fdl.tasks._framework_env``.) Only facts known for sure stop a command: a probe that cannot tell lets it run.
Commands in a container (``docker:``) are not checked here: their tools are the image's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from fdl.errors import EnvironmentProblem, Location
from fdl.runner import Runner
from fdl.tasks._framework_env import build_tools
from fdl.tasks._plan import CommandPlan

__all__ = ["check_before_run", "failure_note", "rust_version"]

_RUST_VERSION = re.compile(r'^[ \t]*rust-version[ \t]*=[ \t]*"([^"\n]+)"', re.M)
_RUSTC = re.compile(r"rustc (\d+\.\d+(?:\.\d+)?)")
# Where Rust comes from when rustup cannot help (no network to static.rust-lang.org, a
# distribution's rustc): the standalone installers of each release.
STANDALONE = "https://forge.rust-lang.org/infra/other-installation-methods.html"


def rust_version(crate: Path) -> tuple[str, Location] | None:
    """The ``rust-version`` of the crate in ``crate`` (its ``Cargo.toml``, or the
    ``[workspace.package]`` one it inherits from the same file), and where it is said."""
    from fdl._files import read_small_text

    path = crate / "Cargo.toml"
    try:
        text = read_small_text(path, limit=1 << 22)  # never a FIFO, a device, gigabytes
    except OSError:
        return None
    if text is None:
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
    from fdl.system import rust_toolchain_file_problem

    blocked = rust_toolchain_file_problem(plan.cwd)
    if blocked is not None:  # rustup (cargo's proxy) would block on it or fill the memory
        raise EnvironmentProblem(
            f"`fdl {plan.name}` runs cargo, and {blocked}",
            hint='make it a small TOML file ([toolchain] channel = "1.95.0") or remove it',
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


def check_before_run(plan: CommandPlan, runner: Runner, environ: Mapping[str, str]) -> None:
    """Stop ``plan`` before it starts when the build it runs cannot succeed.

    Args:
        plan: The command, planned to run on this machine.
        runner: Finds and probes the tools.
        environ: The environment the command runs in.

    Raises:
        EnvironmentProblem: cargo is missing, rustc is older than the crate's
            ``rust-version``, or rustup would hang on its toolchain file (each with the fix).
    """
    if plan.docker is not None:
        return
    tools = build_tools(plan.script)
    if not tools:
        return
    if "cargo" in tools:
        _check_cargo(plan, runner, plan.environ(environ))


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
