"""Manifests of the shapes of floDl's own repository (issue 18): a root fdl.yml with nested
sub-command manifests, presets, a ddp-bench-like preset with a value outside its choices, and
an export-like command with `compile: true` whose entry answers `--fdl-schema` (a shell
program and a C++ program built here with g++)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.tasks_helpers import write

SCHEMA_JSON = json.dumps(
    {
        "options": {
            "format": {"type": "string", "choices": ["onnx", "safetensors"], "description": "fmt"},
            "steps": {"type": "int", "short": "s"},
        },
        "args": [{"name": "model", "type": "string", "required": True}],
    }
)

TOOL = f"""#!/bin/sh
if [ "$1" = "--fdl-schema" ]; then
  echo probe >> "$(dirname "$0")/probes.log"
  echo "compiling schema..."   # chatter before the JSON is tolerated
  echo '{SCHEMA_JSON}'
  exit 0
fi
echo "export $*"
"""

ROOT = """\
description: floDl-shaped
commands:
  test:
    run: echo tests
  bench:
    description: floDl's own benchmark script
    run: echo flodl-bench
  ddp-bench:
    description: DDP benchmarks
  export:
    description: export a model
"""

DDP = """\
entry: sh -c 'echo bench "$@"' bench
schema:
  options:
    model: {type: string, choices: [mlp, conv]}
    epochs: {type: int}
commands:
  quick:
    description: a quick run
    options: {model: linear, epochs: 1}
  full:
    options: {model: mlp, epochs: 10}
"""

EXPORT = """\
entry: ./tool.sh
compile: true
schema:
  options:
    legacy: {type: bool}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path, {"fdl.yml": ROOT, "ddp-bench/fdl.yml": DDP, "export/fdl.yml": EXPORT})
    tool = tmp_path / "export" / "tool.sh"
    tool.write_text(TOOL)
    tool.chmod(0o755)
    return tmp_path


def probes(project: Path) -> int:
    log = project / "export" / "probes.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_one_bad_preset_value_does_not_disable_the_sub_command(run_fdl, project) -> None:
    listing = run_fdl(["--help"], cwd=project)
    assert listing.exit_code == 0
    assert "preset quick has a problem; see `fdl ddp-bench --help`" in listing.stdout
    assert "its manifest has problems" not in listing.stdout
    helped = run_fdl(["ddp-bench", "--help"], cwd=project)
    assert helped.exit_code == 0, helped.output
    assert "quick" in helped.stdout and "full" in helped.stdout
    assert "ddp-bench/fdl.yml:9:22: commands.quick.options.model" in helped.stdout
    full = run_fdl(["ddp-bench", "full", "--dry-run"], cwd=project)
    assert full.exit_code == 0, full.output
    assert "--epochs 10 --model mlp" in full.stdout
    quick = run_fdl(["ddp-bench", "quick", "--dry-run"], cwd=project)
    assert quick.exit_code == 3
    assert "ddp-bench/fdl.yml:9:22:" in quick.stderr
    assert "'linear'; allowed: mlp, conv" in quick.stderr


def test_compile_true_probes_once_and_uses_the_entrys_schema(run_fdl, project) -> None:
    assert run_fdl(["--help"], cwd=project).exit_code == 0
    assert probes(project) == 0  # never a probe for plain `fdl --help`
    helped = run_fdl(["export", "--help"], cwd=project)
    assert helped.exit_code == 0, helped.output
    assert "--format VALUE" in helped.stdout and "<model>" in helped.stdout
    assert "--legacy" not in helped.stdout  # the probed schema replaces the inline one
    assert probes(project) == 1
    ran = run_fdl(["export", "m1", "--format", "onnx", "-s", "3", "--dry-run"], cwd=project)
    assert ran.exit_code == 0 and "sh m1 --format onnx -s 3" in ran.stdout
    refused = run_fdl(["export", "m1", "--format", "tflite"], cwd=project)
    assert refused.exit_code == 2 and "allowed: onnx, safetensors" in refused.stderr
    assert probes(project) == 1  # the cache answered
    cache = project / "export" / ".fdl" / "schema-cache" / "export.json"
    cached = json.loads(cache.read_text())
    # the reference CLI's format at its path (it ignores x-fdl, fdl's key)
    assert cached["options"]["format"]["choices"] == ["onnx", "safetensors"]
    assert cached["args"][0]["name"] == "model" and set(cached["x-fdl"]) == {"key", "probe"}
    # a cache the reference wrote (the bare schema) is asked again, then carries fdl's key
    del cached["x-fdl"]
    cache.write_text(json.dumps(cached))
    assert run_fdl(["export", "--help"], cwd=project).exit_code == 0
    assert probes(project) == 2
    assert "x-fdl" in json.loads(cache.read_text())


