"""What the sbatch generator writes for each kind of image reference and path: behaviours the
mutation run (scripts/mutation.py) found that no unit test held."""

from __future__ import annotations

import pytest

from fdl.deploy._slurm import pyxis_image, slurm_literal


@pytest.mark.parametrize(
    ("reference", "enroot"),
    [
        ("ghcr.io/team/train:1", "ghcr.io#team/train:1"),
        ("localhost/train:1", "localhost#train:1"),
        ("host:5000/train:1", "host:5000#train:1"),
        ("team/train:1", "team/train:1"),  # Docker Hub: no registry host to separate
        ("train:1", "train:1"),
    ],
)
def test_pyxis_separates_the_registry_host_with_a_hash(reference: str, enroot: str) -> None:
    assert pyxis_image(reference) == enroot


def test_a_path_keeps_its_percent_signs_from_sbatchs_patterns() -> None:
    assert slurm_literal("/data/%j/run") == "/data/%%j/run"
    assert slurm_literal("/data/run") == "/data/run"
