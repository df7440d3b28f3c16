"""Which source a variant comes from: every source's offer, ranked by one table.

A command says what it needs (:class:`Need`: the build, the sources it considers, the ones
its command line named); what takes I/O to know (the team registry's match, the torch
installed for the user's Python, what the command line pointed at) is gathered once, before,
into :class:`Facts`. Each source then answers :func:`offer` (pure): can it serve the need,
why (or why not), at what cost (bytes where known, time, whose build it is), and
:func:`choose_source` ranks the offers: those that can serve first, then those the command
line named, then the preference table ``fdl/data/libtorch_sources.yaml`` (kept as data, a
reason for each rule). ``fdl setup``, ``libtorch install``, ``download``, ``build``'s
registry check and ``pull`` choose here, then install through
:func:`fdl.libtorch.install_source`; their ``--dry-run --json`` carries
:meth:`Choice.to_json` and their text plan :meth:`Choice.lines`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from fdl.errors import EnvironmentProblem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from fdl.libtorch.sources import SharedMatch, WheelSource

__all__ = [
    "SOURCES",
    "Choice",
    "Facts",
    "Need",
    "Offer",
    "Rule",
    "choose_source",
    "gather_facts",
    "load_preferences",
    "offer",
]

SOURCES = ("registry", "installed", "archive", "wheel", "cpu-view", "directory", "build")
"""What offers: the sources' kinds, with ``installed`` (the ``wheel`` source reading the
torch installed for the user's Python) apart, as it is preferred to a download."""


@dataclass(frozen=True)
class Need:
    """What a command needs a variant for.

    Attributes:
        command: ``setup``, ``install``, ``download``, ``build`` or ``pull``.
        torch: The release (``2.14.1``), when chosen already.
        variant: The build (``cu130``, ``cpu``, ``rocm70``), when chosen already.
        cuda: Its CUDA release (None: CPU or ROCm).
        rocm: Its ROCm release (an AMD build).
        covers_all: An official build serves (it covers every GPU, or was asked for).
        build: The ``fdl libtorch build`` command that covers every GPU (empty: none can).
        archives: download.pytorch.org has libtorch archives for this platform.
        pypi_variant: The build PyPI's wheel of ``torch`` is (the tables), if known.
        sources: The sources this command considers (default: all).
        asked: The sources its command line named: ranked before the table's order.
        only: Only the ``asked`` sources serve (``install --from-dir``, ``pull``).
        refused: ``(source, why)`` ruled out by the command line (``--no-registry``).
    """

    command: str
    torch: str | None = None
    variant: str | None = None
    cuda: str | None = None
    rocm: str | None = None
    covers_all: bool = True
    build: tuple[str, ...] = ()
    archives: bool = True
    pypi_variant: str | None = None
    sources: tuple[str, ...] = SOURCES
    asked: tuple[str, ...] = ()
    only: bool = False
    refused: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Facts:
    """What took I/O to know, gathered once before choosing.

    Attributes:
        registry: The team's repository (``libtorch.registry``), if any.
        shared: What :func:`fdl.libtorch.find_shared` found there (a ``SharedMatch``).
        installed: The torch installed for the user's Python
            (:func:`fdl.libtorch.installed_torch`, a ``WheelSource``).
        given: What the command line pointed a source at: ``{"directory": path,
            "wheel": file, python or release, "registry": reference}``.
        looked: The facts looked for (``registry``, ``installed``): an offer does not
            say "none" of what nobody looked at.
    """

    registry: str | None = None
    shared: SharedMatch | None = None
    installed: WheelSource | None = None
    given: Mapping[str, str] = field(default_factory=dict)
    looked: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Offer:
    """A source's answer to a need."""

    source: str
    ok: bool
    why: str
    bytes: int | None = None
    time: str = ""
    trust: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Choice:
    """The offers, best first, and the one taken (None: no source serves)."""

    offers: tuple[Offer, ...]

    @property
    def chosen(self) -> Offer | None:
        first = self.offers[0] if self.offers else None
        return first if first is not None and first.ok else None

    @property
    def source(self) -> str | None:
        return self.chosen.source if self.chosen else None

    def to_json(self) -> dict[str, Any]:
        return {"chosen": self.source, "offers": [o.to_json() for o in self.offers]}

    def lines(self) -> list[str]:
        """The ranked offers for a text plan."""
        out = ["  sources:  (best first)"]
        for number, item in enumerate(self.offers, 1):
            mark = "chosen" if item is self.chosen else "can" if item.ok else "no"
            cost = ", ".join(c for c in (_size(item.bytes), item.time, item.trust) if c)
            cost = f" ({cost})" if cost and item.ok else ""
            out.append(f"    {number}. {item.source} [{mark}]: {item.why}{cost}")
        return out


@dataclass(frozen=True)
class Rule:
    """One row of the preference table."""

    source: str
    trust: str
    time: str
    why: str


