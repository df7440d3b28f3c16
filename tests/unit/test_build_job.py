"""The SLURM job of ``fdl libtorch build --on`` (pure planner) and the answer it leaves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fdl.deploy import DeployTarget, GpuOffer, plan_build_job, read_build_result
from fdl.errors import EnvironmentProblem, UsageError
from tests.support.scripts import assert_bash_accepts

REGISTRY = "127.0.0.1:5000/team/libtorch"
FDL = ("/opt/venv/bin/python", "-m", "fdl")

LAB = DeployTarget(
    "lab",
    "slurm",
    gpus_per_node=2,
    gpus=(GpuOffer("12.0", type="rtx5090"), GpuOffer("6.1", type="gtx1080")),
    cpus_per_task=8,
    memory="32G",
    time="04:00:00",
    partition="build",
    account="team",
    origin="fdl.yml:4:5",
)


def _plan(target: DeployTarget = LAB, given=None, tmp_path: Path = Path("/p"), **kw):  # type: ignore[no-untyped-def]
    return plan_build_job(
        target,
        given or {},
        registry=REGISTRY,
        state_dir=tmp_path / ".fdl" / "deploy",
        workdir=tmp_path,
        fdl=FDL,
        **kw,
    )


def test_the_script_asks_for_the_target_node_and_builds_for_its_gpus(tmp_path: Path) -> None:
    job = _plan(tmp_path=tmp_path)
    options = [line for line in job.text.splitlines() if line.startswith("#SBATCH")]
    assert options == [
        "#SBATCH --job-name=fdl-libtorch-build-lab",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --mem=32G",
        "#SBATCH --time=04:00:00",
        "#SBATCH --partition=build",
        "#SBATCH --account=team",
        f"#SBATCH --output={tmp_path}/.fdl/deploy/fdl-%x-%j.out",
        f"#SBATCH --chdir={tmp_path}",
    ]  # one task, no GPU asked for: nvcc compiles for archs it does not run on
    assert job.backend == "docker"
    assert job.argv == (
        *FDL,
        "libtorch",
        "build",
        "--docker",
        "--archs",
        "6.1;12.0",
        "--jobs",
        "8",
        "--push",
        "--json",
    )
    assert f"export FDL_LIBTORCH_REGISTRY={REGISTRY}" in job.text
    assert "libtorch build --docker --archs '6.1;12.0' --jobs 8 --push --json" in job.text
    assert job.result_path("42") == tmp_path / ".fdl/deploy/libtorch-build/42.json"
    data = job.to_json()
    assert data["action"] == "submit" and data["script"] == job.text


@pytest.mark.parametrize(
    "target",
    [
        LAB,
        DeployTarget("lab", "slurm", runtime="apptainer", output="/scratch/%j.out"),
        DeployTarget("lab", "slurm", runtime="pyxis", sbatch=("--exclusive",)),
    ],
)
def test_the_script_is_valid_bash_and_shellcheck_clean(target: DeployTarget, tmp_path) -> None:
    job = _plan(target, {"cpu": (True, "--cpu")}, tmp_path=tmp_path)
    assert_bash_accepts(job.text)
    # The answer appears whole or not at all, and a cancelled job removes the partial one.
    assert 'mv "$result.part" "$result"' in job.text
    assert 'trap "stop 143" TERM' in job.text


def test_backend_follows_the_command_line_then_the_runtime(tmp_path: Path) -> None:
    native = _plan(given={"backend": ("native", "--native"), "cpu": (True, "--cpu")})
    assert native.backend == "native" and "--docker" not in native.argv
    assert native.argv.count("--native") == 1
    apptainer = _plan(DeployTarget("lab", "slurm", runtime="apptainer"), {"cpu": (True, "--cpu")})
    assert apptainer.backend == "native" and "--native" in apptainer.argv


def test_options_pass_through_and_a_relative_source_becomes_absolute(tmp_path: Path) -> None:
    given = {
        "archs": ("8.0", "--archs"),
        "jobs": (3, "--jobs"),
        "source": ("src/pytorch", "--source"),
        "flash_attention": (False, "--no-flash-attention"),
        "activate": (False, "--no-activate"),
    }
    job = _plan(given=given, tmp_path=tmp_path, no_registry=True)
    argv = list(job.argv[len(FDL) + 2 :])
    assert argv == [
        "--archs",
        "8.0",
        "--jobs",
        "3",
        "--source",
        str(tmp_path / "src" / "pytorch"),
        "--no-flash-attention",
        "--no-activate",
        "--docker",
        "--no-registry",
        "--push",
        "--json",
    ]


def test_refusals_say_what_to_do() -> None:
    with pytest.raises(UsageError) as kube:
        _plan(DeployTarget("k", "kubernetes"), {"cpu": (True, "--cpu")})
    assert "SLURM targets" in kube.value.message and "--push" in (kube.value.hint or "")
    with pytest.raises(UsageError) as no_gpus:
        _plan(DeployTarget("lab", "slurm", origin="fdl.yml:7:3"))
    assert "declares no GPUs" in no_gpus.value.message
    assert "deploy.lab.gpus" in (no_gpus.value.hint or "") and "fdl.yml:7:3" in (
        no_gpus.value.hint or ""
    )
    with pytest.raises(UsageError) as fetch:
        _plan(given={"fetch_only": (True, "--fetch-only")})
    assert "--fetch-only cannot be used with --on" in fetch.value.message


def test_the_answer_names_the_pushed_reference(tmp_path: Path) -> None:
    path = tmp_path / "7.json"
    pushed = {"reference": f"{REGISTRY}@sha256:{'a' * 64}", "digest": f"sha256:{'a' * 64}"}
    path.write_text(json.dumps({"variant": "builds/cpu", "path": "/p/x", "pushed": pushed}))
    assert read_build_result(path) == {
        **pushed,
        "variant": "builds/cpu",
        "path": "/p/x",
        "pulled_instead": False,
    }
    path.write_text(json.dumps({"action": "pull", **pushed, "variant": "builds/y"}))
    assert read_build_result(path)["pulled_instead"] is True


@pytest.mark.parametrize("text", [None, "not json", "[1]", '{"pushed": {"digest": "x"}}'])
def test_no_answer_is_an_environment_problem(tmp_path: Path, text: str | None) -> None:
    path = tmp_path / "7.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(EnvironmentProblem) as caught:
        read_build_result(path)
    assert str(path) in caught.value.message
    assert "fdl deploy logs" in (caught.value.hint or "")


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("p\ntouch PWNED\n#", "a line break"),
        ("p\rq", "a carriage return"),
        ('p"q', "a double quote"),
        ("p\\q", "a backslash"),
        ("p\x1b[2Jq", "the control character \\x1b"),
        ("p\u2028q", "a line separator"),
    ],
)
def test_a_directory_no_sbatch_line_can_carry_is_refused_naming_it(
    tmp_path: Path, name: str, what: str
) -> None:
    with pytest.raises(UsageError) as refused:
        _plan(tmp_path=tmp_path / name)
    assert what in refused.value.message and "#SBATCH --" in refused.value.message
    assert "rename" in (refused.value.hint or "")


def test_a_directory_with_spaces_quotes_or_percent_stays_one_directive(tmp_path: Path) -> None:
    root = tmp_path / "my project's 100% run"
    text = _plan(tmp_path=root).text
    directives = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert f'#SBATCH --chdir="{root}"' in directives
    literal = str(root / ".fdl" / "deploy").replace("%", "%%")
    assert f'#SBATCH --output="{literal}/fdl-%x-%j.out"' in directives


# --- the renderer's fuzzer (issue "round 3", point 1): any project path -----------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fdl.deploy._slurm import sbatch_directive  # noqa: E402


def _sbatch_reads(line: str) -> list[str]:
    """How sbatch splits an #SBATCH line's options (its own grammar: `#` is a comment)."""
    from tests.support.sbatch_grammar import sbatch_arguments

    return sbatch_arguments(line.removeprefix("#SBATCH"))


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=40))
def test_any_value_is_one_directive_or_refused(value: str) -> None:
    try:
        line = "#SBATCH " + sbatch_directive("chdir", value)
    except UsageError as refused:
        assert any(not c.isprintable() or c in '"\\' for c in value)
        assert "#SBATCH --chdir=" in refused.message
        return
    assert "\n" not in line and "\r" not in line
    assert _sbatch_reads(line) == [f"--chdir={value}"]


@settings(max_examples=100, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30))
def test_any_project_directory_renders_a_script_with_only_the_template_s_lines(name: str) -> None:
    root = Path("/p") / name.replace("/", "_").replace("\x00", "_")
    if root.name in ("", ".", ".."):
        return
    try:
        job = _plan(tmp_path=root)
    except UsageError:
        return  # refused, naming the character (above)
    lines, default = job.text.split("\n"), _plan().text.split("\n")  # as bash and sbatch read
    directives = [line for line in lines if line.startswith("#SBATCH")]
    assert len(directives) == len([line for line in default if line.startswith("#SBATCH")])
    assert len(lines) == len(default)  # no line injected
    assert _sbatch_reads(next(d for d in directives if "--chdir" in d)) == [f"--chdir={root}"]
