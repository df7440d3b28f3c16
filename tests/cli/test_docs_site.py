"""The manual (docs/, mkdocs.yml): a page for every built-in command, titled as the command,
every page in the navigation, and `mkdocs build --strict` refusing a broken link or a page
left out of it, naming the page (scripts/test.sh builds the real site)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fdl.cli._registry import BUILTINS

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"


def _nav_pages(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in _nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_pages(value)]
    return []


def _config() -> dict:
    return yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))


def test_every_built_in_command_has_its_page() -> None:
    nav = _nav_pages(_config()["nav"])
    for name in BUILTINS:
        page = DOCS / "commands" / f"{name}.md"
        assert page.is_file(), f"no page for `fdl {name}`: write docs/commands/{name}.md"
        title = page.read_text(encoding="utf-8").splitlines()[0]
        assert re.match(rf"# fdl {name}\b", title), f"{page}:1: {title!r} is not `# fdl {name}`"
        assert f"commands/{name}.md" in nav, f"docs/commands/{name}.md is not in mkdocs.yml's nav"


def test_every_page_is_in_the_navigation_once() -> None:
    nav = _nav_pages(_config()["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(nav) == pages
    assert len(nav) == len(set(nav))


def test_the_site_refuses_what_it_must() -> None:
    config = _config()
    assert config["strict"] is True and config["theme"]["name"] == "material"
    for check in ("omitted_files", "not_found", "unrecognized_links", "anchors"):
        assert config["validation"][check] == "warn", check  # a warning fails --strict
    pins = (DOCS / "requirements.txt").read_text(encoding="utf-8")
    assert re.search(r"^mkdocs==\S+$", pins, re.MULTILINE)
    assert re.search(r"^mkdocs-material==\S+$", pins, re.MULTILINE)


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def broken_links(page: Path, root: Path) -> list[str]:
    """Relative links of a Markdown page whose file does not exist, as page:line: target."""
    found, fence = [], False
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fence = not fence
        if fence:
            continue
        for target in _LINK.findall(line):
            path = target.split("#", 1)[0]
            if not path or re.match(r"[a-z]+:", path):
                continue
            if not (page.parent / path).exists():
                found.append(f"{page.relative_to(root)}:{n}: {target}")
    return found


def test_every_relative_link_of_the_manual_and_the_readme_leads_to_a_file() -> None:
    pages = [*sorted(DOCS.rglob("*.md")), REPO / "README.md", REPO / "CHANGELOG.md"]
    broken = [link for page in pages for link in broken_links(page, REPO)]
    assert not broken, "links to nothing:\n" + "\n".join(broken)


def test_a_broken_link_is_named_with_its_page_and_line(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text(
        "# A\n\n[b](b.md) and [c](c.md#x), [w](https://x.org)\n"
    )
    (tmp_path / "docs" / "b.md").write_text("# B\n\n```text\n[not](a link.md)\n```\n")
    assert broken_links(tmp_path / "docs" / "a.md", tmp_path) == ["docs/a.md:3: c.md#x"]
    assert broken_links(tmp_path / "docs" / "b.md", tmp_path) == []


def _build(site: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site / "out")],
        cwd=site,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(site)},
    )


@pytest.mark.slow
def test_a_broken_link_or_a_page_out_of_the_nav_fails_the_build(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="pip install -r docs/requirements.txt")
    pytest.importorskip("material", reason="pip install -r docs/requirements.txt")
    site = tmp_path / "site"
    shutil.copytree(DOCS, site / "docs")
    shutil.copy(REPO / "mkdocs.yml", site)
    shutil.copy(REPO / "CHANGELOG.md", site)  # the changelog page includes it
    built = _build(site)
    assert built.returncode == 0, built.stderr

    page = site / "docs" / "commands" / "cache.md"
    page.write_text(page.read_text() + "\nSee [the missing page](nowhere.md).\n")
    broken = _build(site)
    assert broken.returncode == 1
    assert "'commands/cache.md' contains a link 'nowhere.md'" in broken.stderr

    page.write_text(page.read_text().replace("See [the missing page](nowhere.md).\n", ""))
    (site / "docs" / "stray.md").write_text("# Stray\n")
    stray = _build(site)
    assert stray.returncode == 1
    assert 'not included in the "nav"' in stray.stderr and "stray.md" in stray.stderr
