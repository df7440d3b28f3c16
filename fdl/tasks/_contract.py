"""floDl CLI 0.8.0's run-time contract for project commands: ``--gpus``, the variables a
command gets (``FDL_GPU_FEATURE``, ``HOSTNAME``), the logical ``docker: gpu`` service and
the shell a ``docker:`` script runs under.

Evidence: ``flodl-cli`` 0.8.0 ``src/main.rs:91-124, 391-433`` (``--gpus`` anywhere before
``--``), ``src/gpus.rs:43-78, 173-200`` (the spec, both vendors' masks),
``src/run.rs:251-360`` (``FDL_GPU_FEATURE``), ``src/run.rs:678-745`` (``docker: gpu``),
``src/run.rs:760-775, 930-940`` (``bash -c`` in the container).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from fdl.errors import UsageError
from fdl.tasks._env import EnvChange

TYPE_CHECKING = False
if TYPE_CHECKING:
    from fdl.tasks._libtorch_env import Variant

__all__ = [
    "ALL_GPUS",
    "BASH_PROLOGUE",
    "LOGICAL_GPU_SERVICE",
    "gpu_feature",
    "gpu_mask",
    "gpu_service",
    "hostname_change",
    "local_hostname",
    "parse_gpus",
    "take_gpus",
]

ALL_GPUS = "all"
LOGICAL_GPU_SERVICE = "gpu"
# Both vendors' spellings: HIP prefers its own variable (gpus.rs:181-200).
MASK_VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")
_EXAMPLE = "e.g. `fdl train --gpus 0,1` or `fdl train --gpus all`"

# floDl's CLI runs a docker: script with `bash -c` (run.rs:770, 939). fdl starts `sh -c`
# with this prologue, which hands the script ($0) and its arguments to bash where the image
# has one and says so on stderr where it has not (an image without bash runs it under sh).
BASH_PROLOGUE = (
    "for fdl_bash in /bin/bash /usr/bin/bash /usr/local/bin/bash; do "
    '[ -x "$fdl_bash" ] && exec "$fdl_bash" -c "$0" bash "$@"; done; '
    "echo 'fdl: this image has no bash; running the script under sh' >&2; "
    'exec sh -c "$0" sh "$@"'
)


def parse_gpus(raw: str) -> str | tuple[int, ...]:
    """``--gpus``'s value as floDl's CLI reads it (gpus.rs:43-78): ``all`` (any case), or
    distinct device indices 0-255 separated by commas.

    Raises:
        UsageError: empty, an empty entry, not an index, or an index given twice.
    """
    text = raw.strip()
    if not text:
        raise UsageError("--gpus needs a value", hint=_EXAMPLE)
    if text.lower() == ALL_GPUS:
        return ALL_GPUS
    devices: list[int] = []
    for part in text.split(","):
        entry = part.strip()
        if not entry:
            raise UsageError(f"--gpus: empty entry in {text!r}", hint=_EXAMPLE)
        if not (entry.isascii() and entry.isdigit()) or int(entry) > 255:
            raise UsageError(f"--gpus: {entry!r} is not a device index (0 to 255)", hint=_EXAMPLE)
        if int(entry) in devices:
            raise UsageError(
                f"--gpus: device {int(entry)} is given twice in {text!r}", hint=_EXAMPLE
            )
        devices.append(int(entry))
    return tuple(devices)


def take_gpus(args: Sequence[str]) -> tuple[list[str], str | None]:
    """``args`` without ``--gpus SPEC``/``--gpus=SPEC`` (looked for before ``--`` only, as
    floDl's CLI does: main.rs:391-433), and the spec's text.

    Raises:
        UsageError: no value, a value that is an option, or ``--gpus`` given twice.
    """
    rest: list[str] = []
    found: str | None = None
    index = 0
    while index < len(args):
        token = args[index]
        if token == "--":
            rest.extend(args[index:])
            break
        value: str | None = None
        if token == "--gpus":
            if index + 1 >= len(args) or not args[index + 1] or args[index + 1].startswith("-"):
                raise UsageError("--gpus needs a value", hint=_EXAMPLE)
            value = args[index + 1]
            index += 2
        elif token.startswith("--gpus="):
            value = token.split("=", 1)[1]
            if not value:
                raise UsageError("--gpus= needs a value", hint=_EXAMPLE)
            index += 1
        else:
            rest.append(token)
            index += 1
            continue
        if found is not None:
            raise UsageError("--gpus is given twice", hint="give it once")
        found = value
    return rest, found


def gpu_mask(devices: Sequence[int]) -> list[EnvChange]:
    """``CUDA_VISIBLE_DEVICES`` and ``HIP_VISIBLE_DEVICES`` for ``devices``."""
    joined = ",".join(str(device) for device in devices)
    return [EnvChange(name, joined) for name in MASK_VARIABLES]


def gpu_feature(variant: Variant | None) -> EnvChange:
    """``FDL_GPU_FEATURE``: the cargo feature the active variant needs (``rocm`` for an AMD
    build, else ``cuda``, also without a GPU variant)."""
    from fdl.libtorch.vendor import feature_of

    return EnvChange("FDL_GPU_FEATURE", feature_of(variant.vendor if variant else None))


def gpu_service(variant: Variant | None, services: Sequence[str]) -> tuple[str, str | None]:
    """The compose service ``docker: gpu`` stands for, and a note when it falls back:
    the active variant's vendor's service (``cuda``, ``rocm``), ``cuda`` without a GPU
    variant, and ``cuda`` with a note where the compose file has no ``rocm`` service."""
    from fdl.libtorch.vendor import service_of

    vendor = variant.vendor if variant is not None else None
    service = service_of(vendor)
    if service == "cuda" or service in services:
        return service, None
    build = {"amd": "a ROCm"}.get(vendor or "", f"an {vendor}")
    return "cuda", (
        f"the active libtorch ({variant.name if variant else '?'}) is {build} build, but "
        f"the compose file defines no {service!r} service: `docker: gpu` runs in 'cuda'; "
        f"define a {service!r} service, or name the service in the command's `docker:`"
    )


def hostname_change(environ: Mapping[str, str]) -> list[EnvChange]:
    """``HOSTNAME`` when the environment lacks it (bash does not export it), as floDl's CLI
    fills it for compose's ``hostname: ${HOSTNAME}`` (main.rs:91-99): ``$FLODL_HOST_NAME``,
    else this machine's name."""
    if environ.get("HOSTNAME"):
        return []
    name = local_hostname(environ)
    return [EnvChange("HOSTNAME", name)] if name else []


def local_hostname(environ: Mapping[str, str]) -> str:
    """This machine's name as floDl's launcher matches it (cluster.rs:776-797):
    ``$FLODL_HOST_NAME``, else the kernel's node name."""
    return (environ.get("FLODL_HOST_NAME") or "").strip() or os.uname().nodename
