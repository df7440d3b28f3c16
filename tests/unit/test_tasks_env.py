"""The active libtorch variant is exported to commands (host and containers)."""

from __future__ import annotations

from pathlib import Path

from fdl.tasks._env import EnvChange, apply_changes, export_line
from fdl.tasks._libtorch_env import (
    active_libtorch,
    compose_variables,
    read_variant,
    variant_exports,
)
from tests.support.tasks_helpers import fake_libtorch, write


def project(tmp_path: Path) -> Path:
    return write(tmp_path, {"fdl.yml": "commands: {}\n"})


def test_active_variant_and_its_metadata(tmp_path: Path) -> None:
    variant = fake_libtorch(project(tmp_path))
    state = active_libtorch(tmp_path, {})
    assert state.active is not None
    assert state.active.path == variant
    assert (state.active.name, state.active.cuda, state.active.torch) == (
        "precompiled/cu128",
        "12.8",
        "2.10.0",
    )
    assert state.active.archs == ("7.0", "8.0")


def test_exports_for_a_cuda_variant(tmp_path: Path) -> None:
    fake_libtorch(project(tmp_path))
    state = active_libtorch(tmp_path, {})
    assert state.active is not None
    env = apply_changes(
        {"LD_LIBRARY_PATH": "/usr/lib", "PATH": "/bin"},
        variant_exports("/opt/lt", state.active),
    )
    assert env["LIBTORCH"] == env["LIBTORCH_PATH"] == "/opt/lt"
    assert env["LD_LIBRARY_PATH"] == "/opt/lt/lib:/usr/lib"
    assert env["CMAKE_PREFIX_PATH"] == "/opt/lt"
    assert env["Torch_DIR"] == "/opt/lt/share/cmake/Torch"
    assert (env["CUDA_VERSION"], env["CUDA_TAG"]) == ("12.8.0", "12.8")
    assert env["PATH"] == "/bin"


def test_cpu_variant_has_no_cuda_variables(tmp_path: Path) -> None:
    fake_libtorch(project(tmp_path), "precompiled/cpu", cuda=None)
    state = active_libtorch(tmp_path, {})
    assert state.active is not None
    names = {change.name for change in variant_exports("/x", state.active)}
    assert "CUDA_VERSION" not in names and "LIBTORCH" in names


def test_compose_variables_give_host_paths(tmp_path: Path) -> None:
    variant = fake_libtorch(project(tmp_path), "builds/sm61-sm120", cuda="13.0")
    values = {c.name: c.value for c in compose_variables(active_libtorch(tmp_path, {}))}
    assert values == {
        "LIBTORCH_HOST_PATH": str(variant),
        "LIBTORCH_CUDA_PATH": str(variant),
        "LIBTORCH_CPU_PATH": str(tmp_path / "libtorch" / "precompiled" / "cpu"),
        "CUDA_VERSION": "13.0.0",
        "CUDA_TAG": "13.0",
    }


def test_no_active_variant_exports_nothing(tmp_path: Path) -> None:
    state = active_libtorch(project(tmp_path), {})
    assert state.active is None and state.problem is None


def test_active_pointing_outside_is_refused(tmp_path: Path) -> None:
    project(tmp_path)
    (tmp_path / "outside" / "lib").mkdir(parents=True)
    (tmp_path / "libtorch").mkdir()
    (tmp_path / "libtorch" / ".active").write_text("../outside\n")
    state = active_libtorch(tmp_path, {})
    assert state.active is None
    assert state.problem is not None and "not a variant path" in state.problem


def test_active_naming_a_missing_variant_is_a_problem(tmp_path: Path) -> None:
    project(tmp_path)
    (tmp_path / "libtorch").mkdir()
    (tmp_path / "libtorch" / ".active").write_text("precompiled/cu126\n")
    state = active_libtorch(tmp_path, {})
    assert state.active is None
    assert state.problem is not None and "lib is missing" in state.problem


def test_variant_without_metadata(tmp_path: Path) -> None:
    (tmp_path / "v" / "lib").mkdir(parents=True)
    variant = read_variant(tmp_path, "v")
    assert (variant.cuda, variant.torch, variant.archs) == (None, None, ())


def test_prepend_keeps_the_existing_list_once() -> None:
    change = EnvChange("LD_LIBRARY_PATH", "/a/lib", prepend=True)
    assert apply_changes({}, [change])["LD_LIBRARY_PATH"] == "/a/lib"
    assert (
        apply_changes({"LD_LIBRARY_PATH": "/a/lib:/b"}, [change])["LD_LIBRARY_PATH"] == "/a/lib:/b"
    )
    assert (
        export_line(change)
        == 'export LD_LIBRARY_PATH=/a/lib"${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"'
    )
    assert export_line(EnvChange("X", "a b")) == "export X='a b'"


def test_the_cuda_path_is_exported_only_for_a_cuda_variant(tmp_path: Path) -> None:
    root = project(tmp_path)
    variant = fake_libtorch(root, "precompiled/cu126", cuda="12.6")
    values = {c.name: c.value for c in compose_variables(active_libtorch(tmp_path, {}))}
    assert values["LIBTORCH_CUDA_PATH"] == str(variant)
    fake_libtorch(root, "precompiled/cpu", cuda=None)
    names = {c.name for c in compose_variables(active_libtorch(tmp_path, {}))}
    assert "LIBTORCH_CUDA_PATH" not in names and "LIBTORCH_HOST_PATH" in names
