"""The ``libtorch:`` section: which libtorch a project uses and where it comes from.

::

    libtorch:
      torch: "2.14"                  # PyTorch version (default: what the framework needs)
      framework-check: true          # refuse a torch the framework cannot compile against
      variant: cu130                 # cpu, cu126, cu130 ... or auto (fit the detected GPUs)
      mirror: https://mirror.example/pytorch   # a mirror of download.pytorch.org (same paths)
      registry: registry.example.com/team/libtorch  # the team's variants (push/pull)

Other modules add keys (the source-build planner adds ``build:``) by creating a module
named in :data:`EXTENSIONS` that exports ``FIELDS`` (key -> spec); nothing here changes.
"""

from __future__ import annotations

from importlib import import_module

from fdl.manifest.schema import Bool, Obj, Spec, Str, Version, for_generated_files

__all__ = ["ENV_ALIASES", "EXTENSIONS", "LIBTORCH_FIELDS", "SECTIONS", "libtorch_spec"]

# Variables that set one key, in the environment variable layer (over the files, under
# --set): the name download.pytorch.org mirrors have had since the reference CLI.
ENV_ALIASES = {
    "FDL_LIBTORCH_MIRROR": ("libtorch", "mirror"),
    "FDL_LIBTORCH_REGISTRY": ("libtorch", "registry"),
}

LIBTORCH_FIELDS: dict[str, Spec] = {
    "torch": Version(
        "PyTorch version (e.g. 2.14 or 2.14.1); if unset, the one the project's framework "
        "(floDl, tch-rs, find_package(Torch X)) compiles against, else the newest known."
    ),
    "framework-check": Bool(
        "Refuse a libtorch.torch the project's framework cannot compile against "
        "(default: true; false keeps the pin on purpose)."
    ),
    "variant": Str(
        "Official build to install: cpu, cuXYZ (cu126, cu130, ...) or auto (fit the GPUs).",
        pattern=r"auto|cpu|cu[0-9]{3}",
        example="cu130",
    ),
    "mirror": Str(
        "Base URL of a mirror of download.pytorch.org holding the same paths "
        "(also $FDL_LIBTORCH_MIRROR, as an environment variable layer).",
        pattern=r"(https?|file)://\S+",
        example="https://mirror.example/pytorch",
    ),
    "registry": Str(
        "The team's OCI repository of libtorch variants (fdl libtorch push/pull); setup, "
        "install and build look there first (also $FDL_LIBTORCH_REGISTRY).",
        pattern=r"[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+",
        rule="host[:port]/namespace/name, lower case, without a tag",
        example="registry.example.com/team/libtorch",
    ),
}

# Modules that may add fields to the section; each exports FIELDS: dict[str, Spec].
EXTENSIONS = ("fdl.manifest.sections.libtorch_build",)


def libtorch_spec() -> Obj:
    """The section's spec: :data:`LIBTORCH_FIELDS` plus every extension present."""
    fields = dict(LIBTORCH_FIELDS)
    for name in EXTENSIONS:
        try:
            module = import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        fields.update(module.FIELDS)
    return Obj(fields, description="The project's libtorch: version, variant, download mirror.")


# Values land in the source build's Dockerfile and scripts, and through `fdl ci generate`
# in the workflow: one line each, no `${{`.
SECTIONS: dict[str, Spec] = {"libtorch": for_generated_files(libtorch_spec(), expressions=True)}
