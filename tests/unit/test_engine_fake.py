"""The FakeEngine other modules test against behaves like the real one where it matters."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from fdl.engine import (
    Builder,
    BuildSpec,
    DockerEngine,
    Engine,
    RunResult,
    RunSpec,
    default_engine,
    set_default_engine,
)
from fdl.errors import CommandFailed, EnvironmentProblem
from tests.support.fakes import FakeEngine


def test_fake_and_real_engines_offer_the_protocol_with_the_same_signatures() -> None:
    methods = [name for name in vars(Engine) if not name.startswith("_")]
    assert "build" in methods
    for name in methods:
        protocol = inspect.signature(getattr(Engine, name))
        assert inspect.signature(getattr(FakeEngine, name)) == protocol, name
        assert inspect.signature(getattr(DockerEngine, name)) == protocol, name


def test_builds_are_recorded_and_their_images_inspectable(tmp_path: Path) -> None:
    engine = FakeEngine(build_lines=["#5 [1/2] RUN x", "#5 DONE"])
    lines: list[str] = []
    spec = BuildSpec(
        tmp_path, dockerfile_text="FROM a\nRUN x\n", tags=("me/a:1",), labels={"k": "v"}
    )

    result = engine.build(spec, on_line=lines.append)

    assert engine.builds == [spec]
    assert lines == ["#5 [1/2] RUN x", "#5 DONE"]
    info = engine.inspect_image("me/a:1")
    assert info.id == result.image_id
    assert info.labels == {"k": "v"}
    assert engine.image_exists(result.image_id)


def test_classic_fake_refuses_buildkit_builds_like_the_real_engine(tmp_path: Path) -> None:
    engine = FakeEngine(builder=Builder.CLASSIC)
    with pytest.raises(EnvironmentProblem, match="needs BuildKit"):
        engine.build(
            BuildSpec(tmp_path, dockerfile_text="FROM a\nRUN --mount=type=cache,target=/c x\n")
        )


def test_configured_images_runs_and_files(tmp_path: Path) -> None:
    engine = FakeEngine(
        run_result=lambda spec: RunResult(0, " ".join(spec.argv) + "\n"),
        files={("b:1", "/usr/local/libtorch"): {"lib/libtorch.so": "elf"}},
    )
    engine.add_image("b:1", size=123, labels={"org.fdl.archs": "sm_61"})

    assert engine.disk_usage("b:1").size == 123
    assert engine.run(RunSpec("b:1", ("echo", "hi"))).stdout == "echo hi\n"
    engine.copy_out("b:1", "/usr/local/libtorch", tmp_path / "out")
    assert (tmp_path / "out" / "lib" / "libtorch.so").read_text() == "elf"
    with pytest.raises(CommandFailed, match="no such image"):
        engine.inspect_image("missing:1")


def test_default_engine_can_be_replaced() -> None:
    previous = default_engine()
    fake = FakeEngine()
    try:
        set_default_engine(fake)
        assert default_engine() is fake
    finally:
        set_default_engine(previous)
