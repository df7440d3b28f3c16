"""Manifest engine scaling: load + merge + explain for 1k, 10k, 100k leaves over 4 layers.

Each manifest has a base, an inherited file, an overlay and an env-var layer;
the overlay overrides a tenth of the leaves. Growth should be linear; target:
10k leaves explained in under 1 s.

    python bench/manifest_scale.py [--sizes 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table

from fdl.manifest import load_manifest
from fdl.manifest.render import render_explain, render_show


def write_layers(root: Path, leaves: int) -> dict[str, str]:
    """Write base/inherited/overlay files with ``leaves`` leaves; return env vars."""
    groups = max(1, leaves // 4)

    def body(prefix: str, step: int) -> str:
        lines = ["commands:"]
        for g in range(0, groups, step):
            lines.append(f"  cmd{g}:")
            lines.append(f"    description: {prefix} command {g}")
            lines.append(f"    run: make target{g} --flag {prefix}")
            lines.append(f"    append: --{prefix}")
            lines.append(f"    docker: {prefix}-service")
        return "\n".join(lines) + "\n"

    (root / "common.yml").write_text("description: common\n" + body("inherited", 2))
    (root / "fdl.yml").write_text("inherit-from: common.yml\ndescription: base\n" + body("base", 1))
    (root / "fdl.ci.yml").write_text(body("overlay", 10))
    return {"FDL__DESCRIPTION": "from env", "FDL__COMMANDS__CMD0__RUN": "make env"}


def measure(leaves: int) -> tuple[int, float, float, float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        environ = write_layers(root, leaves)
        start = time.perf_counter()
        manifest = load_manifest(root, env="ci", environ=environ)
        loaded = time.perf_counter()
        shown = render_show(manifest.tree)
        rendered = time.perf_counter()
        explanations = manifest.explain()
        text = render_explain(explanations)
        explained = time.perf_counter()
        assert shown and text
        count = len(explanations)
    return count, loaded - start, rendered - loaded, explained - rendered, explained - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    args = parser.parse_args()
    rows = []
    first: tuple[int, float] | None = None
    for size in (int(s) for s in args.sizes.split(",")):
        leaves, load, show, explain, total = measure(size)
        if first is None:
            first = (leaves, total)
        per_leaf_us = total / leaves * 1e6
        rows.append(
            (
                f"{leaves:,}",
                f"{load * 1000:.0f}",
                f"{show * 1000:.0f}",
                f"{explain * 1000:.0f}",
                f"{total * 1000:.0f}",
                f"{per_leaf_us:.1f}",
            )
        )
    print("4 layers: inherited + base + overlay (10% overridden) + env vars")
    print_table(
        ["leaves", "load+merge+validate ms", "show ms", "explain ms", "total ms", "us/leaf"], rows
    )


if __name__ == "__main__":
    main()
