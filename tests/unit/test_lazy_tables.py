"""The lazy packages' export tables are generated from their modules' ``__all__``
(fdl._lazy_tables) and are current."""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

import pytest

from fdl._lazy_tables import TableError, homes, lazy_packages, main, refresh

LAZY = {
    "fdl.compat",
    "fdl.deploy",
    "fdl.engine",
    "fdl.libtorch",
    "fdl.libtorch.sources",
    "fdl.nccl",
    "fdl.tasks",
}


def _dotted(package: Path) -> str:
    root = Path(import_module("fdl").__file__ or "").parent.parent
    return ".".join(package.relative_to(root).parts)


def test_every_lazy_package_holds_a_generated_table() -> None:
    assert {_dotted(p) for p in lazy_packages()} >= LAZY


@pytest.mark.parametrize("package", sorted(lazy_packages()), ids=_dotted)
def test_the_generated_table_is_current(package: Path) -> None:
    assert refresh(package, write=False), "run `python -m fdl._lazy_tables --write`"


@pytest.mark.parametrize("package", sorted(lazy_packages()), ids=_dotted)
def test_each_name_of_all_comes_from_a_module_that_exports_it(package: Path) -> None:
    module = import_module(_dotted(package))
    table = module._HOMES
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    for name, home in table.items():
        assert name in module.__all__, name
        assert name in import_module(f"{module.__name__}.{home}").__all__, (name, home)


def _package(tmp_path: Path, init: str, **modules: str) -> Path:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text(init)
    for name, text in modules.items():
        (package / f"{name}.py").write_text(text)
    return package


INIT = """from fdl._lazy import lazy_attribute
TYPE_CHECKING = False
# <lazy-exports>
# </lazy-exports>
__all__ = ["Thing", "helper", "own"]
own = 1
"""


def test_a_stale_table_is_found_and_rewritten(tmp_path: Path) -> None:
    package = _package(
        tmp_path,
        INIT,
        _things='__all__ = ["Thing"]\nclass Thing: ...\n',
        _helpers='from pkg._things import Thing\n__all__ = ["Thing", "helper"]\ndef helper(): ...\n',
    )
    assert homes(package) == {"Thing": "_things", "helper": "_helpers"}
    assert not refresh(package, write=False)
    assert not refresh(package, write=True)
    assert refresh(package, write=False)
    text = (package / "__init__.py").read_text()
    assert '    "Thing": "_things",\n' in text and "from pkg._helpers import helper" in text
    (package / "_helpers.py").write_text('__all__ = ["helper", "extra"]\ndef helper(): ...\n')
    (package / "__init__.py").write_text(text.replace('"own"]', '"extra", "own"]'))
    assert not refresh(package, write=False)


def test_a_name_no_module_exports_is_refused(tmp_path: Path) -> None:
    package = _package(tmp_path, INIT, _things='__all__ = ["Thing"]\nclass Thing: ...\n')
    with pytest.raises(TableError, match="'helper' is exported by none"):
        homes(package)


def test_a_name_two_modules_define_is_refused(tmp_path: Path) -> None:
    both = '__all__ = ["Thing", "helper"]\nclass Thing: ...\ndef helper(): ...\n'
    package = _package(tmp_path, INIT, _a=both, _b=both)
    with pytest.raises(TableError, match="'Thing' is exported by _a, _b"):
        homes(package)


def test_the_check_passes_on_this_tree(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--check"]) == 0, capsys.readouterr()


def test_a_section_without_its_end_marker_is_refused(tmp_path: Path) -> None:
    package = _package(
        tmp_path, INIT.replace("# </lazy-exports>\n", ""), _things='__all__ = ["Thing"]\n'
    )
    with pytest.raises(TableError, match="no # <lazy-exports>"):
        refresh(package, write=True)
