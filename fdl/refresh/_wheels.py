"""torch wheel facts from PyPI without downloading the wheels: the ``METADATA`` member is
read through HTTP Range requests (the zip's central directory, then that one member), and
its ``nvidia-*`` pins give the CUDA and cuDNN of the wheel's build."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from fdl.archive import ArchiveError, zip_members
from fdl.errors import NetworkError
from fdl.formats.ranged import member_chunks
from fdl.formats.wheel import applicable, dist_info_member, parse_metadata, parse_wheel_name

__all__ = ["WheelFacts", "cuda_facts", "pypi_wheels", "wheel_drift", "wheel_metadata"]

PYPI_JSON = "https://pypi.org/pypi/torch/json"

ReadRange = Callable[[str, int, int | None], tuple[bytes, int]]


def wheel_metadata(url: str, read: ReadRange) -> str:
    """The ``*.dist-info/METADATA`` text of the wheel at ``url``: the zip's directory
    (:func:`fdl.archive.zip_members`), then that one member
    (:func:`fdl.formats.ranged.member_chunks`).

    Args:
        read: ``(url, start, length) -> (bytes, total size)``; a negative start counts from
            the end (:func:`fdl.net.read_range`).

    Raises:
        NetworkError: the wheel cannot be read, is no zip (truncated structures, bad
            deflate data), or holds no METADATA, or one over 1 MiB (declared or inflated).
    """
    try:
        members = zip_members(url, read)
    except ArchiveError as exc:
        raise NetworkError(exc.message, hint=_DAMAGED) from None
    name = dist_info_member(members, "METADATA")
    if name is None:
        raise NetworkError(f"{url}: the wheel holds no *.dist-info/METADATA")
    member = members[name]
    declared = max(member.compressed, member.size)
    if declared > _METADATA_MAX:  # refused before a byte is inflated
        raise NetworkError(f"{url}: a METADATA of {declared} bytes, not read")
    pieces: list[bytes] = []
    inflated = 0
    for piece in member_chunks(url, read, member):
        inflated += len(piece)
        if inflated > member.size:
            raise NetworkError(
                f"{url}: its METADATA inflates beyond the {member.size} bytes declared"
            )
        pieces.append(piece)
    return b"".join(pieces).decode("utf-8", "replace")


_METADATA_MAX = 1 << 20
_DAMAGED = (
    "run the same command again; if it fails the same way, the index serves a damaged or "
    "crafted wheel"
)


@dataclass(frozen=True)
class WheelFacts:
    """What a torch wheel's METADATA says about its build."""

    version: str
    cuda: str | None
    cudnn: str | None
    pins: dict[str, str]


def cuda_facts(metadata: str, machine: str = "x86_64") -> WheelFacts:
    """The CUDA (major.minor of ``nvidia-cuda-runtime`` or ``cuda-toolkit``) and cuDNN pins
    of a torch wheel, as pip installs it on a Linux ``machine`` (``x86_64``, ``aarch64``).

    The pins' environment markers are evaluated: before 2.12 the aarch64 wheels' METADATA
    lists the CUDA pins with ``platform_machine == "x86_64"``, i.e. that wheel is a CPU build.
    """
    environment = {
        "platform_system": "Linux",
        "sys_platform": "linux",
        "platform_machine": machine,
        "python_version": "3.11",
        "python_full_version": "3.11.0",
        "implementation_name": "cpython",
        "extra": "",
    }
    headers = parse_metadata(metadata)
    pins: dict[str, str] = {}
    for requirement in applicable(headers.requires, environment):
        name = requirement.name.lower()
        if not (name.startswith("nvidia-") or name == "cuda-toolkit"):
            continue
        exact = [s.version for s in requirement.specifier if s.operator == "=="]
        if exact:  # 2.15 on: one cuda-toolkit pin instead of the nvidia-cuda-* ones
            pins[name] = exact[0]
    runtime = pins.get("cuda-toolkit") or next(
        (v for k, v in pins.items() if k.startswith("nvidia-cuda-runtime")), None
    )
    cudnn = next((v for k, v in pins.items() if k.startswith("nvidia-cudnn")), None)
    cuda = ".".join(runtime.split(".")[:2]) if runtime else None
    return WheelFacts(
        (headers.version or "").split()[0] if headers.version else "", cuda, cudnn, pins
    )


def pypi_wheels(
    project_json: dict[str, object], version: str, base: str = PYPI_JSON
) -> dict[str, str]:
    """Platform (``linux-x86_64``, ``linux-aarch64``) -> the URL of one of the release's
    CPython manylinux wheels, from PyPI's project JSON (its ``releases``): the cp311 one,
    else the oldest CPython it publishes (a release that dropped 3.11 is still read).
    Relative file URLs are taken from ``base``, the project JSON's own URL."""
    from fdl.net import file_link

    releases = project_json.get("releases")
    files = releases.get(version, []) if isinstance(releases, dict) else []
    files = files if isinstance(files, list) else []
    chosen: dict[str, tuple[tuple[int, int], str]] = {}
    for item in files:
        if not isinstance(item, dict):
            continue
        name = str(item.get("filename", ""))
        parsed = parse_wheel_name(name)
        tag = re.match(r"cp3([0-9]{1,4})-cp3[0-9]{1,4}-", parsed.tags) if parsed else None
        link = file_link(base, str(item.get("url", "")))  # http(s) only: never file://
        if tag is None or "manylinux" not in name or item.get("yanked") or link is None:
            continue
        rank = (0 if tag.group(1) == "11" else 1, int(tag.group(1)))
        platform = "linux-aarch64" if name.endswith("_aarch64.whl") else "linux-x86_64"
        if platform not in chosen or rank < chosen[platform][0]:
            chosen[platform] = (rank, link)
    return {platform: url for platform, (_, url) in chosen.items()}


def wheel_drift(version: str, platform: str, facts: WheelFacts) -> list[dict[str, object]]:
    """Differences between the tables' default (PyPI) variant of ``version`` and the
    wheel's pins; a release the tables do not have is one difference."""
    from fdl.compat import release
    from fdl.errors import UsageError

    source = f"METADATA of the {platform} wheel of torch {version} on PyPI"
    table_platform = {"linux-aarch64": "linux-arm64"}.get(platform, platform)
    try:
        variant = next(v for v in release(version).variants_on(table_platform) if v.default)
    except (UsageError, StopIteration):
        return [
            {
                "torch": version,
                "fact": "release",
                "table": None,
                "artefact": f"CUDA {facts.cuda}, cuDNN {facts.cudnn}",
                "source": source,
            }
        ]
    found: list[dict[str, object]] = []
    if facts.cuda != variant.cuda:
        found.append(
            {
                "torch": version,
                "fact": "default.cuda",
                "table": variant.cuda,
                "artefact": facts.cuda,
                "source": source,
            }
        )
    table_cudnn = variant.cudnn
    if facts.cudnn and table_cudnn and facts.cudnn != table_cudnn:
        found.append(
            {
                "torch": version,
                "fact": "default.cudnn",
                "table": table_cudnn,
                "artefact": facts.cudnn,
                "source": source,
            }
        )
    return found