def test_a_rebuilt_program_or_a_changed_manifest_is_asked_again(run_fdl, project) -> None:
    run_fdl(["export", "--help"], cwd=project)
    tool = project / "export" / "tool.sh"
    tool.write_text(TOOL + "# rebuilt\n")
    run_fdl(["export", "--help"], cwd=project)
    assert probes(project) == 2
    manifest = project / "export" / "fdl.yml"
    manifest.write_text(EXPORT + "description: changed\n")
    run_fdl(["export", "--help"], cwd=project)
    assert probes(project) == 3
    run_fdl(["export", "--help"], cwd=project)
    assert probes(project) == 3


def test_a_failing_probe_falls_back_to_the_inline_schema(run_fdl, project) -> None:
    tool = project / "export" / "tool.sh"
    tool.write_text('#!/bin/sh\necho "not built yet" >&2\nexit 7\n')
    result = run_fdl(["export", "x", "--legacy"], cwd=project)
    assert result.exit_code == 7, result.output  # the probe failed; the run went on
    assert "exited with status 7: not built yet" in result.stderr
    assert "using the inline schema" in result.stderr
    tool.write_text("#!/bin/sh\necho no json here\n")
    result = run_fdl(["export", "--help"], cwd=project)
    assert "printed no JSON object" in result.stdout + result.stderr
    assert "--legacy" in result.stdout


def test_refresh_schema_and_the_schema_group(run_fdl, project) -> None:
    refreshed = run_fdl(["export", "--refresh-schema"], cwd=project)
    assert refreshed.exit_code == 0, refreshed.output
    assert "2 options, 1 positional arguments" in refreshed.stdout
    listed = json.loads(run_fdl(["schema", "list", "--json"], cwd=project).stdout)
    assert listed == [
        {"name": "export", "path": "export/.fdl/schema-cache/export.json", "status": "fresh"}
    ]
    (project / "export" / "tool.sh").write_text(TOOL + "# rebuilt\n")
    assert (
        json.loads(run_fdl(["schema", "list", "--json"], cwd=project).stdout)[0]["status"]
        == "stale"
    )
    assert run_fdl(["schema", "refresh"], cwd=project).exit_code == 0
    assert probes(project) == 2
    cleared = run_fdl(["schema", "clear"], cwd=project)
    assert cleared.exit_code == 0 and "cleared 1 cached schema" in cleared.stderr
    assert not (project / "export" / ".fdl").exists()
    (project / "export" / "tool.sh").write_text("#!/bin/sh\nexit 3\n")
    failed = run_fdl(["export", "--refresh-schema"], cwd=project)
    assert failed.exit_code == 4 and "exited with status 3" in failed.stderr


def test_completion_reads_the_cache_and_never_probes(run_fdl, project) -> None:
    assert run_fdl(["__complete", "bash", "--", "export", "--f"], cwd=project).stdout == ""
    assert probes(project) == 0
    run_fdl(["export", "--help"], cwd=project)
    completed = run_fdl(["__complete", "bash", "--", "export", "--f"], cwd=project)
    assert "--format" in completed.stdout
    assert probes(project) == 1


