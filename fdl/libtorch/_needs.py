"""What each command needs from a source (a :class:`~fdl.libtorch._choose.Need`).

``fdl setup`` and ``fdl libtorch download`` need the build :func:`select_variant` chose
(:func:`need_for`); ``libtorch install``'s options name one source (:func:`install_need`);
``libtorch build`` weighs the team's registry against the build (:func:`build_need`).
The chooser (:func:`~fdl.libtorch._choose.choose_source`) answers them all.
"""

from __future__ import annotations

from pathlib import Path

from fdl.errors import UsageError
from fdl.libtorch._choose import SOURCES, Need

TYPE_CHECKING = False
if TYPE_CHECKING:
    from fdl.libtorch._select import Selection
    from fdl.libtorch.build import BuildPlan

__all__ = ["build_need", "install_need", "need_for", "pypi_variant"]


def pypi_variant(torch: str) -> str | None:
    """The build PyPI's Linux x86_64 torch wheel of ``torch`` is (``cu128``), if known."""
    from fdl.compat import release
    from fdl.errors import FdlError

    try:
        return next((v.name for v in release(torch).variants if v.default), None)
    except FdlError:
        return None


def need_for(
    selection: Selection,
    command: str,
    *,
    from_wheel: bool = False,
    archives: bool = True,
    sources: tuple[str, ...] | None = None,
    asked: tuple[str, ...] = (),
    only: bool = False,
) -> Need:
    """What the selected build needs from a source. --cpu/--cuda, the manifest's
    libtorch.variant or ``fdl libtorch download`` is served as asked, even where it misses
    a GPU (with its warnings); ``from_wheel`` (asked for, or
    a platform without archives) puts PyPI first, and (asked for) rules the registry out."""
    wheel_first = from_wheel or not archives
    return Need(
        command,
        torch=selection.torch_version,
        variant=selection.variant,
        cuda=selection.cuda,
        rocm=selection.rocm,
        covers_all=bool(selection.rocm)
        or selection.covers_all
        or selection.how != "detected"
        or "archive" in asked,
        build=selection.build,
        archives=archives,
        pypi_variant=pypi_variant(selection.torch_version) if selection.cuda else None,
        sources=sources or tuple(s for s in SOURCES if s != "directory"),
        asked=asked or (("installed", "wheel", "cpu-view") if wheel_first else ()),
        only=only,
        refused=(("registry", "--from-wheel asks for PyPI's wheel"),) if from_wheel else (),
    )


def install_need(
    *,
    directory: Path | None,
    wheel: Path | None,
    python: str | None,
    torch: str | None,
    from_wheel: bool,
    from_registry: bool,
    cpu: bool,
    registry: str | None,
    pinned_cpu: bool,
) -> tuple[Need, dict[str, str]]:
    """``libtorch install``'s need, and what its options point the source at: the team's
    registry when asked, or when it is set and no other source is named; a directory; the
    CPU view (``--cpu``, or ``libtorch.variant: cpu`` without a wheel file or ``--python``);
    else the wheel (a file, a Python's torch, or pip's).

    Raises:
        UsageError: no source named, or two that exclude each other.
    """
    named = [s for s in (wheel, python, torch) if s]
    other = directory is not None or from_wheel or wheel is not None or python is not None
    sources = ("registry", "wheel", "cpu-view", "directory")

    def one(source: str, given: dict[str, str]) -> tuple[Need, dict[str, str]]:
        return Need(
            "libtorch install", torch=torch, sources=sources, asked=(source,), only=True
        ), given

    if from_registry or (not other and registry):
        if other:
            raise UsageError("--from-registry takes no other source", hint="pass one source")
        return one("registry", {})
    if directory is None and not (from_wheel or wheel is not None):
        raise UsageError(
            "say where the libtorch comes from: --from-wheel [WHEEL | --python PY | --torch V], "
            "--from-dir DIR or --from-registry",
            hint="e.g. fdl libtorch install --from-wheel --torch 2.13.0",
        )
    if directory is not None and (from_wheel or named):
        raise UsageError("--from-dir and --from-wheel are mutually exclusive", hint="pass one")
    if len(named) > 1:
        raise UsageError(
            "give one wheel source: a .whl file, --python or --torch", hint="pass only one of them"
        )
    release = f"torch {torch}" if torch else "torch"
    if directory is None and python is None and (cpu or pinned_cpu):
        return one(
            "cpu-view", {"cpu-view": str(wheel) if wheel else f"the index's {release} wheel"}
        )
    if cpu:
        raise UsageError(
            "--cpu reads a wheel file or the index's wheel, not --python or --from-dir",
            hint="fdl libtorch install --from-wheel --cpu --torch VERSION",
        )
    if directory is not None:
        return one("directory", {"directory": str(directory)})
    if wheel is not None:
        return one("wheel", {"wheel": f"the wheel {wheel}"})
    if python is not None:
        return one("wheel", {"wheel": f"the torch installed for {python}"})
    return one("wheel", {"wheel": f"the index's {release} wheel (pip download)"})


def build_need(plan: BuildPlan, *, no_registry: bool, fetch_only: bool) -> Need:
    """``fdl libtorch build``'s need: the team's variant of the release for the planned
    archs, else the build."""
    refused = (
        (("registry", "--no-registry: built here"),)
        if no_registry
        else (("registry", "--fetch-only: the sources only"),)
        if fetch_only
        else ()
    )
    return Need(
        "libtorch build",
        torch=plan.torch,
        variant=plan.variant,
        covers_all=False,
        build=("fdl", "libtorch", "build"),
        sources=("registry", "build"),
        refused=refused,
    )
