"""A package's names imported on first use (PEP 562's module ``__getattr__``): a package
lists where each name lives and imports none of its modules until one is asked for, so a
command pays only for the modules it uses (start-up time). The tables are generated from the
modules' ``__all__`` (:mod:`fdl._lazy_tables`)."""

from __future__ import annotations

from importlib import import_module

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["lazy_attribute"]


def lazy_attribute(
    package: str, homes: Mapping[str, str], namespace: dict[str, Any] | None, name: str
) -> Any:
    """``name`` from its module ``package.homes[name]``; kept in ``namespace`` (the
    package's globals) when given, so the next use is a plain lookup (a package whose tests
    patch its modules' names gives None: each use then reads the module again).

    Raises:
        AttributeError: the package has no such name.
    """
    home = homes.get(name)
    if home is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(import_module(f"{package}.{home}"), name)
    if namespace is not None:
        namespace[name] = value
    return value
