"""The libtorch variant of an image, and the image fdl makes of it.

Why an image: a build's context is the project directory, and its
``.dockerignore`` keeps ``libtorch/`` out (hundreds of MB to GB, and often
not under the project at all). Docker 20.10's built-in BuildKit has no second
build context (``--build-context`` needs buildx and Dockerfile 1.4), but every
BuildKit reads other images as stages. So fdl builds the variant once into a
``FROM scratch`` image (``fdl-libtorch:<variant>-<content key>``, shared by projects
since the key names its content, and tagged with the project's own stable name
``fdl-libtorch:<project>-<variant>``), and the generated Dockerfiles read it as the stage
``libtorch``: the build stage bind-mounts it (nothing of it lands in a layer
but the libraries the program loads), a baked dev image copies it. The key
changes when any file of the variant changes, so a reinstalled variant is
rebuilt and an unchanged one costs one ``docker image inspect``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from fdl.compat.rocm import gfx_sort_key
from fdl.compat.vendors import vendor_of_variant
from fdl.errors import UsageError
from fdl.images._data import images_data
from fdl.images._spec import VariantRef
from fdl.libtorch import variants
from fdl.paths import Context

__all__ = [
    "VariantResolver",
    "content_key",
    "keyed_image",
    "project_libtorch_image",
    "project_resolver",
    "variant_ref",
    "variant_slug",
]

VariantResolver = Callable[[str | None], VariantRef]


def variant_ref(name: str, directory: Path | None, *, pinned: bool = False) -> VariantRef:
    """What an image needs to know about an installed variant."""
    info = variants.read_info(directory, name) if directory is not None else None
    vendor = info.vendor if info is not None else vendor_of_variant(name)
    archs: list[str] = []
    if info is not None:
        kind = "gfx" if vendor == "amd" else "cubin"
        archs = list(info.archs_found.get(kind) or info.archs_requested)
    cuda = info.cuda if info is not None else None
    cudnn = bool(info is not None and info.cudnn)
    if cuda and not cudnn and directory is not None:
        cudnn = any((directory / "lib").glob("libcudnn*.so*"))
    slug = variant_slug(name)
    return VariantRef(
        name=name,
        directory=directory,
        torch=info.torch if info is not None else None,
        cuda=cuda,
        cudnn=cudnn,
        archs=tuple(sorted(set(archs), key=gfx_sort_key if vendor == "amd" else None)),
        image=f"{images_data().paths['libtorch_image']}:{slug}",
        pinned=pinned,
        vendor=vendor,
    )


def variant_slug(name: str) -> str:
    """``precompiled/cu130`` -> ``precompiled-cu130`` (a tag-safe form of the name)."""
    return name.replace("/", "-").lower()


def project_libtorch_image(name: str, project: str) -> str:
    """The project's stable name of its variant image (``fdl-libtorch:<project>-<variant>``).

    Per project: a name that projects shared (``fdl-libtorch:precompiled-cpu``) would be
    re-pointed by each project's build, and another project's compose file would then run
    a libtorch it never asked for.
    """
    return f"{images_data().paths['libtorch_image']}:{project}-{variant_slug(name)}"


def project_resolver(context: Context) -> VariantResolver:
    """Resolve variant names (None: the active one) in a libtorch context.

    Raises (from the returned function):
        UsageError: no active variant, or the named one is not installed.
    """

    def resolve(name: str | None) -> VariantRef:
        chosen = name or variants.active_name(context)
        if chosen is None:
            raise UsageError(
                f"no libtorch variant is active in {context.label()}",
                hint="set `variant:` in the image profile, or install and activate one "
                "(`fdl libtorch download` or `fdl libtorch install --from-wheel`)",
            )
        directory = variants.variant_dir(context, chosen)
        if not (directory / "lib").is_dir():
            installed = ", ".join(variants.list_variants(context)) or "none"
            raise UsageError(
                f"libtorch variant {chosen!r} is not installed in {context.label()}",
                hint=f"installed variants: {installed}",
            )
        return variant_ref(chosen, directory, pinned=name is not None)

    return resolve


def content_key(directory: Path) -> str:
    """A key that changes when any file of the variant changes (names, sizes, times).

    Stat-based rather than a content hash: hashing a CUDA variant's gigabytes on
    every build would cost seconds; installs write new files, so times change.
    """
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            stat = path.lstat()
            relative = path.relative_to(directory).as_posix()
            digest.update(
                f"{relative}\0{stat.st_size}\0{stat.st_mtime_ns}\0{stat.st_mode}\n".encode()
            )
    return digest.hexdigest()[:16]


def keyed_image(variant: VariantRef) -> str:
    """The exact image name of the variant's current contents."""
    if variant.directory is None:
        raise UsageError(
            f"libtorch variant {variant.name!r} is not installed here",
            hint="install it (`fdl libtorch download` or `fdl libtorch install --from-wheel`) "
            "before building images that use it",
        )
    # Shared by every project: the content key makes the name mean one set of files.
    shared = f"{images_data().paths['libtorch_image']}:{variant_slug(variant.name)}"
    return f"{shared}-{content_key(variant.directory)}"
