"""The libtorch library API without the CLI: wheels, trees, setup, remove under its lock."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from fdl.errors import NetworkError, UsageError
from fdl.libtorch import (
    SetupPlan,
    install_dir,
    install_wheel,
    plan_setup,
    run_setup,
    select_variant,
    variants,
    wheel_source,
)
from fdl.locking import FileLock, LockBusy
from fdl.net import RetryPolicy
from fdl.paths import Context
from fdl.runner import Completed
from tests.support.fakes import FakeRunner
from tests.support.libtorch_trees import make_tree, torch_wheel

WHEEL = "torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl"


@pytest.fixture
def context(tmp_path: Path) -> Context:
    return Context(tmp_path / "root", project=True)


def test_install_wheel_from_a_file_keeps_the_same_build_and_guards_another(
    context: Context, tmp_path: Path
) -> None:
    wheel = torch_wheel(tmp_path / WHEEL)
    cache, runner = tmp_path / "wheels", FakeRunner()
    messages: list[str] = []
    source = wheel_source(cache=cache, runner=runner, wheel=wheel)
    first = install_wheel(context, source, cache=cache, runner=runner, on_message=messages.append)
    assert first.installed and first.activated and first.target.name == "precompiled/cpu"
    assert variants.active_name(context) == "precompiled/cpu"
    assert any("copying torch/" in m for m in messages)
    again = install_wheel(context, source, cache=cache, runner=runner)
    assert not again.installed

    other = source_of(tmp_path, "2.14.1+cpu", cache, runner)
    with pytest.raises(UsageError, match=r"already holds libtorch 2\.13\.0"):
        install_wheel(context, other, cache=cache, runner=runner)
    replaced = install_wheel(context, other, cache=cache, runner=runner, force=True)
    assert replaced.installed
    assert (replaced.target.path / "build-version").read_text() == "2.14.1+cpu\n"


def source_of(tmp_path: Path, version: str, cache: Path, runner: FakeRunner):
    (tmp_path / "other").mkdir(exist_ok=True)
    wheel = torch_wheel(
        tmp_path / "other" / WHEEL.replace("2.13.0", version.split("+", maxsplit=1)[0]), version
    )
    return wheel_source(cache=cache, runner=runner, wheel=wheel)


def test_wheel_source_downloads_the_exact_version_with_pip(tmp_path: Path) -> None:
    cache = tmp_path / "wheels"

    def pip(argv: list[str]) -> Completed:
        assert argv[-1] == "torch==2.13.0" and argv[argv.index("--dest") + 1] == str(cache)
        saved = torch_wheel(cache / WHEEL)
        return Completed(argv, 0, f"Saved {saved}\n")

    runner = FakeRunner({(sys.executable, "-m", "pip", "download"): pip})
    told: list[str] = []
    source = wheel_source(cache=cache, runner=runner, torch="2.13.0", on_message=told.append)
    assert (
        source.version == "2.13.0+cpu"
        and source.fetched_by == "pip download torch==2.13.0 --no-deps"
    )
    assert told == ["pip download torch==2.13.0 --no-deps"]


def test_install_dir_copies_refuses_an_existing_variant_and_adopts_in_place(
    context: Context, tmp_path: Path
) -> None:
    tree = make_tree(tmp_path / "mine")
    result = install_dir(context, tree, activate=False)
    assert result.target.name == "precompiled/mine" and not result.activated
    assert (tree / "lib").is_dir(), "the user's tree is copied, never moved"
    with pytest.raises(UsageError, match="already installed"):
        install_dir(context, tree)
    in_place = install_dir(context, result.target.path, name="precompiled/mine")
    assert in_place.activated and variants.active_name(context) == "precompiled/mine"
    with pytest.raises(UsageError, match="not a libtorch tree"):
        install_dir(context, tmp_path / "nothing")


def test_run_setup_activates_an_installed_variant(context: Context) -> None:
    make_tree(context.libtorch_dir / "precompiled/cpu")
    plan = plan_setup(context, ())
    assert plan.action == "activate"
    done = run_setup(plan, context, cache=context.root / "cache")
    assert (done.done, done.variant, done.install) == ("activated", "precompiled/cpu", None)
    assert variants.active_name(context) == "precompiled/cpu"


def test_run_setup_refuses_plans_it_cannot_carry_out(context: Context) -> None:
    selection = select_variant([], cpu=True)
    plan = SetupPlan("build", "no official build", selection, command=("fdl", "libtorch"))
    with pytest.raises(UsageError, match="'build' setup plan"):
        run_setup(plan, context, cache=context.root / "cache")


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_run_setup_falls_back_to_the_wheels_cpu_view_when_the_download_fails(
    context: Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CPU plan's fallback is the CPU view of the index's wheel (here an index on disk,
    as $PIP_INDEX_URL names it), never pip's CUDA build: pip is not run."""
    cache = tmp_path / "cache"
    plan = plan_setup(context, (), torch="2.13")
    assert plan.action == "download"
    assert plan.alternatives[0].startswith("fdl libtorch install --from-wheel --cpu --torch 2.13.0")
    index = tmp_path / "index"
    (index / "torch").mkdir(parents=True)
    torch_wheel(index / "torch" / WHEEL)
    (index / "torch" / "index.html").write_text(f'<a href="{WHEEL}">{WHEEL}</a>\n')
    monkeypatch.setenv("PIP_INDEX_URL", index.as_uri())

    said: list[str] = []
    stages: list[str] = []
    done = run_setup(
        plan,
        context,
        cache=cache,
        runner=FakeRunner({}),
        mirror=f"http://127.0.0.1:{closed_port()}/",
        on_message=said.append,
        on_stage=stages.append,
        transfer={"retry": RetryPolicy(attempts=1, base_delay=0.01), "sleep": lambda _s: None},
    )
    assert done.done == "installed" and done.install is not None
    source = done.install.info.source
    assert (source["kind"], source["view"], source["build_version"]) == (
        "wheel",
        "cpu",
        "2.13.0+cpu",
    )
    assert variants.active_name(context) == "precompiled/cpu"
    assert any("trying the PyPI wheel instead" in s for s in said)
    assert stages == ["downloading libtorch 2.13.0 (cpu)", "CPU view of the PyPI wheel"]


