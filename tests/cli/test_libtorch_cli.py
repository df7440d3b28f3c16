"""`fdl libtorch ...`, `fdl diagnose` and `fdl setup` through the CLI, with a fake nvidia-smi."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fdl.libtorch import VariantInfo, finish_info, variants
from fdl.paths import Context
from tests.support.libtorch_trees import make_tree

GPU_NAMES = {
    "6.0": "Tesla P100-PCIE-16GB",
    "6.1": "NVIDIA GeForce GTX 1060 6GB",
    "7.0": "Tesla V100-SXM2-16GB",
    "12.0": "NVIDIA GeForce RTX 5060 Ti",
    "12.1": "NVIDIA GB10",
}


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """An isolated machine: FDL_HOME, cache, a work dir, and a fake nvidia-smi on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    env = {
        "FDL_HOME": str(tmp_path / "home"),
        "FDL_CACHE_DIR": str(tmp_path / "cache"),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    }
    monkeypatch.delenv("FDL_LIBTORCH_MIRROR", raising=False)
    monkeypatch.delenv("FLODL_HOME", raising=False)

    class Machine:
        root = tmp_path
        home = tmp_path / "home"
        cwd = work

        def gpus(self, *caps: str, driver: str = "580.65") -> None:
            """Install a fake nvidia-smi listing these GPUs (none: no nvidia-smi at all)."""
            script = bin_dir / "nvidia-smi"
            if not caps:
                script.unlink(missing_ok=True)
                return
            lines = "".join(
                f"{i}, {GPU_NAMES.get(c, 'NVIDIA GPU')}, {c}, 8192, {driver}\\n"
                for i, c in enumerate(caps)
            )
            script.write_text(f"#!/bin/sh\nprintf '{lines}'\n")
            script.chmod(0o755)

        def context(self) -> Context:
            return Context(self.home, project=False)

        def install(self, name: str, version: str, cuda: str | None, cubins=()) -> Path:
            context = self.context()
            path = make_tree(context.libtorch_dir / name, version, cubins=cubins, cuda_needed=())
            info = VariantInfo(
                name=name,
                torch=version.split("+", maxsplit=1)[0],
                cuda=cuda,
                source={"kind": "download", "build_version": version},
            )
            variants.write_info(path, finish_info(path, info))
            return path

    machine = Machine()
    machine.env = env  # type: ignore[attr-defined]
    return machine


@pytest.fixture
def fdl(run_fdl, machine):
    def invoke(*args: str, env: dict[str, str] | None = None):
        return run_fdl(list(args), cwd=machine.cwd, env={**machine.env, **(env or {})})

    return invoke


# --- variant selection at the CLI level ------------------------------------------------------


@pytest.mark.parametrize(
    ("gpus", "variant", "covers_all"),
    [
        (("6.1", "12.0"), "cu132", False),
        (("6.0", "7.0"), "cu126", True),
        (("12.0",), "cu132", True),
        (("12.1",), "cu132", True),
        ((), "cpu", True),
    ],
)
def test_download_dry_run_picks_the_variant(fdl, machine, gpus, variant, covers_all) -> None:
    machine.gpus(*gpus)
    result = fdl("libtorch", "download", "--dry-run", "--json")
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["variant"] == variant
    assert plan["covers_all_gpus"] is covers_all
    assert plan["dry_run"] is True
    version = plan["torch"]
    assert plan["url"] == (
        f"https://download.pytorch.org/libtorch/{variant}/"
        f"libtorch-shared-with-deps-{version}%2B{variant}.zip"
    )
    assert plan["target"] == str(machine.home / "libtorch" / "precompiled" / variant)
    assert plan["build_version"] == f"{version}+{variant}"
    assert not (machine.home / "libtorch").exists(), "a dry run writes nothing"


def test_dry_run_text_says_when_no_official_build_covers_the_gpus(fdl, machine) -> None:
    machine.gpus("12.0", "6.1")
    result = fdl("libtorch", "download", "--dry-run")
    assert result.exit_code == 0
    assert "no official PyTorch" in result.stdout
    assert "sm_61" in result.stdout and "NOT COVERED" in result.stdout
    assert "fdl libtorch build --archs 6.1,12.0" in result.stdout
    assert "[dry-run]" in result.stdout


