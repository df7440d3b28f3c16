"""``fdl probe``: is this machine ready for a long training job?

floDl 0.8's readiness gate (flodl-cli 0.8.0 ``src/probe.rs``), in its JSON shape
``{host, gpus, libtorch{..., archs_match}, data_path, nccl, issues, warnings, ready}``,
and beyond it: the NCCL the active libtorch will load is read from its binary for code
covering every NVIDIA GPU (a rig of sm_61 and sm_120 needs both), and the NVIDIA driver
is held to the variant's CUDA and to each GPU's own floor.

:func:`gather` asks the machine (once); :func:`plan_probe` is pure: facts in, report out.
An *issue* makes the machine not ready (exit 1); a *warning* does not.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fdl.system.resources import glibc_version
from fdl.system.survey import Device, Survey

__all__ = ["DEFAULT_DATA_PATH", "NcclLibrary", "ProbeFacts", "ProbeReport", "gather", "plan_probe"]

# floDl's convention (flodl-cli 0.8.0 src/config: DEFAULT_DATA_PATH)
DEFAULT_DATA_PATH = "/flodl/data"
# Where floDl looks for libnccl.so* (probe.rs check_nccl), after the variant's own lib/
# and the NVIDIA wheels beside a pip-adopted torch.
NCCL_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/local/lib",
    "/usr/local/cuda/lib64",
    "/opt/cuda/lib64",
)
CUDA_HEADERS = (
    "cuda_runtime.h",
    "crt/host_config.h",
    "cublas_v2.h",
    "cusolverDn.h",
    "cusparse.h",
    "nccl.h",
)
ROCM_HEADERS = (
    "hip/hip_runtime.h",
    "rccl/rccl.h",
    "hipblas/hipblas.h",
    "hipsolver/hipsolver.h",
    "hipsparse/hipsparse.h",
)


@dataclass(frozen=True)
class NcclLibrary:
    """A ``libnccl.so*`` found where the run will look, and the GPU code it holds."""

    path: str
    where: str  # "fdl nccl build", "variant", "wheel", "system", "LD_LIBRARY_PATH"
    cubins: tuple[str, ...] = ()
    ptx: tuple[str, ...] = ()
    unreadable: str | None = None


@dataclass(frozen=True)
class ProbeFacts:
    """What :func:`gather` learned; everything :func:`plan_probe` decides from."""

    host: str
    survey: Survey
    libtorch_path: str | None
    variant: Any  # VariantInfo | None
    data_path: str
    data_path_explicit: bool
    data_exists: bool
    data_readable: bool
    fs_type: str | None
    skip_mount: bool
    nccl: tuple[NcclLibrary, ...]
    via_docker: str | None
    glibc: str | None
    missing_headers: tuple[str, ...] = ()
    toolkit_root: str | None = None
    image: str | None = None  # the job runs in this image (fdl deploy): its libtorch is judged


@dataclass(frozen=True)
class ProbeReport:
    facts: ProbeFacts
    archs_match: tuple[tuple[int, bool], ...]
    issues: tuple[str, ...]
    warnings: tuple[str, ...] = field(default=())

    @property
    def ready(self) -> bool:
        return not self.issues

    def to_json(self) -> dict[str, Any]:
        f = self.facts
        libtorch = None
        if f.libtorch_path is not None:
            info = f.variant
            found = info.archs_found if info is not None else {}
            archs = [*found.get("cubin", []), *found.get("ptx", []), *found.get("gfx", [])]
            libtorch = {
                "path": f.libtorch_path,
                "valid_dir": Path(f.libtorch_path, "lib").is_dir(),
                "torch": info.torch if info is not None else None,
                "cuda": (info.cuda or "none") if info is not None else None,
                "vendor": info.vendor if info is not None else None,
                "archs": " ".join(archs or (info.archs_requested if info else [])) or None,
                "archs_match": [{"gpu": g, "covered": ok} for g, ok in self.archs_match],
            }
        data = None
        if not f.skip_mount:
            data = {
                "path": f.data_path,
                "exists": f.data_exists,
                "readable": f.data_readable,
                "fs_type": f.fs_type,
            }
        nccl: dict[str, Any] | None = None
        if f.nccl or f.via_docker:
            nccl = {"via_docker": f.via_docker} if f.via_docker else {}
            if f.nccl:
                nccl |= {
                    "library_path": f.nccl[0].path,
                    "count": len(f.nccl),
                    "where": f.nccl[0].where,
                    "cubins": list(f.nccl[0].cubins),
                    "ptx": list(f.nccl[0].ptx),
                }
        return {
            "host": f.host,
            "gpus": [d.to_json() for d in f.survey.devices],
            "gpu_notes": [n.to_json() for n in f.survey.notes],
            "libtorch": libtorch,
            "data_path": data,
            "nccl": nccl,
            "issues": list(self.issues),
            "warnings": list(self.warnings),
            "ready": self.ready,
        }


def plan_probe(facts: ProbeFacts) -> ProbeReport:
    """The verdict on ``facts``: GPUs, libtorch against them, the data mount, NCCL, the
    toolkit headers, glibc and the driver."""
    issues: list[str] = []
    warnings: list[str] = []
    survey = facts.survey
    for note in survey.notes:
        (issues if note.kind == "hardware_unusable" else warnings).append(note.message)
    if not survey.devices:
        issues.append(
            "no usable GPUs detected: single-host CPU training still works; multi-rank "
            "training needs a working GPU stack (fdl diagnose says what was looked for)"
        )
    matches = _libtorch(facts, issues, warnings)
    _data_path(facts, issues, warnings)
    nvidia = [d for d in survey.devices if d.vendor == "nvidia"]
    if nvidia and not facts.via_docker:
        cuda = facts.variant.cuda if facts.variant is not None else None
        _nccl(facts.nccl, nvidia, issues, warnings, cuda=cuda)
    if facts.missing_headers and facts.variant is not None:
        feature = "rocm" if facts.variant.vendor == "amd" else "cuda"
        warnings.append(
            f"the active libtorch is {facts.variant.vendor.upper()} but its toolkit headers are "
            f"missing under {facts.toolkit_root} ({', '.join(facts.missing_headers)}): native "
            f"builds with --features {feature} will fail; builds in the image are unaffected"
        )
    return ProbeReport(facts, matches, tuple(issues), tuple(warnings))


def _libtorch(
    facts: ProbeFacts, issues: list[str], warnings: list[str]
) -> tuple[tuple[int, bool], ...]:
    from fdl.compat import check_driver, parse_archs, runs_on

    info = facts.variant
    if facts.libtorch_path is None or info is None:
        warnings.append("no libtorch variant is active: fdl setup installs the one for these GPUs")
        return ()
    matches: list[tuple[int, bool]] = []
    if info.vendor == "nvidia":
        codes = [*info.archs_found.get("cubin", []), *info.archs_found.get("ptx", [])]
        targets = parse_archs(codes or info.archs_requested)
        for device in facts.survey.devices:
            if device.vendor == "nvidia" and device.capability is not None:
                matches.append((device.index, runs_on(targets, device.capability).ok))
        driver = facts.survey.nvidia_driver
        caps = [d.capability for d in facts.survey.devices if d.capability is not None]
        if driver and info.cuda:
            check = check_driver(driver, info.cuda, gpus=caps)
            if not check.ok:
                issues.append(f"NVIDIA driver {driver}: {check.reason}")
    elif info.vendor == "amd":
        from fdl.compat.rocm import gfx_processor, rocm_builds

        gfx = set(info.archs_found.get("gfx") or info.archs_requested)
        for device in facts.survey.devices:
            if device.vendor == "amd":
                matches.append((device.index, gfx_processor(device.arch) in gfx))
        build = next((b for b in rocm_builds(info.torch) if b.rocm == info.rocm), None)
        if build and build.glibc and facts.glibc and _older(facts.glibc, build.glibc):
            issues.append(
                f"{info.name} needs glibc {build.glibc} (GLIBCXX_{build.glibcxx}); this machine "
                f"has {facts.glibc}: its libraries will not load here (use an image, fdl image build)"
            )
    uncovered = [str(g) for g, ok in matches if not ok]
    if uncovered and facts.image is not None:
        code = " ".join([*info.archs_found.get("cubin", []), *info.archs_found.get("ptx", [])])
        names = ", ".join(
            f"{d.index} ({d.name}, {d.arch})"
            for d in facts.survey.devices
            if str(d.index) in uncovered
        )
        issues.append(
            f"the image's libtorch {info.name} ({code or 'no GPU code'}) has no code for GPU "
            f"{names} of this node: build the image with a variant that covers it "
            "(`fdl deploy render` names one), or keep the job off this node"
        )
    elif uncovered:
        issues.append(
            f"the active libtorch {info.name} has no code for GPU {', '.join(uncovered)}: "
            "fdl setup plans the variant that covers every GPU"
        )
    elif info.vendor == "cpu" and facts.survey.devices:
        warnings.append(f"the active libtorch {info.name} is a CPU build: the GPUs stay idle")
    return tuple(matches)


def _older(have: str, need: str) -> bool:
    from fdl.compat import version_key

    return version_key(have) < version_key(need)


def _data_path(facts: ProbeFacts, issues: list[str], warnings: list[str]) -> None:
    if facts.skip_mount:
        return
    if not facts.data_exists:
        if facts.data_path_explicit:
            issues.append(
                f"shared data path {facts.data_path} does not exist on this host: mount the "
                "shared storage there, or give the right one with --data-path"
            )
        else:
            warnings.append(
                f"the convention shared-data path {facts.data_path} is not present: ignore this "
                "without shared storage, else mount it or pass --data-path"
            )
    elif not facts.data_readable:
        issues.append(f"shared data path {facts.data_path} exists but this user cannot read it")


def nccl_advice(gpus: Sequence[Device], cuda: str | None) -> str:
    """Which NCCL build serves every GPU here, from the wheels fdl has read
    (``fdl/data/compat/nccl.yaml``)."""
    from fdl.compat.nccl import wheels_covering

    caps = [d.capability for d in gpus if d.capability is not None]
    major = cuda.split(".", 1)[0] if cuda else None
    fitting = wheels_covering(caps)
    same = [w for w in fitting if major is None or w.package.endswith(f"-cu{major}")]
    if same:
        best = same[0]
        return (
            f"{best.requirement} has code for every GPU here ({' '.join(best.cubins)}): pip "
            "install it and put its nvidia/nccl/lib first on LD_LIBRARY_PATH"
        )
    names = " ".join(d.arch for d in gpus)
    if fitting:
        return (
            f"no CUDA {major} NCCL wheel has code for {names}; {fitting[0].requirement} does: "
            "use a CUDA 12 libtorch, or build NCCL from NVIDIA's source for these archs "
            f"(fdl nccl build --archs {_arch_list(gpus)})"
        )
    return (
        f"no NCCL wheel fdl has read covers {names}: build NCCL from NVIDIA's source for them "
        f"(fdl nccl build --archs {_arch_list(gpus)})"
    )


def _arch_list(gpus: Sequence[Device]) -> str:
    """``"6.1;12.0"``: the NVIDIA GPUs' capabilities, for ``fdl nccl build --archs``."""
    caps = sorted({d.capability for d in gpus if d.capability is not None}, key=lambda c: c.number)
    return '"' + ";".join(str(c) for c in caps) + '"'