def test_run_setup_does_not_hide_a_missing_zip_behind_the_wheel(
    context: Context, tmp_path: Path
) -> None:
    plan = plan_setup(context, (), torch="2.13")
    mirror = (tmp_path / "empty-mirror").as_uri() + "/"
    (tmp_path / "empty-mirror").mkdir()
    with pytest.raises(NetworkError) as caught:
        run_setup(plan, context, cache=tmp_path / "cache", runner=FakeRunner(), mirror=mirror)
    assert type(caught.value).__name__ == "NotFound"


def test_remove_waits_for_the_variant_lock(context: Context) -> None:
    make_tree(context.libtorch_dir / "precompiled/cpu")
    variants.activate(context, "precompiled/cpu")
    lock = FileLock(variants.lock_file(context, "precompiled/cpu"), purpose="installing")
    with lock, pytest.raises(LockBusy):
        variants.remove(context, "precompiled/cpu", timeout=0.1)
    assert (context.libtorch_dir / "precompiled/cpu").is_dir()
    assert variants.remove(context, "precompiled/cpu") is True
    assert variants.list_variants(context) == []


@pytest.mark.parametrize(
    ("gpus", "options"),
    [
        ((), {}),
        ((), {"from_wheel": True}),
        (("6.1", "12.0"), {"torch": "2.10.0"}),
        (("6.1", "12.0"), {"torch": "2.10.0", "preferred": "cpu"}),
        (("6.1", "12.0"), {"torch": "2.10.0", "driver": "560.35.03"}),
        (("8.6",), {"torch": "2.10.0", "from_wheel": True}),
    ],
    ids=["cpu", "cpu-wheel", "rig", "rig-cpu-pin", "rig-560", "rtx3090-wheel"],
)
def test_every_alternative_says_what_it_installs(
    context: Context, gpus: tuple[str, ...], options: dict
) -> None:
    """An `or:` line is a command and, in parentheses, what it would install: a bare
    `fdl libtorch install --from-wheel --torch 2.10.0` left the reader to guess (PyPI's
    CUDA build, 3.7 GB)."""
    from fdl.compat import parse_capability

    plan = plan_setup(context, tuple(parse_capability(g) for g in gpus), **options)
    assert plan.alternatives, plan
    for line in plan.alternatives:
        command, _, what = line.partition("   (")
        assert command.startswith("fdl ") and what.endswith(")") and len(what) > 10, line


def test_install_dir_records_cuda_from_the_binaries(context: Context, tmp_path: Path) -> None:
    """An unpacked 2.10.0+cu128 zip is a CUDA 12.8 variant (`.arch cuda=12.8`, so
    CUDA_VERSION/CUDA_TAG are exported), not `CUDA: none`; a tree without CUDA binaries is a
    CPU build whatever its build-version says (the CPU view of a +cu128 wheel)."""
    from fdl.tasks._libtorch_env import read_variant, variant_exports

    cuda_tree = make_tree(
        tmp_path / "libtorch-cu128",
        "2.10.0+cu128",
        cubins=[70, 120],
        cuda_needed=["libcudart.so.12"],
    )
    result = install_dir(context, cuda_tree, name="cu128")
    assert result.info.cuda == "12.8"
    path = context.libtorch_dir / "precompiled" / "cu128"
    assert "cuda=12.8" in (path / ".arch").read_text().splitlines()
    exports = {
        c.name: c.value
        for c in variant_exports(str(path), read_variant(context.libtorch_dir, "precompiled/cu128"))
    }
    assert (exports["CUDA_VERSION"], exports["CUDA_TAG"]) == ("12.8.0", "12.8")
    # a build-version whose CUDA major is not the runtime the binaries need is not believed
    odd = make_tree(tmp_path / "odd", "2.10.0+cu128", cubins=[120], cuda_needed=["libcudart.so.13"])
    assert install_dir(context, odd, name="odd", activate=False).info.cuda is None
    cpu_tree = make_tree(tmp_path / "view", "2.10.0+cu128")
    assert install_dir(context, cpu_tree, name="view", activate=False).info.cuda is None
