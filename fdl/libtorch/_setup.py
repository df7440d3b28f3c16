"""``fdl setup``: decide what libtorch fits this machine (a plan), then carry it out.

The decision above the sources (:mod:`fdl.libtorch.sources`): :func:`plan_setup` reads the
installed variants (keep, activate) and asks the chooser (:mod:`fdl.libtorch._choose`) which
source serves the build it selected; :func:`choose_setup` asks again with the facts the
command gathered (the team registry's match, the torch installed for the user's Python);
:func:`run_setup`
activates, downloads (falling back to the PyPI wheel when download.pytorch.org is out of
reach) or installs the wheel. A ``build`` plan is only described: ``fdl libtorch build``
runs it.

The plan is one of:

- ``keep``: the active variant already runs on every GPU (and is the asked torch version);
- ``activate``: an installed variant does; it only needs activating;
- ``download``: an official build covers every GPU: the ``archive`` source
  (``fdl libtorch download``);
- ``wheel``: the same, from PyPI (``--from-wheel``, or when download.pytorch.org is out of
  reach): the ``wheel`` source, and for a CPU plan the ``cpu-view`` source, never PyPI's
  CUDA build;
- ``build``: no official build covers the GPUs together (sm_61 + sm_120): the source
  build that does (the ``build`` source), described by :func:`fdl.libtorch.build_command`
  and left to ``fdl libtorch build``;
- ``pull``: the team's registry holds a variant that fits: the ``registry`` source
  (:func:`choose_setup` turns the plan into a pull of what :func:`fdl.libtorch.find_shared`
  found, a step of its own after this plan: ``fdl libtorch pull``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fdl.compat import (
    Capability,
    newer_release_covering,
    resolve_torch_version,
    version_key,
)
from fdl.errors import NetworkError, UsageError
from fdl.libtorch import variants
from fdl.libtorch._choose import Choice, Facts, Need, choose_source
from fdl.libtorch._install import InstallResult
from fdl.libtorch._needs import need_for, pypi_variant
from fdl.libtorch._scan import scan_device_code
from fdl.libtorch._select import Selection, select_rocm, select_variant
from fdl.libtorch.sources import (
    FromCpuView,
    ProgressCallback,
    check_wheel,
    install_cpu_view,
    install_wheel,
    plan_download,
    run_download,
    wheel_source,
)
from fdl.net import NotFound
from fdl.paths import Context
from fdl.runner import Runner, default_runner

if TYPE_CHECKING:
    from fdl.libtorch.sources import SharedMatch, WheelSource

__all__ = [
    "ACTIONS",
    "SetupPlan",
    "SetupResult",
    "choose_setup",
    "covers_gpus",
    "plan_setup",
    "run_setup",
]

ACTIONS = ("keep", "activate", "download", "wheel", "build", "pull")


@dataclass(frozen=True)
class SetupPlan:
    """What ``fdl setup`` will do.

    Attributes:
        action: One of :data:`ACTIONS`.
        reason: Why, in one line.
        selection: The official build considered.
        variant: The variant kept or activated (``keep``/``activate``).
        command: The equivalent fdl command.
        alternatives: Other commands that would also help.
        python: A ``wheel`` plan's Python whose installed torch is copied (None: PyPI's).
        need: What a source must serve (None for ``keep``/``activate``).
        choice: The sources' offers, ranked (:func:`fdl.libtorch._choose.choose_source`).
        reference: A ``pull`` plan's pinned reference.
    """

    action: str
    reason: str
    selection: Selection
    variant: str | None = None
    command: tuple[str, ...] = ()
    alternatives: tuple[str, ...] = ()
    python: str | None = None
    need: Need | None = None
    choice: Choice | None = None
    reference: str | None = None

    @property
    def command_line(self) -> str:
        """The command as a shell reads it back (a ``--python`` path with a space or a
        ``$`` quoted: it is shown to be pasted)."""
        import shlex

        return shlex.join(self.command)

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "reason": self.reason,
            "variant": self.variant,
            "command": self.command_line,
            "alternatives": list(self.alternatives),
            "python": self.python,
            "selection": self.selection.to_json(),
        }


def covers_gpus(context: Context, name: str, gpus: tuple[Capability, ...]) -> bool:
    """True when the installed variant ``name`` runs on every GPU (read from its binaries)."""
    path = context.libtorch_dir / name
    if not (path / "lib").is_dir():
        return False
    scan = scan_device_code(path)
    if not gpus:
        return True
    return scan.has_device_code and all(v.ok for v in scan.verdicts(gpus))


def _torch_of(context: Context, name: str) -> str | None:
    return variants.read_info(context.libtorch_dir / name, name).torch


def plan_setup(
    context: Context,
    gpus: tuple[Capability, ...],
    *,
    driver: str | None = None,
    torch: str | None = None,
    preferred: str | None = None,
    preferred_origin: str | None = None,
    from_wheel: bool = False,
    force: bool = False,
    platform: str = "linux-x86_64",
    amd: tuple[str, ...] = (),
) -> SetupPlan:
    """Decide what setup does for these GPUs (reads the installed variants, nothing else).

    Args:
        platform: This machine's (``linux-arm64``): without official libtorch archives
            for it, an official build comes from the platform's PyPI wheel.
        amd: The gfx archs of the machine's usable AMD GPUs. Without NVIDIA GPUs the plan is
            the ROCm build that covers them; beside NVIDIA GPUs (one libtorch serves one
            vendor) the plan is for the NVIDIA ones, as floDl's, and says so.
    """

    if amd and not gpus and preferred in (None, "auto"):
        return _plan_rocm(context, amd, torch=torch, force=force)
    plan = _plan_nvidia(
        context,
        gpus,
        driver=driver,
        torch=torch,
        preferred=preferred,
        preferred_origin=preferred_origin,
        from_wheel=from_wheel,
        force=force,
        platform=platform,
    )
    return _with_amd_left_out(plan, amd) if amd else plan


def _with_amd_left_out(plan: SetupPlan, amd: tuple[str, ...]) -> SetupPlan:
    """A plan for the NVIDIA GPUs of a machine that also has AMD ones: said, with the ROCm
    variant that serves them beside it."""
    from dataclasses import replace

    from fdl.compat.rocm import choose_rocm_build, rocm_builds

    torch = plan.selection.torch_version
    choice = choose_rocm_build(torch, amd)
    note = (
        f"AMD GPU(s) {' '.join(amd)} left out: one libtorch serves one vendor, and with NVIDIA "
        "GPUs present the plan is for them (floDl's rule)"
    )
    extra: tuple[str, ...] = ()
    if choice.build is not None:
        build = choice.build
        extra = (
            f"fdl libtorch download --rocm {build.rocm} --torch {build.torch} --no-activate   "
            f"(a ROCm variant beside it, for the AMD GPUs: {build.directory})",
        )
    elif not rocm_builds(torch):
        note += f"; torch {torch} has no official ROCm build"
    return replace(plan, reason=f"{plan.reason}; {note}", alternatives=(*plan.alternatives, *extra))


def _plan_rocm(
    context: Context, amd: tuple[str, ...], *, torch: str | None, force: bool
) -> SetupPlan:
    """The plan for a machine whose usable GPUs are AMD's: keep or activate an installed
    ROCm variant that covers them, else download the official ROCm build (floDl's rule:
    the oldest 7.x build, which serves every 7.x host runtime); the CPU build when no ROCm
    build has kernels for them."""
    from fdl.compat.rocm import choose_rocm_build, gfx_processor, rocm_builds

    newest = max((b.torch for b in rocm_builds()), key=version_key, default=None)
    full = resolve_torch_version(torch) if torch else newest or resolve_torch_version(None)
    choice = choose_rocm_build(full, amd)
    if choice.build is None:
        selection = replace_reason(select_variant((), cpu=True, torch=full), choice.reason)
        return _chosen(selection, from_wheel=False, archives=True)
    build = choice.build
    wanted = {gfx_processor(a) for a in choice.covered}

    def serves(name: str) -> bool:
        info = variants.read_info(context.libtorch_dir / name, name)
        gfx = set(info.archs_found.get("gfx") or info.archs_requested)
        return info.vendor == "amd" and wanted <= gfx and info.torch == build.torch

    selection = replace_reason(select_rocm(full, build.rocm), choice.reason)
    active = variants.active_name(context)
    if not force and active and serves(active):
        return SetupPlan(
            "keep", f"the active variant {active} runs on every AMD GPU", selection, active
        )
    if not force:
        for name in variants.list_variants(context):
            if name != active and serves(name):
                return SetupPlan(
                    "activate",
                    f"{name} is installed and runs on every AMD GPU",
                    selection,
                    name,
                    ("fdl", "libtorch", "activate", name),
                )
    need = need_for(selection, "setup", from_wheel=False, archives=True)
    return SetupPlan(
        "download",
        choice.reason,
        selection,
        command=("fdl", "libtorch", "download", *_flags(selection)),
        need=need,
        choice=choose_source(need),
    )


def replace_reason(selection: Selection, reason: str) -> Selection:
    from dataclasses import replace

    return replace(selection, reason=reason)


def _plan_nvidia(
    context: Context,
    gpus: tuple[Capability, ...],
    *,
    driver: str | None,
    torch: str | None,
    preferred: str | None,
    preferred_origin: str | None,
    from_wheel: bool,
    force: bool,
    platform: str,
) -> SetupPlan:
    from fdl.compat import libtorch_platforms

    selection = select_variant(
        gpus,
        torch=torch,
        preferred=preferred,
        driver=driver,
        preferred_origin=preferred_origin,
        platform=platform,
    )
    wanted_torch = selection.torch_version if torch else None
    active = variants.active_name(context)
    fits = active is not None and covers_gpus(context, active, gpus)
    if not force and active and fits and wanted_torch in (None, _torch_of(context, active)):
        return SetupPlan(
            "keep", f"the active variant {active} runs on every GPU", selection, active
        )
    if not force:
        for name in variants.list_variants(context):
            if name == active or not covers_gpus(context, name, gpus):
                continue
            if wanted_torch is not None and _torch_of(context, name) != wanted_torch:
                continue
            return SetupPlan(
                "activate",
                f"{name} is installed and runs on every GPU",
                selection,
                name,
                ("fdl", "libtorch", "activate", name),
            )
    return _chosen(selection, from_wheel=from_wheel, archives=platform in libtorch_platforms())


def _chosen(selection: Selection, *, from_wheel: bool, archives: bool) -> SetupPlan:
    """The plan of the official source (or the source build) the chooser takes; the team's
    registry and the installed torch are facts :func:`choose_setup` adds."""
    need = need_for(selection, "setup", from_wheel=from_wheel, archives=archives)
    choice = choose_source(need)
    if choice.source in ("wheel", "cpu-view"):
        plan = _official(selection, from_wheel=True)
    elif choice.source == "archive":
        plan = _official(selection, from_wheel=False)
    elif choice.source == "build" or not need.covers_all:
        plan = _build(selection)  # none that can be built: the UsageError saying so
    else:
        why = "; ".join(f"{o.source}: {o.why}" for o in choice.offers)
        raise UsageError(
            f"no source serves torch {selection.torch_version} ({selection.variant}) here: {why}",
            hint="choose another build: fdl setup --torch VERSION, or libtorch.variant in fdl.yml",
        )
    from dataclasses import replace

    return replace(plan, need=need, choice=choice)


def choose_setup(plan: SetupPlan, facts: Facts) -> SetupPlan:
    """``plan`` chosen again with what was gathered (the team registry's match, the torch
    installed for the user's Python): the registry's variant is pulled, the installed
    build copied, else the plan stands. ``keep``/``activate`` plans stay as they are."""
    if plan.need is None:
        return plan
    from dataclasses import replace

    choice = choose_source(plan.need, facts)
    chosen = plan
    if choice.source == "registry":
        chosen = _prefer_shared(plan, facts.shared)
    elif choice.source == "installed":
        chosen = _prefer_installed(plan, facts.installed)
    return replace(chosen, need=plan.need, choice=choice)


def _flags(selection: Selection) -> list[str]:
    if selection.rocm:
        return ["--rocm", selection.rocm, "--torch", selection.torch_version]
    flags = ["--cuda", selection.cuda] if selection.cuda else ["--cpu"]
    return [*flags, "--torch", selection.torch_version]


def _wheel_command(selection: Selection) -> tuple[tuple[str, ...], str] | None:
    """The ``install --from-wheel`` that gives the selected build, and what it installs;
    None when PyPI's wheel of that release is another build (a CUDA build fdl does not
    pick): a fallback must not change what is installed."""
    base = ("fdl", "libtorch", "install", "--from-wheel")
    torch = selection.torch_version
    if selection.cuda is None:
        return (*base, "--cpu", "--torch", torch), FromCpuView(torch=torch).describe()
    if pypi_variant(torch) != selection.variant:
        return None
    what = f"PyPI's torch {torch} wheel ({selection.variant}) with its NVIDIA wheels"
    return (*base, "--torch", torch), what


def _official_what(selection: Selection) -> str:
    """What the official download of ``selection`` installs, in words."""
    build = "CPU build" if selection.cuda is None else f"{selection.variant} build"
    return f"PyTorch's official torch {selection.torch_version} {build}, the libtorch zip"


def _build_what(selection: Selection) -> str:
    gpus = " + ".join(c.sm for c in selection.gpus)
    cuda = f" on CUDA {selection.build_cuda}" if selection.build_cuda else ""
    return f"a source build for every GPU ({gpus}){cuda}, hours"


def _official(selection: Selection, from_wheel: bool) -> SetupPlan:
    download = ("fdl", "libtorch", "download", *_flags(selection))
    wheel = _wheel_command(selection)
    build = (
        (f"{' '.join(selection.build)}   ({_build_what(selection)})",) if selection.build else ()
    )
    if from_wheel and wheel is not None:
        return SetupPlan(
            "wheel",
            f"{selection.reason} ({wheel[1]})",
            selection,
            command=wheel[0],
            alternatives=(f"{' '.join(download)}   ({_official_what(selection)})", *build),
        )
    offered = (f"{' '.join(wheel[0])}   ({wheel[1]})",) if wheel is not None else ()
    return SetupPlan(
        "download",
        selection.reason,
        selection,
        command=download,
        alternatives=(*offered, *build),
    )


def _build(selection: Selection) -> SetupPlan:
    if not selection.build:
        # Neither an official build nor a source build of this release runs on the GPUs.
        gpus = " + ".join(c.sm for c in selection.gpus)
        newer = newer_release_covering(selection.gpus, selection.torch_version)
        raise UsageError(
            f"torch {selection.torch_version} has no build for {gpus} and cannot be built for them",
            hint=f"fdl setup --torch {newer[0]} (its {newer[1]} build covers them)"
            if newer
            else "build separate libtorch variants for these GPUs",
        )
    partial = ("fdl", "libtorch", "download", *_flags(selection))
    covered = [v.gpu.sm for v in selection.verdicts if v.ok]
    after = ", once the driver is upgraded" if selection.driver_problem else ""
    alternatives = (
        (
            f"{' '.join(partial)}   (the official {selection.variant} build: runs on "
            f"{', '.join(covered)} only{after})",
        )
        if covered
        else ()
    )
    driver = f" ({selection.driver_problem})" if selection.driver_problem else ""
    return SetupPlan(
        "build",
        f"no official libtorch {selection.torch_version} covers "
        f"{' + '.join(c.sm for c in selection.gpus)}: a source build does{driver}",
        selection,
        command=selection.build,
        alternatives=alternatives,
    )


def _prefer_installed(plan: SetupPlan, installed: WheelSource | None) -> SetupPlan:
    """``fdl setup``'s plan with the torch already installed for the user's Python first,
    when it is the very build planned (the same release and CUDA build): a ``download`` or
    PyPI ``wheel`` plan becomes a copy of it, with its NVIDIA libraries, and nothing is
    downloaded. A CPU plan never takes a CUDA build."""
    if installed is None or plan.action not in ("download", "wheel") or plan.python:
        return plan
    selection = plan.selection
    if installed.torch_version != selection.torch_version or installed.variant != selection.variant:
        return plan
    python = str(installed.extra.get("python") or "")
    if not python:
        return plan
    instead = (f"{plan.command_line}   (a download: {plan.reason})",) if plan.command else ()
    return SetupPlan(
        "wheel",
        f"{selection.reason}; torch {installed.version} is installed for {python}: copied "
        "from there with its NVIDIA libraries, nothing downloaded",
        selection,
        command=("fdl", "libtorch", "install", "--from-wheel", "--python", python),
        alternatives=(*instead, *plan.alternatives),
        python=python,
    )


def _prefer_shared(plan: SetupPlan, match: SharedMatch | None) -> SetupPlan:
    """``fdl setup``'s plan with the team's variant first: a ``download``, ``wheel`` or
    ``build`` plan becomes a ``pull`` of ``match`` (what runs locally already stays)."""
    if match is None or plan.action in ("keep", "activate"):
        return plan
    instead = (
        (f"{plan.command_line}   (without the registry: {plan.reason})",) if plan.command else ()
    )
    return SetupPlan(
        "pull",
        match.reason(),
        plan.selection,
        match.name,
        match.command,
        (*instead, *plan.alternatives),
        reference=match.remote.pinned,
    )


@dataclass(frozen=True)
class SetupResult:
    """What :func:`run_setup` did.

    Attributes:
        done: ``activated`` or ``installed``.
        variant: The variant now in place.
        install: The install's outcome (None for ``activated``).
    """

    done: str
    variant: str
    install: InstallResult | None = None


def run_setup(
    plan: SetupPlan,
    context: Context,
    *,
    cache: Path,
    runner: Runner | None = None,
    mirror: str | None = None,
    on_progress: ProgressCallback | None = None,
    on_message: Callable[[str], None] | None = None,
    on_line: Callable[[str], None] | None = None,
    on_stage: Callable[[str], None] | None = None,
    transfer: Mapping[str, Any] | None = None,
) -> SetupResult:
    """Carry out an ``activate``, ``download`` or ``wheel`` plan.

    A download that fails on the network (not a missing file) falls back to the PyPI
    wheel of the same torch version.

    Args:
        plan: From :func:`plan_setup`.
        context: The libtorch root.
        cache: fdl's cache directory (zips under ``libtorch/``, wheels under ``wheels/``).
        runner: Runs pip for the wheel (default: the real one).
        mirror: Base URL of a mirror of download.pytorch.org.
        on_progress: Download progress in bytes.
        on_message: Told what is being done.
        on_line: Gets pip's output.
        on_stage: Told when a new stage starts (``downloading cu130``, ``install from wheel``).
        transfer: Extra keyword arguments for :func:`fdl.net.download` (``retry``, ``sleep``).

    Raises:
        UsageError: a ``keep`` or ``build`` plan (nothing to carry out here).
        NetworkError: the download and the wheel both failed, or the zip does not exist.
    """
    say = on_message or (lambda _text: None)
    stage = on_stage or (lambda _label: None)
    if plan.action == "activate" and plan.variant is not None:
        return SetupResult("activated", variants.activate(context, plan.variant))
    if plan.action not in ("download", "wheel"):
        raise UsageError(
            f"a {plan.action!r} setup plan has nothing to carry out",
            hint=plan.command_line or "nothing to do",
        )

    def wheel() -> InstallResult:
        selection = plan.selection
        torch = selection.torch_version
        run = runner or default_runner()
        if plan.python:  # the build planned, installed for the user's Python: copied
            stage(f"install from {plan.python}'s torch")
            source = wheel_source(cache=cache / "wheels", runner=run, python=plan.python)
            check_wheel(source, torch=torch, variant=selection.variant)
            return install_wheel(
                context, source, cache=cache / "wheels", runner=run, on_message=say, on_line=on_line
            )
        if selection.cuda is None:  # never PyPI's CUDA build for a CPU plan
            stage("CPU view of the PyPI wheel")
            return install_cpu_view(
                context, cache=cache / "wheels", torch=torch, on_message=say, on_progress=None
            )
        if _wheel_command(selection) is None:
            raise NetworkError(
                f"download.pytorch.org cannot be reached, and PyPI's torch {torch} wheel is "
                f"{pypi_variant(torch) or 'another build'}, not {selection.variant}: nothing "
                "was installed",
                hint=f"retry when it can be reached (fdl setup), point FDL_LIBTORCH_MIRROR at "
                f"a mirror, or take PyPI's build: fdl libtorch install --from-wheel --torch "
                f"{torch} --name {pypi_variant(torch) or 'pypi'}",
            )
        stage("install from wheel")
        source = wheel_source(
            cache=cache / "wheels", runner=run, torch=torch, on_message=say, on_line=on_line
        )
        check_wheel(source, torch=torch, variant=selection.variant)
        return install_wheel(
            context, source, cache=cache / "wheels", runner=run, on_message=say, on_line=on_line
        )

    if plan.action == "wheel":
        result = wheel()
    else:
        chosen = plan_download(plan.selection, context, cache, mirror=mirror)
        stage(f"downloading {chosen.label}")
        try:
            result = run_download(
                chosen, context, on_progress=on_progress, on_message=say, transfer=transfer
            )
        except NetworkError as exc:
            if isinstance(exc, NotFound) or plan.selection.rocm:
                raise  # PyPI has no ROCm wheel to fall back to
            say(f"download failed ({exc.message}); trying the PyPI wheel instead")
            result = wheel()
    name = result.target.name or str(result.target.path)
    return SetupResult("installed", name, result)