def _nccl(
    found: Sequence[NcclLibrary],
    gpus: Sequence[Device],
    issues: list[str],
    warnings: list[str],
    *,
    cuda: str | None = None,
) -> None:
    from fdl.compat import parse_archs, runs_on

    if not found:
        issues.append(
            "no libnccl.so found (the variant, the NVIDIA wheels beside it, the system's "
            "library directories, $LD_LIBRARY_PATH): multi-rank training fails at its first "
            f"collective. {nccl_advice(gpus, cuda)}"
        )
        return
    first = found[0]
    if first.unreadable:
        warnings.append(f"cannot read {first.path}: {first.unreadable}")
        return
    if len({Path(n.path).resolve().name for n in found}) > 1:
        warnings.append(f"{len(found)} libnccl libraries found: the first ({first.path}) is loaded")
    if not first.cubins and not first.ptx:
        return  # a stub or a library whose code fdl cannot see: nothing to hold it to
    targets = parse_archs([*first.cubins, *first.ptx])
    missed = [d for d in gpus if d.capability is not None and not runs_on(targets, d.capability).ok]
    if missed:
        names = ", ".join(f"{d.index} ({d.arch})" for d in missed)
        issues.append(
            f"{first.path} has no code for GPU {names} (it holds "
            f"{' '.join([*first.cubins, *first.ptx])}): NCCL collectives fail on them. "
            f"{nccl_advice(gpus, cuda)}"
        )