def _size(count: int | None) -> str:
    if count is None:
        return ""
    return f"{count / 1e6:.0f} MB" if count < 1e9 else f"{count / 1e9:.1f} GB"


TABLE = Path(__file__).resolve().parent.parent / "data" / "libtorch_sources.yaml"


def load_preferences(path: Path | None = None) -> tuple[Rule, ...]:
    """The preference table, best first (``fdl/data/libtorch_sources.yaml``; read once).

    Raises:
        EnvironmentProblem: the table is missing or malformed (exit 4: fdl's own data is
            broken; reinstall fdl).
    """
    return _load(path or TABLE)


@cache
def _load(path: Path) -> tuple[Rule, ...]:
    import yaml

    def bad(what: str) -> EnvironmentProblem:
        return EnvironmentProblem(
            f"the sources' preference table {path} {what}",
            hint="fdl's own data is damaged: reinstall fdl (pip install --force-reinstall fdl)",
        )

    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise bad(f"cannot be read ({exc.__class__.__name__})") from None
    except yaml.YAMLError:
        raise bad("is not YAML") from None
    if not isinstance(raw, dict) or raw.get("schema") != 1:
        raise bad("is not schema 1")
    rows = raw.get("prefer")
    if not isinstance(rows, list) or not rows:
        raise bad("has no `prefer:` list")
    rules: list[Rule] = []
    for number, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise bad(f"rule {number} is not a mapping")
        values = [row.get(k) for k in ("source", "trust", "time", "why")]
        if not all(isinstance(v, str) and v.strip() for v in values):
            raise bad(f"rule {number} needs source, trust, time and why (text)")
        source, trust, time, why = (str(v).strip() for v in values)
        if source not in SOURCES:
            raise bad(f"rule {number} names an unknown source {source!r}")
        if any(r.source == source for r in rules):
            raise bad(f"names {source} twice")
        rules.append(Rule(source, trust, time, why))
    missing = [s for s in SOURCES if all(r.source != s for r in rules)]
    if missing:
        raise bad(f"does not rank {', '.join(missing)}")
    return tuple(rules)


def choose_source(
    need: Need, facts: Facts | None = None, *, table: tuple[Rule, ...] | None = None
) -> Choice:
    """Every source the need considers, ranked: those that serve first, then those the
    command line named, then the table's order. ``choice.chosen`` is the first (None when
    none serves)."""
    facts = facts or Facts()
    rules = table if table is not None else load_preferences()
    order = {rule.source: index for index, rule in enumerate(rules)}
    offers = []
    for rule in rules:
        if rule.source not in need.sources:
            continue
        answer = offer(rule.source, need, facts)
        offers.append(
            Offer(answer.source, answer.ok, answer.why, answer.bytes, rule.time, rule.trust)
        )
    offers.sort(key=lambda o: (not o.ok, o.source not in need.asked, order[o.source]))
    return Choice(tuple(offers))


def gather_facts(
    need: Need,
    *,
    registry: str | None = None,
    look_up: Callable[[], SharedMatch | None] | None = None,
    installed: Callable[[], WheelSource | None] | None = None,
    given: Mapping[str, str] | None = None,
) -> Facts:
    """The facts ``need`` can use, each gathered once and only where an offer reads it:
    ``look_up()`` (the team registry's match) when the registry is considered, and
    ``installed()`` (the torch of the user's Python) when an official build serves."""
    given = dict(given or {})

    def considered(source: str) -> bool:
        return (
            source in need.sources
            and source not in dict(need.refused)
            and (not need.only or source in need.asked)
            and source not in given
        )

    shared, found, looked = None, None, set()
    if registry and look_up is not None and considered("registry") and not need.rocm:
        shared = look_up()
        looked.add("registry")
    if installed is not None and considered("installed") and need.covers_all and not need.rocm:
        found = installed()
        looked.add("installed")
    return Facts(registry, shared, found, given, frozenset(looked))


def offer(source: str, need: Need, facts: Facts) -> Offer:
    """``source``'s answer to ``need`` (pure: reads only ``need`` and ``facts``)."""
    refused = dict(need.refused)
    if source in refused:
        return Offer(source, False, refused[source])
    if need.only and source not in need.asked:
        named = " or ".join(need.asked) or "nothing"
        return Offer(source, False, f"not asked for (fdl {need.command} takes {named} here)")
    return _OFFERS[source](need, facts)


def _release(need: Need) -> str:
    return f"torch {need.torch}" if need.torch else "the release"


