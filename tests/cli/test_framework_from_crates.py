"""A floDl or tch release fdl's tables lack is read from its own crates at run time: from
cargo's registry cache (a fake ``CARGO_HOME``), else fetched by cargo itself from a sparse
registry on 127.0.0.1; the plan names the file and line and says the fact was read at run
time; the second run reads fdl's cache, not the crate. Offline: exit 5 with the way out,
which (``libtorch.torch`` with ``framework-check: false``) works. Hostile crates end in a
clear error naming the crate, never exit 70, and write nothing outside fdl's cache."""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
from pathlib import Path
from typing import ClassVar

import pytest

from tests.support.fake_crates import (
    REGISTRY_DIR,
    TORCH_SYS_BUILD,
    crate,
    flodl_files,
    put_in_cache,
    serve_registry,
)
from tests.support.faulty_http import FaultyServer

PACKAGE = (
    '\n[[package]]\nname = "{name}"\nversion = "{version}"\n'
    'source = "registry+https://github.com/rust-lang/crates.io-index"\n'
)


@pytest.fixture
def machine(tmp_path: Path):
    home = tmp_path / "cargo"
    home.mkdir()
    project = tmp_path / "proj"
    project.mkdir()
    (project / "fdl.yml").write_text("name: demo\n", encoding="utf-8")

    class Machine:
        cargo = home
        cwd = project
        cache = tmp_path / "cache"
        env: ClassVar[dict[str, str]] = {
            "CARGO_HOME": str(home),
            "FDL_HOME": str(tmp_path / "home"),
            "FDL_CACHE_DIR": str(tmp_path / "cache"),
            "FDL_NVML": "0",
            "PATH": f"{tmp_path / 'nobin'}{os.pathsep}{os.environ['PATH']}",
        }

        def lock(self, *packages: tuple[str, str]) -> None:
            text = "version = 4\n" + "".join(PACKAGE.format(name=n, version=v) for n, v in packages)
            (project / "Cargo.lock").write_text(text, encoding="utf-8")

    return Machine()


@pytest.fixture
def fdl(run_fdl, machine):
    def invoke(*args: str, env: dict[str, str] | None = None):
        return run_fdl(list(args), cwd=machine.cwd, env={**machine.env, **(env or {})})

    return invoke


def _torch_sys(torch: str = "2.11.0", cxx: int = 17) -> bytes:
    return crate("torch-sys", "0.99.0", {"build.rs": TORCH_SYS_BUILD.format(torch=torch, cxx=cxx)})


def _framework(result) -> dict[str, object]:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["framework"]


def test_an_unseen_tch_release_is_planned_from_torch_sys_in_cargos_cache(fdl, machine) -> None:
    archive = put_in_cache(machine.cargo, "torch-sys", "0.99.0", _torch_sys("2.11.0"))
    machine.lock(("torch-sys", "0.99.0"))
    first = _framework(fdl("setup", "--dry-run", "--json"))
    assert first["torch"] == "2.11.0"  # not 2.13.0, the newest tch row's
    (pin,) = first["frameworks"]
    assert (pin["release"], pin["torch"], pin["cxx_standard"]) == ("0.99.0", "2.11.0", 17)
    assert pin["how"].startswith("torch-sys 0.99.0 in Cargo.lock; read from its crate at run time")
    assert pin["how"].endswith(
        'torch-sys build.rs:4 TORCH_VERSION "2.11.0"; torch-sys build.rs:7 c++17'
    )
    assert pin["source"].startswith("read by fdl at run time from crate torch-sys 0.99.0")
    assert 'torch-sys build.rs:4 TORCH_VERSION "2.11.0"' in pin["source"]
    assert "torch-sys build.rs:7 c++17" in pin["source"]
    assert str(archive) in pin["source"]
    kept = json.loads((machine.cache / "compat" / "frameworks" / "tch-0.99.0.json").read_text())
    assert (kept["torch"], kept["cxx_standard"], kept["read_by"]) == (
        "2.11.0",
        17,
        "fdl at run time",
    )
    text = fdl("setup", "--dry-run")
    assert text.exit_code == 0, text.output
    assert "tch-rs 0.99.0 compiles against torch 2.11.0" in text.stdout
    assert (
        "read from its crate at run time, not fdl's reviewed tables: torch-sys build.rs:4"
        in text.stdout
    )

    # The second run reads fdl's cache: the crate, now garbage, is not opened.
    archive.write_bytes(b"not a crate any more")
    again = _framework(fdl("setup", "--dry-run", "--json"))
    assert again["torch"] == "2.11.0"
    assert "kept in fdl's cache on" in again["frameworks"][0]["source"]


