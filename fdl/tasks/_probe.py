"""``compile: true``: the entry describes its own options (``<entry> --fdl-schema``).

A nested manifest with ``compile: true`` gets its schema from its entry: fdl runs
``<entry> --fdl-schema`` once, where the entry runs (this machine or its compose service),
keeps the JSON in ``<dir>/.fdl/schema-cache/<dir>.json`` and uses it for help, option
checks and completion. The cache is keyed by the manifest's text, the entry, and the
entry's program (its size and modification time; for ``cargo`` entries the crate's
``Cargo.toml``, ``Cargo.lock`` and sources), so a rebuilt program or a changed manifest
is asked again. A probe that fails or prints no JSON object leaves the inline ``schema:``
in use, with a warning. Probing happens when the command runs or its help is asked for,
and for ``--refresh-schema`` and ``fdl schema refresh``; never for ``fdl --help``,
completion or ``--dry-run``, which read the cache only. An entry that runs here and is
not ``cargo`` is asked for its help without ``compile: true`` (as floDl's CLI does:
floDl's benchmarks manifest promises that ``fdl bench --help`` shows run.sh's flags),
never for a run; other entries without it are asked only on ``--refresh-schema``, and a
fresh cache is used for every entry.

What the cache and the probe give is bounded: a cache file is read only when it is a
regular file of at most MAX_CACHE_BYTES, nested at most MAX_DEPTH deep, and passes the
checks of an inline ``schema:``; a probe runs in its own process group, ended when it
prints more than MAX_PROBE_OUTPUT bytes or outlives its time (HELP_PROBE_SECONDS for
``--help``, which then shows the inline schema with a note).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fdl._files import atomic_write_text, leaves
from fdl.errors import EnvironmentProblem, FdlError, ManifestError, ManifestErrors
from fdl.manifest import LayerKind, Manifest, MapNode, parse_text
from fdl.manifest.schema import Checker
from fdl.manifest.sections import COMMAND_SCHEMA

__all__ = [
    "CACHE_DIR",
    "HELP_PROBE_SECONDS",
    "MAX_PROBE_OUTPUT",
    "PROBE_SECONDS",
    "CachedSchema",
    "ProbeFailed",
    "asks_itself",
    "cache_file",
    "cached_schema",
    "effective_schema",
    "find_caches",
    "parse_probe_output",
    "probe_failure",
    "probe_key",
    "schema_of",
    "with_schema",
    "write_cache",
]

CACHE_DIR = Path(".fdl") / "schema-cache"
_META = "x-fdl"  # fdl's cache key, beside the schema's own keys
FLAG = "--fdl-schema"
# Directories the cache search skips (build output, dependencies, VCS).
_SKIP = {".git", "target", "node_modules", "libtorch", "runs", ".cargo", ".venv", "__pycache__"}
_MAX_SOURCE_FILES = 20_000
# What a cache file or a probe's output may hold: a schema is a few kB; past these, or
# nested deeper than a schema is, the cache is not used and the probe is refused, so a
# hostile or broken file (a FIFO, /dev/zero, deep JSON) cannot hang help or fill memory.
MAX_CACHE_BYTES = 1 << 20
MAX_PROBE_OUTPUT = 1 << 20
MAX_DEPTH = 32
# `fdl <command> --help` waits this long for `<entry> --fdl-schema`, a run or
# `--refresh-schema` PROBE_SECONDS (a cargo entry may build first).
HELP_PROBE_SECONDS = 1.0
PROBE_SECONDS = 600.0


class ProbeFailed(FdlError):
    """``<entry> --fdl-schema`` failed or printed no usable schema."""

    exit_code = EnvironmentProblem.exit_code


@dataclass(frozen=True)
class CachedSchema:
    """A schema cache file and what it says about itself.

    Attributes:
        path: The file.
        name: The command directory's name.
        status: ``fresh`` (its key matches), ``stale`` (the program or manifest changed) or
            ``orphan`` (no manifest beside it, or unreadable).
        schema: The cached schema, when readable.
    """

    path: Path
    name: str
    status: str
    schema: dict[str, Any] | None


def cache_file(nested: Manifest) -> Path:
    """Where the schema of ``nested``'s entry is cached."""
    return nested.directory / CACHE_DIR / f"{nested.directory.name}.json"


