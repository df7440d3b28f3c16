"""``fdl setup``: decide what libtorch fits this machine (a pure plan), for the CLI to run.

The plan is one of:

- ``keep``: the active variant already runs on every GPU (and is the asked torch version);
- ``activate``: an installed variant does; it only needs activating;
- ``download``: an official build covers every GPU (``fdl libtorch download``);
- ``wheel``: the same, from PyPI (``--from-wheel``, or when download.pytorch.org is out of
  reach);
- ``build``: no official build covers the GPUs together (sm_61 + sm_120): the source
  build that does, described by :func:`fdl.libtorch.build_command` and left to
  ``fdl libtorch build``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fdl.compat import Capability
from fdl.libtorch import variants
from fdl.libtorch._scan import scan_device_code
from fdl.libtorch._select import Selection, select_variant
from fdl.paths import Context

__all__ = ["ACTIONS", "SetupPlan", "plan_setup"]

ACTIONS = ("keep", "activate", "download", "wheel", "build")


@dataclass(frozen=True)
class SetupPlan:
    """What ``fdl setup`` will do.

    Attributes:
        action: One of :data:`ACTIONS`.
        reason: Why, in one line.
        selection: The official build considered.
        variant: The variant kept or activated (``keep``/``activate``).
        command: The equivalent fdl command.
        alternatives: Other commands that would also help.
    """

    action: str
    reason: str
    selection: Selection
    variant: str | None = None
    command: tuple[str, ...] = ()
    alternatives: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "reason": self.reason,
            "variant": self.variant,
            "command": " ".join(self.command),
            "alternatives": list(self.alternatives),
            "selection": self.selection.to_json(),
        }


def covers_gpus(context: Context, name: str, gpus: tuple[Capability, ...]) -> bool:
    """True when the installed variant ``name`` runs on every GPU (read from its binaries)."""
    path = context.libtorch_dir / name
    if not (path / "lib").is_dir():
        return False
    scan = scan_device_code(path)
    if not gpus:
        return True
    return scan.has_device_code and all(v.ok for v in scan.verdicts(gpus))


def _torch_of(context: Context, name: str) -> str | None:
    return variants.read_info(context.libtorch_dir / name, name).torch


def plan_setup(
    context: Context,
    gpus: tuple[Capability, ...],
    *,
    driver: str | None = None,
    torch: str | None = None,
    preferred: str | None = None,
    from_wheel: bool = False,
    force: bool = False,
) -> SetupPlan:
    """Decide what setup does for these GPUs (reads the installed variants, nothing else)."""
    selection = select_variant(gpus, torch=torch, preferred=preferred, driver=driver)
    wanted_torch = selection.torch_version if torch else None
    active = variants.active_name(context)
    fits = active is not None and covers_gpus(context, active, gpus)
    if not force and active and fits and wanted_torch in (None, _torch_of(context, active)):
        return SetupPlan(
            "keep", f"the active variant {active} runs on every GPU", selection, active
        )
    if not force:
        for name in variants.list_variants(context):
            if name == active or not covers_gpus(context, name, gpus):
                continue
            if wanted_torch is not None and _torch_of(context, name) != wanted_torch:
                continue
            return SetupPlan(
                "activate",
                f"{name} is installed and runs on every GPU",
                selection,
                name,
                ("fdl", "libtorch", "activate", name),
            )
    if selection.covers_all:
        return _official(selection, from_wheel)
    return _build(selection)


def _flags(selection: Selection) -> list[str]:
    flags = ["--cuda", selection.cuda] if selection.cuda else ["--cpu"]
    return [*flags, "--torch", selection.torch_version]


def _official(selection: Selection, from_wheel: bool) -> SetupPlan:
    download = ("fdl", "libtorch", "download", *_flags(selection))
    wheel = ("fdl", "libtorch", "install", "--from-wheel", "--torch", selection.torch_version)
    if from_wheel:
        return SetupPlan(
            "wheel",
            f"{selection.reason} (from the PyPI wheel, as asked)",
            selection,
            command=wheel,
            alternatives=(" ".join(download),),
        )
    return SetupPlan(
        "download", selection.reason, selection, command=download, alternatives=(" ".join(wheel),)
    )


def _build(selection: Selection) -> SetupPlan:
    partial = ("fdl", "libtorch", "download", *_flags(selection))
    covered = [v.gpu.sm for v in selection.verdicts if v.ok]
    alternatives = (
        (f"{' '.join(partial)}   (runs on {', '.join(covered)} only)",) if covered else ()
    )
    return SetupPlan(
        "build",
        f"no official libtorch {selection.torch_version} covers "
        f"{' + '.join(c.sm for c in selection.gpus)}: a source build does",
        selection,
        command=selection.build,
        alternatives=alternatives,
    )