def test_an_unseen_flodl_release_is_planned_from_flodl_cli_and_flodl_sys(fdl, machine) -> None:
    for name, files in flodl_files(torch="2.11.0", cxx=17).items():
        put_in_cache(machine.cargo, name, "0.99.0", crate(name, "0.99.0", files))
    machine.lock(("flodl", "0.99.0"), ("flodl-sys", "0.99.0"))
    found = _framework(fdl("setup", "--dry-run", "--json"))
    assert found["torch"] == "2.11.0"  # floDl's rows all say 2.10.0
    source = found["frameworks"][0]["source"]
    assert "crates flodl-cli 0.99.0 and flodl-sys 0.99.0" in source
    assert 'flodl-cli src/libtorch/download.rs:3 LIBTORCH_VERSION "2.11.0"' in source
    assert "flodl-cli src/libtorch/build.rs:2" in source
    assert "flodl-cli src/init.rs:3" in source
    assert "flodl-sys build.rs:2 c++17" in source


def test_unpacked_sources_are_read_and_a_damaged_cache_entry_is_a_miss(fdl, machine) -> None:
    unpacked = machine.cargo / "registry" / "src" / REGISTRY_DIR / "torch-sys-0.99.0"
    unpacked.mkdir(parents=True)
    (unpacked / "build.rs").write_text(TORCH_SYS_BUILD.format(torch="2.12.0", cxx=17))
    (unpacked / ".cargo-ok").write_text('{"v":1}')
    machine.lock(("torch-sys", "0.99.0"))
    assert _framework(fdl("setup", "--dry-run", "--json"))["torch"] == "2.12.0"
    entry = machine.cache / "compat" / "frameworks" / "tch-0.99.0.json"
    entry.write_text('{"format": 1, "framework": "tch", "version": "0.99.0", "torch": "9.9.9; rm')
    found = _framework(fdl("setup", "--dry-run", "--json"))
    assert found["torch"] == "2.12.0"
    assert str(unpacked) in found["frameworks"][0]["source"]
    assert json.loads(entry.read_text())["torch"] == "2.12.0"  # read again, kept again


@pytest.fixture
def registry() -> FaultyServer:
    with FaultyServer() as server:
        yield server


def _use_registry(machine, url: str) -> None:
    (machine.cargo / "config.toml").write_text(
        f'[source.crates-io]\nreplace-with = "fake"\n\n[source.fake]\nregistry = "{url}"\n',
        encoding="utf-8",
    )


def test_a_crate_cargo_lacks_is_fetched_through_cargo_from_the_users_registry(
    fdl, machine, registry: FaultyServer
) -> None:
    from tests.support.cargo import require_cargo

    require_cargo()
    _use_registry(machine, serve_registry(registry, {("torch-sys", "0.99.0"): _torch_sys()}))
    machine.lock(("torch-sys", "0.99.0"))
    result = fdl("setup", "--dry-run", "--json")
    found = _framework(result)
    assert found["torch"] == "2.11.0"
    assert "fetching it through cargo" in result.stderr
    assert [r.path for r in registry.log if r.path.startswith("/dl/")] == [
        "/dl/torch-sys/0.99.0/download"
    ]
    assert list((machine.cargo / "registry" / "cache").glob("*/torch-sys-0.99.0.crate"))
    # nothing left of the manifest fdl had cargo fetch
    assert not list((machine.cache / "compat" / "frameworks").glob(".fetch-*"))


