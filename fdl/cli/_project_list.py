"""The project's commands as rows for ``fdl --help``: name and what it does."""

from __future__ import annotations

from fdl.cli._registry import BUILTINS
from fdl.errors import ManifestError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from fdl.manifest import Manifest

__all__ = ["command_rows", "describe_command"]


def describe_command(
    manifest: Manifest, name: str, spec: dict[str, Any] | None, env: str | None
) -> str:
    """One line for a root command: its description, else what it runs."""
    spec = spec or {}
    if spec.get("run") is not None:
        kind = "run"  # the common case, without loading the task runner (start-up time)
    else:
        from fdl.tasks import command_kind

        kind = command_kind(spec)
    text = spec.get("description") or ""
    if kind == "run":
        if not text:
            lines = spec["run"].strip().splitlines()
            text = lines[0] + (" ..." if len(lines) > 1 else "")
        if spec.get("docker"):
            text += f"  [docker: {spec['docker']}]"
        return text
    from fdl.tasks import load_nested

    directory = manifest.directory / (spec.get("path") or name)
    try:
        nested = load_nested(directory.resolve(), env, manifest.directory)
    except ManifestError:
        return (
            text + "  " if text else ""
        ) + f"(its manifest has problems; see `fdl {name} --help`)"
    if nested is None:
        return (text + "  " if text else "") + f"(no fdl.yml in {spec.get('path') or name}/)"
    text = text or nested.data.get("description") or ""
    from fdl.tasks import preset_problems

    broken = list(preset_problems(nested, manifest.directory))
    if broken:
        which = ", ".join(broken)
        text = (text + "  " if text else "") + (
            f"(preset{'s' if len(broken) > 1 else ''} {which} "
            f"{'have' if len(broken) > 1 else 'has'} a problem; see `fdl {name} --help`)"
        )
    count = len(nested.data.get("commands") or {})
    extra = f"{count} sub-command{'s' if count != 1 else ''}" if count else ""
    if nested.data.get("docker"):
        extra += ("; " if extra else "") + f"docker: {nested.data['docker']}"
    if not extra:
        return text
    return f"{text}  [{extra}]" if text else f"[{extra}]"


def command_rows(manifest: Manifest, env: str | None) -> list[tuple[str, str]]:
    """``(name, description)`` for every root command, in manifest order."""
    rows = []
    for name, spec in (manifest.data.get("commands") or {}).items():
        text = describe_command(manifest, name, spec, env)
        if name in BUILTINS and name != "run":
            if BUILTINS[name].single:
                text += f"  [shadowed by the built-in; run it with `fdl run {name}`]"
            else:
                text += (
                    f"  [also a built-in: `fdl {name} <sub-command>` is the built-in's; "
                    f"`fdl {name}` otherwise runs this]"
                )
        if isinstance(spec, dict) and spec.get("cluster") is True:
            # floDl's fdl.cluster.yml marks the multi-host commands: floDl's launcher in the
            # program fans out, fdl exports its envelope (fdl.tasks._cluster)
            text += "  [cluster: true: floDl's launcher fans it out]"
        rows.append((name, text))
    return rows
