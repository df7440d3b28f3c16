"""``fdl libtorch verify``: is this variant what it claims, and does it fit this machine?

Checks, each a :class:`~fdl.checks.Check`:

- files: ``lib/libtorch.so``, headers, ``TorchConfig.cmake``, ``build-version``;
- archs: the GPU code really compiled into torch's libraries (``.nv_fatbin``), compared
  with the metadata recorded at install time and with what was asked for;
- gpus: whether each detected GPU can run it (and the driver its CUDA version);
- libraries: every DT_NEEDED of torch's libraries resolves inside the variant or the system;
- cmake (``--cmake``): a tiny program builds with ``find_package(Torch)`` and runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fdl.checks import Check, Severity, worst
from fdl.compat import ArchList, Match, check_driver, parse_archs
from fdl.errors import FdlError
from fdl.libtorch import variants
from fdl.libtorch._deps import library_checks
from fdl.libtorch._scan import DeviceScan, read_build_version, scan_device_code
from fdl.libtorch._select import coverage_fix
from fdl.libtorch._smoke import SmokeResult
from fdl.system import Gpu, GpuReport

__all__ = ["VerifyReport", "gpu_label", "verify_variant"]

LineCallback = Callable[[str], None]
HIP_LIBRARY = "libtorch_hip.so"


@dataclass(frozen=True)
class VerifyReport:
    """What verifying a variant found."""

    name: str
    path: Path
    info: variants.VariantInfo
    scan: DeviceScan
    checks: tuple[Check, ...]
    smoke: SmokeResult | None = None

    @property
    def ok(self) -> bool:
        return worst(self.checks) is not Severity.ERROR

    def to_json(self) -> dict[str, Any]:
        found = self.scan.archs_found() if self.scan.has_device_code else {"cubin": [], "ptx": []}
        return {
            "variant": self.name,
            "path": str(self.path),
            "ok": self.ok,
            "torch": self.info.torch,
            "cuda": self.info.cuda,
            "archs_found": found,
            "libraries": self.scan.per_library(),
            "checks": [c.to_json() for c in self.checks],
            "smoke": None
            if self.smoke is None
            else {
                "ok": self.smoke.ok,
                "stage": self.smoke.stage,
                "lines": list(self.smoke.lines),
                "message": self.smoke.message,
            },
        }


def gpu_label(gpu: Gpu) -> str:
    """``GPU 1 (GTX 1060 6GB, sm_61)``."""
    return f"GPU {gpu.index} ({gpu.short_name}, {gpu.sm or 'unknown arch'})"


def _check(
    group: str, name: str, severity: Severity, message: str, fix: str | None = None, **data: Any
) -> Check:
    return Check(group, name, severity, message, fix, dict(data))


def _files(path: Path, info: variants.VariantInfo) -> list[Check]:
    checks = []
    required = {
        "lib/libtorch.so": "the library every program links",
        "include/torch": "the C++ headers",
        "share/cmake/Torch/TorchConfig.cmake": "what CMake's find_package(Torch) reads",
    }
    for relative, what in required.items():
        present = (path / relative).exists()
        checks.append(
            _check(
                "files",
                relative,
                Severity.OK if present else Severity.ERROR,
                "present" if present else f"missing ({what})",
                None
                if present
                else "reinstall the variant (fdl libtorch download / install --force)",
            )
        )
    version = read_build_version(path)
    if version is None:
        checks.append(_check("files", "build-version", Severity.INFO, "no build-version file"))
    elif info.torch and version.split("+", 1)[0] != info.torch:
        checks.append(
            _check(
                "files",
                "build-version",
                Severity.ERROR,
                f"build-version says {version}, the metadata says torch {info.torch}",
                "the tree was changed after install; reinstall it",
            )
        )
    else:
        checks.append(_check("files", "build-version", Severity.OK, version))
    view = variants.describe_view(info.source, info.extra)
    if view:
        checks.append(_check("files", "build", Severity.INFO, view))
    if not (path / variants.INFO_FILE).is_file():
        checks.append(
            _check(
                "files",
                "metadata",
                Severity.WARNING,
                "no variant.json (installed by hand or by another tool): only the binaries tell",
                "reinstall it with fdl to record where it came from",
            )
        )
    return checks


def _recorded(info: variants.VariantInfo) -> ArchList | None:
    codes = [*info.archs_found.get("cubin", []), *info.archs_found.get("ptx", [])]
    if not info.archs_found:
        return None
    return parse_archs(" ".join(codes)) if codes else ArchList()


def _archs(path: Path, info: variants.VariantInfo, scan: DeviceScan) -> list[Check]:
    found = scan.targets
    checks = [
        _check("archs", "unreadable", Severity.ERROR, f"{name}: {why}", "reinstall the variant")
        for name, why in scan.errors
    ]
    if info.cuda is None and scan.has_device_code:
        return [
            *checks,
            _check(
                "archs",
                "gpu code",
                Severity.ERROR,
                f"the metadata says CPU build, but the libraries hold GPU code ({' '.join(found.codes())})",
                "the metadata is wrong: reinstall the variant",
            ),
        ]
    if info.cuda is not None and not scan.has_device_code:
        return [
            *checks,
            _check(
                "archs",
                "gpu code",
                Severity.ERROR,
                f"the metadata says CUDA {info.cuda}, but no torch library holds GPU code",
                "reinstall the variant; a CUDA libtorch has lib/libtorch_cuda.so with device code",
            ),
        ]
    if not scan.has_device_code:
        return [
            *checks,
            _check("archs", "gpu code", Severity.OK, "CPU build: no GPU code, as recorded"),
        ]
    main = scan.main
    assert main is not None
    summary = f"{main.path.name}: cubins {' '.join(t.code for t in found.cubins) or 'none'}; " + (
        f"PTX {' '.join(t.code for t in found.ptx)}" if found.ptx else "no PTX"
    )
    checks.append(Check("archs", "gpu code", Severity.OK, summary, None, dict(scan.archs_found())))
    if scan.extras:
        checks.append(
            _check(
                "archs",
                "extra kernels",
                Severity.INFO,
                f"a few kernels also for {' '.join(scan.extras.codes())}",
            )
        )
    recorded = _recorded(info)
    if recorded is not None and set(recorded) != set(found):
        checks.append(
            _check(
                "archs",
                "recorded",
                Severity.ERROR,
                f"variant.json records {' '.join(recorded.codes()) or 'no GPU code'}, the libraries hold "
                f"{' '.join(found.codes())}",
                "the libraries changed since install: reinstall the variant",
            )
        )
    checks += _requested(info, found)
    return checks


def _requested(info: variants.VariantInfo, found: ArchList) -> list[Check]:
    try:
        requested = parse_archs(" ".join(info.archs_requested)) if info.archs_requested else None
    except FdlError:
        return [
            _check(
                "archs",
                "requested",
                Severity.WARNING,
                f"cannot read the requested archs {info.archs_requested!r}",
            )
        ]
    if requested is None:
        return []
    missing = [t for t in requested if t not in set(found)]
    if not missing:
        return [
            _check("archs", "requested", Severity.OK, "every requested arch is in the binaries")
        ]
    built = info.source.get("kind") == "build"
    what = "asked for" if built else "documented"
    ptx_note = (
        " (without PTX, GPUs newer than the newest cubin cannot JIT)"
        if any(t.kind.value == "ptx" for t in missing)
        else ""
    )
    return [
        _check(
            "archs",
            "requested",
            # an official build's documentation is not a promise: the GPU checks tell
            Severity.ERROR if built else Severity.INFO,
            f"{what} but not in the binaries: {' '.join(t.code for t in missing)}{ptx_note}",
            "rebuild with the missing archs (fdl libtorch build --archs ...)" if built else None,
            missing=[t.code for t in missing],
        )
    ]


def _gpus(
    info: variants.VariantInfo, scan: DeviceScan, report: GpuReport | None, torch: str | None
) -> list[Check]:
    if report is None or not report.gpus:
        why = report.reason if report is not None and report.reason else "no NVIDIA GPU detected"
        return [_check("gpus", "gpus", Severity.INFO, f"{why}: GPU coverage not checked")]
    caps = list(report.capabilities)
    checks = []
    for gpu in report.gpus:
        label = gpu_label(gpu)
        if gpu.capability is None:
            checks.append(
                _check(
                    "gpus",
                    f"GPU {gpu.index}",
                    Severity.WARNING,
                    f"{label}: the driver does not report its compute capability",
                    "update the NVIDIA driver",
                )
            )
            continue
        if info.cuda is None and not scan.has_device_code:
            checks.append(
                _check(
                    "gpus",
                    f"GPU {gpu.index}",
                    Severity.WARNING,
                    f"{label}: this is a CPU build, the GPU is not used",
                    coverage_fix(caps, torch or info.torch, report.driver),
                )
            )
            continue
        verdict = scan.verdict(gpu.capability)
        if not verdict.ok:
            checks.append(
                _check(
                    "gpus",
                    f"GPU {gpu.index}",
                    Severity.ERROR,
                    f"{label} is not covered by {info.name}: {verdict.reason}",
                    coverage_fix(caps, torch or info.torch, report.driver),
                    gpu=gpu.sm,
                )
            )
            continue
        checks.append(
            _check(
                "gpus", f"GPU {gpu.index}", Severity.OK, f"{label}: {verdict.reason}", gpu=gpu.sm
            )
        )
        for library, gap in scan.gaps(gpu.capability):
            checks.append(
                _check(
                    "gpus",
                    f"GPU {gpu.index} {library}",
                    Severity.WARNING,
                    f"{label}: {library} has no code for it ({gap.reason}); its kernels fail there",
                    coverage_fix([gpu.capability], torch or info.torch, report.driver),
                )
            )
    if info.cuda and report.driver:
        try:
            driver = check_driver(
                report.driver,
                info.cuda,
                gpus=caps,
                ptx=any(scan.verdict(c).match is Match.PTX for c in caps),
            )
        except FdlError:
            driver = None
        if driver is not None:
            checks.append(
                _check(
                    "gpus",
                    "driver",
                    Severity.OK if driver.ok else Severity.ERROR,
                    driver.reason,
                    None if driver.ok else f"install an NVIDIA driver >= {driver.required}",
                )
            )
    return checks


def verify_variant(
    path: Path,
    name: str,
    *,
    gpus: GpuReport | None = None,
    smoke: Callable[[variants.VariantInfo], SmokeResult] | None = None,
    torch: str | None = None,
    amd: Sequence[str] | None = None,
) -> VerifyReport:
    """Check the variant at ``path`` (see the module docstring).

    Args:
        path: The variant directory.
        name: Its name (``precompiled/cu130``).
        gpus: The detected GPUs; None skips the coverage checks.
        smoke: Runs the CMake smoke program (``--cmake``); None skips it.
        torch: The release the fixes install (the project's framework needs it); None: the
            variant's own.
        amd: The gfx archs of the machine's usable AMD GPUs (None: not looked at); a ROCm
            variant is held to them, and its code is read from ``libtorch_hip.so``.
    """
    info = variants.read_info(path, name)
    scan = scan_device_code(path)
    checks = [*_files(path, info)]
    if info.vendor == "amd" or (path / "lib" / HIP_LIBRARY).is_file():
        from fdl.libtorch._verify_rocm import rocm_checks

        checks += rocm_checks(path, info, amd, gpus)
    else:
        checks += [*_archs(path, info, scan), *_gpus(info, scan, gpus, torch)]
    if (path / "lib").is_dir():
        checks += library_checks(path, info)
    result = None
    if smoke is not None:
        result = smoke(info)
        checks.append(_smoke_check(result))
    return VerifyReport(name, path, info, scan, tuple(checks), result)


def _smoke_check(result: SmokeResult) -> Check:
    if result.ok:
        detail = ", ".join(result.lines[1:]) if len(result.lines) > 1 else "ran"
        return _check(
            "cmake",
            "smoke program",
            Severity.OK,
            f"find_package(Torch) configured, built and ran: torch {result.torch}; {detail}",
            lines=list(result.lines),
        )
    where = f" (build directory kept: {result.work_dir})" if result.work_dir else ""
    return _check(
        "cmake",
        "smoke program",
        Severity.ERROR,
        f"the CMake smoke program failed at {result.stage}: {result.message}{where}",
        "read the output above; a missing CUDA toolkit or compiler is the usual cause",
        stage=result.stage,
        lines=list(result.lines),
    )
