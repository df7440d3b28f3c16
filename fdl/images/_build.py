"""Building planned images through the container engine.

The build context is the project directory (its ``.dockerignore`` written or
checked first); the libtorch variant comes in as an image (see
:mod:`fdl.images._variant`), made once per variant content.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from fdl.engine import BuildResult, BuildSpec, Engine, LineCallback, Secret, default_engine
from fdl.errors import NetworkError, UsageError
from fdl.images._context import IgnoreFile, ensure_dockerignore
from fdl.images._render import render_dockerfile, render_libtorch_dockerfile
from fdl.images._spec import ImageSpec, VariantRef
from fdl.images._variant import keyed_image
from fdl.paths import owner_labels
from fdl.runner import Runner

__all__ = ["BuiltImage", "build_images", "build_spec", "ensure_libtorch_image"]

StatusCallback = Callable[[str], None]


@dataclass(frozen=True)
class BuiltImage:
    """One image that was built.

    Attributes:
        spec: Its plan.
        result: What the engine reported (image id, cached and built steps).
        libtorch_image: The variant image it read, if any.
        seconds: How long the build took (wall clock).
        pushed: Whether it was pushed.
    """

    spec: ImageSpec
    result: BuildResult
    libtorch_image: str | None
    seconds: float
    pushed: bool = False


def _secrets(spec: ImageSpec, project_dir: Path, environ: Mapping[str, str]) -> dict[str, Secret]:
    """The build secrets, checked before the build (a missing one would fail late)."""
    secrets: dict[str, Secret] = {}
    for secret in spec.secrets:
        where = f"images.{spec.profile}.secrets.{secret.id}"
        if secret.env is not None:
            if secret.env not in environ:
                raise UsageError(
                    f"{where}: the build secret comes from ${secret.env}, which is not set",
                    hint=f"export {secret.env}=... before building (it never lands in the image)",
                )
            secrets[secret.id] = Secret(env=secret.env)
        elif secret.file is not None:
            path = (project_dir / Path(os.path.expanduser(secret.file))).resolve()
            if not path.is_file():
                raise UsageError(
                    f"{where}: the build secret's file {path} does not exist",
                    hint="create it, or point `file:` at the file holding the secret",
                )
            secrets[secret.id] = Secret(file=path)
    return secrets


def build_spec(
    spec: ImageSpec,
    project_dir: Path,
    *,
    libtorch_image: str | None = None,
    no_cache: bool = False,
    environ: Mapping[str, str] | None = None,
    cache_from: Sequence[str] = (),
    cache_to: Sequence[str] = (),
    extra_args: Mapping[str, str] | None = None,
) -> BuildSpec:
    """The engine's build of one planned image (context: the profile's ``context:``
    under ``project_dir``; cache sources and exports as ``docker build`` takes them;
    ``extra_args``: further build arguments, e.g. the host Rust images)."""
    build_args = {"LIBTORCH_IMAGE": libtorch_image} if libtorch_image else {}
    build_args.update(extra_args or {})
    return BuildSpec(
        context=project_dir / spec.context,
        dockerfile_text=render_dockerfile(spec),
        tags=(spec.tag,),
        build_args=build_args,
        secrets=_secrets(spec, project_dir, os.environ if environ is None else environ),
        cache_from=tuple(cache_from),
        cache_to=tuple(cache_to),
        no_cache=no_cache,
    )


def ensure_libtorch_image(
    variant: VariantRef,
    engine: Engine,
    fdl_version: str,
    *,
    on_status: StatusCallback | None = None,
    on_line: LineCallback | None = None,
    project_dir: Path | None = None,
) -> str:
    """The image of the variant's current contents, built when missing (labelled with
    this user and ``project_dir``: `fdl cache clean images` takes only its owner's).

    Returns:
        Its exact name (``fdl-libtorch:<variant>-<key>``); the project's stable name
        (``fdl-libtorch:<project>-<variant>``) is pointed at it too.
    """
    keyed = keyed_image(variant)
    if engine.image_exists(keyed):
        if on_status is not None:
            on_status(f"libtorch image {keyed} is up to date")
    else:
        if on_status is not None:
            on_status(f"making the libtorch image {keyed} from {variant.name}")
        assert variant.directory is not None  # keyed_image checked it
        engine.build(
            BuildSpec(
                context=variant.directory,
                dockerfile_text=render_libtorch_dockerfile(variant, fdl_version),
                tags=(keyed,),
                labels=owner_labels(project_dir),
            ),
            on_line=on_line,
        )
    engine.tag(keyed, variant.image)
    return keyed


def build_images(
    specs: Sequence[ImageSpec],
    project_dir: Path,
    *,
    engine: Engine | None = None,
    no_cache: bool = False,
    push: bool = False,
    environ: Mapping[str, str] | None = None,
    on_status: StatusCallback | None = None,
    on_line: LineCallback | None = None,
    on_ignore: Callable[[IgnoreFile], None] | None = None,
    runner: Runner | None = None,
) -> list[BuiltImage]:
    """Build each planned image (and the variant images they read), in order.

    The ``.dockerignore`` of each build context is written (or, when it is the user's,
    checked) first: without it the daemon would receive ``libtorch/`` and any ``.env``.

    Args:
        specs: The planned images.
        project_dir: The project (build contexts are relative to it).
        engine: The container engine (default: the process-wide one).
        no_cache: Build every step again.
        push: Push each image after building it.
        environ: Where env-sourced build secrets are read (default: os.environ).
        on_status: Receives one line per stage of the work.
        on_line: Receives the engine's build output, line by line.
        on_ignore: Receives what happened to the ``.dockerignore``.
        runner: Runs the host's rustc and cargo for ``toolchain: host`` profiles.

    Raises:
        UsageError: a build secret is missing.
        EnvironmentProblem: no engine, the engine cannot build with BuildKit, or the
            host's Rust does not fit a ``toolchain: host`` profile.
        NetworkError: the host's cargo cannot download the crates (``toolchain: host``).
        CommandFailed: a build step failed.
    """
    chosen = engine or default_engine()
    env = os.environ if environ is None else environ
    for spec in specs:  # every secret is checked before anything is built
        _secrets(spec, project_dir, env)
    # and the host's Rust of `toolchain: host` profiles (rustc's release against the pin)
    hosts = {}
    if any(spec.host_rust for spec in specs):
        from fdl.images._rust import probe_host_rust
        from fdl.runner import default_runner

        runner = runner or default_runner()
        hosts = {
            spec.profile: probe_host_rust(
                project_dir / spec.context, runner, f"images.{spec.profile}.toolchain"
            )
            for spec in specs
            if spec.host_rust
        }
    for context in dict.fromkeys(spec.context for spec in specs):
        ignore = ensure_dockerignore(
            project_dir / context, [spec for spec in specs if spec.context == context]
        )
        if on_ignore is not None:
            on_ignore(ignore)
    built: list[BuiltImage] = []
    for spec in specs:
        started = time.monotonic()
        libtorch_image = None
        if spec.needs_libtorch_image and spec.variant is not None:
            libtorch_image = ensure_libtorch_image(
                spec.variant,
                chosen,
                spec.fdl_version,
                on_status=on_status,
                on_line=on_line,
                project_dir=project_dir,
            )
        extra = {}
        if spec.profile in hosts and runner is not None:
            from fdl.images._rust import ensure_host_rust
            from fdl.paths import cache_dir, own_cache_dir

            extra = ensure_host_rust(
                spec,
                project_dir,
                chosen,
                runner,
                hosts[spec.profile],
                cache=own_cache_dir(cache_dir(env) / "crates"),
                on_status=on_status,
                on_line=on_line,
            )
        request = build_spec(
            spec,
            project_dir,
            libtorch_image=libtorch_image,
            no_cache=no_cache,
            environ=env,
            extra_args=extra,
        )
        if on_status is not None:
            on_status(f"building {spec.tag} ({spec.kind} image of profile {spec.profile})")
        try:
            result = chosen.build(request, on_line=on_line)
        except NetworkError as error:
            raise _unreachable_base(error, spec) from None
        if push:
            if on_status is not None:
                on_status(f"pushing {spec.tag}")
            chosen.push(spec.tag, on_line=on_line)
        built.append(
            BuiltImage(spec, result, libtorch_image, time.monotonic() - started, pushed=push)
        )
    return built


def _unreachable_base(error: NetworkError, spec: ImageSpec) -> NetworkError:
    """A registry failure, with the manifest keys that name the images it tried to pull."""
    bases = ", ".join(dict.fromkeys(b for b in (spec.build_base, spec.base) if b))
    keys = f"images.{spec.profile}.base" + (" / build-base" if spec.build_base else "")
    hint = (
        f"the {spec.profile} image starts from {bases}; when the registry is out of reach, "
        f"point {keys} at images the engine already has "
        f"(e.g. `fdl --set images.{spec.profile}.base=IMAGE image build {spec.profile}`)"
    )
    if error.hint:
        hint = f"{error.hint}; {hint}"
    return NetworkError(error.message, hint=hint, details=error.details)