CPP = r"""
#include <cstdio>
#include <cstring>
int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--fdl-schema") == 0) {
    std::FILE* log = std::fopen("probes.log", "a");
    std::fputs("probe\n", log);
    std::fclose(log);
    std::puts("{\"options\": {\"precision\": {\"type\": \"string\", "
              "\"choices\": [\"%s\", \"fp32\"]}}}");
    return 0;
  }
  for (int i = 1; i < argc; ++i) std::printf("%s ", argv[i]);
  std::puts("");
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_a_compiled_cpp_entry_answers_fdl_schema(run_fdl, project) -> None:
    export = project / "export"

    def build(first_choice: str) -> None:
        (export / "tool.cpp").write_text(CPP.replace("%s", first_choice))
        subprocess.run(["g++", "-O0", "-o", "tool", "tool.cpp"], cwd=export, check=True)

    build("bf16")
    (export / "fdl.yml").write_text("entry: ./tool\ncompile: true\n")
    helped = run_fdl(["export", "--help"], cwd=project)
    assert "[choices: bf16, fp32]" in helped.stdout, helped.output
    refused = run_fdl(["export", "--precision", "fp16"], cwd=project)
    assert refused.exit_code == 2 and "allowed: bf16, fp32" in refused.stderr
    build("fp16")  # a rebuilt binary is asked again
    ran = run_fdl(["export", "--precision", "fp16"], cwd=project)
    assert ran.exit_code == 0, ran.output
    assert "./tool --precision fp16" in ran.stderr
    assert probes(project) == 2


def test_a_dry_run_never_starts_the_entry_to_ask_for_its_schema(run_fdl, project) -> None:
    """floDl's flodl-hf/export is a `cargo run` in a container: asking it is a build."""
    first = run_fdl(["export", "m1", "--legacy", "--dry-run"], cwd=project)
    assert first.exit_code == 0, first.output
    assert probes(project) == 0
    said = first.stdout + first.stderr
    assert "no fresh cached answer of `./tool.sh --fdl-schema`" in said
    assert "using the inline schema" in said
    run_fdl(["export", "--help"], cwd=project)  # help asks (once)
    assert probes(project) == 1
    refused = run_fdl(["export", "m1", "--format", "tflite", "--dry-run"], cwd=project)
    assert refused.exit_code == 2 and "allowed: onnx, safetensors" in refused.stderr
    (project / "export" / "tool.sh").write_text(TOOL + "# rebuilt\n")
    stale = run_fdl(["export", "m1", "--legacy", "--dry-run"], cwd=project)
    assert stale.exit_code == 0 and "no fresh cached answer" in stale.stdout + stale.stderr
    assert probes(project) == 1


def test_a_project_command_named_like_a_built_in_group_still_runs(run_fdl, project) -> None:
    """floDl's root manifest has `bench`; fdl's `bench` group arrived later."""
    listing = run_fdl(["--help"], cwd=project).stdout
    assert "also a built-in: `fdl bench <sub-command>` is the built-in's" in listing
    ours = run_fdl(["bench", "--dry-run"], cwd=project)
    assert ours.exit_code == 0, ours.output
    assert "echo flodl-bench" in ours.stdout and "running the project's `bench`" in ours.stderr
    builtin = run_fdl(["bench", "report"], cwd=project)
    assert builtin.exit_code == 2 and "bench.jsonl" in builtin.stderr
    # `fdl bench --help` is the project's command's help (as in floDl's README), the note
    # names the built-in's sub-commands
    helped = run_fdl(["bench", "--help"], cwd=project)
    assert helped.exit_code == 0, helped.output
    assert "echo flodl-bench" in helped.stdout and "fdl bench run|" in helped.stderr
    assert run_fdl(["bench", "run", "--help"], cwd=project).stdout.startswith(
        "Usage: fdl bench run"
    )