def test_explicit_cuda_and_torch(fdl, machine) -> None:
    machine.gpus("6.1")
    result = fdl("libtorch", "download", "--cuda", "12.6", "--torch", "2.7", "--dry-run", "--json")
    plan = json.loads(result.stdout)
    assert plan["variant"] == "cu126" and plan["torch"] == "2.7.1"
    # before 2.8 the cxx11 ABI zip had another name
    assert plan["url"].endswith("/cu126/libtorch-cxx11-abi-shared-with-deps-2.7.1%2Bcu126.zip")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cpu", "--cuda", "12.8"], "mutually exclusive"),
        (["--cuda", "11.8"], "has no official cu118 build"),
        (["--torch", "1.13"], "unknown PyTorch version"),
        (["--name", "../evil"], "invalid libtorch variant name"),
    ],
)
def test_download_usage_errors(fdl, machine, args, message) -> None:
    result = fdl("libtorch", "download", "--dry-run", *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_download_of_a_release_newer_than_the_tables_offline(fdl, machine) -> None:
    result = fdl("libtorch", "download", "--dry-run", "--torch", "9.9")  # PyPI refuses
    assert result.exit_code == 5, result.output
    assert "newer than fdl's compatibility tables" in result.stderr
    assert "cannot be read from PyPI" in result.stderr


def test_mirror_from_environment_and_manifest(fdl, machine) -> None:
    (machine.cwd / "fdl.yml").write_text("libtorch:\n  mirror: https://mirror.example/pt\n")
    plan = json.loads(fdl("libtorch", "download", "--cpu", "--dry-run", "--json").stdout)
    assert plan["url"].startswith("https://mirror.example/pt/libtorch/cpu/")
    assert plan["upstream_url"].startswith("https://download.pytorch.org/libtorch/cpu/")
    env = {"FDL_LIBTORCH_MIRROR": "http://127.0.0.1:8080"}
    plan = json.loads(fdl("libtorch", "download", "--cpu", "--dry-run", "--json", env=env).stdout)
    assert plan["url"].startswith("http://127.0.0.1:8080/libtorch/cpu/")
    # inside the project, variants live in the project
    assert plan["target"] == str(machine.cwd / "libtorch" / "precompiled" / "cpu")
    # the variable is a layer of the manifest: explain names it and what it overrode
    explained = fdl("config", "explain", "libtorch.mirror", "--json", env=env)
    entry = json.loads(explained.stdout)[0]
    assert entry["value"] == "http://127.0.0.1:8080"
    assert entry["winner"]["origin"]["source"] == "$FDL_LIBTORCH_MIRROR"
    assert [c["origin"]["source"] for c in entry["overridden"]] == ["fdl.yml"]
    # --set is above it, --mirror above everything
    over = fdl(
        "--set",
        "libtorch.mirror=http://127.0.0.1:9/x",
        "libtorch",
        "download",
        "--cpu",
        "--dry-run",
        "--json",
        env=env,
    )
    assert json.loads(over.stdout)["url"].startswith("http://127.0.0.1:9/x/libtorch/cpu/")
    flag = fdl(
        "libtorch",
        "download",
        "--cpu",
        "--mirror",
        "http://127.0.0.1:7",
        "--dry-run",
        "--json",
        env=env,
    )
    assert json.loads(flag.stdout)["url"].startswith("http://127.0.0.1:7/libtorch/cpu/")
    # a value that is no URL is refused where it was set
    bad = fdl("libtorch", "download", "--cpu", "--dry-run", env={"FDL_LIBTORCH_MIRROR": "nope"})
    assert bad.exit_code == 3 and "$FDL_LIBTORCH_MIRROR" in bad.stderr


def test_path_outside_the_layout_is_not_activated(fdl, machine, tmp_path: Path) -> None:
    plan = json.loads(
        fdl(
            "libtorch", "download", "--cpu", "--path", str(tmp_path / "x"), "--dry-run", "--json"
        ).stdout
    )
    assert plan["activate"] is False and plan["name"] is None
    assert any("not activated" in n for n in plan["notes"])


# --- list / info / activate / remove ---------------------------------------------------------


def test_list_info_activate_remove(fdl, machine) -> None:
    assert "No libtorch variants installed" in fdl("libtorch", "list").stderr
    assert json.loads(fdl("libtorch", "list", "--json").stdout) == []
    machine.install("precompiled/cpu", "2.13.0+cpu", None)
    machine.install("builds/sm61-sm120", "2.14.1", "12.8", cubins=[61, 120])
    result = fdl("libtorch", "activate", "builds/sm61-sm120")
    assert result.exit_code == 0 and "active variant: builds/sm61-sm120" in result.stderr
    listed = json.loads(fdl("libtorch", "list", "--json").stdout)
    assert [(v["variant"], v["active"]) for v in listed] == [
        ("builds/sm61-sm120", True),
        ("precompiled/cpu", False),
    ]
    assert listed[0]["archs_found"]["cubin"] == ["sm_61", "sm_120"]
    text = fdl("libtorch", "list").stdout
    assert "* builds/sm61-sm120" in text and "(active)" in text
    info = fdl("libtorch", "info").stdout
    assert "Variant:   builds/sm61-sm120 (active)" in info and "sm_61 sm_120" in info
    arch = (machine.home / "libtorch/builds/sm61-sm120/.arch").read_text()
    assert "archs=6.1 12.0\n" in arch and "cuda=12.8\n" in arch
    result = fdl("libtorch", "remove", "sm61-sm120", "--yes", "--json")
    removed = json.loads(result.stdout)
    assert removed["removed"] == "builds/sm61-sm120" and removed["was_active"] is True
    assert removed["bytes"] > 0
    assert (machine.home / "libtorch/.active").read_text() == ""
    no_active = fdl("libtorch", "info")
    assert no_active.exit_code == 4 and "no active libtorch variant" in no_active.stderr


@pytest.mark.parametrize("name", ["../../etc", "/abs/lib", "precompiled/..", "other/x"])
def test_bad_names_are_refused(fdl, machine, name) -> None:
    for verb in ("activate", "remove", "info"):
        result = fdl("libtorch", verb, name)
        assert result.exit_code == 2, (verb, result.output)
        assert "invalid libtorch variant name" in result.stderr


def test_activate_unknown_lists_installed(fdl, machine) -> None:
    machine.install("precompiled/cpu", "2.13.0+cpu", None)
    result = fdl("libtorch", "activate", "precompiled/cu999")
    assert result.exit_code == 2
    assert "precompiled/cpu" in result.stderr


# --- verify -----------------------------------------------------------------------------------


def test_verify_reports_an_uncovered_gpu_and_exits_1(fdl, machine) -> None:
    machine.gpus("12.0", "6.1")
    machine.install("precompiled/cu130", "2.14.1+cu130", "13.0", cubins=[75, 80, 86, 90, 100, 120])
    variants.activate(machine.context(), "precompiled/cu130")
    result = fdl("libtorch", "verify")
    assert result.exit_code == 1
    assert "GPU 1 (GTX 1060 6GB, sm_61) is not covered by precompiled/cu130" in result.stdout
    assert "fix: fdl libtorch build --archs 6.1,12.0" in result.stdout
    data = json.loads(fdl("libtorch", "verify", "--json").stdout)
    assert data["ok"] is False
    assert data["archs_found"]["cubin"] == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]


