"""The wheel carries everything fdl reads at run time.

Builds the wheel, installs it into a fresh virtual environment and runs the
console script from another directory: assets come from the installed
package, never from this checkout.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent

pytestmark = [pytest.mark.slow, pytest.mark.network]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
        text=True,
    )
    [built] = out.glob("fdl-*.whl")
    return built


def test_wheel_contains_assets_and_data(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for kind in ("templates", "dockerfiles", "recipes"):
        source = REPO / kind
        for path in source.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                assert f"fdl/_assets/{kind}/{path.relative_to(source).as_posix()}" in names
    for path in (REPO / "fdl" / "data").rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            assert path.relative_to(REPO).as_posix() in names
    assert not any(name.startswith(("tests/", "bench/")) for name in names)


def test_installed_console_script_works_from_elsewhere(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert pip.returncode == 0, pip.stderr[-2000:]
    project = tmp_path / "elsewhere"
    project.mkdir()
    (project / "fdl.yml").write_text("description: from a wheel\ncommands:\n  hi: {run: echo hi}\n")
    fdl = str(venv / "bin" / "fdl")
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "NO_COLOR": "1"}
    version = subprocess.run(
        [fdl, "--version"], cwd=project, env=env, capture_output=True, text=True
    )
    assert version.returncode == 0 and version.stdout.startswith("fdl ")
    shown = subprocess.run(
        [fdl, "config", "show"], cwd=project, env=env, capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    assert "from a wheel" in shown.stdout
    probe = (
        "import fdl._assets as a, pathlib; "
        "paths = [a.asset_dir(k) for k in ('templates', 'dockerfiles', 'recipes')]; "
        "print(all('site-packages' in str(p) for p in paths))"
    )
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", probe],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert where.stdout.strip() == "True", where.stderr
    # `fdl init` renders its templates and the image templates from the installed package.
    made = subprocess.run(
        [fdl, "init", "made", "--template", "cpp", "--mode", "mounted", "--torch", "2.13.0"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    for name in ("CMakeLists.txt", "fdl.yml", "docker/dev.Dockerfile", "docker-compose.yml"):
        assert (tmp_path / "made" / name).is_file(), name
