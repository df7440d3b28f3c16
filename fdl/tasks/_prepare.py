"""From ``fdl <name> <args...>`` to a plan: resolve, compose the script, plan where it runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fdl.manifest import Manifest
from fdl.runner import Runner
from fdl.tasks._args import CommandSchema, check_args
from fdl.tasks._compose import compose_entry, compose_run, quote_all, split_append, split_user_args
from fdl.tasks._plan import CommandPlan, build_plan
from fdl.tasks._presets import config_words, merge_settings
from fdl.tasks._resolve import Kind, Resolution, resolve

__all__ = ["ARGS", "RUNNER_ARGS", "Invocation", "compose_script", "prepare"]

ARGS = "[ARGS...]"
RUNNER_ARGS = "[RUNNER-ARGS...]"


@dataclass
class Invocation:
    """A resolved command and its plan.

    Attributes:
        resolution: What the command is and what the user asked.
        plan: How it runs; for help, with placeholders instead of arguments;
            None for a group of commands without an entry.
    """

    resolution: Resolution
    plan: CommandPlan | None

    @property
    def action(self) -> str:
        """``help``, ``dry-run`` or ``run``."""
        if self.resolution.help or self.plan is None:
            return "help"
        return "dry-run" if self.resolution.dry_run else "run"


def _run_script(resolution: Resolution, *, template: bool) -> str:
    spec = resolution.spec
    use_append = not resolution.no_append
    if template:
        parts = split_append(spec.get("append")) if use_append else None
        if parts is not None and parts.has_separator:
            return compose_run(spec["run"], spec.get("append"), [ARGS], [RUNNER_ARGS])
        return compose_run(
            spec["run"],
            spec.get("append"),
            [ARGS, f"[-- {RUNNER_ARGS[1:]}"],
            None,
            use_append=use_append,
        )
    before, after = split_user_args(resolution.args)
    return compose_run(
        spec["run"],
        spec.get("append"),
        quote_all(before),
        quote_all(after) if after is not None else None,
        use_append=use_append,
    )


def compose_script(
    resolution: Resolution, environ: Mapping[str, str], *, template: bool = False
) -> str:
    """The shell script a resolved command runs.

    Args:
        resolution: The resolved command (not a group).
        environ: For ``env:`` fallbacks of schema options.
        template: Show ``[ARGS...]`` placeholders instead of the user's arguments.

    Raises:
        UsageError: the user's arguments do not fit the entry's schema.
    """
    if resolution.kind is Kind.RUN:
        return _run_script(resolution, template=template)
    nested = resolution.nested
    assert nested is not None
    schema = CommandSchema.from_data(nested.data.get("schema"))
    preset = resolution.spec if resolution.kind is Kind.PRESET else None
    settings = merge_settings(nested.data, preset)
    lists = {name for name, option in schema.options.items() if option.is_list}
    config = config_words(settings, lists)
    if template:
        return compose_entry(nested.data["entry"], [*quote_all(config), ARGS])
    checked = check_args(
        schema,
        resolution.args,
        command=resolution.name,
        environ=environ,
        preset_options=list(settings["options"]),
    )
    resolution.notes.extend(checked.notes)
    words = [*config, *checked.words, *(resolution.passthrough or [])]
    return compose_entry(nested.data["entry"], quote_all(words))


def prepare(
    root: Manifest,
    name: str,
    tail: Sequence[str],
    *,
    environ: Mapping[str, str],
    overlay: str | None = None,
    runner: Runner | None = None,
) -> Invocation:
    """Resolve ``fdl <name> <tail...>`` and plan it.

    For ``--help`` the plan shows placeholders; for ``--dry-run`` and help a
    missing compose program is a note rather than an error.

    Raises:
        UsageError: wrong arguments.
        ManifestError: a nested manifest, compose file or service is missing or invalid.
        EnvironmentProblem: no compose program for a docker command that is to run.
    """
    resolution = resolve(root, name, tail, env=overlay)
    if resolution.kind is Kind.GROUP:
        return Invocation(resolution, None)
    template = resolution.help
    script = compose_script(resolution, environ, template=template)
    plan = build_plan(
        resolution,
        script,
        root=root,
        environ=environ,
        overlay=overlay,
        runner=runner,
        strict=not (resolution.help or resolution.dry_run),
    )
    return Invocation(resolution, plan)