def _program(entry: str, directory: Path) -> Path | None:
    """The program an entry starts (its first word, after ``VAR=value`` assignments)."""
    words = _words(entry)
    if not words:
        return None
    first = words[0]
    if "/" in first:
        path = Path(os.path.expanduser(first))
        return path if path.is_absolute() else directory / path
    import shutil

    found = shutil.which(first)
    return Path(found) if found else None


def _words(entry: str) -> list[str]:
    try:
        words = shlex.split(entry)
    except ValueError:
        return []
    return [w for w in words if not ("=" in w and w.split("=", 1)[0].isidentifier())]


def _scripts(entry: str, directory: Path) -> list[Path]:
    """Files the entry names after its program (``bash run.sh``: the script the schema
    comes from), so editing them asks again."""
    found = []
    for word in _words(entry)[1:6]:
        if word.startswith("-") or len(word) > 255:
            continue
        path = directory / word
        try:
            if path.is_file():
                found.append(path)
        except OSError:
            continue
    return found


def _stamp(path: Path) -> str:
    try:
        info = path.stat()
    except OSError:
        return f"{path}:absent"
    return f"{path}:{info.st_size}:{info.st_mtime_ns}"


def _crate_stamps(directory: Path) -> list[str]:
    """What a ``cargo`` entry's program is built from: the manifest files and sources of
    the crate (bounded walk)."""
    stamps = [_stamp(directory / name) for name in ("Cargo.toml", "Cargo.lock")]
    newest = 0
    seen = 0
    for top, dirs, files in os.walk(directory / "src"):
        dirs[:] = [d for d in dirs if d not in _SKIP]
        for name in files:
            seen += 1
            if seen > _MAX_SOURCE_FILES:
                break
            try:
                newest = max(newest, (Path(top) / name).stat().st_mtime_ns)
            except OSError:
                continue
    stamps.append(f"src:{newest}:{seen}")
    return stamps


def probe_key(nested: Manifest) -> str:
    """What the cache of ``nested`` depends on, hashed."""
    import hashlib  # OpenSSL: only for an entry that asks itself

    entry = str(nested.data.get("entry") or "")
    parts = [f"entry={entry}", f"docker={nested.data.get('docker') or ''}"]
    try:
        parts.append(hashlib.sha256(nested.path.read_bytes()).hexdigest())
    except OSError:
        parts.append("manifest:unreadable")
    program = _program(entry, nested.directory)
    if program is not None:
        parts.append(_stamp(program))
    parts += [_stamp(script) for script in _scripts(entry, nested.directory)]
    if entry.lstrip().startswith("cargo ") or (program is not None and program.name == "cargo"):
        parts += _crate_stamps(nested.directory)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _depth(text: str) -> int:
    """How deeply the JSON ``text`` nests (brackets outside strings), counted without
    parsing it, so that deep nesting is refused before the parser recurses into it."""
    import re

    depth = deepest = 0
    in_string = False
    skip = -1  # the position of a character a backslash escapes
    for found in re.finditer(r'[\\"\[\]{}]', text):
        char, at = found.group(), found.start()
        if at == skip:
            continue
        if in_string:
            if char == "\\":
                skip = at + 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                break
        elif char in "]}":
            depth -= 1
    return deepest


def _loads(text: str) -> Any:
    """JSON ``text`` nested at most MAX_DEPTH deep (ValueError otherwise)."""
    if _depth(text) > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    return json.loads(text)


def _read(path: Path) -> dict[str, Any] | None:
    """A cache file's JSON object; None for anything else (missing, a FIFO, a device, a
    directory, too large, not UTF-8, not JSON, nested too deeply), without blocking."""
    from fdl._files import read_small_text

    try:
        text = read_small_text(path, MAX_CACHE_BYTES)
        data = _loads(text) if text is not None else None
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _usable(schema: dict[str, Any], source: str) -> dict[str, Any] | None:
    """``schema`` when it passes the checks of an inline ``schema:``, else None."""
    try:
        return _checked(schema, source)
    except FdlError:
        return None


