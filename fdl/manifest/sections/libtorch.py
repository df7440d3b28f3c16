"""The ``libtorch:`` section: which libtorch a project uses and where it comes from.

::

    libtorch:
      torch: "2.14"                  # default PyTorch version for download / install / setup
      variant: cu130                 # cpu, cu126, cu130 ... or auto (fit the detected GPUs)
      mirror: https://mirror.example/pytorch   # a mirror of download.pytorch.org (same paths)

Other modules add keys (the source-build planner adds ``build:``) by creating a module
named in :data:`EXTENSIONS` that exports ``FIELDS`` (key -> spec); nothing here changes.
"""

from __future__ import annotations

from importlib import import_module

from fdl.manifest.schema import Obj, Spec, Str, Version, for_generated_files

__all__ = ["ENV_ALIASES", "EXTENSIONS", "LIBTORCH_FIELDS", "SECTIONS", "libtorch_spec"]

# Variables that set one key, in the environment variable layer (over the files, under
# --set): the name download.pytorch.org mirrors have had since the reference CLI.
ENV_ALIASES = {"FDL_LIBTORCH_MIRROR": ("libtorch", "mirror")}

LIBTORCH_FIELDS: dict[str, Spec] = {
    "torch": Version("Default PyTorch version (e.g. 2.14 or 2.14.1); the newest known if unset."),
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