def test_a_cluster_overlay_gives_its_marked_commands_floDls_envelope(
    run_fdl, tmp_path: Path
) -> None:
    """floDl's fdl.cluster.yml: the commands it marks `cluster: true` (nested ones too) get
    the envelope floDl's launcher reads (fdl does not fan out itself); the others run as
    they are; `local_devices: all`, which floDl counts over ssh, is refused with the fix."""
    (tmp_path / "fdl.yml").write_text(
        "commands:\n  build: {run: echo build}\n  train: {run: echo train}\n  sub:\n"
    )
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "fdl.yml").write_text(
        "entry: echo sub\ncommands:\n  quick: {options: {n: 1}}\n"
    )
    overlay = tmp_path / "fdl.cluster.yml"
    overlay.write_text(
        "cluster:\n  controller: {host: 127.0.0.1, path: /srv/p}\n"
        "  workers: [{host: 127.0.0.1, local_devices: [0, 1], nccl_socket_ifname: lo, path: /srv/p}]\n"
        "commands:\n  train: {cluster: true}\n  sub: {cluster: true}\n"
    )
    plain = run_fdl(["--env", "cluster", "build", "--dry-run"], cwd=tmp_path)
    assert plain.exit_code == 0 and "FLODL_INTERNAL" not in plain.stdout
    marked = run_fdl(["--env", "cluster", "train", "--dry-run"], cwd=tmp_path)
    assert marked.exit_code == 0, marked.output
    assert "export FLODL_INTERNAL_FULL_CLUSTER_JSON=" in marked.stdout
    assert "export FLODL_INTERNAL_FDL_CMD=train" in marked.stdout
    nested = run_fdl(["--env", "cluster", "sub", "quick", "--dry-run"], cwd=tmp_path)
    assert nested.exit_code == 0 and "FLODL_INTERNAL_FULL_CLUSTER_JSON=" in nested.stdout
    alone = run_fdl(["train", "--dry-run"], cwd=tmp_path)  # no overlay: no envelope
    assert alone.exit_code == 0 and "FLODL_INTERNAL" not in alone.stdout
    overlay.write_text(overlay.read_text().replace("[0, 1]", "all"))
    refused = run_fdl(["cluster", "train", "--dry-run"], cwd=tmp_path)  # floDl's first word
    assert refused.exit_code == 3, refused.output
    assert "local_devices: is 'all'" in refused.stderr and "local_devices: [0, 1]" in refused.stderr


def test_presets_are_checked_against_the_probed_schema(run_fdl, project) -> None:
    """A `compile: true` entry's presets are checked against what it answered to
    --fdl-schema (read from the cache: `fdl --help` never probes)."""
    (project / "export" / "fdl.yml").write_text(
        EXPORT
        + "commands:\n  fast: {options: {format: onnx}}\n  odd: {options: {format: tflite}}\n"
    )
    before = run_fdl(["--help"], cwd=project)
    assert "preset odd has a problem" not in before.stdout  # nothing probed yet
    assert probes(project) == 0
    assert run_fdl(["export", "--help"], cwd=project).exit_code == 0  # probes once
    assert probes(project) == 1
    listing = run_fdl(["--help"], cwd=project)
    assert "preset odd has a problem" in listing.stdout, listing.stdout
    refused = run_fdl(["export", "odd", "--dry-run"], cwd=project)
    assert refused.exit_code == 3 and "allowed: onnx, safetensors" in refused.stderr
    assert "export/fdl.yml:" in refused.stderr
    assert run_fdl(["export", "fast", "model1", "--dry-run"], cwd=project).exit_code == 0
    assert probes(project) == 1


def test_older_floDl_keys_are_named_with_the_fix(run_fdl, tmp_path: Path) -> None:
    """floDl's fdl.yml.example once had `scripts:` and `commands: [dir/]`, its ddp-bench
    `jobs:`: the fix says what they became, not a did-you-mean."""
    write(
        tmp_path,
        {
            "fdl.yml": "scripts:\n  build: {run: echo b}\ncommands:\n  - sub/\n",
            "sub/fdl.yml": "entry: echo\njobs:\n  quick: {options: {a: 1}}\n",
        },
    )
    old_root = run_fdl(["build", "--dry-run"], cwd=tmp_path)
    assert old_root.exit_code == 3
    assert "fdl.yml:1:1: scripts: unknown key 'scripts'" in old_root.stderr
    assert "move them under `commands:`" in old_root.stderr
    assert "did you mean" not in old_root.stderr
    (tmp_path / "fdl.yml").write_text("commands:\n  sub:\n")
    old_sub = run_fdl(["sub", "quick", "--dry-run"], cwd=tmp_path)
    assert old_sub.exit_code == 3
    assert "sub/fdl.yml:2:1: jobs: unknown key 'jobs'" in old_sub.stderr
    assert "rename it to `commands:`" in old_sub.stderr