def _split(data: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """A cache file's key (None when fdl did not write it) and its schema."""
    meta = data.get(_META)
    key = meta.get("key") if isinstance(meta, dict) else None
    return (key if isinstance(key, str) else None), {k: v for k, v in data.items() if k != _META}


def cached_schema(nested: Manifest) -> dict[str, Any] | None:
    """The cached schema of ``nested``'s entry when it is fresh, else None."""
    data = _read(cache_file(nested))
    if data is None:
        return None
    key, schema = _split(data)
    if key != probe_key(nested):
        return None
    return _usable(schema, str(cache_file(nested)))


def write_cache(nested: Manifest, schema: dict[str, Any], invocation: str) -> Path:
    """Keep a probed schema (best effort: a read-only tree only loses the cache).

    The file is the schema itself, as floDl's reference CLI writes and reads it at the same
    path, with fdl's key beside it under ``x-fdl`` (which the reference ignores): either
    tool reads what the other wrote (fdl asks again for a file without its key).
    """
    path = cache_file(nested)
    payload = {**schema, _META: {"key": probe_key(nested), "probe": invocation}}
    # Never write, nor make a directory, outside the project through a link (a `.fdl`
    # that leads elsewhere got a schema-cache/ made out there): best effort, no cache.
    if path.is_symlink() or leaves(nested.directory, path):
        raise PermissionError(f"{path}: a link leads out of {nested.directory}")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return path


def parse_probe_output(stdout: str, invocation: str) -> dict[str, Any]:
    """The schema in ``--fdl-schema`` output: the JSON object from its first ``{`` (chatter
    before it is tolerated), checked like an inline ``schema:``.

    Raises:
        ProbeFailed: no JSON object, invalid JSON, or a schema that does not validate.
    """
    start = stdout.find("{")
    if start < 0:
        raise ProbeFailed(f"`{invocation}` printed no JSON object")
    text = stdout[start:]
    if _depth(text) > MAX_DEPTH:
        raise ProbeFailed(
            f"`{invocation}` printed JSON nested deeper than {MAX_DEPTH} levels",
            hint="fix the program's --fdl-schema output (the format of `schema:` in fdl.yml)",
        )
    try:
        data = json.loads(text)
    except ValueError as exc:
        try:
            data, _ = json.JSONDecoder().raw_decode(text)  # trailing chatter after the object
        except ValueError:
            raise ProbeFailed(f"`{invocation}` did not print valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ProbeFailed(f"`{invocation}` printed JSON that is not an object")
    return _checked(data, invocation)


def _checked(data: dict[str, Any], invocation: str) -> dict[str, Any]:
    """``data`` checked like an inline ``schema:`` (ProbeFailed when it does not pass)."""
    try:
        node = parse_text(json.dumps(data), invocation, LayerKind.BASE, None)
    except (FdlError, ValueError, RecursionError) as exc:
        raise ProbeFailed(f"`{invocation}` printed a schema fdl cannot read: {exc}") from None
    checker = Checker()
    if isinstance(node, MapNode):
        COMMAND_SCHEMA.check(node, ("schema",), checker)
    if checker.errors:
        first = checker.errors[0]
        raise ProbeFailed(
            f"`{invocation}` printed a schema fdl cannot use: {first.message}",
            hint="fix the program's --fdl-schema output (the format of `schema:` in fdl.yml)",
        )
    return data


def asks_itself(nested: Manifest, *, help_only: bool = False) -> bool:
    """Whether fdl asks ``<entry> --fdl-schema`` by itself: ``compile: true``, or, for
    ``--help`` only (``help_only``), an entry that runs here and is not ``cargo``
    (floDl's CLI probes those unasked: floDl's benchmarks, ``entry: bash run.sh``, show
    run.sh's flags in ``fdl bench --help``). Help waits HELP_PROBE_SECONDS; a run never
    asks such an entry unasked, since one that ignores the flag would run in full. A
    ``cargo`` entry would build first and a ``docker:`` one start a container, so they
    wait for ``compile: true`` or ``--refresh-schema`` (help says so)."""
    if nested.data.get("compile"):
        return True
    entry = str(nested.data.get("entry") or "")
    here = not nested.data.get("docker") and not entry.lstrip().startswith("cargo ")
    return help_only and here


def effective_schema(
    nested: Manifest,
    probe: Callable[[Manifest], tuple[dict[str, Any], str]],
    *,
    refresh: bool = False,
    on_warning: Callable[[str], None] | None = None,
    ask_for_help: bool = False,
) -> dict[str, Any] | None:
    """The schema that applies to ``nested``'s entry: with ``compile: true`` the probed one
    (cached), else (or when the probe fails, with a warning) the inline ``schema:``.

    Args:
        probe: Runs ``<entry> --fdl-schema`` where the entry runs; returns (schema, the
            invocation shown to people).
        refresh: Probe even when the cache is fresh.
        ask_for_help: It is for ``--help`` (see :func:`asks_itself`).
    """
    inline = nested.data.get("schema")
    if not asks_itself(nested, help_only=ask_for_help) and not refresh:
        return schema_of(nested)
    if not refresh:
        cached = cached_schema(nested)
        if cached is not None:
            return cached
    try:
        schema, invocation = probe(nested)
    except FdlError as exc:
        if refresh:  # (Ctrl-C / SIGTERM are no FdlError: they stop fdl, not the probe)
            raise
        if on_warning is not None:
            where = "the inline schema" if inline else "no schema (options pass unchecked)"
            on_warning(f"{exc.message}; using {where}; `--refresh-schema` asks again")
        return inline if isinstance(inline, dict) else None
    with contextlib.suppress(OSError):  # a read-only tree only loses the cache
        write_cache(nested, schema, invocation)
    return schema


def find_caches(root: Path) -> list[CachedSchema]:
    """Every schema cache under the project ``root``, by path, with its status."""
    from fdl.manifest import find_in_directory

    found: list[CachedSchema] = []
    for top, dirs, _ in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP)
        here = Path(top)
        if here.name != CACHE_DIR.name or here.parent.name != CACHE_DIR.parent.name:
            continue
        command_dir = here.parent.parent
        for path in sorted(here.glob("*.json")):
            data = _read(path)
            status = "orphan"
            discovered = find_in_directory(command_dir)
            if data is not None and discovered is not None:
                try:
                    from fdl.manifest import load_directory_manifest

                    nested = load_directory_manifest(command_dir, env=None, schema=None)
                except (ManifestError, ManifestErrors):
                    nested = None
                if nested is not None:
                    status = "fresh" if _split(data)[0] == probe_key(nested) else "stale"
            schema = _split(data)[1] if data is not None else None
            found.append(CachedSchema(path, path.stem, status, schema))
    return found


def with_schema(nested: Manifest, schema: dict[str, Any] | None) -> Manifest:
    """``nested`` with ``schema`` as its schema (the probed one replaces ``schema:``)."""
    data = dict(nested.data)
    if schema is None:
        data.pop("schema", None)
    else:
        data["schema"] = schema
    return Manifest(
        path=nested.path,
        directory=nested.directory,
        env=nested.env,
        example=nested.example,
        layers=nested.layers,
        tree=nested.tree,
        patch=nested.patch,
        data=data,
        candidates=nested.candidates,
    )


def schema_of(nested: Manifest) -> dict[str, Any] | None:
    """The schema to use without probing (completion, listings, entries without
    ``compile: true``): a fresh cache, else the inline ``schema:``."""
    if nested.data.get("entry"):
        cached = cached_schema(nested)
        if cached is not None:
            return cached
    inline = nested.data.get("schema")
    return inline if isinstance(inline, dict) else None


def probe_failure(invocation: str, returncode: int, stderr: str) -> ProbeFailed:
    """A probe that exited non-zero, with the end of what it said."""
    tail = " ".join(stderr.strip().splitlines()[-3:])[:400]
    return ProbeFailed(
        f"`{invocation}` exited with status {returncode}" + (f": {tail}" if tail else ""),
        hint="build the entry's program first (cargo entries: cargo build), or fix its "
        "--fdl-schema; fdl <command> --refresh-schema asks again",
    )
