"""``fdl libtorch verify --cmake``: build and run a tiny program against a variant.

The program (``templates/libtorch-smoke``) is configured with CMake's ``find_package(Torch)``
exactly as a user project would be, built with the C++ standard the release requires, and
run; it prints ``fdl-smoke ...`` lines (torch version, a CPU training step, each GPU).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fdl._assets import asset_dir
from fdl.compat import parse_archs, source_requirements
from fdl.errors import CommandFailed, EnvironmentProblem, FdlError
from fdl.libtorch import variants
from fdl.runner import Runner

__all__ = [
    "SmokeResult",
    "SmokeSetup",
    "cmake_smoke",
    "cuda_root",
    "smoke_runner",
    "smoke_setup",
    "smoke_sources",
]

LineCallback = Callable[[str], None]
_PREFIX = "fdl-smoke "


@dataclass(frozen=True)
class SmokeResult:
    """What the smoke program did.

    Attributes:
        ok: Configured, built, ran, and every line said ok.
        stage: Where it stopped: ``configure``, ``build``, ``run`` or ``done``.
        lines: Its ``fdl-smoke`` lines, without the prefix (``cpu ok``, ``cuda:0 ok``).
        torch: The version the headers report.
        message: What went wrong, with the tail of the output.
        work_dir: Where it was built (kept when it failed).
    """

    ok: bool
    stage: str
    lines: tuple[str, ...] = ()
    torch: str | None = None
    message: str = ""
    work_dir: Path | None = None
    commands: tuple[str, ...] = field(default=())


def smoke_sources() -> Path:
    """The smoke program's directory (CMakeLists.txt, main.cpp)."""
    return asset_dir("templates") / "libtorch-smoke"


@dataclass(frozen=True)
class SmokeSetup:
    """How to configure the smoke program for one variant.

    Attributes:
        cxx_standard: The C++ standard the release needs (17, or 20 from 2.13 on).
        cuda: The variant's CUDA version, None for a CPU build.
        cuda_root: The CUDA toolkit PyTorch's CMake config needs for a CUDA build.
        arch_list: ``TORCH_CUDA_ARCH_LIST`` for the configure step (else PyTorch's CMake
            tries to run a program on the GPU to detect it).
    """

    cxx_standard: int
    cuda: str | None = None
    cuda_root: Path | None = None
    arch_list: str | None = None


def cuda_root(environ: Mapping[str, str]) -> Path | None:
    """The CUDA toolkit to configure against: $CUDA_HOME, $CUDA_PATH, else /usr/local/cuda."""
    for name in ("CUDA_HOME", "CUDA_PATH"):
        value = environ.get(name)
        if value and (Path(value) / "bin" / "nvcc").exists():
            return Path(value)
    default = Path("/usr/local/cuda")
    return default if (default / "bin" / "nvcc").exists() else None


def smoke_setup(info: variants.VariantInfo, environ: Mapping[str, str]) -> SmokeSetup:
    """The smoke program's configuration for the variant ``info`` describes."""
    try:
        standard = source_requirements(info.torch).cxx_standard if info.torch else 17
    except FdlError:
        standard = 20  # newer than the tables: the newest requirement
    if not info.cuda:
        return SmokeSetup(standard)
    cubins = info.archs_found.get("cubin") or info.archs_requested
    try:
        arch_list = parse_archs(" ".join(cubins)).torch_cuda_arch_list() if cubins else None
    except FdlError:
        arch_list = None
    return SmokeSetup(standard, info.cuda, cuda_root(environ), arch_list)


