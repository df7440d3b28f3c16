"""An NCCL that fdl nccl build installed is what project commands load and fdl probe reads."""

from __future__ import annotations

import json
from pathlib import Path

from fdl.diagnose.probe import find_nccl
from fdl.nccl import built_for
from fdl.tasks._env import apply_changes
from fdl.tasks._libtorch_env import active_libtorch, nccl_exports, variant_exports
from tests.support.fake_nccl import fake_libnccl
from tests.support.tasks_helpers import fake_libtorch, write


def install_build(root: Path, name: str, variant: str, codes: list[str]) -> Path:
    """What fdl nccl build leaves: lib/ with NCCL's links, include/, nccl.json."""
    build = root / "libtorch" / "nccl" / "builds" / name
    (build / "lib").mkdir(parents=True)
    (build / "include").mkdir()
    (build / "lib" / "libnccl.so.2.27.5").write_bytes(fake_libnccl(codes))
    (build / "lib" / "libnccl.so.2").symlink_to("libnccl.so.2.27.5")
    record = {"tag": "v2.27.5-1", "version": "2.27.5", "archs": codes, "variant": variant}
    (build / "nccl.json").write_text(json.dumps(record), encoding="utf-8")
    return build


def test_commands_preload_the_build_made_for_the_active_variant(tmp_path: Path) -> None:
    root = write(tmp_path, {"fdl.yml": "commands: {}\n"})
    fake_libtorch(root)
    build = install_build(root, "v2.27.5-sm61-sm120", "precompiled/cu128", ["sm_61", "sm_120"])
    state = active_libtorch(root, {})
    assert state.active is not None
    variant = str(state.active.path)
    env = apply_changes(
        {"LD_LIBRARY_PATH": "/usr/lib", "LD_PRELOAD": "libfoo.so"},
        [*variant_exports(variant, state.active), *nccl_exports(state)],
    )
    assert env["LD_PRELOAD"] == f"{build}/lib/libnccl.so.2:libfoo.so"
    assert env["LD_LIBRARY_PATH"] == f"{build}/lib:{variant}/lib:/usr/lib"


def test_a_build_for_another_variant_or_half_installed_is_not_loaded(tmp_path: Path) -> None:
    root = write(tmp_path, {"fdl.yml": "commands: {}\n"})
    fake_libtorch(root)
    install_build(root, "v2.27.5-sm61", "precompiled/cu126", ["sm_61"])
    partial = root / "libtorch" / "nccl" / "builds" / "v2.27.5-sm120"
    (partial / "lib").mkdir(parents=True)  # no library, no record: an interrupted copy
    state = active_libtorch(root, {})
    assert nccl_exports(state) == []
    assert built_for(root / "libtorch", "precompiled/cu128") is None
    assert built_for(root / "libtorch", "precompiled/cu126") is not None


def test_probe_reads_the_built_nccl_first(tmp_path: Path) -> None:
    variant = fake_libtorch(tmp_path)
    (variant / "lib" / "libnccl.so.2").write_bytes(fake_libnccl(["sm_120"]))
    build = install_build(tmp_path, "v2.27.5-sm61-sm120", "precompiled/cu128", ["sm_61", "sm_120"])
    found = find_nccl(variant, {})
    assert [(Path(n.path), n.where) for n in found] == [
        (build / "lib" / "libnccl.so.2", "fdl nccl build"),
        (variant / "lib" / "libnccl.so.2", "variant"),
    ]
    assert found[0].cubins == ("sm_61", "sm_120")
