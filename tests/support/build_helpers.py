"""Helpers for the source-build integration tests: fake PyTorch copies, consumer program."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FAKE_PYTORCH = FIXTURES / "fake-pytorch"
CONSUMER = FIXTURES / "fake-pytorch-consumer"


def copy_source(dest: Path) -> Path:
    """A writable copy of the fake PyTorch tree (the build installs into it)."""
    shutil.copytree(FAKE_PYTORCH, dest)
    return dest


def build_and_run_consumer(variant: Path, work: Path) -> str:
    """Configure the consumer with find_package(Torch) against ``variant``, build, run it."""
    project = work / "consumer"
    shutil.copytree(CONSUMER, project)
    steps = [
        [
            "cmake",
            "-S",
            str(project),
            "-B",
            str(project / "build"),
            f"-DCMAKE_PREFIX_PATH={variant}",
        ],
        ["cmake", "--build", str(project / "build")],
        [str(project / "build" / "train")],
    ]
    output = ""
    for argv in steps:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, f"{argv}: {done.stdout}{done.stderr}"
        output = done.stdout
    return output


def losses(output: str) -> list[float]:
    return [float(m) for m in re.findall(r"^epoch \d+ loss (\S+)$", output, re.MULTILINE)]
