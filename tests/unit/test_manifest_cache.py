"""The parse cache (fdl.manifest._parsed): a kept tree is the parsed tree, an edit is always
seen, secrets and odd entries never leave or break anything."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from fdl.errors import ManifestError
from fdl.manifest import _parsed as parsed
from fdl.manifest import load_manifest
from fdl.manifest._nodes import LayerKind, MapNode, Node, ScalarNode, SeqNode
from fdl.manifest._yaml import parse_yaml
from fdl.manifest.render import render_explain, render_show

REPO = Path(__file__).resolve().parent.parent.parent

MANIFEST = """\
description: demo   # a comment
commands:
  test:
    run: cargo test --release
    description: "quoted: text"
  bench: {run: 'cargo bench', docker: cuda}
numbers: [1, 0x1f, 0o17, 1.5e3, .inf, -.inf, .nan, ~, true, "12.10", 12.10]
multi: |
  line one
  line two
empty: {}
list: []
tagged: !append [a, b]
replaced: !replace {x: 1}
unicode: "héllo \\u2603"
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("FDL_CACHE_DIR", str(directory))
    monkeypatch.delenv("FDL_MANIFEST_CACHE", raising=False)
    return directory / "manifest"


def shape(node: Node | None) -> object:
    """Everything a tree holds, origins included, as comparable data."""
    if node is None:
        return None
    where = (node.origin.source, node.origin.line, node.origin.column, node.origin.layer)
    where += (node.origin.path, node.tag)
    if isinstance(node, ScalarNode):
        value = "nan" if node.value != node.value else node.value
        return ("scalar", where, type(node.value).__name__, value, node.raw)
    if isinstance(node, SeqNode):
        return ("seq", where, [shape(item) for item in node.items])
    assert isinstance(node, MapNode)
    keys = [(key, str(node.key_origin(key))) for key in node.entries]
    return ("map", where, keys, [shape(child) for child in node.entries.values()])


def parse_file(path: Path) -> Node | None:
    return parsed.cached_parse(path.read_text(), path.name, LayerKind.BASE, path)


def refuse_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object) -> None:
        raise AssertionError("parsed again: the kept tree was not used")

    monkeypatch.setattr(parsed, "_parse", fail)


