"""``fdl diagnose``: grouped checks of the machine, its toolchain and the active libtorch.

Each group is a function returning :class:`~fdl.diagnose.Check` values; nothing prints.
Probes go through the Runner seam (``nvidia-smi``, ``nvcc``, ``docker``, ...), so tests use
a fake ``nvidia-smi`` on PATH or the test runner ``tests.support.fakes.FakeRunner``.
The project's checks (its Rust toolchain, its framework) are in :mod:`fdl.diagnose._project`.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fdl.checks import Check, Severity, worst
from fdl.compat import (
    ArchList,
    Target,
    check_gpu_driver,
    compilable_toolkits,
    host_compilers,
)
from fdl.errors import FdlError
from fdl.libtorch import TorchDecision, variants, verify_variant
from fdl.paths import Context
from fdl.runner import Runner, default_runner
from fdl.system import GpuReport, Toolchain, cpu, detect_gpus, disk_free, memory, probe_toolchain

__all__ = ["Diagnosis", "run_diagnose"]

_GIB = 1024**3
MIN_FREE_DISK_GIB = 8  # a CUDA variant unpacks to 4-8 GB
MIN_RAM_GIB = 4


@dataclass(frozen=True)
class Diagnosis:
    """Everything ``fdl diagnose`` found."""

    context: Context
    gpus: GpuReport
    checks: tuple[Check, ...]
    active: str | None
    installed: tuple[str, ...]
    system: Mapping[str, Any] = field(default_factory=dict)
    variant: variants.VariantInfo | None = None
    docker: str | None = None  # floDl's system.docker: "container", or the client's version
    nvidia_driver_loaded: bool = False
    # AMD GPUs of the KFD topology (fdl.system.survey), and notes on those that are unusable
    amd: tuple[Any, ...] = ()
    amd_notes: tuple[Any, ...] = ()

    @property
    def worst(self) -> Severity:
        return worst(self.checks)

    def to_json(self) -> dict[str, Any]:
        """fdl's own keys (``gpus``, ``driver``, ``checks``...) and those floDl's CLI emits
        and its users script against (:func:`fdl.diagnose._reference.diagnosis_json`)."""
        from fdl.diagnose._reference import diagnosis_json

        return diagnosis_json(self)


def system_facts() -> dict[str, Any]:
    """CPU, threads, RAM and OS as floDl's ``diagnose --json`` reports them."""
    facts: dict[str, Any] = {"os": f"{platform.system()} {platform.release()}"}
    found = cpu()
    if found.value is not None:
        facts["cpu"] = found.value.model or "unknown"
        facts["threads"] = found.value.logical
    ram = memory()
    if ram.value is not None:
        facts["ram_gb"] = ram.value.total_mib // 1024
    return facts


def _c(group: str, name: str, severity: Severity, message: str, fix: str | None = None) -> Check:
    return Check(group, name, severity, message, fix)


def _low(name: str, low: bool, message: str, fix: str) -> Check:
    """A system resource's check: a warning with ``fix`` when it runs ``low``, else info."""
    return _c(
        "system", name, Severity.WARNING if low else Severity.INFO, message, fix if low else None
    )


def system_checks(context: Context) -> list[Check]:
    """CPU, memory, disk space where variants go, OS."""
    checks = []
    found = cpu()
    if found.value is not None:
        model = found.value.model or "unknown model"
        checks.append(
            _c("system", "cpu", Severity.INFO, f"{model}, {found.value.usable} cores usable")
        )
    ram = memory()
    if ram.value is not None:
        usable = ram.value.usable_mib / 1024
        checks.append(
            _low(
                "memory",
                usable < MIN_RAM_GIB,
                f"{ram.value.total_mib / 1024:.1f} GiB RAM, {usable:.1f} GiB available",
                "close other programs; source builds need about 5 GB per parallel job",
            )
        )
    disk = disk_free(context.root)
    if disk.value is not None:
        gib = disk.value / _GIB
        checks.append(
            _low(
                "disk",
                gib < MIN_FREE_DISK_GIB,
                f"{gib:.1f} GiB free in {disk.path}",
                f"free space: a CUDA libtorch needs up to {MIN_FREE_DISK_GIB} GB",
            )
        )
    checks.append(
        _c(
            "system",
            "os",
            Severity.INFO,
            f"{platform.system()} {platform.release()} ({platform.machine()})",
        )
    )
    return checks


