"""``fdl diagnose``'s checks of the project: its Rust toolchain (cargo, rustc, the crate's
edition, the channel ``rust-toolchain.toml`` pins against the images' ``setup:``) and its
framework's torch against the active variant. The machine's checks are in
:mod:`fdl.diagnose.checks`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from fdl.checks import Check, Severity
from fdl.compat import version_key
from fdl.libtorch import TorchDecision, variants
from fdl.paths import Context
from fdl.runner import Runner

__all__ = ["framework_checks", "rust_checks", "toolchain_pin_checks"]


def _c(group: str, name: str, severity: Severity, message: str, fix: str | None = None) -> Check:
    return Check(group, name, severity, message, fix)


_EDITION = re.compile(r'^[ \t]*edition[ \t]*=[ \t]*"(\d{4})"', re.M)


_DEFAULT_TOOLCHAIN = re.compile(r"--default-toolchain[= ]+([A-Za-z0-9._-]+)")


def toolchain_pin_checks(project: Path, image_setups: Mapping[str, str]) -> list[Check]:
    """The channel pinned in ``rust-toolchain.toml`` against the toolchain each image's
    ``setup:`` installs (``--default-toolchain``): an image with another rustc builds the
    project with a compiler nobody tested on the host."""
    from fdl._files import load_toml, read_small_text, reason_of

    try:
        # Bounded, and never a FIFO or a device: a toolchain file is a few lines.
        text = read_small_text(project / "rust-toolchain.toml", limit=1 << 16)
        pinned = load_toml(text) if text is not None else None
    except (OSError, ValueError) as exc:  # ValueError: not TOML
        return [
            _c(
                "toolchain",
                "rust-toolchain.toml",
                Severity.ERROR,
                f"rust-toolchain.toml cannot be read: {reason_of(exc)}",
                'fix its TOML ([toolchain] channel = "1.91.0")',
            )
        ]
    table = pinned.get("toolchain") if pinned is not None else None
    if pinned is not None and table is not None and not isinstance(table, dict):
        return [
            _c(
                "toolchain",
                "rust-toolchain.toml",
                Severity.ERROR,
                f"rust-toolchain.toml: `toolchain` is {type(table).__name__}, not a table",
                'write it as a table: [toolchain] channel = "1.91.0"',
            )
        ]
    channel = str((table or {}).get("channel") or "")
    if not channel:
        return []
    checks = []
    for profile, setup in sorted(image_setups.items()):
        found = _DEFAULT_TOOLCHAIN.search(setup)
        if found is None or found.group(1) == channel:
            continue
        checks.append(
            _c(
                "toolchain",
                f"image {profile}",
                Severity.WARNING,
                f"images.{profile}.setup installs Rust {found.group(1)}, but rust-toolchain.toml "
                f"pins {channel}",
                f"use --default-toolchain {channel} in images.{profile}.setup (or change the pin)",
            )
        )
    return checks


def rust_checks(project: Path, runner: Runner, *, in_containers: bool = False) -> list[Check]:
    """For a Rust project (a ``Cargo.toml``, as floDl's): cargo and rustc, and whether this
    rustc knows the crate's edition. ``in_containers``: every cargo command of the
    manifest runs in a compose service (mounted, baked), so a host without Rust is fine."""
    manifest = project / "Cargo.toml"
    if not manifest.is_file():
        return []
    from fdl.compat import load_table
    from fdl.system import probe_tool, rust_toolchain_file_problem

    blocked = rust_toolchain_file_problem(Path.cwd())  # where rustup would look
    if blocked is not None:
        return [
            _c(
                "toolchain",
                "rust toolchain file",
                Severity.ERROR,
                f"cargo and rustc not asked: {blocked}",
                'replace it with a small TOML file ([toolchain] channel = "1.91.0") or remove it',
            )
        ]
    install = "install Rust: curl https://sh.rustup.rs -sSf | sh (or apt install cargo)"
    checks = []
    cargo, rustc = probe_tool("cargo", runner), probe_tool("rustc", runner)
    missing_pin = re.search(
        r"toolchain '([^']+?)(?:-[a-z0-9_]+-unknown-[a-z-]+)?' is not installed",
        f"{cargo.reason} {rustc.reason}",
    )
    for name, probe in (("cargo", cargo), ("rustc", rustc)):
        if probe.value is None and in_containers:
            checks.append(
                _c(
                    "toolchain",
                    name,
                    Severity.INFO,
                    f"{probe.reason}: not needed here, the project's cargo commands run in "
                    "its containers (`docker:` in fdl.yml), which have it",
                )
            )
        elif probe.value is None:
            fix = install
            if missing_pin is not None:
                fix = (
                    f"rustup toolchain install {missing_pin.group(1)} (the channel "
                    "rust-toolchain.toml pins; it needs network access to static.rust-lang.org)"
                )
            checks.append(
                _c(
                    "toolchain",
                    name,
                    Severity.ERROR,
                    f"{probe.reason}: the project is a Rust "
                    "crate (Cargo.toml), its commands need it",
                    fix,
                )
            )
        else:
            checks.append(_c("toolchain", name, Severity.OK, f"{name} {probe.value.version}"))
    try:
        text = manifest.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    found = _EDITION.search(text)
    if found is None or rustc.value is None:
        return checks
    editions = load_table("build")["rust_editions"]["minimum_rustc"]
    need = editions.get(found.group(1))
    if need is not None and version_key(rustc.value.version) < version_key(str(need)):
        checks.append(
            _c(
                "toolchain",
                "rust edition",
                Severity.ERROR,
                f"Cargo.toml asks for edition {found.group(1)}, which needs rustc {need} or "
                f"newer; this rustc is {rustc.value.version}",
                "rustup update stable (or pin a newer toolchain in rust-toolchain.toml)",
            )
        )
    return checks


def framework_checks(context: Context, decision: TorchDecision) -> list[Check]:
    """The project's framework and the torch it needs, against the active variant: one it
    cannot compile against is an error; one that is not the project's torch a warning."""
    checks = []
    for pin in decision.pins:
        needs = f"torch {pin.torch}" if pin.torch else "any torch"
        if pin.torch and not pin.exact:
            needs = f"torch {pin.torch} or newer"
        std = f", C++{pin.cxx_standard}" if pin.cxx_standard else ""
        reads = f", reads {pin.reads}" if pin.reads else ""
        checks.append(
            _c(
                "framework",
                pin.framework,
                Severity.INFO,
                f"{pin.label} ({pin.how}): {needs}{std}{reads}",
            )
        )
    active = variants.active_name(context)
    if active is None or not (context.libtorch_dir / active / "lib").is_dir():
        return checks
    torch = variants.read_info(context.libtorch_dir / active, active).torch
    if not torch:
        return checks
    fix = (
        f"fdl setup (installs torch {decision.torch} for these GPUs)"
        if decision.torch
        else "fdl setup"
    )
    reason = decision.refusal(torch)
    if reason:
        checks.append(
            _c(
                "framework",
                "active",
                Severity.ERROR,
                f"the active {active} is torch {torch}: {reason}",
                fix,
            )
        )
    elif decision.torch and torch.split("+")[0] != decision.torch:
        checks.append(
            _c(
                "framework",
                "pin",
                Severity.WARNING,
                f"the project uses torch {decision.torch} ({decision.origin}), the active "
                f"{active} is torch {torch}",
                fix,
            )
        )
    return checks
