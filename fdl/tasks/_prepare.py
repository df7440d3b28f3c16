"""From ``fdl <name> <args...>`` to a plan: resolve, compose the script, plan where it runs."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from fdl.manifest import Manifest
from fdl.tasks._compose import (
    ALL_ARGS,
    compose_entry,
    compose_run,
    quote_all,
    split_append,
    split_user_args,
)
from fdl.tasks._env import EnvChange
from fdl.tasks._plan import CommandPlan, build_plan
from fdl.tasks._resolve import Kind, Resolution, locate, resolve

TYPE_CHECKING = False  # typing costs start-up: annotations only
if TYPE_CHECKING:
    from typing import Any

    from fdl.runner import Runner  # a dry run never loads the runner

# An entry's schema, presets and probe (fdl.tasks._args, _presets, _probe) are imported where
# an entry is run: a `run:` command starts without them.

__all__ = ["ARGS", "RUNNER_ARGS", "Composed", "Invocation", "compose_script", "prepare"]

ARGS = "[ARGS...]"
RUNNER_ARGS = "[RUNNER-ARGS...]"


@dataclass(frozen=True)
class Composed:
    """A command's script, shown and run.

    Attributes:
        shown: The script with the user's arguments quoted in place (what help,
            the "running" line and ``plan.script`` show).
        text: The script that runs: it refers to the arguments as ``"$@"``.
        args: The shell's positional parameters for ``text``.
    """

    shown: str
    text: str
    args: tuple[str, ...] = ()


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
        """``refresh-schema``, ``help``, ``dry-run`` or ``run``."""
        if self.resolution.refresh_schema:
            return "refresh-schema"
        if self.resolution.help or self.plan is None:
            return "help"
        return "dry-run" if self.resolution.dry_run else "run"


# A `run:` script that reads its arguments itself (`"$@"`, `$*`): appending them too would
# hand every argument twice. Only these two: `$1` is as often awk's as the shell's.
_OWN_ARGS = re.compile(r"\$(?:@|\*|\{[@*]\})")


def _run_script(resolution: Resolution, *, template: bool) -> Composed:
    spec = resolution.spec
    run, append = spec["run"], spec.get("append")
    use_append = not resolution.no_append
    if _OWN_ARGS.search(run):
        return _run_script_with_own_args(resolution, run, append, use_append, template=template)
    if template:
        parts = split_append(append) if use_append else None
        if parts is not None and parts.has_separator:
            shown = compose_run(run, append, [ARGS], [RUNNER_ARGS])
        else:
            shown = compose_run(
                run, append, [ARGS, f"[-- {RUNNER_ARGS[1:]}"], None, use_append=use_append
            )
        return Composed(shown, shown)
    before, after = split_user_args(resolution.args)
    shown = compose_run(
        run,
        append,
        quote_all(before),
        quote_all(after) if after is not None else None,
        use_append=use_append,
    )
    parts = split_append(append) if use_append else None
    if after is not None and parts is not None and parts.post:
        # `run [append-pre] ARGS -- append-post RUNNER-ARGS`: the runner arguments
        # follow manifest text, so they stay quoted in the script; ARGS travel as "$@".
        args = tuple(before)
        text = compose_run(run, append, [ALL_ARGS] if args else [], quote_all(after))
    elif after is not None:
        # `run [append-pre] ARGS -- RUNNER-ARGS` is the user's words in their order.
        args = (*before, "--", *after)
        text = compose_run(run, parts.pre if parts else None, [ALL_ARGS], None)
    else:
        # `run [append-pre] ARGS [--]` (the `--` of an `append:` with nothing after it).
        args = tuple(before)
        text = compose_run(run, append, [ALL_ARGS] if args else [], None, use_append=use_append)
    return Composed(shown, text, args)


def _run_script_with_own_args(
    resolution: Resolution, run: str, append: str | None, use_append: bool, *, template: bool
) -> Composed:
    """The script of a ``run:`` that uses ``"$@"`` itself: the arguments are its positional
    parameters only (``sh -c 'script' sh ARGS...``), never appended as well."""
    text = compose_run(run, append, [], None, use_append=use_append)
    before, after = split_user_args(resolution.args)
    args = (*before, *(("--", *after) if after is not None else ()))
    if template or (args and resolution.dry_run):
        resolution.notes.append(
            'the `run:` script reads its arguments itself ("$@"): they reach it as its '
            "positional parameters and are not appended to it"
        )
    if template:
        return Composed(text, text)
    return Composed(f"{text}  # with {shlex.join(args)}" if args else text, text, args)


def compose_script(
    resolution: Resolution, environ: Mapping[str, str], *, template: bool = False
) -> Composed:
    """The shell script a resolved command runs, and its arguments.

    Args:
        resolution: The resolved command (not a group).
        environ: For ``env:`` fallbacks of schema options.
        template: Show ``[ARGS...]`` placeholders instead of the user's arguments.

    Raises:
        UsageError: the user's arguments do not fit the entry's schema.
    """
    if resolution.kind is Kind.RUN:
        return _run_script(resolution, template=template)
    from fdl.tasks._args import CommandSchema, check_args
    from fdl.tasks._presets import config_words, merge_settings

    nested = resolution.nested
    assert nested is not None
    schema = CommandSchema.from_data(nested.data.get("schema"))
    preset = resolution.spec if resolution.kind is Kind.PRESET else None
    settings = merge_settings(nested.data, preset)
    lists = {name for name, option in schema.options.items() if option.is_list}
    config = config_words(settings, lists)
    entry = nested.data["entry"]
    if template:
        shown = compose_entry(entry, [*quote_all(config), ARGS])
        return Composed(shown, shown)
    checked = check_args(
        schema,
        resolution.args,
        command=resolution.name,
        environ=environ,
        preset_options=list(settings["options"]),
    )
    resolution.notes.extend(checked.notes)
    words = (*config, *checked.words, *(resolution.passthrough or []))
    text = compose_entry(entry, [ALL_ARGS] if words else [])
    return Composed(compose_entry(entry, quote_all(words)), text, words)


def _prober(
    resolution: Resolution,
    root: Manifest,
    environ: Mapping[str, str],
    overlay: str | None,
    runner: Runner | None,
) -> Callable[[Manifest], tuple[dict[str, Any], str]]:
    """Runs ``<entry> --fdl-schema`` where the entry runs (this machine or its compose
    service), through the same planning as the command itself."""

    def probe(nested: Manifest) -> tuple[dict[str, Any], str]:
        from fdl.tasks._probe import (
            FLAG,
            HELP_PROBE_SECONDS,
            MAX_PROBE_OUTPUT,
            PROBE_SECONDS,
            parse_probe_output,
            probe_failure,
        )

        script = compose_entry(str(nested.data["entry"]), [FLAG])
        asked = replace(
            resolution,
            kind=Kind.ENTRY,
            nested=nested,
            args=[],
            passthrough=None,
            help=False,
            dry_run=False,
            refresh_schema=False,
            notes=[],
        )
        plan = build_plan(asked, script, root=root, environ=environ, overlay=overlay, runner=runner)
        where = f" (in compose service {plan.docker.service})" if plan.docker else ""
        from fdl.runner import default_runner

        run = runner or default_runner()
        # bounded: what the probe prints (deep JSON, an endless stream) and how long it
        # takes; `--help` waits briefly, then shows the inline schema with the note
        done = run.run(
            plan.argv,
            cwd=plan.cwd,
            env=plan.environ(environ),
            check=False,
            timeout=HELP_PROBE_SECONDS if resolution.help else PROBE_SECONDS,
            max_output=MAX_PROBE_OUTPUT,
        )
        if done.returncode != 0:
            raise probe_failure(script + where, done.returncode, done.stderr)
        return parse_probe_output(done.stdout, script), script + where

    return probe


def _schema_for_dry_run(nested: Manifest, notes: list[str]) -> dict[str, Any] | None:
    """A dry run never starts the entry to ask for its schema (for a ``cargo`` entry that
    is a build, for a ``docker:`` one a container): it uses a fresh cache, else the inline
    ``schema:`` and says that the run would ask first."""
    from fdl.tasks._probe import FLAG, cached_schema

    cached = cached_schema(nested)
    if cached is not None:
        return cached
    inline = nested.data.get("schema")
    probe = compose_entry(str(nested.data["entry"]), [FLAG])
    using = (
        "the inline schema:" if isinstance(inline, dict) else "no schema (options pass unchecked)"
    )
    notes.append(
        f"no fresh cached answer of `{probe}` (a dry run does not start the entry; the run "
        f"asks it first, `--refresh-schema` asks now); using {using}"
    )
    return inline if isinstance(inline, dict) else None


def prepare(
    root: Manifest,
    name: str,
    tail: Sequence[str],
    *,
    environ: Mapping[str, str],
    overlay: str | None = None,
    runner: Runner | None = None,
    no_append: bool = False,
    gpus: str | tuple[int, ...] | None = None,
    count_gpus: Callable[[], int] | None = None,
) -> Invocation:
    """Resolve ``fdl <name> <tail...>`` and plan it.

    ``gpus`` is ``--gpus`` (:func:`fdl.tasks._contract.parse_gpus`): the command gets
    ``CUDA_VISIBLE_DEVICES``/``HIP_VISIBLE_DEVICES``, or, when it is marked ``cluster:
    true``, floDl's launcher envelope (:mod:`fdl.tasks._cluster`; ``count_gpus`` answers
    ``--gpus all``).

    ``no_append`` is ``fdl --no-append <name>`` (floDl's place for it): it leaves out a
    ``run:`` command's ``append:`` as ``--no-append`` after the name does, and means
    nothing to entries (floDl's CLI drops it for them too).

    For ``--help`` the plan shows placeholders; for ``--dry-run`` and help a
    missing compose program is a note rather than an error. A ``compile: true`` entry
    is asked for its schema for help and runs, never for a dry run (which reads the cache).

    Raises:
        UsageError: wrong arguments.
        ManifestError: a nested manifest, compose file or service is missing or invalid.
        EnvironmentProblem: no compose program for a docker command that is to run.
    """
    resolution = resolve(root, name, tail, env=overlay)
    if no_append and resolution.kind is Kind.RUN:
        resolution.no_append = True
    nested = resolution.nested
    if nested is not None and nested.data.get("entry"):
        from fdl.tasks._probe import (
            FLAG,
            asks_itself,
            cached_schema,
            effective_schema,
            with_schema,
        )
    if (
        nested is not None
        and nested.data.get("entry")
        and (asks_itself(nested, help_only=resolution.help) or resolution.refresh_schema)
    ):
        if resolution.dry_run and not resolution.refresh_schema:
            schema = _schema_for_dry_run(nested, resolution.notes)
        else:
            probe = _prober(resolution, root, environ, overlay, runner)
            schema = effective_schema(
                nested,
                probe,
                refresh=resolution.refresh_schema,
                on_warning=resolution.notes.append,
                ask_for_help=resolution.help,
            )
        resolution.nested = with_schema(nested, schema)
        if resolution.refresh_schema:
            return Invocation(resolution, None)
    elif nested is not None and nested.data.get("entry"):
        # not asked (a run of an entry without compile: true; help of a cargo or docker
        # entry) unless --refresh-schema, but what it answered then is used
        cached = cached_schema(nested)
        if cached is not None:
            resolution.nested = with_schema(nested, cached)
        elif resolution.help and not nested.data.get("schema"):
            words = resolution.words[:-1] if resolution.kind is Kind.PRESET else resolution.words
            asked = compose_entry(str(nested.data["entry"]), [FLAG])
            where = (
                f" in compose service {nested.data['docker']}" if nested.data.get("docker") else ""
            )
            resolution.notes.append(
                f"the options of `{asked}`{where} are not known yet: "
                f"`fdl {' '.join(words)} --refresh-schema` asks it, and this help shows them"
            )
    if resolution.kind is Kind.GROUP:
        return Invocation(resolution, None)
    exports: tuple[EnvChange, ...] = ()
    if not resolution.help and (gpus is not None or resolution.cluster):
        from fdl.tasks._cluster import cluster_run
        from fdl.tasks._contract import local_hostname

        run = cluster_run(
            marked=resolution.cluster,
            block=root.data.get("cluster"),
            block_at=locate(root, ("cluster",), root.directory, at_key=True),
            gpus=gpus,
            command=name,
            directory=root.directory,
            environ=environ,
            count_gpus=count_gpus or _count_gpus,
            hostname=local_hostname(environ),
        )
        exports = tuple(run.exports)
        resolution.notes.extend(run.notes)
    if not resolution.help and overlay and root.data.get("cluster") is not None:
        exports += _testing_envelope(root, count_gpus or _count_gpus, resolution.notes)
    template = resolution.help
    script = compose_script(resolution, environ, template=template)
    plan = build_plan(
        resolution,
        script.shown,
        run=(script.text, script.args),
        root=root,
        environ=environ,
        overlay=overlay,
        runner=runner,
        strict=not (resolution.help or resolution.dry_run),
        exports=exports,
    )
    return Invocation(resolution, plan)


def _testing_envelope(
    root: Manifest, count_gpus: Callable[[], int], notes: list[str]
) -> tuple[EnvChange, ...]:
    """``FLODL_TESTING_CLUSTER_JSON`` for a command of an overlay with a ``cluster:`` block,
    as floDl's CLI exports it; one it cannot build is a note (floDl's CLI warns too)."""
    from fdl.errors import FdlError
    from fdl.tasks._cluster import testing_envelope

    where = locate(root, ("cluster",), root.directory, at_key=True)
    try:
        value = testing_envelope(root.data.get("cluster"), where, count_gpus)
    except FdlError as error:
        notes.append(f"FLODL_TESTING_CLUSTER_JSON is not set: {error}")
        return ()
    return (EnvChange("FLODL_TESTING_CLUSTER_JSON", value),)


def _count_gpus() -> int:
    """The GPUs on this machine, for ``--gpus all``."""
    from fdl.system.gpus import detect_gpus

    return len(detect_gpus().gpus)