def gpu_checks(report: GpuReport) -> list[Check]:
    """The GPUs nvidia-smi lists, and the driver."""
    if not report.gpus:
        return [_c("gpus", "gpus", Severity.INFO, f"{report.reason or 'no NVIDIA GPU'}: CPU only")]
    checks = []
    for gpu in report.gpus:
        memory_text = f", {gpu.memory_mib / 1024:.0f} GiB" if gpu.memory_mib else ""
        if gpu.mig_instances:
            memory_text += f", MIG: {gpu.mig_instances} instances (same code as the GPU)"
        if gpu.capability is None:
            checks.append(
                _c(
                    "gpus",
                    f"GPU {gpu.index}",
                    Severity.WARNING,
                    f"{gpu.name}: compute capability not reported by the driver, and the "
                    "name is not in fdl's table",
                    "name the archs yourself (fdl libtorch build --archs X.Y; "
                    "developer.nvidia.com/cuda-gpus lists them)",
                )
            )
        else:
            line = f"{gpu.name}: {gpu.capability.label()}{memory_text}"
            floor = check_gpu_driver(report.driver, [gpu.capability]) if report.driver else None
            if floor is not None and not floor.ok:
                checks.append(
                    _c(
                        "gpus",
                        f"GPU {gpu.index}",
                        Severity.ERROR,
                        f"{line}: {floor.reason}",
                        f"{floor.fix}; then fdl setup",
                    )
                )
            else:
                checks.append(_c("gpus", f"GPU {gpu.index}", Severity.OK, line))
    if report.driver:
        checks.append(_c("gpus", "driver", Severity.INFO, f"NVIDIA driver {report.driver}"))
    identified = all(g.capability is not None for g in report.gpus)
    if report.reason and identified:
        checks.append(_c("gpus", "nvidia-smi", Severity.INFO, report.reason))
    elif report.reason:
        checks.append(
            _c(
                "gpus",
                "nvidia-smi",
                Severity.WARNING,
                report.reason,
                "check the NVIDIA driver: `nvidia-smi` should list every GPU with its compute_cap",
            )
        )
    return checks


def toolchain_checks(tools: Toolchain, report: GpuReport) -> list[Check]:
    """nvcc (and whether it compiles these GPUs), host compilers, cmake."""
    checks = []
    nvcc = tools.nvcc.value
    if nvcc is None:
        checks.append(
            _c(
                "toolchain",
                "nvcc",
                Severity.INFO,
                f"{tools.nvcc.reason}: needed only for native source builds",
            )
        )
    else:
        checks.append(
            _c("toolchain", "nvcc", Severity.OK, f"CUDA {nvcc.full_version} at {nvcc.path}")
        )
        checks += _nvcc_fits(nvcc.version, nvcc.targets, report)
    for name in ("gcc", "g++", "cmake"):
        probe = tools[name]
        if probe.value is None:
            severity = Severity.WARNING if name != "gcc" else Severity.INFO
            checks.append(
                _c(
                    "toolchain",
                    name,
                    severity,
                    f"{probe.reason}",
                    f"install {name} (needed by verify --cmake and source builds)",
                )
            )
        else:
            checks.append(_c("toolchain", name, Severity.OK, f"{name} {probe.value.version}"))
    gcc = tools["gcc"].value
    if nvcc is not None and gcc is not None:
        try:
            limit = host_compilers(nvcc.version).gcc
        except FdlError:
            limit = None
        if limit is not None and gcc.major > limit:
            checks.append(
                _c(
                    "toolchain",
                    "host compiler",
                    Severity.WARNING,
                    f"CUDA {nvcc.version} accepts gcc <= {limit}, gcc is {gcc.version}",
                    f"install gcc-{limit} and pass it as the CUDA host compiler (CUDAHOSTCXX)",
                )
            )
    return checks


