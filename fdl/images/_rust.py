"""``toolchain: host``: this machine's Rust toolchain and the project's crates, as images.

rustup is how fdl's images get Rust (the distributions' rustc is older than
floDl's edition 2024 needs), but rustup downloads from static.rust-lang.org and
cargo from crates.io, from inside ``docker build``: behind a firewall, or a proxy
whose certificate the image does not trust, neither works, while the host's
cargo does. With ``toolchain: host`` the build step takes both from the host:

- the toolchain rustup (or Rust's standalone installer) put on this machine, the
  one ``rustc`` runs in the project (rust-toolchain.toml's), its version checked
  against that pin (or Cargo.toml's ``rust-version``), made into a ``FROM scratch``
  image of its ``bin/cargo``, ``bin/rustc`` and ``lib/`` (``fdl-rust:<version>-<key>``,
  the key from ``rustc -vV``: made once per toolchain, shared by projects);
- the crates of Cargo.lock, vendored by the host's cargo (``cargo vendor``, through
  its own network settings), with the ``config.toml`` that points cargo at them, as an
  image (``fdl-crates:<project>-<profile>``) the build step mounts at ``/.cargo``
  (cargo reads ``/.cargo/config.toml`` for any directory below ``/``).

As with the libtorch image (:mod:`fdl.images._variant`): Docker 20.10's BuildKit has
no second build context, but reads images as stages. The toolchain is bind-mounted
in the build stage only: the runtime image never holds it. Rust's own toolchains
(rustup's, the standalone installer's) run on any glibc from 2.17, so a newer host
builds for an older image's glibc alike: the program is compiled in the image.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from fdl.engine import BuildSpec, Engine, LineCallback
from fdl.errors import CommandFailed, EnvironmentProblem, NetworkError
from fdl.images._data import images_data
from fdl.images._render import host_rust_images
from fdl.images._spec import ImageSpec
from fdl.paths import owner_labels
from fdl.runner import Runner

__all__ = [
    "HostRust",
    "RustPin",
    "ensure_host_rust",
    "probe_host_rust",
    "rust_pin",
    "vendor_crates",
]

StatusCallback = Callable[[str], None]

_RELEASE = re.compile(r"^release:\s*(\S+)", re.M)
_NUMBERED = re.compile(r"\d+\.\d+(?:\.\d+)?")
# cargo's words when it could not reach a registry (curl's and its own).
_NETWORK = re.compile(
    r"Could not resolve host|failed to download|spurious network error|SSL|"
    r"Connection refused|timed out|failed to query replaced source registry|"
    r"failed to get .* as a dependency|download of .* failed",
    re.I,
)


# What a build needs of a toolchain (a rustup toolchain's own directory, or the prefix
# Rust's standalone installer wrote, /usr/local by default, with other programs'
# files beside): cargo and rustc, the compiler's shared libraries (librustc_driver,
# libLLVM), and rustlib (the standard library, the linker wrappers rust-lld and gcc-ld).
_TOOLCHAIN_FILES = (
    ("bin/cargo bin/rustc", "bin/"),
    ("lib/librustc_driver-*.so lib/libLLVM*", "lib/"),
    ("lib/rustlib/", "lib/rustlib/"),
)


@dataclass(frozen=True)
class RustPin:
    """The Rust a project asks for: ``exact`` (rust-toolchain.toml's numbered channel)
    or ``minimum`` (Cargo.toml's ``rust-version``), and the file that says so."""

    version: str
    exact: bool
    origin: str

    def refusal(self, found: str) -> str | None:
        """Why rustc ``found`` does not fit (None: it does)."""
        from fdl.compat import version_key

        have = version_key(found)
        want = version_key(self.version)
        if self.exact and have[: len(want)] != want:
            return f"{self.origin} pins {self.version}"
        if not self.exact and have < want:
            return f"{self.origin} needs {self.version} or newer"
        return None


@dataclass(frozen=True)
class HostRust:
    """This machine's toolchain for the project: its sysroot, release and ``rustc -vV``."""

    sysroot: Path
    version: str
    verbose: str

    @property
    def key(self) -> str:
        """Names this toolchain: its ``rustc -vV`` (release, commit, host), its place, and
        what fdl copies of it (a new fdl that copies more makes a new image)."""
        text = f"{self.verbose}\0{self.sysroot}\0{_TOOLCHAIN_FILES!r}"
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def image(self) -> str:
        """The exact name of its image (``fdl-rust:<version>-<key>``)."""
        return f"{images_data().paths['rust_image']}:{self.version}-{self.key}"


def rust_pin(directory: Path) -> RustPin | None:
    """The Rust the crate in ``directory`` asks for (None: any).

    Raises:
        EnvironmentProblem: ``rust-toolchain.toml`` or ``Cargo.toml`` is a FIFO, a device
            or a directory (reading it, here or by rustup and cargo, would never end).
    """
    from fdl._files import NotARegularFile, load_toml, read_small_text

    for name, table, key in (
        ("rust-toolchain.toml", "toolchain", "channel"),
        ("Cargo.toml", "package", "rust-version"),
    ):
        try:
            data = load_toml(read_small_text(directory / name, limit=1 << 22) or "")
        except NotARegularFile as exc:
            if not exc.reason.endswith("not a file"):  # too large, not UTF-8: no pin read
                continue
            raise EnvironmentProblem(
                f"{exc.path} {exc.reason}: rustup and cargo would wait on it forever",
                hint=f"replace {exc.path} with the file it should be, or remove it",
            ) from None
        except (OSError, ValueError):
            continue  # missing or unreadable: `fdl diagnose` reports a broken file
        section = data.get(table)
        text = str(section.get(key) or "") if isinstance(section, dict) else ""
        if _NUMBERED.fullmatch(text):
            return RustPin(text, exact=name == "rust-toolchain.toml", origin=name)
    return None


def probe_host_rust(directory: Path, runner: Runner, where: str) -> HostRust:
    """The toolchain ``rustc`` is in ``directory`` (rustup honours rust-toolchain.toml
    there), checked against the project's pin and for being a whole toolchain.

    Raises:
        EnvironmentProblem: no rustc, the wrong release, or not a self-contained toolchain.
    """
    pin = rust_pin(directory)
    wanted = pin.version if pin is not None else "stable"
    install = (
        f"install Rust {wanted} on this machine (rustup toolchain install {wanted}; where "
        "rustup cannot download, Rust's standalone installer: "
        "https://forge.rust-lang.org/infra/other-installation-methods.html), "
        f"or remove {where} to install Rust in the image with `setup:`"
    )
    # rustup >= 1.28 would otherwise try to download a pinned toolchain that is missing
    env = {**os.environ, "RUSTUP_AUTO_INSTALL": "0"}
    try:
        done = [
            runner.run(argv, cwd=directory, env=env, check=False, timeout=60, max_output=1 << 16)
            for argv in (["rustc", "-vV"], ["rustc", "--print", "sysroot"])
        ]
    except EnvironmentProblem as missing:  # no rustc on PATH
        raise EnvironmentProblem(
            f"{where}: host takes this machine's Rust: {missing.message}", hint=install
        ) from None
    failed = next((result for result in done if not result.ok), None)
    if failed is not None:
        said = [line.strip() for line in (failed.stderr or failed.stdout).splitlines()]
        # rustup's first error line (a backtrace may follow it, with RUST_BACKTRACE set)
        first = next((line for line in said if line.startswith("error")), None)
        said_first = first or next((line for line in said if line), f"status {failed.returncode}")
        raise EnvironmentProblem(
            f"{where}: host takes this machine's Rust, and `{' '.join(failed.argv)}` "
            f"fails in {directory}: {said_first}",
            hint=install,
        )
    verbose = done[0].stdout.strip()
    release = _RELEASE.search(verbose)
    version = release.group(1) if release else "unknown"
    if pin is not None:
        reason = pin.refusal(version)
        if reason is not None:
            raise EnvironmentProblem(
                f"{where}: host: this machine's rustc in {directory} is {version}, but {reason}",
                hint=install,
            )
    sysroot = Path(done[1].stdout.strip()).resolve()
    lacking = [
        name for name in ("bin/cargo", "bin/rustc", "lib/rustlib") if not (sysroot / name).exists()
    ]
    if lacking:
        raise EnvironmentProblem(
            f"{where}: host: the Rust of this machine at {sysroot} is not a whole toolchain "
            f"(no {', '.join(lacking)}; a distribution's rustc, linked against its libraries?)",
            hint=install,
        )
    return HostRust(sysroot, version, verbose)


def vendor_crates(directory: Path, runner: Runner, dest: Path, mounted_at: str) -> str:
    """``cargo vendor`` the crates of ``directory``'s Cargo.lock into ``dest/vendor`` and
    return the ``config.toml`` that points cargo at them where ``dest`` is mounted.

    Raises:
        NetworkError: cargo could not reach its registry.
        CommandFailed: cargo vendor failed otherwise.
    """
    vendor = dest / "vendor"
    argv = ["cargo", "vendor", "--versioned-dirs", str(vendor)]
    done = runner.run(argv, cwd=directory, check=False, timeout=1800)
    if not done.ok:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        if _NETWORK.search(tail):
            raise NetworkError(
                f"cargo on this machine could not download the crates of {directory}",
                hint="check that cargo reaches its registry here (`cargo fetch` in the "
                "project; proxies: cargo's http.proxy, CARGO_HTTP_CAINFO), then run "
                "`fdl image build` again",
                details=tail,
            )
        raise CommandFailed(
            argv,
            done.returncode,
            output_tail=tail,
            hint="`cargo vendor` must succeed in the project for `toolchain: host` "
            "(fix what cargo says, e.g. Cargo.toml), then run `fdl image build` again",
        )
    config = done.stdout.replace(f'"{vendor}"', f'"{mounted_at}/vendor"')
    if f'"{mounted_at}/vendor"' not in config:
        config = (
            '[source.crates-io]\nreplace-with = "vendored-sources"\n\n'
            f'[source.vendored-sources]\ndirectory = "{mounted_at}/vendor"\n'
        )
    return "# Written by fdl from `cargo vendor`: the build step's crates.\n" + config


def _scratch_dockerfile(comment: str, copies: list[str], labels: Mapping[str, str]) -> str:
    from fdl.images._render import quote

    lines = [f"# Generated by fdl: {comment}", "FROM scratch", *copies]
    if labels:
        pairs = " \\\n      ".join(f"{key}={quote(value)}" for key, value in sorted(labels.items()))
        lines.append(f"LABEL {pairs}")
    return "\n".join(lines) + "\n"


def ensure_host_rust(
    spec: ImageSpec,
    project_dir: Path,
    engine: Engine,
    runner: Runner,
    host: HostRust,
    *,
    cache: Path,
    on_status: StatusCallback | None = None,
    on_line: LineCallback | None = None,
) -> dict[str, str]:
    """Make (or find) the images of ``host`` (the toolchain :func:`probe_host_rust`
    found) and of the profile's vendored crates; return the build arguments that point
    the Dockerfile at them.

    Raises:
        NetworkError, CommandFailed: the crates cannot be vendored.
    """
    directory = project_dir / spec.context
    rust_dir = images_data().paths["rust"]
    crates_dir = images_data().paths["crates"]
    stable_rust, stable_crates = host_rust_images(spec)
    if engine.image_exists(host.image):
        if on_status is not None:
            on_status(f"Rust image {host.image} is up to date")
    else:
        if on_status is not None:
            on_status(f"making the Rust image {host.image} from {host.sysroot}")
        engine.build(
            BuildSpec(
                context=host.sysroot,
                dockerfile_text=_scratch_dockerfile(
                    f"this machine's Rust {host.version} for the build step of training images",
                    [f"COPY {sources} {rust_dir}/{target}" for sources, target in _TOOLCHAIN_FILES],
                    {"dev.fdl.kind": "rust", "dev.fdl.rust": host.version},
                ),
                tags=(host.image,),
                labels=owner_labels(project_dir),
            ),
            on_line=on_line,
        )
    engine.tag(host.image, stable_rust)
    dest = cache / f"{spec.project}-{spec.profile}"
    dest.mkdir(parents=True, exist_ok=True)
    if on_status is not None:
        on_status(f"vendoring the crates of {directory / 'Cargo.lock'} with the host's cargo")
    config = vendor_crates(directory, runner, dest, crates_dir)
    (dest / "config.toml").write_text(config, encoding="utf-8")
    engine.build(
        BuildSpec(
            context=dest,
            dockerfile_text=_scratch_dockerfile(
                f"the crates of {spec.project}'s Cargo.lock, vendored on the host",
                ["COPY config.toml /config.toml", "COPY vendor/ /vendor/"],
                {"dev.fdl.kind": "crates"},
            ),
            tags=(stable_crates,),
            labels=owner_labels(project_dir),
        ),
        on_line=on_line,
    )
    return {"RUST_IMAGE": host.image, "CRATES_IMAGE": stable_crates}
