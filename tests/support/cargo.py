"""Real Cargo builds in the tests, cached between runs.

A Rust test (floDl, tch-rs) builds crates from crates.io against a libtorch fdl
installed. Cold, that is a minute of compiling per crate graph; so each suite names a
cache key (``flodl-0.5.3-torch-2.10.0``) and gets, under ``$FDL_TEST_CACHE/cargo``:

- ``home/``: one ``CARGO_HOME`` for every key (the registry index and the downloaded
  crates; cargo locks it itself), so crates.io is read once;
- ``target/<key>/``: the key's ``CARGO_TARGET_DIR``;
- ``projects/<key>/``: a project directory at the same path on every run. The test makes
  the project afresh there (``fdl init``), but the path stays, so ``LIBTORCH_PATH``
  (``<project>/libtorch/precompiled/cpu``) does not change and flodl-sys's and
  torch-sys's build scripts (``cargo:rerun-if-env-changed``) do not run again, nor does
  anything depending on the project's own path. A lock file keeps two test runs of one
  key from sharing it at once;
- ``projects/<key>.lock/``: the ``Cargo.lock`` files of the first green run, put back
  into the fresh project on the next: the same crate versions every run, so a warm
  rebuild compiles nothing and reads nothing from crates.io.

A warm run then builds only the project's own crate. Where crates.io cannot be reached
(cold) the test skips locally and fails in CI (:func:`skip_or_fail`). In a test::

    with cargo_project("tch-0.23.0-torch-2.10.0") as cache:
        project = cache.directory / "demo"   # made afresh here, e.g. by `fdl init`
        cache.restore_lock(project)
        built = cache.fdl(["build"], project)
        if built.exit_code != 0:
            skip_if_unreachable(built.output)
        cache.keep_lock(project)
"""

from __future__ import annotations

import fcntl
import os
import re
import resource
import shutil
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.artefacts import cache_dir, skip_or_fail

if TYPE_CHECKING:
    from tests.conftest import Result

# What cargo says when the registry (or a download host) does not answer.
UNREACHABLE = re.compile(
    r"failed to (?:download|query replaced source|get .* as a dependency)|"
    r"download of config\.json failed|[Cc]ouldn't resolve host|spurious network error|"
    r"failed to fetch|Connection refused|network failure"
)


def cargo_root() -> Path:
    """``$FDL_TEST_CACHE/cargo``."""
    return cache_dir() / "cargo"


def require_cargo() -> str:
    """cargo on PATH (rustup's, from ``~/.cargo/bin``); skips, or fails in CI, without it."""
    found = shutil.which("cargo") or shutil.which("cargo", path=str(Path.home() / ".cargo/bin"))
    if found is None:
        skip_or_fail("cargo is not on PATH (install Rust with rustup: https://rustup.rs)")
    return found


@dataclass
class CargoProject:
    """A cached project directory of one key, and the environment of its builds.

    Attributes:
        key: The cache key (``flodl-0.5.3-torch-2.10.0``): what makes two builds share.
        directory: ``projects/<key>``: the project's parent, the same path every run.
        env: ``CARGO_HOME`` and ``CARGO_TARGET_DIR`` of the key, and PATH with cargo on it.
        timings: Each :meth:`timed` step's wall and CPU seconds (its child processes'),
            by label, for the test's output.
    """

    key: str
    directory: Path
    env: dict[str, str]
    timings: dict[str, str] = field(default_factory=dict)

    @property
    def locks(self) -> Path:
        return self.directory.with_name(self.directory.name + ".lock")

    def restore_lock(self, project: Path, crate: str = ".") -> bool:
        """Put the kept ``Cargo.lock`` of ``crate`` (a directory of ``project``) back."""
        kept = self.locks / crate / "Cargo.lock"
        if not kept.is_file():
            return False
        shutil.copyfile(kept, project / crate / "Cargo.lock")
        return True

    def keep_lock(self, project: Path, crate: str = ".") -> None:
        """Keep the ``Cargo.lock`` of ``crate`` (after a green build) for the next run."""
        (self.locks / crate).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(project / crate / "Cargo.lock", self.locks / crate / "Cargo.lock")

    def fdl(
        self,
        args: list[str],
        cwd: Path,
        env: Mapping[str, str] | None = None,
        timeout: float = 1800,
    ) -> Result:
        """``fdl ARGS`` in ``cwd`` (a subprocess of the fdl under test), its cargo through
        the key's cache; ``env`` is added last."""
        from tests.conftest import run_fdl_process

        return run_fdl_process(args, cwd=cwd, env={**self.env, **(env or {})}, timeout=timeout)

    @contextmanager
    def timed(self, label: str) -> Iterator[None]:
        """Time the block: wall seconds, and the CPU seconds of the processes it waited for
        (on a shared machine the wall time says as much about the neighbours)."""
        started, before = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            yield
        finally:
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            self.timings[label] = f"{time.monotonic() - started:.1f} s wall, {cpu:.1f} s CPU"


def cargo_env(key: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of a cached cargo build of ``key`` (to add to a process's environment).

    ``RUSTUP_HOME`` stays where rustup put the toolchains (``~/.rustup``): rustup's cargo
    proxy finds them there whatever ``CARGO_HOME`` says.
    """
    environ = os.environ if environ is None else environ
    root = cargo_root()
    cargo = Path(require_cargo()).parent
    path = environ.get("PATH", "")
    return {
        "CARGO_HOME": str(root / "home"),
        "CARGO_TARGET_DIR": str(root / "target" / key),
        "RUSTUP_HOME": environ.get("RUSTUP_HOME") or str(Path.home() / ".rustup"),
        "PATH": f"{cargo}{os.pathsep}{path}" if str(cargo) not in path.split(os.pathsep) else path,
        "CARGO_TERM_COLOR": "never",
    }


@contextmanager
def cargo_project(key: str) -> Iterator[CargoProject]:
    """The cached project directory of ``key``, emptied, held for this test alone.

    Yields a :class:`CargoProject` whose ``directory`` is empty (a fresh project goes
    there) and whose ``env`` builds through the key's cached registry and target.
    """
    env = cargo_env(key)
    directory = cargo_root() / "projects" / key
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f".{key}.flock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another run of this key waits here
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir()
        yield CargoProject(key, directory, env)


def skip_if_unreachable(output: str, what: str = "crates.io") -> None:
    """Skip (or fail in CI) when a cargo step failed because ``what`` did not answer."""
    if UNREACHABLE.search(output):
        tail = "\n".join(output.strip().splitlines()[-6:])
        skip_or_fail(f"{what} cannot be reached:\n{tail}")
