"""Writing generated files and finding drift: missing, changed and stale files."""

from __future__ import annotations

from pathlib import Path

from fdl.ci import GeneratedFile, find_drift, write_files

FILES = [
    GeneratedFile("ci/docker-bake.hcl", "target {}\n"),
    GeneratedFile("ci/dockerfiles/train-cpu.Dockerfile", "FROM x\n"),
]
OWNED = ["ci/dockerfiles"]


def test_a_fresh_write_has_no_drift(tmp_path: Path) -> None:
    changes = write_files(tmp_path, FILES, OWNED)
    assert [(c.path, c.state) for c in changes] == [
        ("ci/docker-bake.hcl", "missing"),
        ("ci/dockerfiles/train-cpu.Dockerfile", "missing"),
    ]
    drift = find_drift(tmp_path, FILES, OWNED)
    assert drift.ok and drift.checked == 2
    assert write_files(tmp_path, FILES, OWNED) == []


def test_a_changed_file_shows_a_unified_diff(tmp_path: Path) -> None:
    write_files(tmp_path, FILES, OWNED)
    (tmp_path / "ci/docker-bake.hcl").write_text("target { old }\n", encoding="utf-8")
    drift = find_drift(tmp_path, FILES, OWNED)
    assert not drift.ok
    assert [(c.path, c.state) for c in drift.changes] == [("ci/docker-bake.hcl", "changed")]
    assert drift.diff.splitlines() == [
        "--- a/ci/docker-bake.hcl",
        "+++ b/ci/docker-bake.hcl",
        "@@ -1 +1 @@",
        "-target { old }",
        "+target {}",
    ]


def test_missing_and_stale_files_are_drift(tmp_path: Path) -> None:
    write_files(tmp_path, FILES, OWNED)
    (tmp_path / "ci/dockerfiles/train-cpu.Dockerfile").unlink()
    (tmp_path / "ci/dockerfiles/train-cu126.Dockerfile").write_text("FROM y\n", encoding="utf-8")
    (tmp_path / "ci/dockerfiles/notes.md").write_text("mine\n", encoding="utf-8")
    drift = find_drift(tmp_path, FILES, OWNED)
    assert [(c.path, c.state) for c in drift.changes] == [
        ("ci/dockerfiles/train-cpu.Dockerfile", "missing"),
        ("ci/dockerfiles/train-cu126.Dockerfile", "stale"),
    ]
    assert "+++ /dev/null" in drift.diff and "--- /dev/null" in drift.diff
    write_files(tmp_path, FILES, OWNED)
    assert not (tmp_path / "ci/dockerfiles/train-cu126.Dockerfile").exists()
    assert (tmp_path / "ci/dockerfiles/notes.md").exists()  # not fdl's: left alone
    assert find_drift(tmp_path, FILES, OWNED).ok


def test_a_file_without_final_newline_still_diffs_line_by_line(tmp_path: Path) -> None:
    write_files(tmp_path, FILES, OWNED)
    (tmp_path / "ci/docker-bake.hcl").write_text("target {}", encoding="utf-8")
    diff = find_drift(tmp_path, FILES, OWNED).diff
    assert all(line for line in diff.split("\n")[:-1])
    assert diff.endswith("\n")