# ---------------------------------------------------------------------------- gathering


def gather(
    *,
    survey: Survey,
    libtorch_path: Path | None,
    variant: Any,
    environ: Mapping[str, str],
    data_path: str | None,
    skip_mount: bool,
    via_docker: str | None,
    image: str | None = None,
) -> ProbeFacts:
    """Ask the machine what :func:`plan_probe` needs (bounded: directory listings and ELF
    headers, nothing is loaded)."""
    path = data_path or DEFAULT_DATA_PATH
    exists = os.path.isdir(path) if not skip_mount else False
    readable = exists and os.access(path, os.R_OK | os.X_OK)
    nccl: tuple[NcclLibrary, ...] = ()
    if any(d.vendor == "nvidia" for d in survey.devices) and not via_docker:
        nccl = find_nccl(libtorch_path, environ)
    # A job's image brings its own toolkit: the host's headers are not its concern.
    headers, root = _missing_headers(variant, environ) if image is None else ((), None)
    return ProbeFacts(
        host=environ.get("FLODL_HOST_NAME") or socket.gethostname(),
        survey=survey,
        libtorch_path=str(libtorch_path) if libtorch_path is not None else None,
        variant=variant,
        data_path=path,
        data_path_explicit=data_path is not None,
        data_exists=exists,
        data_readable=readable,
        fs_type=fs_type(Path(path)) if exists else None,
        skip_mount=skip_mount,
        nccl=nccl,
        via_docker=via_docker,
        glibc=glibc_version(),
        missing_headers=headers,
        toolkit_root=root,
        image=image,
    )


