"""Secrets in deploy targets, bench sides and manifest errors: refused or masked, never
written or printed in clear. Each case searches the secret's value in every byte fdl
printed and every file it wrote."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fdl.engine import set_default_engine
from fdl.runner import Completed, set_default_runner
from tests.support.fakes import FakeEngine, FakeRunner
from tests.support.images import make_project, make_variant

TOKEN = "ghp_" + "A1b2C3d4" * 5  # a GitHub token's shape
AWS = "AKIA" + "Q3EXAMPLE7KEY2ID"  # an AWS key id's shape (short: type errors quoted it)
PLAIN = "s3cr3t-plain-value-123"  # a !secret with no token shape
CU130 = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120")


def _manifest(kind: str, env: str) -> str:
    extra = "    registry: 127.0.0.1:5000/acme\n" if kind == "slurm" else ""
    return (
        f"deploy:\n  lab:\n    kind: {kind}\n{extra}    gpus-per-node: 1\n"
        '    gpus: [{type: h100, product: NVIDIA-H100, capability: "9.0"}]\n'
        f"    env:\n{env}"
    )


def _files_hold(root: Path, secret: str) -> list[Path]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and path.name != "fdl.yml" and secret.encode() in path.read_bytes():
            found.append(path)
    return found


@pytest.fixture
def engine() -> Iterator[FakeEngine]:
    fake = FakeEngine()
    fake.add_image("cpp-train-train:latest", id="sha256:" + "1" * 64)
    set_default_engine(fake)
    yield fake


ENVS = [
    pytest.param(f"      HF_AUTH: {TOKEN}\n", TOKEN, id="token-shaped"),
    pytest.param(f"      DB_PASSWORD: {PLAIN}\n", PLAIN, id="secret-named"),
    pytest.param(f"      DB_URL: !secret {PLAIN}\n", PLAIN, id="secret-tagged"),
    # Round 3: a token glued to a word reached the sbatch script; a URL's password too.
    pytest.param(f"      NOTE: x{TOKEN}\n", TOKEN, id="token-glued"),
    pytest.param(f"      DB: https://bob:{PLAIN}@db.example.com/x\n", PLAIN, id="url-password"),
]


@pytest.mark.parametrize("kind", ["slurm", "kubernetes"])
@pytest.mark.parametrize(("env", "secret"), ENVS)
def test_a_secret_in_a_deploy_env_is_refused_and_never_written(  # type: ignore[no-untyped-def]
    run_fdl, tmp_path: Path, engine: FakeEngine, kind: str, env: str, secret: str
) -> None:
    project = make_project(tmp_path, _manifest(kind, env))
    make_variant(project, "precompiled/cu130", cuda="13.0", archs=CU130)
    set_default_runner(
        FakeRunner(
            {("sbatch", "--parsable"): Completed([], 0, "42\n")},
            programs={"sbatch": "/usr/bin/sbatch"},
        )
    )
    printed = []
    for args in (
        ["deploy", "render", "lab"],
        ["deploy", "render", "lab", "--json"],
        ["deploy", "submit", "lab", "--dry-run", "--json"],
        ["deploy", "submit", "lab"],
    ):
        result = run_fdl(args, cwd=project)
        assert result.exit_code == 3, result.output
        printed.append(result.output)
    output = "".join(printed)
    assert "fdl.yml:" in output and "deploy.lab.env." in output
    assert ("pass-env" if kind == "slurm" else "secret-env") in output
    assert secret not in output
    assert _files_hold(project, secret) == []


def test_pass_env_reaches_the_container_and_the_script_is_private(  # type: ignore[no-untyped-def]
    run_fdl, tmp_path: Path, engine: FakeEngine
) -> None:
    manifest = _manifest("slurm", "      NCCL_DEBUG: INFO\n") + "    pass-env: [HF_TOKEN]\n"
    project = make_project(tmp_path, manifest)
    make_variant(project, "precompiled/cu130", cuda="13.0", archs=CU130)
    result = run_fdl(["deploy", "render", "lab"], cwd=project)
    assert result.exit_code == 0, result.output
    assert ': "${HF_TOKEN:?HF_TOKEN is not set' in result.stdout
    assert "export HF_TOKEN\n" in result.stdout
    assert "--env HF_TOKEN" in result.stdout
    set_default_runner(
        FakeRunner(
            {
                ("sbatch", "--test-only"): Completed([], 0, "", "sbatch: Job 42 to start at..."),
                ("sbatch", "--parsable"): Completed([], 0, "42\n"),
                ("scontrol", "show", "job"): Completed([], 0, "JobId=42 JobState=RUNNING\n"),
            },
            programs={
                "sbatch": "/usr/bin/sbatch",
                "srun": "/usr/bin/srun",
                "docker": "/usr/bin/docker",
            },
        )
    )
    result = run_fdl(["deploy", "submit", "lab"], cwd=project, env={"HF_TOKEN": TOKEN})
    assert result.exit_code == 0, result.output
    script = project / ".fdl" / "deploy" / "lab.sbatch"
    assert script.stat().st_mode & 0o077 == 0
    assert TOKEN not in result.output
    assert _files_hold(project, TOKEN) == []


def test_secret_env_becomes_a_secret_reference(run_fdl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    manifest = _manifest("kubernetes", "      NCCL_DEBUG: INFO\n")
    manifest += "    secret-env: {HF_TOKEN: hf-token/value}\n"
    project = make_project(tmp_path, manifest)
    make_variant(project, "precompiled/cu130", cuda="13.0", archs=CU130)
    result = run_fdl(["deploy", "render", "lab"], cwd=project)
    assert result.exit_code == 0, result.output
    assert "secretKeyRef:" in result.stdout
    assert "name: hf-token" in result.stdout and "key: value" in result.stdout
    wrong = make_project(
        tmp_path / "w", _manifest("slurm", "      A: b\n") + "    secret-env: {A: s/k}\n"
    )
    result = run_fdl(["deploy", "render", "lab"], cwd=wrong)
    assert result.exit_code == 3 and "pass-env" in result.output


@pytest.mark.parametrize(
    "manifest",
    [
        f"deploy:\n  lab:\n    kind: {TOKEN}\n",  # an enum
        f"deploy:\n  lab:\n    kind: slurm\n    partition: 'a {TOKEN}'\n",  # a pattern
        f"deploy:\n  lab:\n    kind: slurm\n    nodes: {AWS}\n",  # a type error
        f"deploy:\n  lab:\n    kind: slurm\n    nodes: !secret {PLAIN}\n",
        f"deploy:\n  lab:\n    kind: slurm\n    partition: !secret 'a {PLAIN}'\n",
    ],
)
def test_manifest_errors_do_not_echo_a_secret(run_fdl, tmp_path: Path, manifest: str) -> None:  # type: ignore[no-untyped-def]
    project = make_project(tmp_path, manifest)
    result = run_fdl(["config", "show"], cwd=project)
    assert result.exit_code == 3, result.output
    assert "fdl.yml:" in result.output
    assert TOKEN not in result.output
    assert PLAIN not in result.output
    assert AWS not in result.output


def test_bench_records_env_names_never_values(run_fdl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import sys

    (tmp_path / "prog.py").write_text(
        "import os\nassert os.environ['HF_AUTH'].startswith('ghp_')\nprint('ms: 1.5')\n"
    )
    (tmp_path / "fdl.yml").write_text(
        f"bench:\n  b:\n    run: [{sys.executable}, prog.py]\n    rounds: 1\n    warmup: 0\n"
        f"    figures: {{ms: 'ms: ([0-9.]+)'}}\n"
        f"    compare:\n      a: {{env: {{HF_AUTH: {TOKEN}, DB_URL: !secret {PLAIN}}}}}\n"
        f"      b: {{env: {{HF_AUTH: {TOKEN}, OMP_NUM_THREADS: '4', DB_PASSWORD: {PLAIN}}}}}\n"
    )
    printed = [
        run_fdl(["bench", "run", "--dry-run"], cwd=tmp_path),
        run_fdl(["bench", "run", "--dry-run", "--json"], cwd=tmp_path),
        run_fdl(["bench", "run", "-o", "out.jsonl"], cwd=tmp_path),
        run_fdl(["bench", "report", "out.jsonl", "--json"], cwd=tmp_path),
    ]
    assert [p.exit_code for p in printed] == [0, 0, 0, 0], printed[2].output
    output = "".join(p.output for p in printed)
    assert "HF_AUTH=***" in output and "DB_URL=***" in output and "DB_PASSWORD=***" in output
    # What is not a secret is shown: it is often what the sides compare.
    assert "OMP_NUM_THREADS=4" in output and '"OMP_NUM_THREADS": "4"' in output
    assert TOKEN not in output and PLAIN not in output
    assert '"HF_AUTH": "***"' in (tmp_path / "out.jsonl").read_text()
    for secret in (TOKEN, PLAIN):
        assert _files_hold(tmp_path, secret) == []
    # Outside env: (an argument) a secret is refused: it would be recorded in clear.
    text = (tmp_path / "fdl.yml").read_text()
    (tmp_path / "fdl.yml").write_text(
        text.replace("b: {env", f"b: {{args: [--token, {TOKEN}], env")
    )
    refused = run_fdl(["bench", "run", "--dry-run"], cwd=tmp_path)
    assert refused.exit_code == 3 and "looks like a GitHub token" in refused.output
    assert TOKEN not in refused.output


SHOWN = [
    pytest.param(
        "images:\n  train:\n    env:\n      NOTE: x" + TOKEN + "\n",
        {},
        "images.train.env.NOTE",
        TOKEN,
        id="glued",
    ),
    pytest.param(
        "description: x\n", {"FDL__DESCRIPTION": f"see {TOKEN}"}, "description", TOKEN, id="fdl-env"
    ),
    pytest.param(
        "description: x\n",
        {"FDL__COMMANDS__X__RUN": f"curl https://bob:{PLAIN}@db.example.com"},
        "commands.x.run",
        PLAIN,
        id="url-password",
    ),
]


@pytest.mark.parametrize(("manifest", "env", "key", "secret"), SHOWN)
def test_config_show_and_explain_mask_token_shaped_values_under_any_key(  # type: ignore[no-untyped-def]
    run_fdl,
    tmp_path: Path,
    manifest: str,
    env: dict,
    key: str,
    secret: str,
) -> None:
    (tmp_path / "fdl.yml").write_text(manifest)
    outputs = []
    for args in (
        ["config", "show"],
        ["config", "show", "--json"],
        ["config", "explain", key],
        ["config", "explain", key, "--json"],
    ):
        result = run_fdl(args, cwd=tmp_path, env=env)
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    assert all("***" in out for out in outputs), outputs
    assert secret not in "".join(outputs)
    shown = run_fdl(["config", "show", "--show-secrets"], cwd=tmp_path, env=env)
    assert secret in shown.output  # asked for: shown


def _masked(args: list[str], stdout: str, keys: tuple[str, ...]) -> bool:
    """Whether each leaf named by ``keys`` is printed, as ``***``, in ``args``' output."""
    if args == ["config", "explain", "--json"]:
        items = {i["key"].rpartition(".")[2]: i["value"] for i in json.loads(stdout)}
        return all(items.get(key) == "***" for key in keys)
    if args == ["config", "show", "--json"]:
        shown = json.loads(stdout)
        section = shown["images"]["train"] if "images" in shown else shown["deploy"]["lab"]
        return all(section["env"].get(key) == "***" for key in keys)
    pattern = '.{} = "***"' if args[1] == "explain" else '{}: "***"'
    return all(pattern.format(key) in stdout for key in keys)


