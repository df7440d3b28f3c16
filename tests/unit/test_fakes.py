"""The test doubles keep the real seams' signatures, so a test that passes with a fake
calls the real thing the same way (a renamed or added parameter fails here first)."""

from __future__ import annotations

import inspect

import pytest

from fdl.engine import DockerEngine, Engine
from fdl.runner import Runner, SubprocessRunner
from tests.support.fakes import FakeEngine, FakeRunner


def _public_methods(protocol: type) -> list[str]:
    return sorted(
        name
        for name, member in vars(protocol).items()
        if not name.startswith("_") and callable(member)
    )


def _shape(function: object) -> list[tuple[str, object, object]]:
    signature = inspect.signature(function)  # type: ignore[arg-type]
    return [(p.name, p.kind, p.default) for p in signature.parameters.values() if p.name != "self"]


CASES = [
    (Runner, SubprocessRunner, FakeRunner),
    (Engine, DockerEngine, FakeEngine),
]


@pytest.mark.parametrize(("protocol", "real", "fake"), CASES, ids=["runner", "engine"])
def test_fakes_have_the_real_signatures(protocol: type, real: type, fake: type) -> None:
    methods = _public_methods(protocol)
    assert methods, f"{protocol.__name__} declares no methods"
    differences = {
        name: (_shape(getattr(real, name)), _shape(getattr(fake, name)))
        for name in methods
        if _shape(getattr(real, name)) != _shape(getattr(fake, name))
    }
    assert differences == {}, differences
    for name in methods:  # the real class keeps the protocol too
        assert _shape(getattr(real, name)) == _shape(getattr(protocol, name)), name