def test_offline_the_refusal_names_the_way_out_and_the_way_out_works(
    fdl, machine, registry: FaultyServer
) -> None:
    from tests.support.cargo import require_cargo

    require_cargo()
    _use_registry(machine, serve_registry(registry, {}))
    machine.lock(("torch-sys", "0.99.0"))
    refused = fdl("setup", "--dry-run", env={"CARGO_NET_OFFLINE": "true"})
    assert refused.exit_code == 5, refused.output
    assert "Cargo.lock:5:12: unknown release of tch-rs: 0.99.0" in refused.stderr
    assert "cargo could not fetch it" in refused.stderr
    assert "libtorch.framework-check: false" in refused.stderr
    assert "Traceback" not in refused.output
    registry.clear_log()
    (machine.cwd / "fdl.yml").write_text(
        'name: demo\nlibtorch:\n  torch: "2.11.0"\n  framework-check: false\n', encoding="utf-8"
    )
    kept = fdl("setup", "--dry-run", "--json", env={"CARGO_NET_OFFLINE": "true"})
    assert kept.exit_code == 0, kept.output
    assert json.loads(kept.stdout)["plan"]["selection"]["torch"] == "2.11.0"
    assert registry.log == []  # the way out asks nothing of cargo


def test_the_way_out_works_for_a_release_fdl_refuses_to_read(fdl, machine) -> None:
    machine.lock(("flodl", "0.9.0-rc.1"))
    refused = fdl("setup", "--dry-run")
    assert refused.exit_code == 3, refused.output
    assert "unknown release of floDl: 0.9.0-rc.1" in refused.stderr
    assert "framework-check: false" in refused.stderr
    kept = fdl(
        "--set",
        "libtorch.torch=2.10.0",
        "--set",
        "libtorch.framework-check=false",
        "setup",
        "--dry-run",
        "--json",
    )
    assert kept.exit_code == 0, kept.output
    assert json.loads(kept.stdout)["plan"]["selection"]["torch"] == "2.10.0"


# --- hostile crates ----------------------------------------------------------------------


def _tar(members: list[tarfile.TarInfo], data: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for info in members:
            archive.addfile(info, io.BytesIO(data[info.name]) if info.name in data else None)
    return buffer.getvalue()


def _member(name: str, data: bytes = b"", **attrs: object) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for key, value in attrs.items():
        setattr(info, key, value)
    return info


def _climbing() -> bytes:
    body = TORCH_SYS_BUILD.format(torch="2.11.0", cxx=17).encode()
    return _tar(
        [_member("torch-sys-0.99.0/../../evil.rs", body)], {"torch-sys-0.99.0/../../evil.rs": body}
    )


def _linked() -> bytes:
    return _tar(
        [_member("torch-sys-0.99.0/build.rs", type=tarfile.SYMTYPE, linkname="/etc/passwd")], {}
    )


def _huge() -> bytes:
    body = b"// " + b"x" * (50 << 20)
    return _tar([_member("torch-sys-0.99.0/build.rs", body)], {"torch-sys-0.99.0/build.rs": body})


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (
            _torch_sys("2.11.0; rm -rf ~"),
            "states the libtorch release as '2.11.0; rm -rf ~', which is not one",
        ),
        (_torch_sys("2.11.0\\n$(id)"), "states the libtorch release as"),
        (
            crate("torch-sys", "0.99.0", {"build.rs": 'const TORCH_VERSION: &str = "2.11\n.0";\n'}),
            "do not state the libtorch release",
        ),
        (crate("torch-sys", "0.99.0", {"lib.rs": ""}), "do not state the libtorch release"),
        (_torch_sys(cxx=99), "states the C++ standard as '99'"),
        (_torch_sys()[:200], "is not a complete tar archive"),
        (b"\x00" * 512, "is not a complete tar archive"),
        (_climbing(), "'..' in the path"),
        (_linked(), "is a link or special file"),
        (_huge(), "more than the 4194304 read"),
    ],
    ids=[
        "shell",
        "escaped-newline",
        "newline",
        "missing",
        "cxx",
        "truncated",
        "zeros",
        "climb",
        "link",
        "50MB",
    ],
)
def test_a_hostile_crate_is_refused_naming_it_and_nothing_is_written_outside_the_cache(
    fdl, machine, tmp_path: Path, content: bytes, said: str
) -> None:
    put_in_cache(machine.cargo, "torch-sys", "0.99.0", content)
    machine.lock(("torch-sys", "0.99.0"))
    before = sorted(p for p in tmp_path.rglob("*") if not p.is_relative_to(machine.cache))
    refused = fdl("setup", "--dry-run")
    assert refused.exit_code == 3, refused.output
    assert "Cargo.lock:5:12: tch-rs 0.99.0 is not in fdl's tables" in refused.stderr
    assert said in refused.stderr
    assert "framework-check: false" in refused.stderr
    after = sorted(p for p in tmp_path.rglob("*") if not p.is_relative_to(machine.cache))
    assert after == before
    assert not (tmp_path.parent / "evil.rs").exists()
    assert (
        not list((machine.cache / "compat").rglob("tch-*.json"))
        if (machine.cache / "compat").exists()
        else True
    )