SHOW_ALL = (["config", "show"], ["config", "show", "--json"], ["config", "explain"],
            ["config", "explain", "--json"])  # fmt: skip


@pytest.mark.parametrize(
    ("manifest", "keys"),
    [
        (f"images:\n  train:\n    env: !secret {{FOO: {PLAIN}, BAR: x{PLAIN}}}\n", ("FOO", "BAR")),
        (f"images:\n  train: !secret\n    env: {{FOO: {PLAIN}, BAR: {PLAIN}}}\n", ("FOO", "BAR")),
        (f"deploy:\n  lab:\n    kind: slurm\n    env: !secret {{DB: {PLAIN}}}\n", ("DB",)),
    ],
    ids=["mapping", "nested-mapping", "deploy-env"],
)
def test_a_secret_tag_on_a_mapping_masks_every_value_inside(
    run_fdl, tmp_path: Path, manifest: str, keys: tuple[str, ...]
) -> None:
    """`!secret` on a mapping, or on a mapping around it: every value inside is masked (explain
    printed a tagged mapping's values) in show and explain, text and JSON."""
    project = make_project(tmp_path, manifest)
    for args in SHOW_ALL:
        result = run_fdl(args, cwd=project)
        assert result.exit_code == 0, (args, result.output)
        assert _masked(args, result.stdout, keys), (args, result.output)
        assert PLAIN not in result.output, (args, result.output)


def test_a_secret_tag_on_a_list_of_image_args_is_refused_unprinted(run_fdl, tmp_path: Path) -> None:
    """`!secret` on a list: each value inside is tagged, and image args are written in clear
    into the Dockerfile, so the manifest is refused at each value (the merge kept only
    scalars' tags: a tagged list of args reached the Dockerfile)."""
    project = make_project(tmp_path, f"images:\n  train:\n    args: !secret [--token, {PLAIN}]\n")
    for args in SHOW_ALL:
        result = run_fdl(args, cwd=project)
        assert result.exit_code == 3, (args, result.output)
        for column, index in ((20, 0), (29, 1)):
            assert f"fdl.yml:3:{column}: images.train.args.{index}: is tagged !secret" in (
                result.output
            ), (args, result.output)
        assert "fix: take it out of the manifest" in result.output
        assert PLAIN not in result.output, (args, result.output)
