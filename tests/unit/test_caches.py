"""fdl's caches: listed with their size, cleaned by name, nothing else touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fdl.errors import UsageError
from fdl.libtorch import ImageOwner, clean_caches, list_caches
from fdl.paths import CACHE_TAG, PROJECT_LABEL, USER_LABEL, Context, own_cache_dir, owner_labels
from tests.support.fakes import FakeEngine


def test_list_and_clean_only_fdls_caches(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    own_cache_dir(cache / "wheels")
    (cache / "wheels" / "torch.whl").write_bytes(b"x" * 5000)
    (cache / "mine.txt").write_text("not a cache of fdl's\n")
    context = Context(tmp_path / "project", project=True)
    (own_cache_dir(context.libtorch_dir / ".build-cache") / "venv").mkdir()
    (context.libtorch_dir / "precompiled" / "cpu" / "lib").mkdir(parents=True)
    engine = FakeEngine()
    engine.add_image("fdl-libtorch:proj-precompiled-cpu", size=1000, labels=owner_labels())
    engine.add_image("fdl-libtorch-builder:sm120-abc", size=2000, labels=owner_labels())
    engine.add_image("debian:bookworm", size=99)
    owner = ImageOwner(every_project=True)
    environ = {"FDL_CACHE_DIR": str(cache)}
    entries = {e.name: e for e in list_caches(context, environ, engine=engine, owner=owner)}
    assert entries["wheels"].size >= 5000 and entries["downloads"].size == 0
    assert entries["images"].images == (
        "fdl-libtorch-builder:sm120-abc",
        "fdl-libtorch:proj-precompiled-cpu",
    )
    assert entries["images"].size == 3000
    removed = clean_caches(list(entries.values()), ["wheels", "images"], engine=engine)
    assert [e.name for e in removed] == ["wheels", "images"]
    assert not (cache / "wheels").exists() and (cache / "mine.txt").is_file()
    assert (context.libtorch_dir / ".build-cache").is_dir()  # not asked for
    assert (context.libtorch_dir / "precompiled" / "cpu" / "lib").is_dir()  # never a cache
    assert engine.image_exists("debian:bookworm")
    with pytest.raises(UsageError, match="no cache called 'variants'"):
        clean_caches(list(entries.values()), ["variants"])


def test_the_cli_asks_or_needs_yes_and_has_a_dry_run(run_fdl, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    own_cache_dir(cache / "wheels")
    (cache / "wheels" / "torch.whl").write_bytes(b"x" * 4096)
    env = {"FDL_CACHE_DIR": str(cache), "FDL_HOME": str(tmp_path / "home")}
    dry = run_fdl(["cache", "clean", "wheels", "--dry-run"], cwd=tmp_path, env=env)
    assert dry.exit_code == 0 and "[dry-run] would delete wheels" in dry.stdout
    asked = run_fdl(["cache", "clean", "wheels"], cwd=tmp_path, env=env)
    assert asked.exit_code == 2 and "--yes" in asked.stderr
    assert (cache / "wheels" / "torch.whl").is_file()
    done = run_fdl(["cache", "clean", "wheels", "--yes"], cwd=tmp_path, env=env)
    assert done.exit_code == 0 and "freed" in done.stderr
    assert not (cache / "wheels").exists()
    bad = run_fdl(["cache", "clean", "everything"], cwd=tmp_path, env=env)
    assert bad.exit_code == 2 and "no cache called 'everything'" in bad.stderr


def test_a_directory_fdl_did_not_make_is_never_cleaned(run_fdl, tmp_path: Path) -> None:
    """FDL_CACHE_DIR pointed at a home directory: `fdl cache clean --yes` deleted its
    libtorch/ and wheels/ (the user's own), and the dry-run said it would."""
    home = tmp_path / "me"
    (home / "libtorch").mkdir(parents=True)
    (home / "libtorch" / "notes.txt").write_text("three weeks of results\n")
    own_cache_dir(home / "wheels")
    (home / "wheels" / "torch.whl").write_bytes(b"x" * 4096)
    (home / "smoke").mkdir()  # empty: nothing to lose, nothing to refuse
    env = {"FDL_CACHE_DIR": str(home), "FDL_HOME": str(tmp_path / "fdl-home")}
    for extra in (["--dry-run"], ["--yes"]):
        result = run_fdl(["cache", "clean", *extra], cwd=tmp_path, env=env)
        assert result.exit_code == 2, result.output
        assert f"fdl did not make downloads ({home / 'libtorch'})" in result.stderr
        assert f"no {CACHE_TAG} of fdl's" in result.stderr and "FDL_CACHE_DIR" in result.stderr
    assert (home / "libtorch" / "notes.txt").is_file() and (home / "wheels").is_dir()
    listed = run_fdl(["cache", "list", "--json"], cwd=tmp_path, env=env)
    owned = {entry["name"]: entry["owned"] for entry in json.loads(listed.stdout)}
    assert owned["downloads"] is False and owned["wheels"] is True
    # the caches fdl made are still cleaned when the foreign one is left out
    done = run_fdl(["cache", "clean", "wheels", "--yes"], cwd=tmp_path, env=env)
    assert done.exit_code == 0, done.output
    assert not (home / "wheels").exists() and (home / "libtorch" / "notes.txt").is_file()


def test_a_cache_dir_fdl_makes_is_tagged_and_an_existing_one_is_not(tmp_path: Path) -> None:
    made = own_cache_dir(tmp_path / "a" / "cache")
    assert (made / CACHE_TAG).read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    (tmp_path / "mine").mkdir()
    own_cache_dir(tmp_path / "mine")
    assert not (tmp_path / "mine" / CACHE_TAG).exists()


def test_images_of_other_projects_and_users_are_never_cleaned(tmp_path: Path) -> None:
    """A shared engine: only this project's images go, or with every_project this user's."""
    project = tmp_path / "proj"
    project.mkdir()
    context = Context(project, project=True)
    engine = FakeEngine()
    mine = owner_labels(project)
    engine.add_image("fdl-libtorch:precompiled-cpu-0123456789abcdef", size=10, labels=mine)
    engine.add_image("fdl-libtorch:proj-precompiled-cpu", size=10, labels=owner_labels(tmp_path))
    decoys = {  # another project of this user, another user, an image fdl did not label
        "fdl-libtorch:other-precompiled-cpu": owner_labels(tmp_path / "other"),
        "fdl-libtorch:precompiled-cu130-fedcba9876543210": owner_labels(tmp_path / "other"),
        "fdl-libtorch:proj-precompiled-cu128": {**mine, USER_LABEL: "not-me"},
        "fdl-libtorch:precompiled-cu126-00112233aabbccdd": {PROJECT_LABEL: str(project)},
    }
    for ref, labels in decoys.items():
        engine.add_image(ref, size=1000, labels=labels)
    owner = ImageOwner(project_dir=project, project="proj")
    entries = {e.name: e for e in list_caches(context, {}, engine=engine, owner=owner)}
    assert entries["images"].images == (
        "fdl-libtorch:precompiled-cpu-0123456789abcdef",
        "fdl-libtorch:proj-precompiled-cpu",
    )
    clean_caches(list(entries.values()), ["images"], engine=engine)
    assert all(engine.image_exists(ref) for ref in decoys)
    assert not engine.image_exists("fdl-libtorch:proj-precompiled-cpu")
    # Outside the project (no owner): none; for this user: the other project's too.
    unowned = next(e for e in list_caches(context, {}, engine=engine) if e.name == "images")
    assert unowned.images == ()
    everyone = ImageOwner(every_project=True)
    entries = {e.name: e for e in list_caches(context, {}, engine=engine, owner=everyone)}
    assert set(entries["images"].images) == set(decoys) - {
        "fdl-libtorch:proj-precompiled-cu128",
        "fdl-libtorch:precompiled-cu126-00112233aabbccdd",
    }


def test_images_fdl_builds_carry_its_owner_labels(tmp_path: Path) -> None:
    from fdl.images import plan_images
    from fdl.images._build import ensure_libtorch_image
    from fdl.manifest import load_manifest
    from tests.support.images import make_project, make_variant

    project = make_project(tmp_path, "images:\n  train: {}\n")
    make_variant(project)
    spec = plan_images(load_manifest(project))[0]
    engine = FakeEngine()
    assert spec.variant is not None
    ensure_libtorch_image(spec.variant, engine, "0", project_dir=project)
    assert engine.builds[0].labels == owner_labels(project)


def test_a_clean_stopped_half_way_keeps_the_tag(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Ctrl-C during the delete: the tag goes last, so the next clean still may."""
    import shutil

    cache = tmp_path / "cache"
    for name in ("a", "b", "z"):
        (own_cache_dir(cache / "wheels") / name).mkdir()
    real = shutil.rmtree
    calls = []

    def interrupted(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", interrupted)
    context = Context(tmp_path / "project", project=True)
    entries = list_caches(context, {"FDL_CACHE_DIR": str(cache)})
    with pytest.raises(KeyboardInterrupt):
        clean_caches(entries, ["wheels"])
    assert (cache / "wheels" / CACHE_TAG).is_file()
    monkeypatch.setattr(shutil, "rmtree", real)
    clean_caches(list_caches(context, {"FDL_CACHE_DIR": str(cache)}), ["wheels"])
    assert not (cache / "wheels").exists()


def test_the_cli_cleans_this_projects_images_or_with_a_flag_this_users(  # type: ignore[no-untyped-def]
    run_fdl, tmp_path: Path
) -> None:
    from fdl.engine import set_default_engine

    project = tmp_path / "proj"
    project.mkdir()
    (project / "fdl.yml").write_text("description: x\n")
    engine = FakeEngine()
    engine.add_image("fdl-libtorch:proj-precompiled-cpu", labels=owner_labels(project))
    engine.add_image("fdl-libtorch:other-precompiled-cpu", labels=owner_labels(tmp_path / "o"))
    set_default_engine(engine)
    env = {"FDL_CACHE_DIR": str(tmp_path / "cache"), "FDL_HOME": str(tmp_path / "home")}
    done = run_fdl(["cache", "clean", "images", "--yes"], cwd=project, env=env)
    assert done.exit_code == 0, done.output
    assert engine.removed == ["fdl-libtorch:proj-precompiled-cpu"]
    done = run_fdl(["cache", "clean", "images", "--yes", "--all-projects"], cwd=project, env=env)
    assert done.exit_code == 0, done.output
    assert engine.removed[1:] == ["fdl-libtorch:other-precompiled-cpu"]
