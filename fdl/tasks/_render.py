"""A plan as a shell script: what ``--dry-run`` prints (paste it into ``sh`` to run it)."""

from __future__ import annotations

from fdl._text import printable
from fdl.tasks._compose import quote
from fdl.tasks._env import export_line
from fdl.tasks._plan import CommandPlan

__all__ = ["render_argv", "render_script"]


def render_argv(plan: CommandPlan) -> str:
    """The exact command line, one word per shell word; docker runs broken over lines.

    The user's arguments follow the script as its positional parameters
    (``sh -c 'script "$@"' sh ARGS...``; in a container ``sh -c PROLOGUE 'script' ARGS...``,
    which runs the script under bash); bytes that are not UTF-8 are printed
    as ``"$(printf '\\377')"``, so the line pastes into ``sh`` unchanged.
    """
    words = [quote(word) for word in plan.argv]
    if plan.docker is None:
        return " ".join(words)
    # <service> sh -c <prologue> <script> [ARGS...]: the script ($0) starts a line
    script_at = len(plan.argv) - len(plan.args) - 1
    service_at = script_at - 4
    breaks = {service_at, script_at}
    lines: list[str] = []
    current: list[str] = []
    for index, word in enumerate(words):
        if (plan.argv[index] == "-e" and index < service_at) or index in breaks:
            lines.append(" ".join(current))
            current = []
        current.append(word)
    lines.append(" ".join(current))
    return " \\\n    ".join(line for line in lines if line)


def render_script(plan: CommandPlan) -> str:
    """The plan as a POSIX shell script with comments saying what and where."""
    title = f"# fdl {plan.name}"
    if plan.description:  # a comment: one line (a line break would start a command), masked
        from fdl.manifest import shown_text

        title += f": {printable(shown_text(plan.description))}"
    lines = [title]
    if plan.declared_at is not None:
        lines.append(f"# declared at {plan.declared_at}")
    if plan.docker is not None:
        lines.append(
            f"# runs in docker compose service {plan.docker.service} "
            f"({plan.docker.compose_file.name}), in {plan.docker.container_dir}"
        )
        if plan.docker.profile is not None:
            lines.append(
                f"# its image is built first when missing (fdl image build {plan.docker.profile})"
            )
    else:
        lines.append("# runs on this machine")
    if plan.overlay:
        lines.append(f"# environment overlay: {plan.overlay}")
    lines.extend(f"# note: {note}" for note in plan.notes)
    # every comment one line, whatever a path, a description or a note holds
    lines = [printable(line, 2000) for line in lines]
    lines.append(f"cd {quote(str(plan.cwd))}")
    lines.extend(export_line(change) for change in plan.env)
    lines.append(render_argv(plan))
    return "\n".join(lines) + "\n"