def test_a_group_without_entry_says_so_for_a_dry_run(run_fdl, tmp_path: Path) -> None:
    """floDl's flodl-hf/fdl.yml is commands only (no entry:)."""
    write(
        tmp_path,
        {
            "fdl.yml": "commands:\n  hf:\n",
            "hf/fdl.yml": "commands:\n  convert: {run: echo c}\n  parity: {run: echo p}\n",
        },
    )
    grouped = run_fdl(["hf", "--dry-run"], cwd=tmp_path)
    assert grouped.exit_code == 2
    assert "`fdl hf` is a group of commands (its manifest has no entry:)" in grouped.stderr
    assert "`fdl hf convert --dry-run`" in grouped.stderr
    unknown = run_fdl(["hf", "convrt", "--dry-run"], cwd=tmp_path)
    assert unknown.exit_code == 2 and "did you mean `fdl hf convert`?" in unknown.stderr
    assert run_fdl(["hf", "convert", "--dry-run"], cwd=tmp_path).exit_code == 0


def test_an_undeclared_nested_manifest_says_where_it_belongs(run_fdl, tmp_path: Path) -> None:
    """floDl's flodl-hf/verify-matrix/fdl.yml (an entry: manifest) that its parent's
    commands: do not name: from its directory it is the nearest fdl.yml."""
    write(
        tmp_path,
        {
            "fdl.yml": "commands:\n  hf:\n",
            "hf/fdl.yml": "commands:\n  convert: {run: echo c}\n",
            "hf/matrix/fdl.yml": "description: m\nentry: ../run.sh\n",
        },
    )
    here = run_fdl(["x"], cwd=tmp_path / "hf" / "matrix")
    assert here.exit_code == 3
    assert "fdl.yml:2:1: entry: unknown key 'entry'" in here.stderr
    assert "declare this directory there and run it as `fdl NAME`" in here.stderr


COMPOSE_WORKDIR = """\
services:
  dev:
    image: busybox
    volumes: [".:/workspace"]
    working_dir: /workspace
  parity:
    image: busybox
    volumes: [".:/workspace"]
    working_dir: /workspace/hf
"""


def test_run_scripts_run_in_a_services_own_working_dir(run_fdl, tmp_path: Path) -> None:
    """floDl's hf-parity service sets working_dir: /workspace/flodl-hf, and
    flodl-hf/parity/fdl.yml's run: scripts are relative to it (`python
    scripts/parity_bert.py`); a working_dir that is just the mount point (dev's
    /workspace) leaves a nested script in its own directory."""
    write(
        tmp_path,
        {
            "docker-compose.yml": COMPOSE_WORKDIR,
            "fdl.yml": "commands:\n  hf:\n",
            "hf/fdl.yml": "commands:\n  parity:\n  conv:\n  ex: {run: cargo run, docker: dev}\n",
            "hf/parity/fdl.yml": "commands:\n  bert: {run: python scripts/p.py, docker: parity}\n",
            "hf/conv/fdl.yml": "entry: python /workspace/hf/scripts/c.py\ndocker: parity\n",
        },
    )
    env = {"FDL_IN_CONTAINER": "0", "FDL_COMPOSE": "docker compose"}
    parity = run_fdl(["hf", "parity", "bert", "--dry-run"], cwd=tmp_path, env=env)
    assert parity.exit_code == 0, parity.output
    assert "cd /workspace/hf || exit 125\npython scripts/p.py" in parity.stdout
    ex = run_fdl(["hf", "ex", "--dry-run"], cwd=tmp_path, env=env)
    assert "cd /workspace/hf || exit 125\ncargo run" in ex.stdout  # its manifest's directory
    conv = run_fdl(["hf", "conv", "--dry-run"], cwd=tmp_path, env=env)
    assert "cd /workspace/hf/conv || exit 125" in conv.stdout  # entries: their directory
