"""Finding manifest files and reading them into layers.

Precedence, lowest first: files inherited by the base (``inherit-from``), the
base ``fdl.yml``, files inherited by the overlay, the overlay
``fdl.<env>.yml``, ``FDL__A__B`` environment variables, ``--set a.b=v``. The layers made
of the environment, ``--set`` and a command's options are :mod:`fdl.manifest._overrides`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from fdl._upward import EXAMPLE_SUFFIXES, MANIFEST_NAMES, only_one, upward
from fdl.errors import Location, ManifestError, ManifestNotFound, UsageError
from fdl.manifest._nodes import LayerKind, MapNode, Node, Origin, ScalarNode, SeqNode, is_null

BASE_NAMES = MANIFEST_NAMES
OVERLAY_EXTENSIONS = ("yml", "yaml", "json")
INHERIT_KEY = "inherit-from"
ENV_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$")
# Largest manifest file fdl reads (real ones are a few kB); bigger is refused
# before reading, so /dev/zero or a huge file cannot exhaust memory.
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
# Characters YAML (libyaml) refuses in a stream: C0/C1 controls other than
# tab/newline/return/NEL, surrogates, U+FFFE/U+FFFF. Written as the refused ranges, not
# the complement of the allowed ones: the same set, compiled in a seventh of the time
# (the complement's ranges made it 3-4 ms of every command's start); ASCII text (most
# manifests) is searched for the ASCII ones only, a pattern that compiles in 0.05 ms.
_NOT_PRINTABLE_ASCII = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_NOT_PRINTABLE: list[re.Pattern[str]] = []


def _not_printable(text: str) -> re.Match[str] | None:
    """The first character of ``text`` that YAML refuses, if any."""
    if text.isascii():
        return _NOT_PRINTABLE_ASCII.search(text)
    if not _NOT_PRINTABLE:
        _NOT_PRINTABLE.append(
            re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]")
        )
    return _NOT_PRINTABLE[0].search(text)


def _short(path: Path | str) -> str:
    text = str(path)
    return text if len(text) <= 120 else text[:60] + "..." + text[-57:]


def is_file(path: Path, what: str = "manifest", *, usage: bool = False) -> bool:
    """``path.is_file()``, with OS errors (a name over the system's limit) as fdl errors.

    Raises:
        ManifestError: (or UsageError when ``usage``) when the path cannot be looked at.
    """
    try:
        return path.is_file()
    except OSError as exc:
        raise _path_error(path, what, exc, usage=usage) from None


def _path_error(path: Path, what: str, exc: OSError, *, usage: bool) -> ManifestError | UsageError:
    import errno

    if exc.errno == errno.ENAMETOOLONG:
        message = f"{what} {_short(path)}: file name too long for this system"
        hint = "use a shorter path (each name at most 255 bytes, the whole path 4096)"
    else:
        message = f"{what} {_short(path)}: {exc.strerror or exc}"
        hint = "check the path and its permissions"
    if usage:
        return UsageError(message, hint=hint)
    return ManifestError(message, hint=hint)


def _why_not_file(path: Path) -> str:
    """Why ``path`` is not a readable manifest file: missing, a directory, special."""
    try:
        if path.is_dir():
            return "is a directory"
        if path.exists():
            return "is not a regular file (a FIFO, device or socket)"
    except OSError:
        pass
    return "does not exist"


def working_directory(cwd: Path, directory: Path | str) -> Path:
    """The directory ``-C DIR`` selects, relative to ``cwd``.

    Raises:
        UsageError: ``directory`` is not a directory or cannot be looked at.
    """
    target = cwd / directory
    try:
        if target.is_dir():
            return target.resolve()
    except OSError as exc:
        raise _path_error(Path(directory), "-C", exc, usage=True) from None
    raise UsageError(f"-C {_short(directory)}: not a directory", hint="pass an existing directory")


_OVERLAY_FILE = re.compile(r"^fdl\.([A-Za-z0-9][A-Za-z0-9_-]*)\.(yml|yaml|json)$")


class Layer:
    """One source of manifest values.

    Attributes:
        kind: Base, inherited, overlay, environment variables or ``--set``.
        source: Display name (path relative to the project root, or a label).
        path: The file, for file layers.
        root: The parsed mapping; None for an empty file.
    """

    __slots__ = ("kind", "path", "root", "source")

    def __init__(self, kind: LayerKind, source: str, path: Path | None, root: Node | None) -> None:
        self.kind = kind
        self.source = source
        self.path = path
        self.root = root

    def __repr__(self) -> str:
        return f"Layer({self.kind.value}, {self.source!r})"


class Candidate:
    """A file that could contribute a layer (for ``fdl config layers``)."""

    __slots__ = ("exists", "kind", "note", "path", "source", "used")

    def __init__(
        self,
        kind: LayerKind,
        source: str,
        path: Path | None,
        exists: bool,
        used: bool,
        note: str = "",
    ) -> None:
        self.kind = kind
        self.source = source
        self.path = path
        self.exists = exists
        self.used = used
        self.note = note


class Discovered:
    """The manifest file found for a directory.

    Attributes:
        path: The file to read.
        example: True when ``path`` is an ``.example``/``.dist`` file used
            because no real manifest exists.
    """

    __slots__ = ("example", "path")

    def __init__(self, path: Path, example: bool = False) -> None:
        self.path = path
        self.example = example

    @property
    def directory(self) -> Path:
        return self.path.parent


def display_name(path: Path, root: Path) -> str:
    """``path`` relative to the project root when below it, else absolute."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        rel = os.path.relpath(path, root)
        return rel if not rel.startswith("../../..") else str(path)


def find_in_directory(directory: Path) -> Discovered | None:
    """The manifest of ``directory`` itself (no walking up), if any.

    Raises:
        ManifestError: when two candidates of the same rank exist.
    """
    real = only_one(
        [directory / name for name in BASE_NAMES if is_file(directory / name)],
        str(directory),
        "; fdl will not pick one silently",
        hint="remove or rename one of them, or choose one with -f/--manifest",
    )
    if real is not None:
        return Discovered(real)
    examples = [
        directory / (name + suffix)
        for name in BASE_NAMES
        for suffix in EXAMPLE_SUFFIXES
        if is_file(directory / (name + suffix))
    ]
    example = only_one(
        examples,
        str(directory),
        " and no fdl.yml",
        hint="keep one example file, or create fdl.yml",
    )
    return Discovered(example, example=True) if example is not None else None


def discover(start: Path, explicit: Path | None = None) -> Discovered:
    """Find the manifest: ``explicit``, else the nearest one walking up from ``start``.

    Raises:
        ManifestError: nothing found, the explicit file is missing, or two
            candidates compete in one directory.
    """
    if explicit is not None:
        path = explicit if explicit.is_absolute() else start / explicit
        if not is_file(path, "-f"):
            raise ManifestError(
                f"manifest {_short(explicit)} {_why_not_file(path)}",
                hint="check the path given to -f/--manifest",
            )
        example = path.suffix in EXAMPLE_SUFFIXES
        return Discovered(path.resolve(), example=example)
    for directory in upward(start):
        found = find_in_directory(directory)
        if found is not None:
            return found
    raise ManifestNotFound(
        f"no fdl.yml found in {start} or any parent directory",
        hint="create one with `fdl init`, or pass -f/--manifest PATH",
    )


def list_environments(directory: Path) -> list[str]:
    """Names of the overlays (``fdl.<env>.yml|yaml|json``) in ``directory``."""
    names: set[str] = set()
    try:
        entries = list(directory.iterdir())
    except OSError:
        return []
    for entry in entries:
        match = _OVERLAY_FILE.match(entry.name)
        if match and entry.is_file():
            names.add(match.group(1))
    return sorted(names)


def overlay_candidates(directory: Path, env: str) -> list[Path]:
    """The files that could hold overlay ``env`` in ``directory``, in lookup order."""
    return [directory / f"fdl.{env}.{ext}" for ext in OVERLAY_EXTENSIONS]


def _not_a_file(path: Path) -> str | None:
    """What stands at ``path`` when it is there but is not a regular file (None otherwise)."""
    import stat

    try:
        mode = path.lstat().st_mode
    except OSError:
        return None
    if stat.S_ISLNK(mode):
        if path.exists():
            return _not_a_file(path.resolve())
        return f"a link to {_short(repr(str(path.readlink())))} that leads nowhere"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    return None if stat.S_ISREG(mode) else "a device or special file"


def find_overlay(directory: Path, env: str, *, required: bool) -> Path | None:
    """The overlay file for ``env`` in ``directory``.

    Raises:
        UsageError: the environment name is malformed.
        ManifestError: two overlay files compete, or ``required`` and none exists.
    """
    if not ENV_NAME.match(env):
        raise UsageError(
            f"invalid environment name {_short(repr(env))}",
            hint="use up to 100 letters, digits, '-' and '_' (e.g. `--env ci`)",
        )
    existing = only_one(
        [p for p in overlay_candidates(directory, env) if is_file(p, "overlay")],
        str(directory),
        f" for environment {env!r}",
        hint="keep one of them",
    )
    if existing is not None:
        return existing
    if required:
        for candidate in overlay_candidates(directory, env):
            kind = _not_a_file(candidate)
            if kind is not None:
                raise ManifestError(
                    f"environment {env!r}: {candidate} is {kind}, not a file",
                    hint=f"make {candidate.name} a YAML file (or remove it and create one)",
                )
        available = list_environments(directory)
        listing = ", ".join(available) if available else "none"
        raise ManifestError(
            f"environment {env!r} not found: no fdl.{env}.yml in {directory}",
            hint=f"environments that exist: {listing}; create fdl.{env}.yml to add one",
        )
    return None


def read_layer(path: Path, kind: LayerKind, root: Path) -> Layer:
    """Parse one manifest file into a layer.

    Raises:
        ManifestError: unreadable file, syntax error, or a top level that is
            not a mapping.
    """
    source = display_name(path, root)
    text = read_text(path, source)
    node = parse_text(text, source, kind, path)
    if node is not None and not isinstance(node, MapNode):
        kind_name = "a list" if isinstance(node, SeqNode) else "a single value"
        raise ManifestError(
            f"the top level of a manifest must be a mapping, found {kind_name}",
            location=node.origin.location(),
            hint="write `key: value` entries at the top level",
        )
    return Layer(kind, source, path, node)


def read_text(path: Path, source: str) -> str:
    """The UTF-8 text of a manifest file (a leading BOM dropped).

    Only regular files of at most :data:`MAX_MANIFEST_BYTES` are read, so a
    FIFO, a device or a directory cannot hang fdl or exhaust its memory.

    Raises:
        ManifestError: the file cannot be read, is not a regular file, is too
            big, is not UTF-8 or holds characters YAML refuses (with file:line:col).
    """
    import stat

    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise ManifestError(f"{source}: {kind}", hint="point fdl at a manifest file (fdl.yml)")
        if info.st_size > MAX_MANIFEST_BYTES:
            raise ManifestError(
                f"{source}: {info.st_size:,} bytes; fdl reads manifests of at most "
                f"{MAX_MANIFEST_BYTES:,} bytes",
                hint="is this the right file? split it with inherit-from otherwise",
            )
        with path.open("rb") as handle:
            data = handle.read(MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise ManifestError(
            f"cannot read {source}: {exc.strerror or exc}",
            hint="check that the file exists and that you may read it",
        ) from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestError(
            f"{source}: more than {MAX_MANIFEST_BYTES:,} bytes", hint="is this the right file?"
        )
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = _line_col(data, exc.start)
        raise ManifestError(
            f"not valid UTF-8: byte {data[exc.start : exc.start + 1]!r}",
            location=Location(source, line, column, path),
            hint="save the file as UTF-8",
        ) from None
    bad = _not_printable(text)
    if bad is not None:
        line, column = _line_col(text, bad.start())
        raise ManifestError(
            f"character U+{ord(bad.group()):04X} is not allowed in YAML",
            location=Location(source, line, column, path),
            hint="remove it (or write it as an escape such as \\x00 in a double-quoted string)",
        )
    return text


def _line_col(data: bytes | str, offset: int) -> tuple[int, int]:
    """1-based line and column (in characters) of ``offset`` in ``data``."""
    newline: bytes | str = b"\n" if isinstance(data, bytes) else "\n"
    line = data.count(newline, 0, offset) + 1  # type: ignore[arg-type]
    start = data.rfind(newline, 0, offset) + 1  # type: ignore[arg-type]
    head = data[start:offset]
    text = head.decode("utf-8", "replace") if isinstance(head, bytes) else head
    return line, len(text) + 1


def parse_text(text: str, source: str, kind: LayerKind, path: Path | None) -> Node | None:
    """Parse YAML or JSON (by the file name) into a node tree."""
    is_json = path is not None and (path.suffix == ".json" or path.name.endswith(".json.example"))
    if is_json:
        from fdl.manifest._json import parse_json

        return parse_json(text, source, kind, path)
    if path is not None:
        from fdl.manifest._parsed import cached_parse

        return cached_parse(text, source, kind, path)
    from fdl.manifest._yaml import parse_yaml

    return parse_yaml(text, source, kind, path)


def _pop_inherit(layer: Layer) -> tuple[str, Origin] | None:
    """Remove ``inherit-from`` from the layer, returning its value and origin."""
    root = layer.root
    if not isinstance(root, MapNode) or INHERIT_KEY not in root.entries:
        return None
    node = root.entries[INHERIT_KEY]
    entries = {k: v for k, v in root.entries.items() if k != INHERIT_KEY}
    origins = {k: v for k, v in root.key_origins.items() if k != INHERIT_KEY}
    layer.root = MapNode(entries, root.origin, root.tag, origins)
    if is_null(node):
        return None
    if (
        not isinstance(node, ScalarNode)
        or not isinstance(node.value, str)
        or not node.value.strip()
    ):
        raise ManifestError(
            f"{INHERIT_KEY} must be a non-empty file path",
            location=node.origin.location(),
            hint=f"write `{INHERIT_KEY}: shared.yml` (relative to this file)",
        )
    return node.value, node.origin


def load_chain(
    path: Path,
    kind: LayerKind,
    root: Path,
    trail: tuple[Path, ...] = (),
    links: tuple[Origin, ...] = (),
) -> list[Layer]:
    """The file at ``path`` preceded by everything it inherits from (deepest first).

    Raises:
        ManifestError: on a cycle or a missing inherited file.
    """
    canonical = path.resolve()
    if canonical in trail:
        cycle = " -> ".join(display_name(p, root) for p in (*trail, canonical))
        start = trail.index(canonical)
        raise ManifestError(
            f"inherit-from cycle: {cycle}",
            location=links[-1].location() if links else None,
            details="\n".join(f"{o.location()}: inherit-from" for o in links[start:]),
            hint="remove one of the inherit-from links",
        )
    layer = read_layer(path, kind, root)
    inherited = _pop_inherit(layer)
    if inherited is None:
        return [layer]
    target, origin = inherited
    parent = Path(os.path.expanduser(target))
    if not parent.is_absolute():
        parent = path.parent / parent
    try:
        found = parent.is_file()
    except OSError as exc:
        error = _path_error(parent, "inherit-from target", exc, usage=False)
        error.location = origin.location()
        raise error from None
    if not found:
        raise ManifestError(
            f"inherit-from target {_short(target)} {_why_not_file(parent)} "
            f"(looked for {_short(parent)})",
            location=origin.location(),
            hint="fix the path; it is relative to the file that declares it",
        )
    ancestors = load_chain(parent, LayerKind.INHERITED, root, (*trail, canonical), (*links, origin))
    return [*ancestors, layer]


def dedupe(layers: list[Layer]) -> list[Layer]:
    """Drop repeated files (same canonical path), keeping the first occurrence."""
    seen: set[Path] = set()
    out: list[Layer] = []
    for layer in layers:
        if layer.path is not None:
            key = layer.path.resolve()
            if key in seen:
                continue
            seen.add(key)
        out.append(layer)
    return out
