"""``fdl diagnose``: do the GPUs, the toolchain and the active libtorch fit together?"""

from __future__ import annotations

from typing import Annotated

import typer

from fdl.cli._render import render_checks, summary_line
from fdl.cli._session import Session
from fdl.cli.commands._common import JsonOption, group, visible_devices
from fdl.diagnose import Check, Severity, run_diagnose
from fdl.errors import ExitCode, ManifestError

app = group("diagnose")


@app.command()
def diagnose(
    ctx: typer.Context,
    as_json: JsonOption = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit with 1 when any check finds an error.")
    ] = False,
    no_docker: Annotated[bool, typer.Option("--no-docker", help="Do not probe docker.")] = False,
) -> None:
    """Check the machine, its GPUs, toolchain, docker and the active libtorch; each problem
    comes with its fix.

    Example: fdl diagnose --strict
    """
    session: Session = ctx.obj
    context = session.libtorch_context()
    checks: list[Check] = []
    expected = None
    framework = None
    setups: dict[str, str] = {}
    in_containers = False
    try:
        manifest = session.manifest_or_none()
        expected = manifest.get("libtorch.variant") if manifest is not None else None
        try:
            framework = session.libtorch_settings().framework
        except ManifestError as exc:  # libtorch.torch against the framework, or Cargo files
            checks.append(Check("framework", "torch", Severity.ERROR, str(exc), exc.hint))
        in_containers = manifest is not None and _cargo_in_containers(manifest.get("commands"))
        images = (manifest.get("images") or {}) if manifest is not None else {}
        setups = {
            str(name): "\n".join(str(line) for line in (spec or {}).get("setup") or ())
            for name, spec in images.items()
            if isinstance(spec, dict)
        }
    except ManifestError as exc:
        checks.append(Check("manifest", "fdl.yml", Severity.ERROR, str(exc), exc.hint))
    result = run_diagnose(
        context,
        environ=session.environ,
        expected_variant=expected,
        docker=not no_docker,
        image_setups=setups,
        framework=framework,
        in_containers=in_containers,
        visible=visible_devices(session.options.gpus),
    )
    checks += result.checks
    if as_json:
        data = result.to_json()
        data["checks"] = [c.to_json() for c in checks]
        session.console.json(data)
    else:
        session.console.out(f"fdl diagnose: {context.label()}\n")
        session.console.out(render_checks(session.console, checks), end="")
        session.console.out(f"\n{summary_line(checks)}")
    if strict and any(c.severity is Severity.ERROR for c in checks):
        raise typer.Exit(int(ExitCode.FAILURE))


def _cargo_in_containers(commands: object) -> bool:
    """Whether every ``run:`` command that calls cargo has ``docker:`` (mounted and baked
    projects): then the host needs no Rust toolchain."""
    if not isinstance(commands, dict):
        return False
    cargo = [
        spec
        for spec in commands.values()
        if isinstance(spec, dict) and "cargo" in str(spec.get("run") or "")
    ]
    return bool(cargo) and all(spec.get("docker") for spec in cargo)