def find_nccl(libtorch: Path | None, environ: Mapping[str, str]) -> tuple[NcclLibrary, ...]:
    """Every ``libnccl.so*`` the run may load, in the order the loader would meet them."""
    places: list[tuple[str, Path]] = []
    if libtorch is not None:
        built = _built_nccl(libtorch)
        if built is not None:  # LD_PRELOAD'ed by project commands: loaded before any other
            places.append(("fdl nccl build", built))
        places.append(("variant", libtorch / "lib"))
        places.append(("wheel", libtorch / "nvidia" / "nccl" / "lib"))
        places.append(("wheel", libtorch.parent / "nvidia" / "nccl" / "lib"))
    places += [
        ("LD_LIBRARY_PATH", Path(p)) for p in environ.get("LD_LIBRARY_PATH", "").split(":") if p
    ]
    places += [("system", Path(p)) for p in NCCL_DIRS]
    found: list[NcclLibrary] = []
    seen: set[str] = set()
    for where, directory in places:
        try:
            names = sorted(p.name for p in directory.iterdir() if p.name.startswith("libnccl.so"))
        except OSError:
            continue
        for name in names[:16]:
            library = directory / name
            key = str(library.resolve())
            if key in seen or not library.is_file():
                continue
            seen.add(key)
            found.append(_read_nccl(library, where))
    return tuple(found)


def _built_nccl(libtorch: Path) -> Path | None:
    """The ``lib/`` of the NCCL ``fdl nccl build`` made for this variant, when one was:
    ``<root>/libtorch/nccl/builds/`` beside ``<root>/libtorch/<kind>/<name>``."""
    from fdl.nccl import built_for

    build = built_for(libtorch.parent.parent, f"{libtorch.parent.name}/{libtorch.name}")
    return build.library.parent if build is not None else None


def _read_nccl(library: Path, where: str) -> NcclLibrary:
    from fdl.binaries import BinaryFormatError, read_device_code

    try:
        code = read_device_code(library)
    except (BinaryFormatError, OSError) as exc:
        return NcclLibrary(str(library), where, unreadable=str(exc)[:300])
    return NcclLibrary(str(library), where, code.cubin_archs, code.ptx_archs)


def fs_type(path: Path, mountinfo: Path = Path("/proc/self/mountinfo")) -> str | None:
    """The file system ``path`` lives on (``nfs4``, ``fuse.sshfs``, ``ext4``): the mount
    with the longest mount point above it (the last one mounted, where stacked)."""
    from fdl._files import NotARegularFile, read_small_text

    try:
        text = read_small_text(mountinfo, limit=4 << 20) or ""
    except (NotARegularFile, OSError):
        return None
    target = os.path.realpath(path)
    best: tuple[int, str] | None = None
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, after = left.split(), right.split()
        if not sep or len(fields) < 5 or not after:
            continue
        point = fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= best[0]):
            best = (len(point), after[0])
    return best[1] if best else None


def _missing_headers(
    variant: Any, environ: Mapping[str, str]
) -> tuple[tuple[str, ...], str | None]:
    if variant is None or variant.vendor == "cpu":
        return (), None
    headers: tuple[str, ...]
    if variant.vendor == "amd":
        root = next(
            (environ[k] for k in ("ROCM_PATH", "HIP_PATH", "HSA_PATH") if environ.get(k)),
            "/opt/rocm",
        )
        headers = ROCM_HEADERS
    else:
        root = environ.get("CUDA_HOME") or "/usr/local/cuda"
        headers = CUDA_HEADERS
    include = [Path(root) / "include", Path("/usr/include")]
    missing = tuple(h for h in headers if not any((d / h).is_file() for d in include))
    return missing, root