# --- diagnose -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpus", "active", "strict_code", "expect"),
    [
        (("12.0", "6.1"), ("precompiled/cu130", "2.14.1+cu130", "13.0", [120]), 1, "sm_61"),
        (("6.0", "7.0"), ("precompiled/cu126", "2.14.1+cu126", "12.6", [50, 60, 70]), 0, None),
        (("12.1",), ("precompiled/cu130", "2.14.1+cu130", "13.0", [120]), 0, None),
        ((), ("precompiled/cpu", "2.13.0+cpu", None, []), 0, None),
        (("12.0",), ("precompiled/cu126", "2.14.1+cu126", "12.6", [50, 60, 70, 90]), 1, "sm_120"),
    ],
)
def test_diagnose_gpu_sets(fdl, machine, gpus, active, strict_code, expect) -> None:
    machine.gpus(*gpus)
    name, version, cuda, cubins = active
    machine.install(name, version, cuda, cubins=cubins)
    variants.activate(machine.context(), name)
    result = fdl("diagnose", "--json", "--strict", "--no-docker")
    assert result.exit_code == strict_code, result.stdout
    data = json.loads(result.stdout)
    errors = [c for c in data["checks"] if c["severity"] == "error"]
    if expect is None:
        assert errors == []
    else:
        assert any(expect in c["message"] and c["fix"] for c in errors)
    assert data["libtorch"]["active"] == name
    assert len(data["gpus"]) == len(gpus)
    # without --strict the exit code stays 0
    assert fdl("diagnose", "--no-docker").exit_code == 0


