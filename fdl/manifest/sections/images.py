"""The ``images:`` section: Docker image profiles (``fdl image ...``).

Example::

    images:
      dev: {}                      # toolchain image, libtorch mounted from the host
      train:                       # slim training image
        program: build/train
        args: [--steps, "100"]
        mounts: ["./data:/workspace/data:ro", "./runs:/workspace/runs"]
"""

from __future__ import annotations

from fdl.manifest._nodes import MapNode, ScalarNode, is_set
from fdl.manifest.schema import (
    ENV_NAME,
    MOUNT,
    PROFILE_NAME,
    RELATIVE,
    Bool,
    Checker,
    Enum,
    Float,
    Int,
    ListOf,
    MapOf,
    Obj,
    OneOf,
    Spec,
    Str,
    Version,
    env_name,
    for_generated_files,
)

__all__ = ["KINDS", "PROFILE", "SECTIONS"]

KINDS = ("dev", "train", "builder")
IMAGE_REF = (
    r"(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@sha256:[0-9a-f]{64})?"
)
PACKAGE = r"[a-z0-9][a-z0-9+.:=~-]*"
PACKAGE_RULE = "a Debian package name, optionally =VERSION"
IN_PROJECT = "a path relative to the project, without ':'"

# Keys that only make sense for some kinds: key -> kinds.
ONLY_FOR = {
    "build-base": ("train",),
    "build-packages": ("train",),
    "build": ("train",),
    "build-dir": ("train",),
    "program": ("train",),
    "args": ("train",),
    "files": ("train",),
    "strip": ("train",),
    "dlopen": ("train",),
    "mounts": ("train",),
    "secrets": ("train",),
    "cuda": ("builder",),
    "libtorch": ("dev",),
    "follow-active": ("dev",),
    "setup": ("dev", "train"),
    "toolchain": ("train",),
    "variant": ("dev", "train"),
}


def _kind_of(name: str, node: MapNode) -> str | None:
    child = node.entries.get("kind")
    if isinstance(child, ScalarNode) and isinstance(child.value, str):
        return child.value
    return name if name in KINDS else None


def _check_profile(node: MapNode, path: tuple[str, ...], checker: Checker) -> None:
    name = path[-1] if path else "?"
    kind = _kind_of(name, node)
    if kind is None:
        checker.fail(
            node,
            path,
            f"profile {name!r} needs `kind:`",
            f"set kind: to one of {', '.join(KINDS)} (profiles named like a kind get it implicitly)",
        )
        return
    for key, kinds in ONLY_FOR.items():
        if not is_set(node, key):
            continue
        if kind not in kinds:
            checker.fail(
                node.entries[key],
                (*path, key),
                f"`{key}:` does not apply to a {kind} image",
                f"it applies to {' and '.join(kinds)} images; remove it here",
            )


def _check_secret(node: MapNode, path: tuple[str, ...], checker: Checker) -> None:
    given = [key for key in ("env", "file") if key in node.entries]
    if len(given) != 1:
        checker.fail(
            node,
            path,
            "a build secret needs exactly one of `env:` or `file:`",
            "e.g. {env: PIP_TOKEN} or {file: ~/.netrc}",
        )


SECRET: Spec = Obj(
    {
        "env": env_name("PIP_TOKEN", "Host environment variable holding the secret."),
        "file": Str("Host file holding the secret (relative to the project, or absolute)."),
    },
    description="Where a build secret comes from (read at /run/secrets/<id> by the build).",
    validators=[_check_secret],
)

