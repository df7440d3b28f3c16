"""Docker images of a libtorch project: a dev image with the toolchain, and slim
training images that carry only what the trained program loads.

Plan, then execute::

    from fdl.images import plan_images, render_dockerfile

    specs = plan_images(manifest, ["train"])      # pure: ImageSpec values
    print(render_dockerfile(specs[0]))            # deterministic text
"""

from __future__ import annotations

from fdl.images._build import BuiltImage, build_images, build_spec, ensure_libtorch_image
from fdl.images._context import (
    IgnoreFile,
    WrittenFiles,
    ensure_dockerignore,
    missing_essentials,
    write_generated,
    write_image_files,
)
from fdl.images._data import images_data
from fdl.images._plan import (
    DEFAULT_PROFILES,
    ImageDefault,
    image_default,
    manifest_hash,
    plan_images,
    profiles_of,
    project_name,
)
from fdl.images._render import (
    LISTING,
    dockerfile_name,
    render_compose,
    render_dockerfile,
    render_dockerignore,
    render_libtorch_dockerfile,
)
from fdl.images._run import RunPlan, host_has_gpus, plan_run, prepare_mounts, stale_image
from fdl.images._size import LayerSize, SizeReport, parse_listing, size_report
from fdl.images._spec import KINDS, ImageSpec, MountSpec, SecretSpec, VariantRef
from fdl.images._variant import (
    VariantResolver,
    content_key,
    keyed_image,
    project_libtorch_image,
    project_resolver,
    variant_ref,
)

__all__ = [
    "DEFAULT_PROFILES",
    "KINDS",
    "LISTING",
    "BuiltImage",
    "IgnoreFile",
    "ImageDefault",
    "ImageSpec",
    "LayerSize",
    "MountSpec",
    "RunPlan",
    "SecretSpec",
    "SizeReport",
    "VariantRef",
    "VariantResolver",
    "WrittenFiles",
    "build_images",
    "build_spec",
    "content_key",
    "dockerfile_name",
    "ensure_dockerignore",
    "ensure_libtorch_image",
    "host_has_gpus",
    "image_default",
    "images_data",
    "keyed_image",
    "manifest_hash",
    "missing_essentials",
    "parse_listing",
    "plan_images",
    "plan_run",
    "prepare_mounts",
    "profiles_of",
    "project_libtorch_image",
    "project_name",
    "project_resolver",
    "render_compose",
    "render_dockerfile",
    "render_dockerignore",
    "render_libtorch_dockerfile",
    "size_report",
    "stale_image",
    "variant_ref",
    "write_generated",
    "write_image_files",
]
