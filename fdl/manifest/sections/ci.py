"""The ``ci:`` section: the image matrix CI builds (``fdl ci matrix|generate|check|pushed``).

Example::

    ci:
      registry: ghcr.io/acme               # images and caches go here
      variants: [cpu, cu130, build:pascal-blackwell]
      profiles: [dev, train]               # default: every dev and train profile
      tests:
        train: [--steps, "2"]              # docker run --rm <tag> --steps 2

Only shapes are checked here (cheap, on every manifest load); whether a variant exists
for the PyTorch release or a profile is declared is checked by the planner (fdl.ci).
"""

from __future__ import annotations

from fdl.manifest.schema import (
    PROFILE_NAME,
    REGISTRY,
    RELATIVE,
    RELATIVE_RULE,
    Bool,
    Enum,
    ListOf,
    MapOf,
    Obj,
    OneOf,
    Spec,
    Str,
    Version,
    for_generated_files,
    word,
)

__all__ = ["CI", "PINNED", "SECTIONS", "TAG_FIELDS", "VARIANT"]

VARIANT = r"cpu|cu[0-9]{3}|build:[A-Za-z0-9][A-Za-z0-9._-]*"
# The placeholders of the tag scheme.
TAG_FIELDS = ("registry", "project", "profile", "variant", "torch", "version")
# A pushed variant pinned by digest (what `fdl libtorch push` prints): host/path[:tag]@sha256:...
PINNED = REGISTRY + r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?@sha256:[0-9a-f]{64}"
RUNNER = OneOf(
    Str(pattern=r"\S+", example="ubuntu-24.04"),
    ListOf(word("self-hosted")),
    description="A runs-on value: a runner label, or a list of labels (self-hosted).",
)

CACHE: Spec = Obj(
    {
        "registry": Bool(
            "A registry cache per cell in <registry>/<project>-cache:<cell> (default: on "
            "when a registry is set)."
        ),
        "gha": Bool("A GitHub Actions cache per cell (type=gha, scope=<cell>); default off."),
        "mode": Enum(
            ("max", "min"),
            "max (default) also caches the build stage (the compile) and what it reads; "
            "min only the final image's layers.",
        ),
    },
    description="BuildKit caches; each cell has its own scope so cells never overwrite "
    "each other's cache. Exported only by builds of the push branch.",
)

CI: Spec = Obj(
    {
        "registry": Str(
            "Where images and caches are pushed (host/namespace).",
            pattern=REGISTRY,
            example="ghcr.io/acme",
        ),
        "project": Str(
            "The {project} of tags (default: the manifest's `name:`, else its directory's name).",
            pattern=r"[a-z0-9]+(?:[._-][a-z0-9]+)*",
            example="vit-train",
            rule="an image name: lowercase letters and digits, separated by '.', '_' or '-'",
        ),
        "tag": Str(
            "Tag scheme; placeholders: {" + "}, {".join(TAG_FIELDS) + "}.",
            pattern=r"[^\s$]+",
            example="{registry}/{project}-{profile}:{variant}-{version}",
        ),
        "version": Str(
            "The {version} of tags (default latest).",
            pattern=r"[A-Za-z0-9_][A-Za-z0-9_.-]*",
            example="1.4.0",
            rule="a tag: letters, digits, '_', '.' and '-'",
        ),
        "torch": Version(
            "PyTorch of the official variants (default: libtorch.torch, else newest)."
        ),
        "profiles": ListOf(
            Str(pattern=PROFILE_NAME, example="train"),
            "Image profiles to build (default: every dev and train profile).",
        ),
        "variants": ListOf(
            Str(pattern=VARIANT, example="cu130"),
            "libtorch variants: cpu, cuXYZ (official) or build:<recipe> (source build).",
        ),
        "pushed": MapOf(
            Str(
                pattern=PINNED,
                example="registry.example.com/team/libtorch:2.10.0-cu129-sm61@sha256:"
                + "0123456789abcdef" * 4,
                rule="a reference pinned by digest (REPO[:TAG]@sha256:DIGEST), as "
                "`fdl libtorch push` prints it",
            ),
            "Per variant of `variants`: a variant pushed by `fdl libtorch push`, pinned by "
            "digest; its image copies the tree from there instead of installing or building it.",
            key_pattern=VARIANT,
            key_example="`build:pascal-blackwell`",
            key_rule="a variant as in `variants`",
        ),
        "platforms": ListOf(
            Str(
                pattern=r"[a-z0-9]+/[a-z0-9]+(?:/[a-z0-9]+)?",
                example="linux/arm64",
                rule="OS/ARCH[/VARIANT]",
            ),
            "Platforms.",
        ),
        "cache": CACHE,
        "runner": RUNNER,
        "build-runner": RUNNER,
        "branch": word("main", "Push images (and caches) on this branch (default main)."),
        "fdl": Str(
            "How the workflow installs fdl: a pip requirement you control (a git URL at a "
            "commit, a wheel or checkout in the repository: `.` installs the repository "
            "itself), or pip arguments starting with `-` (`--index-url URL fdl==1.0`); "
            "default: derived from how this fdl was installed.",
            pattern=r"\S(.*\S)?",
            example="git+https://git.example.com/you/fdl@0123abc",
            rule="no leading or trailing spaces",
        ),
        "python": Version("Python of the workflow (default 3.11)."),
        "output": Str(
            "Directory of the bake file and the Dockerfiles, relative to the project (default ci).",
            pattern=RELATIVE,
            example="ci",
            rule=RELATIVE_RULE,
        ),
        "workflow": Str(
            "The workflow file, relative to the repository root "
            "(default .github/workflows/fdl-images.yml).",
            pattern=RELATIVE,
            example=".github/workflows/images.yml",
            rule=RELATIVE_RULE,
        ),
        "tests": MapOf(
            OneOf(ListOf(Str()), Bool()),
            "Per profile: arguments for `docker run --rm <tag> ...` testing a built image, "
            "or false for none (default: dev runs cmake --version, train its default arguments).",
            key_pattern=PROFILE_NAME,
            key_example="`train`",
        ),
    },
    description="The image matrix built in CI: profiles x libtorch variants "
    "(`fdl ci generate` writes a bake file and a GitHub Actions workflow).",
    required=("variants",),
)

# Values land in the workflow, the bake file and Dockerfiles: one line each, and no
# `${{` (GitHub would evaluate it in a `run:` step before the shell).
SECTIONS: dict[str, Spec] = {"ci": for_generated_files(CI, expressions=True)}