def _configure_args(variant: Path, setup: SmokeSetup) -> list[str]:
    args = [
        f"-DCMAKE_PREFIX_PATH={variant}",
        f"-DCMAKE_CXX_STANDARD={setup.cxx_standard}",
        "-DCMAKE_BUILD_TYPE=Release",
    ]
    if setup.cuda:
        if setup.cuda_root is not None:
            root = setup.cuda_root
            args += [
                f"-DCUDA_TOOLKIT_ROOT_DIR={root}",
                f"-DCUDAToolkit_ROOT={root}",
                f"-DCMAKE_CUDA_COMPILER={root / 'bin' / 'nvcc'}",
            ]
        if setup.arch_list:
            args.append(f"-DTORCH_CUDA_ARCH_LIST={setup.arch_list}")
        # PyTorch's CMake looks for nvrtc in the toolkit; the variant brings its own copy.
        nvrtc = sorted((variant / "lib").glob("libnvrtc.so*"))
        if nvrtc:
            args.append(f"-DCUDA_nvrtc_LIBRARY={nvrtc[0]}")
    return args


def cmake_smoke(
    variant: Path,
    work_dir: Path,
    setup: SmokeSetup,
    *,
    runner: Runner,
    on_line: LineCallback | None = None,
    jobs: int | None = None,
) -> SmokeResult:
    """Configure, build and run the smoke program against ``variant`` in ``work_dir``.

    Never raises for a failing step: the result says where and why.

    Raises:
        EnvironmentProblem: cmake or a C++ compiler is missing.
    """
    if runner.which("cmake") is None:
        raise EnvironmentProblem(
            "cmake is not on PATH: verify --cmake needs it", hint="install cmake (>= 3.18)"
        )
    if setup.cuda and setup.cuda_root is None:
        return SmokeResult(
            False,
            "configure",
            message="PyTorch's CMake config of a CUDA libtorch needs a CUDA toolkit at "
            "configure time, and none was found (CUDA_HOME, CUDA_PATH, /usr/local/cuda)",
        )
    source, build = work_dir / "src", work_dir / "build"
    shutil.rmtree(work_dir, ignore_errors=True)
    shutil.copytree(smoke_sources(), source)
    steps = [
        (
            "configure",
            [
                "cmake",
                "-S",
                str(source),
                "-B",
                str(build),
                *_configure_args(variant, setup),
            ],
        ),
        ("build", ["cmake", "--build", str(build), "--parallel", str(jobs or os.cpu_count() or 1)]),
        ("run", [str(build / "fdl_smoke")]),
    ]
    commands = tuple(" ".join(argv) for _, argv in steps)
    log = work_dir / "smoke.log"
    output = ""
    for stage, argv in steps:
        try:
            result = runner.stream(argv, cwd=work_dir, log_file=log, on_line=on_line)
        except CommandFailed as exc:
            return SmokeResult(
                False,
                stage,
                _lines(exc.details or ""),
                None,
                f"{stage} failed: {exc.message}\n{exc.details or ''}".rstrip(),
                work_dir,
                commands,
            )
        except FdlError as exc:
            return SmokeResult(
                False, stage, (), None, f"{stage} failed: {exc.message}", work_dir, commands
            )
        output = result.stdout
    lines = _lines(output)
    torch = next((line.split(" ", 1)[1] for line in lines if line.startswith("torch ")), None)
    bad = [
        line
        for line in lines
        if line.split(" ", 1)[0] not in ("torch", "cuda-devices") and not line.endswith(" ok")
    ]
    ok = bool(lines) and not bad and any(line == "cpu ok" for line in lines)
    message = "" if ok else "the program ran but reported: " + "; ".join(bad or ["no result lines"])
    return SmokeResult(ok, "done", lines, torch, message, work_dir, commands)


def _lines(output: str) -> tuple[str, ...]:
    return tuple(
        line.strip()[len(_PREFIX) :]
        for line in output.splitlines()
        if line.strip().startswith(_PREFIX)
    )


def smoke_runner(
    path: Path,
    work_dir: Path,
    *,
    runner: Runner,
    environ: Mapping[str, str],
    on_line: LineCallback | None = None,
) -> Callable[[variants.VariantInfo], SmokeResult]:
    """A ``smoke`` callable for :func:`fdl.libtorch.verify_variant`."""

    def run(info: variants.VariantInfo) -> SmokeResult:
        return cmake_smoke(
            path, work_dir, smoke_setup(info, environ), runner=runner, on_line=on_line
        )

    return run