def _registry(need: Need, facts: Facts) -> Offer:
    given = facts.given.get("registry")
    if given:
        return Offer("registry", True, f"pull {given}")
    if need.rocm:
        return Offer("registry", False, "the team's registry is not looked in for a ROCm build")
    if not facts.registry:
        return Offer(
            "registry", False, "no team registry (libtorch.registry, $FDL_LIBTORCH_REGISTRY)"
        )
    match = facts.shared
    if match is None and "registry" not in facts.looked:
        return Offer("registry", False, f"the team's registry {facts.registry} was not read")
    if match is None:
        return Offer(
            "registry",
            False,
            f"the team's registry {facts.registry} holds no {_release(need)} variant that "
            "runs on these GPUs",
        )
    layers = (
        match.remote.manifest.get("layers") if isinstance(match.remote.manifest, dict) else None
    )
    sizes = [x.get("size") for x in layers or () if isinstance(x, dict)]
    total = sum(s for s in sizes if isinstance(s, int)) if sizes else None
    return Offer("registry", True, match.reason(), total)


def _official(need: Need, source: str) -> Offer | None:
    """The refusal every official source shares, None when it can go on."""
    if not need.covers_all:
        return Offer(source, False, f"no official libtorch {need.torch} covers every GPU")
    return None


def _installed(need: Need, facts: Facts) -> Offer:
    refused = _official(need, "installed")
    if refused is not None:
        return refused
    if need.rocm:
        return Offer("installed", False, "a ROCm build is not copied from a Python's torch")
    found = facts.installed
    if found is None and "installed" not in facts.looked:
        return Offer("installed", False, "the user's Python was not looked at")
    if found is None:
        return Offer("installed", False, "no torch installed for the user's Python")
    what = f"torch {found.version} ({found.variant or 'its build'})"
    if found.torch_version != need.torch or found.variant != need.variant:
        return Offer(
            "installed", False, f"the user's Python has {what}, not {need.torch} ({need.variant})"
        )
    python = str(found.extra.get("python") or "")
    if not python:
        return Offer("installed", False, f"{what} is installed, but by which Python is unknown")
    return Offer("installed", True, f"{what} is installed for {python}: copied, nothing downloaded")


def _archive(need: Need, facts: Facts) -> Offer:
    refused = _official(need, "archive")
    if refused is not None:
        return refused
    if not need.archives and not need.rocm:
        return Offer(
            "archive", False, "download.pytorch.org has no libtorch archive for this platform"
        )
    build = (
        f"ROCm {need.rocm} build"
        if need.rocm
        else "CPU build"
        if need.cuda is None
        else f"{need.variant} build"
    )
    return Offer("archive", True, f"PyTorch's official {_release(need)} {build}, the libtorch zip")


def _wheel(need: Need, facts: Facts) -> Offer:
    given = facts.given.get("wheel")
    if given:
        return Offer("wheel", True, given)
    refused = _official(need, "wheel")
    if refused is not None:
        return refused
    if need.rocm:
        return Offer("wheel", False, "PyPI has no ROCm wheel")
    if need.cuda is None:
        return Offer(
            "wheel", False, "PyPI's torch wheel is a CUDA build: a CPU plan takes the CPU view"
        )
    if need.pypi_variant != need.variant:
        return Offer(
            "wheel",
            False,
            f"PyPI's {_release(need)} wheel is {need.pypi_variant or 'another build'}, "
            f"not {need.variant}",
        )
    return Offer(
        "wheel", True, f"PyPI's {_release(need)} wheel ({need.variant}) with its NVIDIA wheels"
    )


def _cpu_view(need: Need, facts: Facts) -> Offer:
    given = facts.given.get("cpu-view")
    if given:
        return Offer("cpu-view", True, f"the CPU view of {given}: only what a CPU program loads")
    refused = _official(need, "cpu-view")
    if refused is not None:
        return refused
    if need.rocm or need.cuda is not None:
        return Offer("cpu-view", False, f"a CPU view has no GPU code; the build is {need.variant}")
    return Offer(
        "cpu-view",
        True,
        f"the CPU view of PyPI's {_release(need)} wheel: only what a CPU program loads",
    )


def _directory(need: Need, facts: Facts) -> Offer:
    given = facts.given.get("directory")
    if given:
        return Offer("directory", True, f"the libtorch tree at {given} (copied)")
    return Offer("directory", False, "only a tree named with --from-dir")


def _build(need: Need, facts: Facts) -> Offer:
    if need.rocm:
        return Offer("build", False, "fdl plans a ROCm source build but does not run it")
    if need.covers_all and "build" not in need.asked:
        return Offer("build", False, "an official build covers every GPU")
    if not need.build:
        return Offer("build", False, f"{_release(need)} cannot be built for these GPUs")
    return Offer("build", True, f"a source build for these GPUs: {' '.join(need.build)}")


_OFFERS: Mapping[str, Callable[[Need, Facts], Offer]] = {
    "registry": _registry,
    "installed": _installed,
    "archive": _archive,
    "wheel": _wheel,
    "cpu-view": _cpu_view,
    "directory": _directory,
    "build": _build,
}
