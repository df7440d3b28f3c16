"""Image specs to text: Dockerfiles, the compose file, the .dockerignore.

Templates live in the top-level ``dockerfiles/`` folder; this module prepares
every value (sorted, quoted) so templates only loop and branch. The output
depends only on the specs: no timestamps, no host paths.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fdl._assets import asset_dir, template_environment
from fdl._grammar import quoted
from fdl._text import printable
from fdl.images._data import images_data
from fdl.images._spec import ImageSpec, VariantRef

if TYPE_CHECKING:
    import jinja2

__all__ = [
    "COMPILER_CACHE",
    "LISTING",
    "dockerfile_name",
    "render_compose",
    "render_dockerfile",
    "render_dockerignore",
    "render_libtorch_dockerfile",
]

LISTING = "fdl-closure.tsv"  # sizes of the program and its libraries, in the app dir


def _environment() -> jinja2.Environment:
    return template_environment(asset_dir("dockerfiles"))


def _render(template: str, **values: Any) -> str:
    text = _environment().get_template(template).render(**values)
    lines = [line.rstrip() for line in text.splitlines()]
    # Collapse the blank runs that skipped blocks leave behind.
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip("\n") + "\n"


def quote(value: str) -> str:
    """A Dockerfile double-quoted value (ENV, LABEL): no variable expansion, one line (a
    value's line breaks and the blanks around them become one space), by the Dockerfile
    writer of :func:`fdl._grammar.quoted`; a control character is refused (exit 2)."""
    flat = " ".join(value.split()) if "\n" in value or "\r" in value else value
    return quoted("dockerfile", flat, what="a value", source="the image's Dockerfile")


def _shell(word: str) -> str:
    return quoted("run", word, what="a word", source="the image's Dockerfile")


def slug(text: str) -> str:
    """A cache id piece from an image reference or name."""
    return "".join(char if char.isalnum() or char in "._-" else "-" for char in text.lower())


def apt_cache_id(base: str) -> str:
    """The apt cache mounts' id prefix: one per base image, shared by all projects."""
    return f"fdl-apt-{slug(base)}"


# ccache's cache id: shared by every project (its entries are content-addressed, so
# a stale entry cannot be used, unlike a cached build directory whose make decides by
# file times, which COPY and copies of old files do not move forward).
COMPILER_CACHE = "fdl-ccache"


def build_tool(command: str) -> str:
    """``cargo`` when a line of the build command runs cargo, else ``default``."""
    for line in command.splitlines():
        try:
            words = shlex.split(line)
        except ValueError:
            words = line.split()
        if any(word == "cargo" or word.endswith("/cargo") for word in words):
            return "cargo"
    return "default"


def build_caches(spec: ImageSpec) -> list[tuple[str, str]]:
    """The (cache id, target) mounts of a training image's build step (images.yml)."""
    tool = build_tool(spec.build_command or "")
    names = {
        "project": spec.project,
        "profile": spec.profile,
        "build_dir": spec.build_dir or "build",
    }
    return [
        (slug(ident.format(**names)), target.format(**names))
        for ident, target in images_data().build_caches[tool]
    ]


def host_rust_images(spec: ImageSpec) -> tuple[str, str]:
    """The project's stable names of the images of this machine's Rust toolchain and of
    the crates vendored for the profile (the Dockerfile's defaults of ``RUST_IMAGE`` and
    ``CRATES_IMAGE``; fdl points them at the exact images it made)."""
    paths = images_data().paths
    return (
        f"{paths['rust_image']}:{spec.project}",
        f"{paths['crates_image']}:{slug(spec.project)}-{slug(spec.profile)}",
    )


def dockerfile_name(spec: ImageSpec) -> str:
    """``<profile>.Dockerfile``."""
    return f"{spec.profile}.Dockerfile"


def _build_command(command: str) -> str:
    """Multi-line build scripts run line by line, stopping at the first failure."""
    lines = [line.strip() for line in command.splitlines() if line.strip()]
    return " \\\n    && ".join(lines)


def _wrapped(items: Sequence[str], joiner: str, lead: str = "", width: int = 72) -> list[str]:
    """Items joined by ``joiner``, wrapped to lines of about ``width`` characters; each
    line after the first starts with ``lead``."""
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + len(joiner) + len(item) <= width:
            lines[-1] += joiner + item
        else:
            lines.append((lead if lines else "") + item)
    return lines


def _image_values(spec: ImageSpec) -> dict[str, Any]:
    """What the Dockerfile templates read about one image."""
    app_dir = spec.path("app")
    values: dict[str, Any] = {
        "profile": spec.profile,
        "kind": spec.kind,
        "source": printable(spec.source),  # a comment: one line
        "fdl_version": spec.fdl_version,
        "base": spec.base,
        "build_base": spec.build_base,
        "packages": list(spec.packages),
        "build_packages": list(spec.build_packages),
        "apt_cache": apt_cache_id(spec.base),
        "build_apt_cache": apt_cache_id(spec.build_base or spec.base),
        "libtorch_dir": spec.path("libtorch"),
        "libtorch_image": spec.variant.image if spec.variant is not None else "",
        "baked": spec.libtorch == "baked",
        "user": spec.user,
        "workdir": spec.workdir,
        "workdir_word": _shell(spec.workdir),
        "app_dir": app_dir,
        "env": [(name, quote(value)) for name, value in spec.env],
        "labels": [(name, quote(value)) for name, value in spec.labels],
        "setup": [_build_command(command) for command in spec.setup],
        "host_rust": False,
    }
    if spec.kind == "train":
        name = spec.program_name or "program"
        if spec.host_rust:
            rust_image, crates_image = host_rust_images(spec)
            values.update(
                host_rust=True,
                rust_image=rust_image,
                crates_image=crates_image,
                rust_dir=images_data().paths["rust"],
                crates_dir=images_data().paths["crates"],
                host_rust_mount="--mount=type=bind,from=rust,source={0},target={0}".format(
                    images_data().paths["rust"]
                ),
            )
        values.update(
            build_tool=build_tool(spec.build_command or ""),
            build_caches=build_caches(spec),
            build_env=[(name, quote(value)) for name, value in spec.build_env],
            build_command=_build_command(spec.build_command or ""),
            program=_shell(spec.program or ""),
            build_program=f"/out/app/bin/{name}",
            files=[_shell(path) for path in spec.files],
            secrets=[secret.id for secret in spec.secrets],
            strip=spec.strip,
            dlopen=_wrapped([_shell(pattern) for pattern in spec.dlopen], " "),
            never_ship=list(spec.never_ship),
            reuse=_wrapped(spec.reuse_from_base, "|", lead="|"),  # `case` patterns
            listing_name=LISTING,
            listing=f"{app_dir}/{LISTING}",
            entrypoint=_exec_form([f"{app_dir}/bin/{name}"]),
            cmd=_exec_form(spec.args) if spec.args else None,
        )
    return values


def render_dockerfile(spec: ImageSpec, *, regenerate: str | None = None) -> str:
    """The Dockerfile of one image profile.

    Args:
        regenerate: The command its header names for regenerating it
            (default: ``fdl image render <profile>``).
    """
    values = _image_values(spec)
    values["regenerate"] = printable(regenerate or f"fdl image render {spec.profile}")
    return _render(f"{spec.kind}.Dockerfile.j2", image=values)


def render_libtorch_dockerfile(
    variant: VariantRef, fdl_version: str, *, pushed: str | None = None
) -> str:
    """The Dockerfile of the image fdl makes of a variant (context: its directory), or,
    with ``pushed`` (a reference pinned by digest), of the variant ``fdl libtorch push``
    stored there: its tree (under ``/libtorch``) copied from that image, no context read."""
    labels = {
        "dev.fdl.kind": "libtorch",
        "dev.fdl.variant": variant.name,
        "dev.fdl.torch": variant.torch or "unknown",
        "dev.fdl.cuda": variant.cuda or "none",
        "dev.fdl.version": fdl_version,
    }
    if pushed is not None:
        labels["dev.fdl.libtorch.source"] = pushed
    return _render(
        "libtorch.Dockerfile.j2",
        fdl_version=fdl_version,
        variant=variant.name,
        libtorch_dir=images_data().paths["libtorch"],
        labels=[(name, quote(value)) for name, value in sorted(labels.items())],
        pushed=pushed,
    )


def _exec_form(words: Sequence[str]) -> str:
    """ENTRYPOINT's and CMD's exec form: a JSON array, each word by the JSON writer."""
    return "[" + ", ".join(quoted("json", w, what="an argument", source="CMD") for w in words) + "]"


def _yaml(value: str) -> str:
    """A YAML double-quoted scalar (JSON strings are valid YAML)."""
    return quoted("yaml", value, what="a value", source="the compose file")


def _service(spec: ImageSpec, context: str, dockerfile_dir: str) -> dict[str, Any]:
    libtorch_dir = spec.path("libtorch")
    volumes: list[str] = []
    environment: list[tuple[str, str]] = []
    build_args: list[tuple[str, str]] = []
    # A profile's own context (`context:`) is its build context and its dev sources;
    # compose reads the Dockerfile path relative to the build context.
    build_context, dockerfile = context, _join(dockerfile_dir, dockerfile_name(spec))
    if spec.context != ".":
        build_context = _join(context, spec.context)
        dockerfile = _join(".", posixpath.relpath(dockerfile, spec.context))
    if spec.kind == "dev":
        volumes.append(f"{build_context}:{spec.workdir}")
        if spec.libtorch == "mounted" and spec.variant is not None:
            # The task runner exports LIBTORCH_HOST_PATH (the active variant's host
            # path, as floDl's compose files expect); a pinned variant is mounted as is.
            host = _join(context, f"libtorch/{spec.variant.name}")
            if not spec.variant.pinned:
                host = f"${{LIBTORCH_HOST_PATH:-{host}}}"
            elif spec.follow_active:
                # the active variant when it is a CUDA build (fdl exports the variable
                # only then), else the pinned one: never a CPU libtorch by surprise
                host = f"${{LIBTORCH_CUDA_PATH:-{host}}}"
            volumes.append(f"{host}:{libtorch_dir}:ro")
    for mount in spec.mounts:
        source = mount.source if mount.source.startswith("/") else _join(context, mount.source)
        volumes.append(f"{source}:{mount.target}{':ro' if mount.read_only else ''}")
    if spec.variant is not None and spec.needs_libtorch_image:
        build_args.append(("LIBTORCH_IMAGE", _yaml(spec.variant.image)))
    environment.extend((name, "null") for name in spec.pass_env)
    return {
        "name": spec.profile,
        "image": _yaml(spec.tag),
        "context": _yaml(build_context),
        "dockerfile": _yaml(dockerfile),
        "build_args": build_args,
        "user": _yaml("${FDL_UID:-1000}:${FDL_GID:-1000}") if spec.kind == "dev" else None,
        "workdir": _yaml(spec.workdir),
        "environment": environment,
        "volumes": [_yaml(volume) for volume in volumes],
        "shm_size": _yaml(spec.shm_size) if spec.shm_size else None,
        "interactive": spec.kind == "dev",
        "gpus": spec.variant is not None and spec.variant.cuda is not None,
        "amd": spec.variant is not None and _amd(spec.variant.name),
    }


def _amd(variant: str) -> bool:
    """A ROCm build, by the variant's basename as floDl names them (`rocm70`, `gfx90a`;
    flodl-cli 0.8.0 src/libtorch/detect.rs:158-205): its container needs AMD's devices."""
    return variant.rsplit("/", 1)[-1].startswith(("rocm", "gfx"))


def _join(directory: str, name: str) -> str:
    joined = posixpath.normpath(posixpath.join(directory, name))
    return joined if joined.startswith(("/", ".")) else f"./{joined}"


def render_compose(
    specs: Sequence[ImageSpec], *, context: str = ".", dockerfile_dir: str = "."
) -> str:
    """``docker-compose.yml`` with a service per dev and train profile.

    Args:
        specs: The planned profiles (builder profiles get no service).
        context: The project directory relative to the compose file.
        dockerfile_dir: Where the Dockerfiles are, relative to ``context``.
    """
    chosen = [spec for spec in specs if spec.kind in ("dev", "train")]
    first = chosen[0] if chosen else None
    return _render(
        "docker-compose.yml.j2",
        fdl_version=first.fdl_version if first else "",
        source=printable(first.source) if first else "the manifest",  # a comment: one line
        services=[_service(spec, context, dockerfile_dir) for spec in chosen],
    )


def render_dockerignore(specs: Sequence[ImageSpec]) -> str:
    """The generated ``.dockerignore``: fdl's groups plus each profile's build
    directory and mounted project directories (data can be large)."""
    groups: list[dict[str, Any]] = [
        {"reason": group.reason, "patterns": sorted(group.patterns)}
        for group in images_data().dockerignore
    ]
    listed = {pattern for group in groups for pattern in group["patterns"]}
    extra = set()
    for spec in specs:
        if spec.build_dir:
            extra.add(spec.build_dir)
        for mount in spec.mounts:
            if not mount.source.startswith("/"):
                extra.add(posixpath.normpath(mount.source))
    extra = {pattern for pattern in extra if pattern not in listed and pattern != "."}
    if extra:
        groups.append(
            {
                "reason": "build directories and mounted data of the image profiles",
                "patterns": sorted(extra),
            }
        )
    return _render("dockerignore.j2", groups=groups)
