"""`toolchain: host`: the host's Rust and vendored crates as images for a cargo build
stage (fdl.images._rust), through fake runners and engines."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdl.errors import EnvironmentProblem, ManifestError, NetworkError
from fdl.images import plan_images
from fdl.images._build import build_images
from fdl.images._rust import probe_host_rust, rust_pin
from fdl.manifest import load_manifest
from fdl.runner import Completed
from tests.support.fakes import FakeEngine, FakeRunner
from tests.support.images import make_project, make_variant

MANIFEST = """\
images:
  train:
    toolchain: host
    build: LIBTORCH_PATH=/opt/libtorch cargo build --release
    build-dir: target
    program: target/release/demo
"""
WHERE = "images.train.toolchain"


def verbose(release: str) -> str:
    return f"rustc {release} (59807616e 2026-04-14)\nrelease: {release}\nhost: x86_64-unknown-linux-gnu\n"


def sysroot(root: Path, *, cargo: bool = True) -> Path:
    directory = root / "toolchains" / "1.95.0-x86_64-unknown-linux-gnu"
    (directory / "bin").mkdir(parents=True)
    (directory / "lib" / "rustlib").mkdir(parents=True)
    (directory / "bin" / "rustc").write_text("")
    if cargo:
        (directory / "bin" / "cargo").write_text("")
    return directory


def rust_runner(root: Path, release: str = "1.95.0", vendor: Completed | None = None) -> FakeRunner:
    return FakeRunner(
        {
            ("rustc", "-vV"): Completed([], 0, verbose(release)),
            ("rustc", "--print", "sysroot"): Completed([], 0, f"{root}\n"),
            ("cargo", "vendor"): vendor
            or Completed(
                [],
                0,
                '[source.crates-io]\nreplace-with = "vendored-sources"\n\n'
                '[source.vendored-sources]\ndirectory = "{vendor}"\n',
            ),
        }
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = make_project(tmp_path, MANIFEST, name="demo")
    make_variant(project, torch="2.10.0")
    (project / "rust-toolchain.toml").write_text('[toolchain]\nchannel = "1.95.0"\n')
    return project


def test_the_pin_is_rust_toolchain_toml_then_cargo_rust_version(tmp_path: Path) -> None:
    assert rust_pin(tmp_path) is None
    (tmp_path / "Cargo.toml").write_text('[package]\nname = "x"\nrust-version = "1.85"\n')
    pin = rust_pin(tmp_path)
    assert pin is not None and (pin.version, pin.exact, pin.origin) == ("1.85", False, "Cargo.toml")
    assert pin.refusal("1.95.0") is None and "1.85 or newer" in (pin.refusal("1.84.1") or "")
    (tmp_path / "rust-toolchain.toml").write_text('[toolchain]\nchannel = "stable"\n')
    assert rust_pin(tmp_path) == pin  # a channel name pins no release
    (tmp_path / "rust-toolchain.toml").write_text('[toolchain]\nchannel = "1.95.0"\n')
    exact = rust_pin(tmp_path)
    assert exact is not None and exact.exact and exact.origin == "rust-toolchain.toml"
    assert exact.refusal("1.95.0") is None
    assert exact.refusal("1.94.0") == "rust-toolchain.toml pins 1.95.0"


@pytest.mark.parametrize("name", ["rust-toolchain.toml", "Cargo.toml"])
def test_a_toolchain_file_that_is_a_fifo_is_refused_without_a_hang(
    project: Path, tmp_path: Path, name: str
) -> None:
    """Issue 42, 6: `toolchain: host` read rust-toolchain.toml as a FIFO and waited."""
    import os

    (project / "rust-toolchain.toml").unlink()  # read first: the other one stays unread
    os.mkfifo(project / name)
    runner = rust_runner(sysroot(tmp_path))
    with pytest.raises(EnvironmentProblem) as refused:
        probe_host_rust(project, runner, WHERE)
    assert f"{project / name} is a FIFO" in refused.value.message
    assert runner.calls == []  # rustc, which would read it too, was not started


def test_probe_finds_the_pinned_toolchain(project: Path, tmp_path: Path) -> None:
    root = sysroot(tmp_path)
    host = probe_host_rust(project, rust_runner(root), WHERE)
    assert host.sysroot == root.resolve() and host.version == "1.95.0"
    assert host.image.startswith("fdl-rust:1.95.0-")


def test_another_release_is_refused_with_the_install_command(project: Path, tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem) as caught:
        probe_host_rust(project, rust_runner(sysroot(tmp_path), "1.91.1"), WHERE)
    assert "1.91.1" in caught.value.message and "pins 1.95.0" in caught.value.message
    assert WHERE in caught.value.message
    assert "rustup toolchain install 1.95.0" in (caught.value.hint or "")


def test_no_rustc_names_the_fix(project: Path) -> None:
    with pytest.raises(EnvironmentProblem) as caught:
        probe_host_rust(project, FakeRunner(), WHERE)
    assert "`rustc` was not found" in caught.value.message
    hint = caught.value.hint or ""
    assert "standalone installer" in hint and f"remove {WHERE}" in hint


def test_a_missing_pinned_toolchain_is_rustups_message(project: Path) -> None:
    said = "error: toolchain '1.95.0-x86_64-unknown-linux-gnu' is not installed"
    backtrace = "\nhelp: run `rustup toolchain install`\n\nStack backtrace:\n  12: <unknown>\n"
    runner = FakeRunner({("rustc",): Completed([], 1, "", said + backtrace)})
    with pytest.raises(EnvironmentProblem) as caught:
        probe_host_rust(project, runner, WHERE)
    assert said in caught.value.message


def test_a_rustc_without_cargo_beside_it_is_refused(project: Path, tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem) as caught:
        probe_host_rust(project, rust_runner(sysroot(tmp_path, cargo=False)), WHERE)
    assert "not a whole toolchain" in caught.value.message and "bin/cargo" in caught.value.message


def test_build_makes_the_rust_and_crates_images_and_passes_them(
    project: Path, tmp_path: Path
) -> None:
    root = sysroot(tmp_path)
    runner = rust_runner(root)
    vendor_dir: list[str] = []

    def vendor(args: list[str]) -> Completed:
        vendor_dir.append(args[-1])
        return Completed([], 0, f'[source.vendored-sources]\ndirectory = "{args[-1]}"\n')

    runner.responses[("cargo", "vendor")] = vendor
    engine = FakeEngine()
    (train,) = plan_images(load_manifest(project))
    cache = tmp_path / "cache"
    statuses: list[str] = []
    build_images(
        [train],
        project,
        engine=engine,
        runner=runner,
        environ={"FDL_CACHE_DIR": str(cache)},
        on_status=statuses.append,
    )
    kinds = [spec.tags[0].split(":")[0] for spec in engine.builds]
    assert kinds == ["fdl-libtorch", "fdl-rust", "fdl-crates", "demo-train"]
    rust, crates, image = engine.builds[1:]
    assert rust.context == root.resolve()
    assert "COPY bin/cargo bin/rustc /opt/rust/bin/" in (rust.dockerfile_text or "")
    assert image.build_args["RUST_IMAGE"] == rust.tags[0]
    assert image.build_args["CRATES_IMAGE"] == crates.tags[0] == "fdl-crates:demo-train"
    config = (crates.context / "config.toml").read_text()
    assert 'directory = "/.cargo/vendor"' in config and str(cache) not in config
    assert vendor_dir == [str(crates.context / "vendor")]
    # fdl's own cache (`fdl cache clean crates` may delete it)
    assert crates.context.parent == cache / "crates"
    assert (cache / "crates" / "CACHEDIR.TAG").is_file()
    assert "--mount=type=bind,from=crates,target=/.cargo" in (image.dockerfile_text or "")

    # a second build finds the toolchain's image and makes only the crates' again
    build_images(
        [train], project, engine=engine, runner=runner, environ={"FDL_CACHE_DIR": str(cache)}
    )
    assert [spec.tags[0].split(":")[0] for spec in engine.builds[4:]] == [
        "fdl-crates",
        "demo-train",
    ]


def test_crates_that_cannot_be_downloaded_end_in_a_network_error(
    project: Path, tmp_path: Path
) -> None:
    failed = Completed([], 101, "", "error: failed to download from `https://static.crates.io`")
    runner = rust_runner(sysroot(tmp_path), vendor=failed)
    (train,) = plan_images(load_manifest(project))
    with pytest.raises(NetworkError) as caught:
        build_images(
            [train],
            project,
            engine=FakeEngine(),
            runner=runner,
            environ={"FDL_CACHE_DIR": str(tmp_path / "cache")},
        )
    assert "could not download the crates" in caught.value.message
    assert "cargo fetch" in (caught.value.hint or "")


def test_host_toolchain_is_refused_for_a_build_without_cargo(tmp_path: Path) -> None:
    manifest = "images:\n  train:\n    toolchain: host\n"
    project = make_project(tmp_path, manifest)
    make_variant(project)
    with pytest.raises(ManifestError) as caught:
        plan_images(load_manifest(project))
    assert "runs no cargo" in caught.value.message and "fdl.yml" in str(caught.value)