def _nvcc_fits(version: str, targets: ArchList, report: GpuReport) -> list[Check]:
    caps = report.capabilities
    if not caps:
        return []
    accepted = {(t.capability, t.suffix) for t in targets}
    missing = [c for c in caps if (c, "") not in accepted]
    if not missing:
        return [
            _c(
                "toolchain",
                "nvcc archs",
                Severity.OK,
                f"nvcc {version} compiles every GPU here ({' '.join(c.sm for c in caps)})",
            )
        ]
    able = [t.version for t in compilable_toolkits(ArchList.of(Target(c) for c in caps))]
    fix = (
        f"use CUDA {' or '.join(able)} for native builds (or build in Docker)"
        if able
        else ("no single CUDA compiles them together: build one variant per GPU group")
    )
    return [
        _c(
            "toolchain",
            "nvcc archs",
            Severity.WARNING,
            f"nvcc {version} cannot compile {' '.join(c.sm for c in missing)} (only native source "
            "builds need it)",
            fix,
        )
    ]


def docker_checks(
    runner: Runner, environ: Mapping[str, str], seen: dict[str, str] | None = None
) -> list[Check]:
    """The docker client fdl would use, its daemon, BuildKit and compose (``seen`` gets the
    client's ``version``, for floDl's ``system.docker``)."""
    from fdl.engine import find_compose, probe_clients

    try:
        selection = probe_clients(runner, environ)
    except FdlError as exc:
        return [_c("docker", "docker", Severity.WARNING, exc.message, exc.hint)]
    if selection is None:
        return [
            _c(
                "docker",
                "docker",
                Severity.INFO,
                "no docker CLI on PATH: Docker builds and images are unavailable",
                "install docker if you want image builds or Docker source builds",
            )
        ]
    client = selection.client
    if seen is not None and client.version:
        seen["version"] = client.version
    if not client.usable:
        return [
            _c(
                "docker",
                "daemon",
                Severity.WARNING,
                f"{client.path}: {client.problem}",
                "start the daemon (`sudo systemctl start docker`) or check DOCKER_HOST",
            )
        ]
    checks = [_c("docker", "daemon", Severity.OK, client.describe())]
    if not client.builder.has_buildkit:
        checks.append(
            _c(
                "docker",
                "buildkit",
                Severity.WARNING,
                "no BuildKit (no buildx plugin, no built-in BuildKit): cache mounts and secrets fail",
                "install the docker buildx plugin, or set FDL_DOCKER to a client with BuildKit",
            )
        )
    try:
        compose = find_compose(selection, runner, environ)
        checks.append(
            _c("docker", "compose", Severity.OK, f"{' '.join(compose.argv)} {compose.version}")
        )
    except FdlError as exc:
        checks.append(_c("docker", "compose", Severity.INFO, exc.message, exc.hint))
    return checks