PROFILE: Spec = Obj(
    {
        "kind": Enum(KINDS, "dev (toolchain), train (slim, multi-stage) or builder (libtorch)."),
        "base": Str(
            "Base image of the final stage (default: from fdl's data for the variant).",
            pattern=IMAGE_REF,
            example="debian:bookworm-slim",
        ),
        "build-base": Str(
            "Base image of the build stage (default: from fdl's data).",
            pattern=IMAGE_REF,
            example="nvidia/cuda:12.8.1-devel-ubuntu24.04",
        ),
        "variant": Str(
            "libtorch variant (default: the active one).",
            pattern=r"(?:precompiled|builds)/[A-Za-z0-9][A-Za-z0-9._+-]*",
            example="precompiled/cu128",
        ),
        "libtorch": Enum(("mounted", "baked"), "dev: mount the variant at run time or bake it in."),
        "follow-active": Bool(
            "dev, mounted: mount the active libtorch variant when it is a CUDA build, "
            "`variant:` otherwise (the image keeps `variant:`'s CUDA)."
        ),
        "cuda": Version("builder: the CUDA version of the toolchain (12.8); default CPU."),
        "packages": ListOf(
            Str(pattern=PACKAGE, example="libgomp1", rule=PACKAGE_RULE), "Extra system packages."
        ),
        "build-packages": ListOf(
            Str(pattern=PACKAGE, example="libssl-dev", rule=PACKAGE_RULE),
            "Extra system packages of the build stage.",
        ),
        "env": MapOf(
            OneOf(Str(), Int(), Float(), Bool()),
            "Environment variables of the image (never secrets: they would be stored in it).",
            key_pattern=ENV_NAME,
            key_example="`OMP_NUM_THREADS`",
        ),
        "pass-env": ListOf(
            env_name("HF_TOKEN"),
            "Host variables passed to `fdl image run` (e.g. tokens).",
        ),
        "context": Str(
            "Build context: a directory relative to the project (default: the project).",
            pattern=RELATIVE,
            example="services/train",
        ),
        "setup": ListOf(
            Str(script=True),
            "Shell commands run as root after the system packages (dev images; the build "
            "stage of train images), e.g. to install a toolchain apt does not have.",
        ),
        "toolchain": Enum(
            ("setup", "host"),
            "train, cargo builds: where the build stage's Rust comes from: setup (what "
            "`setup:` installs, e.g. rustup; the default) or host (this machine's toolchain, "
            "checked against rust-toolchain.toml, and the crates of Cargo.lock vendored "
            "here: the build step needs no network).",
        ),
        "build": Str(
            "Build command run in the project directory of the build stage (lines of a "
            "multi-line script run one after the other, stopping at the first failure).",
            script=True,
        ),
        "build-dir": Str(
            "Build directory (default build).",
            pattern=r"[^/][^:]*",
            example="build",
            rule=IN_PROJECT,
        ),
        "program": Str("The built program, relative to the project (e.g. build/train)."),
        "args": ListOf(Str(), "Default arguments of the program."),
        "files": ListOf(
            Str(pattern=r"[^/][^:]*", example="configs/train.yml", rule=IN_PROJECT),
            "Project paths the image carries too.",
        ),
        "user": Str(
            "Non-root user name.",
            pattern=r"[a-z_][a-z0-9_-]*",
            example="trainer",
            rule="a Linux user name: lowercase letters, digits, '_' and '-'",
        ),
        "uid": Int("Its numeric id (not 0).", minimum=1, maximum=2**31 - 2),
        "workdir": Str(
            "Working directory.", pattern=r"/.*", example="/workspace", rule="an absolute path"
        ),
        "tag": Str("Image name.", pattern=IMAGE_REF, example="myproject-train:latest"),
        "labels": MapOf(Str(), "Extra image labels."),
        "dlopen": ListOf(Str(), "Extra libraries the program loads with dlopen (globs)."),
        "strip": Bool("Strip symbol tables from the program and its libraries (default true)."),
        "mounts": ListOf(
            Str(pattern=MOUNT, example="./data:/workspace/data:ro"),
            "Project directories mounted by `fdl image run` (host:container[:ro]).",
        ),
        "secrets": MapOf(
            SECRET,
            "Build secrets by id (BuildKit secret mounts).",
            key_pattern=r"[A-Za-z0-9_.-]+",
            key_example="`pip_token`",
        ),
        "gpus": Str(
            "GPUs for `fdl image run`: auto, all, none, a count or device=0,1.",
            pattern=r"auto|all|none|[0-9]+|device=[0-9,]+",
            example="device=0,1",
        ),
        "shm-size": Str(
            "/dev/shm size for `fdl image run`.",
            pattern=r"[0-9]+[bkmgBKMG]?",
            example="8g",
            rule="a number with an optional unit b, k, m or g",
        ),
    },
    description="An image profile.",
    validators=[_check_profile],
)

SECTIONS: dict[str, Spec] = {
    # Every value lands in a Dockerfile or compose file, and through `fdl ci generate`
    # in the bake file and the workflow: one line each, no `${{`.
    "images": for_generated_files(
        MapOf(
            PROFILE,
            "Docker image profiles built by `fdl image build` (dev, train, builder).",
            key_pattern=PROFILE_NAME,
            key_example="`dev`, `train`, `train-cuda`",
        ),
        expressions=True,
    ),
}