def test_diagnose_text_groups_and_fixes(fdl, machine) -> None:
    machine.gpus("12.0", "6.1")
    result = fdl("diagnose", "--no-docker")
    assert result.exit_code == 0
    for group in ("system", "gpus", "toolchain", "libtorch"):
        assert f"\n{group}\n" in f"\n{result.stdout}"
    assert "no active libtorch variant" in result.stdout
    assert "fix: fdl setup" in result.stdout


# --- setup -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpus", "action", "command"),
    [
        (("6.1", "12.0"), "build", "fdl libtorch build --archs 6.1,12.0"),
        # 2.15 has no cu126 build: the newest release that has one, named in the command
        (("6.0", "7.0"), "download", "fdl libtorch download --cuda 12.6 --torch 2.14.1"),
        (("12.0",), "download", "fdl libtorch download --cuda 13.2"),
        (("12.1",), "download", "fdl libtorch download --cuda 13.2"),
        ((), "download", "fdl libtorch download --cpu"),
    ],
)
def test_setup_plans(fdl, machine, gpus, action, command) -> None:
    machine.gpus(*gpus)
    result = fdl("setup", "--dry-run", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["plan"]["action"] == action
    assert data["plan"]["command"].startswith(command)
    assert not (machine.home / "libtorch").exists()


def test_setup_without_yes_and_without_terminal_changes_nothing(fdl, machine) -> None:
    machine.gpus("12.0")
    result = fdl("setup")
    assert result.exit_code == 0
    assert "plan: download" in result.stdout
    assert "without --yes" in result.stderr
    assert not (machine.home / "libtorch").exists()


def test_setup_activates_an_installed_variant_with_yes(fdl, machine) -> None:
    machine.gpus("6.1", "12.0")
    machine.install("builds/sm61-sm120", "2.14.1", "12.8", cubins=[61, 120])
    result = fdl("setup", "--yes")
    assert result.exit_code == 0, result.output
    assert variants.active_name(machine.context()) == "builds/sm61-sm120"


def test_setup_takes_flodls_non_interactive_flag(fdl, machine) -> None:
    """floDl's `fdl setup --non-interactive` is --yes (issue 34, point 8)."""
    machine.gpus("6.1", "12.0")
    machine.install("builds/sm61-sm120", "2.14.1", "12.8", cubins=[61, 120])
    result = fdl("setup", "--non-interactive")
    assert result.exit_code == 0, result.output
    assert variants.active_name(machine.context()) == "builds/sm61-sm120"


# --- install -------------------------------------------------------------------------------


def test_install_needs_a_source(fdl, machine) -> None:
    result = fdl("libtorch", "install")
    assert result.exit_code == 2 and "--from-wheel" in result.stderr
    result = fdl("libtorch", "install", "--from-wheel", "--torch", "2.13", "--python", "py")
    assert result.exit_code == 2 and "one wheel source" in result.stderr


def test_install_cuda_wheel_without_nvidia_warns(fdl, machine, tmp_path: Path) -> None:
    from tests.support.libtorch_trees import torch_wheel

    wheel = torch_wheel(
        tmp_path / "torch-2.14.1-cp311-cp311-linux_x86_64.whl",
        "2.14.1",
        cuda="13.0",
        cubins=[120],
        cuda_needed=("libnvfake.so.13",),
    )
    result = fdl("libtorch", "install", "--from-wheel", str(wheel), "--no-nvidia")
    assert result.exit_code == 0, result.stderr
    assert "installed precompiled/cu130" in result.stderr
    assert "warning: 1 libraries cannot be found: libnvfake.so.13" in result.stderr
    again = fdl("libtorch", "install", "--from-wheel", str(wheel), "--no-nvidia", "--json")
    assert json.loads(again.stdout)["installed"] is False


def test_install_of_a_cuda_wheel_warns_about_gpus_it_does_not_cover(
    fdl, machine, tmp_path: Path
) -> None:
    """A cu128 wheel on a GTX 1060 (sm_61): `download` warns before installing; a wheel's
    build is known once installed, and the same words follow (issue 34, point 14)."""
    from tests.support.libtorch_trees import torch_wheel

    machine.gpus("6.1", "12.0")
    wheel = torch_wheel(
        tmp_path / "torch-2.14.1-cp311-cp311-linux_x86_64.whl",
        "2.14.1",
        cuda="12.8",
        cubins=[70, 75, 80, 86, 90, 100, 120],
    )
    result = fdl("libtorch", "install", "--from-wheel", str(wheel), "--no-nvidia")
    assert result.exit_code == 0, result.stderr
    assert "warning: precompiled/cu128 has no code for sm_61" in result.stderr
    assert "fix: fdl libtorch build --archs 6.1,12.0" in result.stderr
    machine.gpus("12.0")
    again = fdl("libtorch", "install", "--from-wheel", str(wheel), "--no-nvidia")
    assert again.exit_code == 0 and "has no code" not in again.stderr


def test_install_from_dir_adopts_a_tree(fdl, machine, tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "mylibtorch", "2.13.0+cpu")
    result = fdl("libtorch", "install", "--from-dir", str(tree), "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["variant"] == "precompiled/mylibtorch" and data["activated"] is True
    assert tree.is_dir(), "the original is copied, not moved"
    again = fdl("libtorch", "install", "--from-dir", str(tree))
    assert again.exit_code == 2 and "already installed" in again.stderr


def test_libtorch_lives_in_the_root_project_also_from_a_nested_directory(
    run_fdl, tmp_path: Path
) -> None:
    root = tmp_path / "proj"
    (root / "train").mkdir(parents=True)
    (root / "fdl.yml").write_text("commands:\n  train:\n")
    (root / "train" / "fdl.yml").write_text("entry: echo hi\n")
    tree = tmp_path / "tree"
    for part in ("lib", "include", "share"):
        (tree / part).mkdir(parents=True)
    (tree / "lib" / "libtorch.so").write_bytes(b"")
    result = run_fdl(
        ["libtorch", "install", "--from-dir", str(tree), "--name", "x"],
        cwd=root / "train",
        env={"FDL_HOME": str(tmp_path / "home")},
    )
    assert result.exit_code == 0, result.output
    assert (root / "libtorch" / "precompiled" / "x" / "lib").is_dir()
    assert not (root / "train" / "libtorch").exists()
    assert "(version unknown)" in result.output


def test_remove_asks_or_needs_yes_and_takes_an_unambiguous_short_name(fdl, machine) -> None:
    machine.install("precompiled/cpu", "2.13.0+cpu", None)
    machine.install("builds/cpu", "2.13.0", None)
    machine.install("precompiled/cu130", "2.13.0+cu130", "13.0")
    both = fdl("libtorch", "remove", "cpu", "--yes")
    assert both.exit_code == 2 and "builds/cpu and precompiled/cpu" in both.stderr
    dry = fdl("libtorch", "remove", "cu130", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    plan = json.loads(dry.stdout)
    assert plan["remove"] == "precompiled/cu130" and plan["bytes"] > 0 and plan["dry_run"]
    asked = fdl("libtorch", "remove", "cu130")  # no terminal here
    assert asked.exit_code == 2 and "--yes" in asked.stderr
    assert (machine.home / "libtorch" / "precompiled" / "cu130" / "lib").is_dir()
    done = fdl("libtorch", "remove", "cu130", "--yes")
    assert done.exit_code == 0 and "removed precompiled/cu130" in done.stderr
    assert not (machine.home / "libtorch" / "precompiled" / "cu130").exists()


def test_advice_knows_the_release_a_gpu_needs(fdl, machine) -> None:
    """torch 2.6 has no sm_120 build and its arch list cannot name sm_120: the advice is a
    newer torch, not a 2.6 source build that would fail at configure."""
    machine.gpus("12.0", driver="570.86")
    plan = json.loads(fdl("libtorch", "download", "--dry-run", "--torch", "2.6.0", "--json").stdout)
    assert not any("fdl libtorch build" in w for w in plan["warnings"])
    assert any("use torch 2.7.1 or newer" in w and "cu128" in w for w in plan["warnings"])
    setup = fdl("setup", "--dry-run", "--torch", "2.6.0")
    assert setup.exit_code == 2
    assert "fdl setup --torch 2.7.1" in setup.stderr
    # a release that can be built for the GPU still gets the build command
    plan = json.loads(fdl("libtorch", "download", "--dry-run", "--torch", "2.8.0", "--json").stdout)
    machine.gpus("6.1", "12.0", driver="570.86")
    plan = json.loads(fdl("libtorch", "download", "--dry-run", "--torch", "2.8.0", "--json").stdout)
    assert any("fdl libtorch build --archs 6.1,12.0 --torch 2.8.0" in w for w in plan["warnings"])


def test_a_tree_from_pip_names_the_nvidia_wheels_it_lacks(fdl, machine, tmp_path: Path) -> None:
    """site-packages/torch adopted with --from-dir: the libraries NVIDIA's wheels put beside
    it are missing, and the fix names those wheels and the install that brings them."""
    tree = make_tree(
        tmp_path / "torch",
        "2.13.0+cu130",
        cubins=[120],
        cuda_needed=("libcusparseLt.so.0", "libnvshmem_host.so.3"),
    )
    result = fdl("libtorch", "install", "--from-dir", str(tree))
    assert result.exit_code == 0, result.stderr
    assert "2 libraries cannot be found: libcusparseLt.so.0" in result.stderr
    assert "nvidia-cusparselt-cu13, nvidia-nvshmem-cu13" in result.stderr
    assert "fdl libtorch install --from-wheel --python" in result.stderr
    assert "the archive was incomplete" not in result.stderr


def _venv_with_torch(root: Path, version: str, cuda: str) -> str:
    """A Python environment with a (fake) torch installed as pip installs it: torch/ and its
    dist-info in site-packages, its NVIDIA library beside it under nvidia/."""
    import sys

    from fdl.binaries.synthetic import build_elf

    site = root / "lib/python3.11/site-packages"
    torch_dir = make_tree(site / "torch", version, cubins=[90], cuda_needed=("libnvfake.so.13",))
    (torch_dir / "build-version").unlink()
    (torch_dir / "version.py").write_text(f"__version__ = '{version}'\ncuda = '{cuda}'\n")
    (site / f"torch-{version}.dist-info").mkdir()
    (site / f"torch-{version}.dist-info/METADATA").write_text(f"Name: torch\nVersion: {version}\n")
    (site / "nvidia/fake/lib").mkdir(parents=True)
    (site / "nvidia/fake/lib/libnvfake.so.13").write_bytes(build_elf(soname="libnvfake.so.13"))
    python = root / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    return str(python)


def test_setup_copies_the_build_the_users_python_has_installed(
    fdl, machine, tmp_path: Path
) -> None:
    """The planned build (torch 2.11.0, cu130 for an H200) is installed for the user's
    Python already: setup copies it with its NVIDIA libraries instead of downloading."""
    machine.gpus("9.0", driver="590.10")
    python = _venv_with_torch(tmp_path / "venv", "2.11.0", "13.0")
    env = {"VIRTUAL_ENV": str(tmp_path / "venv")}
    planned = fdl("setup", "--torch", "2.11.0", "--dry-run", "--json", env=env)
    assert planned.exit_code == 0, planned.output
    plan = json.loads(planned.stdout)["plan"]
    assert (plan["action"], plan["python"]) == ("wheel", python)
    assert plan["command"] == f"fdl libtorch install --from-wheel --python {python}"
    assert "is installed for" in plan["reason"] and "nothing downloaded" in plan["reason"]
    assert any(a.startswith("fdl libtorch download --cuda 13.0") for a in plan["alternatives"])
    done = fdl("setup", "--torch", "2.11.0", "--yes", "--json", env=env)
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert (data["done"], data["variant"]) == ("installed", "precompiled/cu130")
    path = Path(data["path"])
    assert (path / "lib/libnvfake.so.13").is_file()  # its NVIDIA library came along
    source = variants.read_info(path, "precompiled/cu130").source
    assert source["environment"] == str(tmp_path / "venv/lib/python3.11/site-packages/torch")


@pytest.mark.parametrize(
    ("gpus", "cuda"),
    [(("9.0",), "12.6"), ((), "13.0")],  # cu126 where cu130 is planned; a CPU plan: no CUDA
)
def test_setup_downloads_when_the_installed_torch_is_another_build(
    fdl, machine, tmp_path: Path, gpus: tuple[str, ...], cuda: str
) -> None:
    machine.gpus(*gpus, driver="590.10")
    _venv_with_torch(tmp_path / "venv", "2.11.0", cuda)
    env = {"VIRTUAL_ENV": str(tmp_path / "venv")}
    planned = fdl("setup", "--torch", "2.11.0", "--dry-run", "--json", env=env)
    assert planned.exit_code == 0, planned.output
    plan = json.loads(planned.stdout)["plan"]
    assert plan["action"] == "download" and plan["python"] is None


# --- the one chooser: every command that installs shows the ranked offers -----------------


def _choice(result) -> dict:
    assert result.exit_code == 0, result.output
    choice = json.loads(result.stdout)["choice"]
    assert {"chosen", "offers"} == set(choice)
    assert all({"source", "ok", "why"} <= set(o) for o in choice["offers"])
    return choice


@pytest.mark.parametrize(("gpus", "chosen"), [(("12.0",), "archive"), (("6.1", "12.0"), "build")])
def test_setup_dry_run_carries_the_choice_and_its_text_the_ranked_offers(
    fdl, machine, gpus, chosen
) -> None:
    machine.gpus(*gpus)
    choice = _choice(fdl("setup", "--dry-run", "--json"))
    assert choice["chosen"] == chosen and choice["offers"][0]["source"] == chosen
    registry = next(o for o in choice["offers"] if o["source"] == "registry")
    assert registry["ok"] is False and registry["why"].startswith("no team registry")
    text = fdl("setup", "--dry-run").stdout
    assert "  sources:  (best first)" in text and f"    1. {chosen} [chosen]: " in text
    ranked = [o["source"] for o in choice["offers"]]
    assert [
        line.split(". ", 1)[1].split(" ")[0]
        for line in text.splitlines()
        if ". " in line and "[" in line
    ] == ranked
    wheel = _choice(fdl("setup", "--from-wheel", "--dry-run", "--json"))
    if chosen == "archive":
        assert wheel["chosen"] == "wheel"


def test_download_dry_run_carries_the_choice(fdl, machine) -> None:
    choice = _choice(fdl("libtorch", "download", "--cpu", "--dry-run", "--json"))
    assert choice["chosen"] == "archive"
    others = [o for o in choice["offers"] if o["source"] != "archive"]
    assert others and all(not o["ok"] and "not asked for" in o["why"] for o in others)
    assert "1. archive [chosen]" in fdl("libtorch", "download", "--cpu", "--dry-run").stdout


def test_build_dry_run_carries_the_choice(fdl, machine) -> None:
    args = ("libtorch", "build", "--cpu", "--native", "--dry-run")
    choice = _choice(fdl(*args, "--json"))
    assert choice["chosen"] == "build"
    assert [o["source"] for o in choice["offers"]] == ["build", "registry"]
    assert "1. build [chosen]" in fdl(*args).stdout


def test_install_and_pull_dry_runs_show_the_source_and_install_nothing(
    fdl, machine, tmp_path: Path
) -> None:
    tree = make_tree(tmp_path / "tree", "2.14.1")
    choice = _choice(fdl("libtorch", "install", "--from-dir", str(tree), "--dry-run", "--json"))
    assert choice["chosen"] == "directory"
    assert not (machine.home / "libtorch").exists()
    text = fdl("libtorch", "install", "--from-wheel", "--cpu", "--torch", "2.14.1", "--dry-run")
    assert text.exit_code == 0, text.output
    assert text.stdout.startswith("[dry-run] would install from cpu-view: the CPU view of")
    reference = "registry.example.com/team/libtorch:2.14.1-cu130"
    pulled = _choice(fdl("libtorch", "pull", reference, "--dry-run", "--json"))
    assert pulled == {
        "chosen": "registry",
        "offers": [
            {
                "source": "registry",
                "ok": True,
                "why": f"pull {reference}",
                "bytes": None,
                "time": "minutes",
                "trust": "team",
            }
        ],
    }
    assert fdl("libtorch", "pull", "not a reference", "--dry-run").exit_code == 2


def test_setup_that_activates_takes_no_source(fdl, machine) -> None:
    machine.gpus("6.1", "12.0")
    machine.install("builds/sm61-sm120", "2.14.1", "12.8", cubins=[61, 120])
    result = fdl("setup", "--dry-run", "--json")
    assert json.loads(result.stdout)["plan"]["action"] == "activate"
    assert _choice(result) == {"chosen": None, "offers": []}
