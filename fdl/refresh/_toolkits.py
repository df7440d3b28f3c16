"""CUDA toolkit facts from NVIDIA's nvcc wheels: the archs ``ptxas`` accepts and the host
compiler limits of ``crt/host_config.h``."""

from __future__ import annotations

import re
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fdl.errors import EnvironmentProblem
from fdl.runner import Runner

__all__ = [
    "Derived",
    "Drift",
    "derive_toolkit",
    "drift",
    "nvcc_wheel_requirement",
    "parse_host_limits",
    "parse_ptxas_archs",
]

_ALLOWED = re.compile(r"Allowed values for this option:(.*?)(?:Default value|\n\s*\n|$)", re.S)


def parse_ptxas_archs(help_text: str) -> list[str]:
    """The cubin targets of ``ptxas --help``'s ``--gpu-name`` (``sm_90a`` -> ``90a``),
    in nvcc's number form, sorted as fdl's tables write them."""
    start = help_text.find("--gpu-name")
    match = _ALLOWED.search(help_text, start if start >= 0 else 0)
    if match is None:
        return []
    codes = {name[3:] for name in re.findall(r"'(sm_[0-9]+[af]?)'", match.group(1))}
    return sorted(codes, key=lambda c: (int(re.sub(r"\D", "", c)), c))


def parse_host_limits(host_config: str) -> dict[str, int]:
    """The newest gcc and clang majors ``crt/host_config.h`` accepts (``#if __GNUC__ > 14``
    rejects 15 and later: gcc 14; ``__clang_major__ >= 20`` rejects 20: clang 19).

    The clang limit is the one of the check whose error is "unsupported clang version": CUDA
    13.4's header also checks NVIDIA's Grace clang and the HOS (``__HORIZON__``) clang, each
    with its own limit.
    """
    limits: dict[str, int] = {}
    gcc = re.search(r"#if\s+__GNUC__\s*>\s*(\d+)", host_config)
    if gcc:
        limits["gcc"] = int(gcc.group(1))
    condition = ""
    clang: list[int] = []
    for line in host_config.splitlines():
        stripped = line.strip()
        if stripped.startswith("#if") and "__clang_major__" in stripped:
            condition = stripped
        elif stripped.startswith("#error") and "unsupported clang version" in stripped:
            clang += [
                int(n) - (1 if op == ">=" else 0)
                for op, n in re.findall(r"__clang_major__\s*(>=|>)\s*(\d+)", condition)
            ]
    if clang:
        limits["clang"] = min(clang)
    return limits


def nvcc_wheel_requirement(version: str) -> str:
    """The PyPI requirement of a toolkit's nvcc wheel (``12.8`` ->
    ``nvidia-cuda-nvcc-cu12==12.8.*``; CUDA 13 wheels drop the suffix)."""
    major = int(version.split(".", maxsplit=1)[0])
    name = "nvidia-cuda-nvcc" if major >= 13 else f"nvidia-cuda-nvcc-cu{major}"
    return f"{name}=={version}.*"


@dataclass(frozen=True)
class Derived:
    """What one toolkit's wheel says."""

    version: str
    wheel: str
    archs: list[str]
    compilers: dict[str, int]
    ptxas_version: str = ""


@dataclass(frozen=True)
class Drift:
    """A fact whose table value differs from what the artefact says."""

    toolkit: str
    fact: str
    table: Any
    artefact: Any
    source: str
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "toolkit": self.toolkit,
            "fact": self.fact,
            "table": self.table,
            "artefact": self.artefact,
            "source": self.source,
            **self.detail,
        }


