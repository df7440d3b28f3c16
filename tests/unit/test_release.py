"""The release: one version (fdl/__init__.py, read by hatch), the changelog's newest release
is that version with an Unreleased section above it, and the wheel's metadata is complete
(scripts/test.sh builds it and runs twine check --strict)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import fdl

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
CHANGELOG = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")


def test_the_version_has_one_source() -> None:
    project = PYPROJECT["project"]
    assert "version" not in project and project["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["hatch"]["version"]["path"] == "fdl/__init__.py"
    assert re.fullmatch(r"\d+\.\d+\.\d+", fdl.__version__)


def test_the_changelog_names_this_version_as_its_newest_release() -> None:
    sections = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", CHANGELOG, re.MULTILINE)
    assert sections[0] == ("Unreleased", "")
    assert sections[1][0] == fdl.__version__ and sections[1][1]
    versions = [tuple(int(n) for n in v.split(".")) for v, _ in sections[1:]]
    assert versions == sorted(versions, reverse=True)  # newest first
    for version, _ in sections:  # each heading has its link at the foot
        assert re.search(rf"^\[{re.escape(version)}\]: https://", CHANGELOG, re.MULTILINE)


def test_the_wheel_metadata_is_complete() -> None:
    project = PYPROJECT["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (REPO / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    assert {"Homepage", "Documentation", "Repository", "Issues", "Changelog"} <= set(
        project["urls"]
    )
    # a classifier for every Python version from requires-python's floor up
    floor = int(re.fullmatch(r">=3\.(\d+)", project["requires-python"]).group(1))
    listed = {
        int(c.rsplit(".", 1)[1])
        for c in project["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    }
    assert min(listed) == floor and listed == set(range(floor, max(listed) + 1))
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]  # PEP 639
    dev = " ".join(project["optional-dependencies"]["dev"])
    assert re.search(r"\bbuild==\S+", dev) and re.search(r"\btwine==\S+", dev)