def test_a_linked_crate_directory_is_not_followed(fdl, machine, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "build.rs").write_text(TORCH_SYS_BUILD.format(torch="2.11.0", cxx=17))
    sources = machine.cargo / "registry" / "src" / REGISTRY_DIR
    sources.mkdir(parents=True)
    (sources / "torch-sys-0.99.0").symlink_to(elsewhere)
    (elsewhere / ".cargo-ok").write_text("")
    unpacked = machine.cargo / "registry" / "src" / "other-registry" / "torch-sys-0.99.0"
    unpacked.mkdir(parents=True)
    (unpacked / ".cargo-ok").write_text("")
    (unpacked / "build.rs").symlink_to(elsewhere / "build.rs")
    machine.lock(("torch-sys", "0.99.0"))
    refused = fdl("setup", "--dry-run")
    assert refused.exit_code == 3, refused.output
    assert f"{unpacked / 'build.rs'} cannot be opened" in refused.stderr


def test_a_lock_naming_the_crate_twice_plans_once_or_refuses_the_disagreement(fdl, machine) -> None:
    put_in_cache(machine.cargo, "torch-sys", "0.99.0", _torch_sys("2.11.0"))
    put_in_cache(
        machine.cargo,
        "torch-sys",
        "0.98.0",
        crate("torch-sys", "0.98.0", {"build.rs": TORCH_SYS_BUILD.format(torch="2.12.0", cxx=17)}),
    )
    machine.lock(("torch-sys", "0.99.0"), ("torch-sys", "0.99.0"))
    assert len(_framework(fdl("setup", "--dry-run", "--json"))["frameworks"]) == 1
    machine.lock(("torch-sys", "0.98.0"), ("torch-sys", "0.99.0"))
    refused = fdl("setup", "--dry-run")
    assert refused.exit_code == 3, refused.output
    assert "need different libtorch releases" in refused.stderr


def test_a_version_string_with_shell_characters_in_the_lock_is_never_a_path(
    fdl, machine, tmp_path: Path
) -> None:
    machine.lock(("torch-sys", "0.99.0/../../x"))
    refused = fdl("setup", "--dry-run")
    assert refused.exit_code == 3, refused.output
    assert "unknown release of tch-rs: 0.99.0/../../x" in refused.stderr
    assert shutil.which("cargo") is None or not (tmp_path / "x").exists()


def test_without_cargo_the_refusal_says_so_with_the_way_out(fdl, machine, tmp_path: Path) -> None:
    machine.lock(("flodl", "0.99.0"))
    (tmp_path / "empty").mkdir()
    refused = fdl("setup", "--dry-run", env={"PATH": str(tmp_path / "empty")})
    assert refused.exit_code == 4, refused.output
    assert "unknown release of floDl: 0.99.0" in refused.stderr
    assert "no copy of flodl-cli 0.99.0 and flodl-sys 0.99.0" in refused.stderr
    assert "cargo" in refused.stderr and "framework-check: false" in refused.stderr
    assert not (machine.cache / "compat" / "frameworks").exists() or not list(
        (machine.cache / "compat" / "frameworks").iterdir()
    )


def test_other_commands_plan_with_the_release_read_from_the_crate(fdl, machine) -> None:
    put_in_cache(machine.cargo, "torch-sys", "0.99.0", _torch_sys("2.11.0"))
    machine.lock(("torch-sys", "0.99.0"))
    download = fdl("libtorch", "download", "--cpu", "--dry-run", "--json")
    assert download.exit_code == 0, download.output
    assert "2.11.0" in json.loads(download.stdout)["url"]
    diagnosed = fdl("diagnose", "--json")
    assert "tch-rs 0.99.0" in diagnosed.stdout and "torch-sys build.rs:4" in diagnosed.stdout