def derive_toolkit(version: str, runner: Runner, python: str) -> Derived:
    """Download the toolkit's nvcc wheel (pip, no dependencies, a scratch directory),
    run its ``ptxas --help`` and read its ``host_config.h``.

    Raises:
        EnvironmentProblem: pip cannot get the wheel, or it holds no ptxas.
    """
    requirement = nvcc_wheel_requirement(version)
    with tempfile.TemporaryDirectory(prefix="fdl-refresh-") as scratch_name:
        scratch = Path(scratch_name)
        got = runner.run(
            [
                python,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                requirement,
                "--dest",
                str(scratch),
            ],
            check=False,
            timeout=900,
        )
        wheels = sorted(scratch.glob("*.whl"))
        if got.returncode != 0 or not wheels:
            raise EnvironmentProblem(
                f"pip cannot download {requirement}: {(got.stderr or got.stdout).strip()[-300:]}",
                hint="PyPI (or its mirror) must be reachable",
            )
        with zipfile.ZipFile(wheels[0]) as wheel:
            names = wheel.namelist()
            ptxas = next((n for n in names if n.endswith("/bin/ptxas")), None)
            header = next((n for n in names if n.endswith("crt/host_config.h")), None)
            if ptxas is None:
                raise EnvironmentProblem(f"{wheels[0].name} holds no bin/ptxas")
            wheel.extract(ptxas, scratch / "x")
            host = wheel.read(header).decode("utf-8", "replace") if header else ""
        if not host:  # CUDA 13 ships the headers in a wheel of their own
            host = _crt_header(version, runner, python, scratch / "crt")
        program = scratch / "x" / ptxas
        program.chmod(0o755)
        helped = runner.run([str(program), "--help"], check=False, timeout=60)
        shown = runner.run([str(program), "--version"], check=False, timeout=60)
        release = re.search(r"V([0-9.]+)", shown.stdout)
        return Derived(
            version=version,
            wheel=wheels[0].name,
            archs=parse_ptxas_archs(helped.stdout),
            compilers=parse_host_limits(host),
            ptxas_version=release.group(1) if release else "",
        )


def _crt_header(version: str, runner: Runner, python: str, dest: Path) -> str:
    """``crt/host_config.h`` from NVIDIA's ``nvidia-cuda-crt`` wheel (CUDA 13 on), or ""."""
    requirement = f"nvidia-cuda-crt=={version}.*"
    runner.run(
        [python, "-m", "pip", "download", "--quiet", "--no-deps", requirement, "--dest", str(dest)],
        check=False,
        timeout=900,
    )
    for found in sorted(dest.glob("*.whl")):
        with zipfile.ZipFile(found) as wheel:
            header = next((n for n in wheel.namelist() if n.endswith("crt/host_config.h")), None)
            if header:
                return wheel.read(header).decode("utf-8", "replace")
    return ""


def drift(derived: Derived) -> list[Drift]:
    """The differences between ``fdl/data/compat/cuda.yaml`` and what the wheel says."""
    from fdl.compat import toolkit
    from fdl.errors import UsageError

    try:
        kit = toolkit(derived.version)
    except UsageError:  # a toolkit newer than the tables: all of it is new
        return [
            Drift(
                derived.version,
                "toolkit",
                None,
                {"archs": " ".join(derived.archs), "compilers": derived.compilers},
                f"ptxas --help and crt/host_config.h of {derived.wheel}",
            )
        ]
    found: list[Drift] = []
    table_archs = sorted(
        {t.code.removeprefix("sm_") for t in kit.targets if t.kind.name != "PTX"},
        key=lambda c: (int(re.sub(r"\D", "", c)), c),
    )
    if derived.archs and table_archs != derived.archs:
        found.append(
            Drift(
                derived.version,
                "archs",
                " ".join(table_archs),
                " ".join(derived.archs),
                f"ptxas --help of {derived.wheel}",
                {
                    "missing_from_table": sorted(set(derived.archs) - set(table_archs)),
                    "not_in_artefact": sorted(set(table_archs) - set(derived.archs)),
                },
            )
        )
    if not derived.compilers:
        found.append(
            Drift(
                derived.version,
                "compilers",
                "gcc/clang limits",
                "no crt/host_config.h found",
                f"{derived.wheel} (and nvidia-cuda-crt)",
            )
        )
    limits = {"gcc": kit.compilers.gcc, "clang": kit.compilers.clang}
    for name, value in derived.compilers.items():
        if limits.get(name) != value:
            found.append(
                Drift(
                    derived.version,
                    f"compilers.{name}",
                    limits.get(name),
                    value,
                    f"crt/host_config.h of {derived.wheel}",
                )
            )
    return found
