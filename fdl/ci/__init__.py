"""CI image builds: the manifest's image matrix (profiles x libtorch variants) as a
bake file and a GitHub Actions workflow, a drift check, and local builds of the matrix.

Plan, then execute::

    from fdl.ci import find_drift, generated_files, plan_matrix

    matrix = plan_matrix(manifest)                 # pure: cells, tags, args, caches
    files = generated_files(matrix)                # deterministic text
    drift = find_drift(repo_root, files, owned)    # what differs from the disk
"""

from __future__ import annotations

from fdl.ci._check import Drift, FileChange, find_drift, write_files
from fdl.ci._config import repository_root
from fdl.ci._fdl import FIX, FdlInstall, derived_install
from fdl.ci._local import LocalBuild, LocalStep, bake_files_current, build_matrix, local_variants
from fdl.ci._matrix import Cell, CiConfig, Matrix, MatrixVariant, bake_path
from fdl.ci._plan import plan_matrix
from fdl.ci._pushed import PushedFinding, find_pushed, pushed_entries
from fdl.ci._render import GeneratedFile, dockerfiles_dir, generated_files, render_bake
from fdl.ci._workflow import render_workflow

__all__ = [
    "FIX",
    "Cell",
    "CiConfig",
    "Drift",
    "FdlInstall",
    "FileChange",
    "GeneratedFile",
    "LocalBuild",
    "LocalStep",
    "Matrix",
    "MatrixVariant",
    "PushedFinding",
    "bake_files_current",
    "bake_path",
    "build_matrix",
    "derived_install",
    "dockerfiles_dir",
    "find_drift",
    "find_pushed",
    "generated_files",
    "local_variants",
    "plan_matrix",
    "pushed_entries",
    "render_bake",
    "render_workflow",
    "repository_root",
    "write_files",
]