def libtorch_checks(
    context: Context, report: GpuReport, expected: str | None = None, torch: str | None = None
) -> list[Check]:
    """The active variant: present, what it is, whether it runs on each GPU (the fixes
    install ``torch``, the project's release, when given)."""
    installed = variants.list_variants(context)
    checks = [
        _c(
            "libtorch",
            "root",
            Severity.INFO,
            f"{context.label()}: {', '.join(installed) or 'no variants'}",
        )
    ]
    active = variants.active_name(context)
    if active is None:
        fix = "fdl setup" if not installed else f"fdl libtorch activate {installed[0]}"
        return [
            *checks,
            _c("libtorch", "active", Severity.WARNING, "no active libtorch variant", fix),
        ]
    path = context.libtorch_dir / active
    if not (path / "lib").is_dir():
        return [
            *checks,
            _c(
                "libtorch",
                "active",
                Severity.ERROR,
                f".active points at {active}, which is not installed",
                "fdl libtorch list, then activate one",
            ),
        ]
    report_v = verify_variant(path, active, gpus=report, torch=torch)
    info = report_v.info
    what = f"torch {info.torch or '?'}, " + (f"CUDA {info.cuda}" if info.cuda else "CPU")
    checks.append(_c("libtorch", "active", Severity.OK, f"{active} ({what})"))
    if (
        expected
        and expected != "auto"
        and active.split("/", 1)[1] != expected
        and active != expected
    ):
        checks.append(
            _c(
                "libtorch",
                "manifest",
                Severity.WARNING,
                f"fdl.yml asks for libtorch.variant {expected}, the active variant is {active}",
                f"fdl libtorch download (installs {expected}) or fdl libtorch activate",
            )
        )
    for check in report_v.checks:
        if check.severity is Severity.OK and check.group in ("files", "libraries"):
            continue  # fine details stay in `fdl libtorch verify`
        checks.append(
            Check("libtorch", check.name, check.severity, check.message, check.fix, check.data)
        )
    return checks


def run_diagnose(
    context: Context,
    *,
    runner: Runner | None = None,
    environ: Mapping[str, str] | None = None,
    expected_variant: str | None = None,
    docker: bool = True,
    image_setups: Mapping[str, str] | None = None,
    framework: TorchDecision | None = None,
    in_containers: bool = False,
    visible: tuple[int, ...] | None = None,
) -> Diagnosis:
    """Run every check group.

    Args:
        context: The libtorch root.
        runner: Runs the probes (default: the process runner).
        environ: The environment (docker client selection honours FDL_DOCKER).
        expected_variant: The manifest's ``libtorch.variant``, if any.
        docker: Probe docker too.
        image_setups: Image profile -> its ``setup:`` commands (the Rust toolchain they
            install is checked against ``rust-toolchain.toml``).
        framework: The torch the project's framework needs (checked against the active
            variant).
        in_containers: The project's cargo commands all run in compose services.
        visible: The device indices floDl's ``--gpus`` leaves (None: every GPU), for both
            vendors, as a project command would see them.
    """
    run = runner or default_runner()
    env = os.environ if environ is None else environ
    report = detect_gpus(run)
    if visible is not None:
        from dataclasses import replace

        report = replace(report, gpus=tuple(g for g in report.gpus if g.index in visible))
    from fdl.diagnose._project import framework_checks, rust_checks, toolchain_pin_checks

    checks = [*system_checks(context), *gpu_checks(report)]
    checks += toolchain_checks(probe_toolchain(run), report)
    if context.project:
        checks += rust_checks(context.root, run, in_containers=in_containers)
        checks += toolchain_pin_checks(context.root, image_setups or {})
    seen: dict[str, str] = {}
    if docker:
        checks += docker_checks(run, env, seen)
    checks += libtorch_checks(
        context, report, expected_variant, framework.torch if framework is not None else None
    )
    if framework is not None:
        checks += framework_checks(context, framework)
    installed = tuple(variants.list_variants(context))
    active = variants.active_name(context)
    info = None
    if active is not None and (context.libtorch_dir / active / "lib").is_dir():
        info = variants.read_info(context.libtorch_dir / active, active)
    from fdl.diagnose._reference import NVIDIA_DRIVER_MARKER, amd_gpus, docker_fact

    amd, amd_notes = amd_gpus(env)
    if visible is not None:
        amd = [device for device in amd if device.index in visible]

    return Diagnosis(
        context,
        report,
        tuple(checks),
        active,
        installed,
        system_facts(),
        variant=info,
        docker=docker_fact(env, seen.get("version")),
        nvidia_driver_loaded=NVIDIA_DRIVER_MARKER.exists(),
        amd=tuple(amd),
        amd_notes=tuple(amd_notes),
    )