def test_a_kept_tree_is_the_parsed_tree(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "fdl.yml"
    path.write_text(MANIFEST)
    fresh = parse_yaml(MANIFEST, "fdl.yml", LayerKind.BASE, path)
    first = parse_file(path)
    assert len(list(cache.glob("*.marshal"))) == 1
    refuse_parsing(monkeypatch)
    second = parse_file(path)
    assert shape(first) == shape(second) == shape(fresh)


@pytest.mark.parametrize(
    "project",
    sorted(p.parent for p in (REPO / "tests" / "fixtures").rglob("fdl.yml")),
    ids=lambda p: str(p.relative_to(REPO / "tests" / "fixtures")),
)
def test_a_project_read_from_kept_trees_shows_and_explains_the_same(
    project: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def views() -> tuple[str, str]:
        try:
            manifest = load_manifest(project, schema=False)
        except ManifestError as error:
            return "error", str(error)
        return render_show(manifest.tree), render_explain(manifest.explain())

    monkeypatch.setenv("FDL_MANIFEST_CACHE", "0")
    expected = views()
    monkeypatch.setenv("FDL_MANIFEST_CACHE", "1")
    assert views() == expected  # parsed, kept
    refuse_parsing(monkeypatch)
    if list(cache.glob("*.marshal")):
        assert views() == expected  # every file from the cache


def test_an_edit_of_the_same_size_and_time_is_seen(cache: Path, tmp_path: Path) -> None:
    path = tmp_path / "fdl.yml"
    path.write_text("a: 1\n")
    before = path.stat()
    assert parse_file(path).entries["a"].value == 1  # type: ignore[union-attr]
    path.write_text("a: 2\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert parse_file(path).entries["a"].value == 2  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "text",
    [
        "registry:\n  password: hunter2-very-secret\n",
        "api_token: hunter2-very-secret\n",
        "env:\n  HF: !secret hunter2-very-secret\n",
        "run: echo ghp_" + "a" * 36 + "\n",
        "url: https://user:hunter2-very-secret@example.com/x\n",
    ],
    ids=["secret key", "token key", "!secret", "token shape", "URL password"],
)
def test_a_tree_holding_a_secret_is_not_kept(cache: Path, tmp_path: Path, text: str) -> None:
    path = tmp_path / "fdl.yml"
    path.write_text(text)
    assert parse_file(path).entries  # type: ignore[union-attr]
    assert not list(cache.glob("*.marshal"))


def test_aliases_are_parsed_every_time_and_stay_right(cache: Path, tmp_path: Path) -> None:
    path = tmp_path / "fdl.yml"
    path.write_text("base: &b {run: make}\nother: *b\nmerged:\n  <<: *b\n  docker: cuda\n")
    for _ in range(2):
        tree = parse_file(path)
        assert isinstance(tree, MapNode)
        assert tree.plain()["merged"] == {"run": "make", "docker": "cuda"}
    assert not list(cache.glob("*.marshal"))


def test_a_syntax_error_is_reported_every_time_and_not_kept(cache: Path, tmp_path: Path) -> None:
    path = tmp_path / "fdl.yml"
    path.write_text("a: [1, 2\n")
    for _ in range(2):
        with pytest.raises(ManifestError) as caught:
            parse_file(path)
        assert caught.value.location is not None
    assert not list(cache.glob("*.marshal"))


def _entry(path: Path) -> Path:
    entry = parsed.entry_path(path, path.name)
    assert entry is not None
    return entry


@pytest.mark.parametrize(
    "plant",
    ["garbage", "truncated", "other-format", "fifo", "link to /dev/zero", "directory", "huge"],
)
def test_an_odd_entry_is_a_miss_never_a_hang_or_a_crash(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plant: str
) -> None:
    path = tmp_path / "fdl.yml"
    path.write_text("a: 1\n")
    parse_file(path)
    entry = _entry(path)
    good = entry.read_bytes()
    entry.unlink()
    if plant == "garbage":
        entry.write_bytes(b"\x00not marshal data" * 10)
    elif plant == "truncated":
        entry.write_bytes(good[: len(good) // 2])
    elif plant == "other-format":
        import marshal

        key = (99, "x", "fdl.yml", "base", str(path), "a: 1\n")
        entry.write_bytes(marshal.dumps((key, None)))
    elif plant == "fifo":
        os.mkfifo(entry)
    elif plant == "link to /dev/zero":
        entry.symlink_to("/dev/zero")
    elif plant == "directory":
        entry.mkdir()
    else:
        monkeypatch.setattr(parsed, "MAX_ENTRY_BYTES", len(good) - 1)
        entry.write_bytes(good)
    tree = parse_file(path)
    assert isinstance(tree, MapNode) and tree.plain() == {"a": 1}


@pytest.mark.parametrize(
    "depth", [1, 700], ids=["a wrong node", "nested deeper than Python recurses"]
)
def test_a_kept_tree_of_the_wrong_shape_is_parsed_again(
    cache: Path, tmp_path: Path, depth: int
) -> None:
    import marshal

    path = tmp_path / "fdl.yml"
    path.write_text("a: 1\n")
    parse_file(path)
    entry = _entry(path)
    kept = marshal.loads(entry.read_bytes())
    tree: object = ("x",)
    for _ in range(depth):
        tree = (1, 1, 1, None, (tree,))  # sequences inside sequences, ending in no node
    entry.write_bytes(marshal.dumps((kept[0], (2, 1, 1, None, (("a", 1, 1, tree),)))))
    tree = parse_file(path)
    assert isinstance(tree, MapNode) and tree.plain() == {"a": 1}


def test_entries_are_private_and_bounded(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parsed, "MAX_ENTRIES", 3)
    for number in range(6):
        path = tmp_path / f"p{number}" / "fdl.yml"
        path.parent.mkdir()
        path.write_text(f"a: {number}\n")
        parse_file(path)
    entries = list(cache.glob("*.marshal"))
    assert len(entries) == 3
    assert all(stat.S_IMODE(entry.stat().st_mode) == 0o600 for entry in entries)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert (cache / "CACHEDIR.TAG").is_file()


def test_the_cache_can_be_turned_off(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FDL_MANIFEST_CACHE", "0")
    path = tmp_path / "fdl.yml"
    path.write_text("a: 1\n")
    assert parse_file(path).entries["a"].value == 1  # type: ignore[union-attr]
    assert not cache.exists()


def test_an_unwritable_cache_only_means_no_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("FDL_CACHE_DIR", str(blocker))
    path = tmp_path / "fdl.yml"
    path.write_text("a: 1\n")
    tree = parse_file(path)
    assert isinstance(tree, MapNode) and tree.plain() == {"a": 1}


def test_nothing_is_kept_in_a_directory_that_is_not_fdls_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FDL_CACHE_DIR pointed at a directory of the user's: no entry written, none pruned."""
    mine = tmp_path / "mine"
    (mine / "manifest").mkdir(parents=True)
    keep = [mine / "manifest" / f"{number:08x}.marshal" for number in range(3)]
    for file in keep:
        file.write_text("the user's")
    monkeypatch.setenv("FDL_CACHE_DIR", str(mine))
    monkeypatch.setattr(parsed, "MAX_ENTRIES", 1)
    path = tmp_path / "fdl.yml"
    path.write_text("a: 1\n")
    parse_file(path)
    assert sorted(mine.rglob("*")) == sorted([mine / "manifest", *keep])


def test_a_linked_entry_directory_is_not_written_through(cache: Path, tmp_path: Path) -> None:
    from fdl.paths import own_cache_dir

    elsewhere = own_cache_dir(tmp_path / "elsewhere")  # even one that looks like fdl's
    cache.parent.mkdir(parents=True)
    cache.symlink_to(elsewhere)
    path = tmp_path / "fdl.yml"
    path.write_text("a: 1\n")
    parse_file(path)
    assert [p.name for p in elsewhere.iterdir()] == ["CACHEDIR.TAG"]  # nothing written


def test_pruning_leaves_files_of_other_names(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parsed, "MAX_ENTRIES", 1)
    path = tmp_path / "fdl.yml"
    path.write_text("a: 1\n")
    parse_file(path)
    other = cache / "notes.txt"
    other.write_text("kept")
    for number in range(3):
        extra = tmp_path / f"q{number}" / "fdl.yml"
        extra.parent.mkdir()
        extra.write_text(f"b: {number}\n")
        parse_file(extra)
    assert other.read_text() == "kept"
    assert len(list(cache.glob("*.marshal"))) == 1
