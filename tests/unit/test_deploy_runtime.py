"""Before a SLURM job is submitted: its runtime is checked on this host, the image's
libtorch is read from the built image's labels, and an output directory no mount keeps
is named."""

from __future__ import annotations

import pytest

from fdl.deploy import (
    DeployTarget,
    ImageArchs,
    archs_of_image,
    check_runtime,
    unmounted_outputs,
)
from fdl.errors import EnvironmentProblem
from fdl.runner import Completed
from tests.support.fakes import FakeRunner

SLURM = {"sbatch": "/usr/bin/sbatch", "srun": "/usr/bin/srun"}


def test_pyxis_without_container_image_in_srun_is_refused() -> None:
    target = DeployTarget("lab", "slurm", runtime="pyxis", origin="fdl.yml:3:5")
    plain = FakeRunner({("srun", "--help"): Completed([], 0, "Usage: srun [OPTIONS...]")}, SLURM)
    with pytest.raises(EnvironmentProblem) as caught:
        check_runtime(target, plain)
    assert "does not know --container-image" in caught.value.message
    assert "fdl.yml:3:5" in (caught.value.hint or "")
    pyxis = FakeRunner(
        {("srun", "--help"): Completed([], 0, "      --container-image=[USER@][REGISTRY#]IMAGE")},
        SLURM,
    )
    assert check_runtime(target, pyxis) == []


@pytest.mark.parametrize("runtime", ["apptainer", "podman", "docker"])
def test_a_runtime_missing_here_is_said_before_submitting(runtime: str) -> None:
    target = DeployTarget("lab", "slurm", runtime=runtime)
    warnings = check_runtime(target, FakeRunner({}, SLURM))
    assert len(warnings) == 1 and f"`{runtime}` is not on this host's PATH" in warnings[0]
    assert check_runtime(target, FakeRunner({}, {**SLURM, runtime: f"/usr/bin/{runtime}"})) == []
    with pytest.raises(EnvironmentProblem, match="sbatch"):
        check_runtime(target, FakeRunner({}, {runtime: f"/usr/bin/{runtime}"}))


def test_the_image_labels_decide_what_libtorch_ships() -> None:
    manifest = ImageArchs("precompiled/cu130", "13.0", ("sm_90", "compute_120"))
    cpu = {"dev.fdl.variant": "precompiled/cpu", "dev.fdl.cuda": "none", "dev.fdl.archs": "cpu"}
    assert archs_of_image(cpu, "t", manifest) == ImageArchs("precompiled/cpu", None, ())
    same = {
        "dev.fdl.variant": "precompiled/cu130",
        "dev.fdl.cuda": "13.0",
        "dev.fdl.archs": "sm_90",
    }
    assert archs_of_image(same, "t", manifest) == manifest  # its PTX kept
    older = {**same, "dev.fdl.archs": "sm_80"}
    assert archs_of_image(older, "t", manifest).codes == ("sm_80",)
    with pytest.raises(EnvironmentProblem, match="fdl did not build it"):
        archs_of_image({}, "t", manifest)


def test_an_output_directory_no_mount_keeps_is_named() -> None:
    mounts = ("/p/runs:/workspace/runs", "/data:/workspace/data:ro")
    assert unmounted_outputs(["--out", "/workspace/runs"], mounts) == []
    assert unmounted_outputs(["--out=/workspace/runs/a"], mounts) == []
    assert unmounted_outputs(["--steps", "2", "--out", "/tmp/x"], mounts) == ["/tmp/x"]
    assert unmounted_outputs(["--save-dir", "/workspace/ckpt"], mounts) == ["/workspace/ckpt"]
    assert unmounted_outputs(["--out", "relative"], ()) == []  # where it lands is unknown
