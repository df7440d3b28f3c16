"""The scaffolds side by side: floDl's ``fdl init`` (flodl-cli 0.5.3, its three modes) and
fdl's ``fdl init --template flodl`` (mounted, baked, native), as the tables in
docs/reference-parity.md ("Scaffold") show them; ``FDL_UPDATE_GOLDEN=1`` rewrites them.

floDl's ``init`` asks crates.io for floDl's newest release; the sandbox's ``curl`` fails
as offline, so its ``Cargo.toml`` takes the git dependency it falls back to.

Cost: about 5 s (three fdl inits; floDl's CLI takes milliseconds). floDl's CLI comes from
``scripts/setup-reference-cli.sh`` (skips locally, fails in CI without it).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.support.reference_cli import Sandbox
from tests.support.reference_scaffold import MODES, scaffold_tables

DOC = Path(__file__).resolve().parents[2] / "docs" / "reference-parity.md"
BEGIN, END = "<!-- scaffold tables: begin -->", "<!-- scaffold tables: end -->"


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Path], dict[str, Path]]:
    root = tmp_path_factory.mktemp("scaffolds")
    sandbox = Sandbox(root / "sandbox")
    ref: dict[str, Path] = {}
    ours: dict[str, Path] = {}
    for mode, (flag, our_mode) in MODES.items():
        got = sandbox.reference(["init", f"ref-{mode}", *([flag] if flag else [])], root)
        assert got.code == 0, got.output
        ref[mode] = root / f"ref-{mode}"
        args = ["init", f"ours-{mode}", "--template", "flodl", "--mode", our_mode, "-y"]
        got = sandbox.ours([*args, "--gpus", "none"], root)
        assert got.code == 0, got.output
        ours[mode] = root / f"ours-{mode}"
    # floDl's init installs itself into ~/.local/bin without a terminal: the sandbox's HOME
    assert (sandbox.home / ".local" / "bin" / "fdl").is_file()
    assert "crates.io/api/v1/crates/flodl" in (sandbox.bin / "curl.log").read_text()
    return ref, ours


def test_docs_show_both_scaffolds(both: tuple[dict[str, Path], dict[str, Path]]) -> None:
    tables = scaffold_tables(*both)
    text = DOC.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), re.S)
    match = pattern.search(text)
    assert match is not None, f"{DOC} lacks the markers {BEGIN} ... {END}"
    if os.environ.get("FDL_UPDATE_GOLDEN") == "1":
        DOC.write_text(text[: match.start(1)] + tables + text[match.end(1) :], encoding="utf-8")
        return
    assert match.group(1) == tables, "rewrite with FDL_UPDATE_GOLDEN=1 and review the diff"


def test_every_file_of_flodls_scaffold_has_a_counterpart_but_its_bootstrap(
    both: tuple[dict[str, Path], dict[str, Path]],
) -> None:
    """What floDl's scaffold has that fdl's lacks: only the ``fdl`` bootstrap script
    (fdl is installed with pipx, not downloaded by the project)."""
    from tests.support.reference_scaffold import COUNTERPARTS

    ref, ours = both
    for mode in MODES:
        theirs = {p.relative_to(ref[mode]).as_posix() for p in ref[mode].rglob("*") if p.is_file()}
        missing = {n for n in theirs if not (ours[mode] / COUNTERPARTS.get(n, n)).is_file()}
        assert missing == {"fdl"}, mode
