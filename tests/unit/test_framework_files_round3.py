"""The project's framework files, written by an attacker or a careless user (issue "Nothing
lost, leaked or injected, round 3", point 8): deep TOML, a path dependency with a NUL or a
link loop, a C++ standard of 5000 digits, `toolchain = "x"`, inputs that made a regex take
quadratic time, and a rust-toolchain.toml that is a FIFO or a link to /dev/zero. Each was
exit 70, a hang, or memory filled; each is now a manifest error at its file (or a diagnose
error) within its deadline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fdl.diagnose._project import toolchain_pin_checks
from fdl.errors import ManifestError
from fdl.libtorch._framework_files import detect_framework
from fdl.system import rust_toolchain_file_problem
from tests.support.cpu_view import REPO

CARGO = '[package]\nname = "x"\nversion = "0.1.0"\n\n[dependencies]\n'
DEEP = "[" * 100_000 + "]" * 100_000


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("files", "said"),
    [
        ({"Cargo.toml": CARGO + 'flodl = "=0.5.3"\n', "Cargo.lock": f"a = {DEEP}\n"}, "nested"),
        ({"Cargo.toml": CARGO + f"x = {DEEP}\n"}, "nested too deeply"),
        ({"Cargo.toml": CARGO + 'flodl = { path = "x\\u0000y" }\n'}, "embedded null byte"),
        (
            {
                "CMakeLists.txt": "find_package(Torch 2.10 EXACT)\nset(CMAKE_CXX_STANDARD "
                + "9" * 5000
                + ")\n"
            },
            "is no C++ standard",
        ),
    ],
    ids=["deep-lock", "deep-cargo-toml", "nul-path", "cxx-5000-digits"],
)
def test_a_hostile_framework_file_is_a_manifest_error_at_its_file(
    tmp_path: Path, files: dict[str, str], said: str
) -> None:
    project = _project(tmp_path, files)
    with pytest.raises(ManifestError) as refused:
        detect_framework(project)
    assert said in refused.value.message
    assert refused.value.location is not None and refused.value.hint


def test_a_path_dependency_through_a_link_loop_is_refused_at_its_line(tmp_path: Path) -> None:
    project = _project(tmp_path, {"Cargo.toml": CARGO + 'flodl = { path = "loop" }\n'})
    (project / "loop").symlink_to("loop")
    with pytest.raises(ManifestError, match="symbolic link loop") as refused:
        detect_framework(project)
    assert str(refused.value.location) == "Cargo.toml:6:1"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('toolchain = "x"\n', "`toolchain` is str, not a table"),
        ("a = " + "[" * 30_000 + "]" * 30_000 + "\n", "nested too deeply"),
    ],
)
def test_a_toolchain_file_of_another_shape_is_a_diagnose_error(
    tmp_path: Path, text: str, said: str
) -> None:
    (tmp_path / "rust-toolchain.toml").write_text(text)
    (check,) = toolchain_pin_checks(tmp_path, {"train": "--default-toolchain 1.95.0"})
    assert said in check.message and check.severity.name == "ERROR"


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_rustup_is_not_run_where_its_toolchain_file_would_block_or_fill_memory(
    tmp_path: Path, kind: str
) -> None:
    nested = tmp_path / "crate"
    nested.mkdir()
    toolchain = tmp_path / "rust-toolchain.toml"
    if kind == "fifo":
        os.mkfifo(toolchain)
    else:
        toolchain.symlink_to("/dev/zero")
    problem = rust_toolchain_file_problem(nested)  # rustup looks in the ancestors too
    assert problem is not None and str(toolchain) in problem
    assert ("a FIFO" if kind == "fifo" else "a device") in problem
    (check,) = toolchain_pin_checks(tmp_path, {})
    assert check.severity.name == "ERROR"


def test_a_plain_toolchain_file_lets_rustup_run(tmp_path: Path) -> None:
    (tmp_path / "rust-toolchain.toml").write_text('[toolchain]\nchannel = "1.95.0"\n')
    assert rust_toolchain_file_problem(tmp_path) is None


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "text"),
    [
        # 4 MiB of unclosed calls: most of an hour with the unbounded `[^)]*`.
        ("CMakeLists.txt", "find_package(Torch REQUIRED)\n" + "target_compile_features(" * 170_000),
        # 60k blank lines before the dependency: over 20 s with `^\s*` (it spans lines).
        (
            "Cargo.toml",
            CARGO.replace("\n[dependencies]\n", "")
            + "\n" * 60_000
            + 'dependencies = { flodl = "=0.5.3" }\n',
        ),
    ],
    ids=["cmake-unclosed-calls", "cargo-blank-lines"],
)
def test_inputs_that_made_a_regex_quadratic_end_within_their_deadline(
    tmp_path: Path, name: str, text: str
) -> None:
    (tmp_path / "fdl.yml").write_text("description: x\n")
    (tmp_path / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FDL")}
    done = subprocess.run(
        [sys.executable, "-m", "fdl", "libtorch", "download", "--dry-run", "--cpu"],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(REPO), "FDL_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=120,  # a deadline, not a measurement: the old code ran for minutes
        check=False,
    )
    assert done.returncode == 0, done.stderr


# --- the framework files' fuzzer: whatever the files hold, a manifest error or an answer ---

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_PIECES = st.sampled_from(
    [
        "[package]\n", 'name = "x"\n', 'rust-version = "1.85"\n', "[dependencies]\n",
        'flodl = "=0.5.3"\n', 'tch = "0.23.0"\n', 'flodl = { path = "../x" }\n',
        "[[package]]\n", 'name = "flodl"\n', 'version = "0.5.3"\n', 'version = "9.9.9"\n',
        "find_package(Torch 2.10 EXACT)\n", "set(CMAKE_CXX_STANDARD 17)\n",
        "target_compile_features(", "cxx_std_20", ")", "[", "]", "{", "}", "=", '"', "\n",
        "\x00", "\ufeff", "\\u0000", "a = ", "[toolchain]\n", 'channel = "1.95.0"\n',
    ]
)  # fmt: skip


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.sampled_from(["Cargo.toml", "Cargo.lock", "CMakeLists.txt", "rust-toolchain.toml"]),
    st.lists(_PIECES, max_size=40).map("".join),
)
def test_any_framework_file_ends_in_an_answer_or_a_manifest_error(
    tmp_path: Path, name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    try:
        detect_framework(tmp_path)
    except ManifestError as refused:
        assert refused.hint and refused.location is not None
    checks = toolchain_pin_checks(tmp_path, {"train": "--default-toolchain 1.95.0"})
    assert all(check.message for check in checks)
    path.unlink()
