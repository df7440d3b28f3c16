"""The GPU code of a torch wheel's libraries, read from PyPI without keeping the wheel.

A wheel is a zip: its central directory (at the end) gives each member's local header
offset and compressed size. The member ``torch/lib/libtorch_cuda.so`` (about 360 MB
deflated in 2.14.1) is fetched with HTTP Range requests a few MiB at a time, inflated
chunk by chunk and fed to :class:`fdl.binaries.FatbinScanner`, which keeps only the
fatbin entry headers: memory stays at a few MiB, nothing is written to disk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fdl.archive import ZipMember, zip_members
from fdl.binaries import DeviceCode, FatbinScanner
from fdl.errors import NetworkError
from fdl.formats.ranged import member_chunks

__all__ = [
    "DEFAULT_LIBRARIES",
    "WheelCode",
    "ZipMember",
    "code_drift",
    "member_chunks",
    "wheel_code_report",
    "wheel_device_code",
    "zip_members",
]

ReadRange = Callable[[str, int, int | None], tuple[bytes, int]]

DEFAULT_LIBRARIES = ("torch/lib/libtorch_cuda.so",)
CHUNK = 8 << 20  # compressed bytes per Range request


@dataclass
class WheelCode:
    """The GPU code found in a wheel's libraries, and what reading it cost.

    Attributes:
        url: The wheel.
        libraries: Member name -> its GPU code (members the wheel lacks are left out).
        missing: Requested members the wheel does not hold (a CPU wheel has no
            ``libtorch_cuda.so``).
        bytes_read: Bytes fetched (directory, headers and the members' compressed data).
    """

    url: str
    libraries: dict[str, DeviceCode] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    bytes_read: int = 0


def wheel_device_code(
    url: str,
    read: ReadRange,
    libraries: Sequence[str] = DEFAULT_LIBRARIES,
    *,
    chunk: int = CHUNK,
) -> WheelCode:
    """The cubins and PTX of the wheel's ``libraries`` (zip member names), streamed
    ``chunk`` compressed bytes per Range request.

    Raises:
        NetworkError: the wheel cannot be read.
    """
    result = WheelCode(url)

    def counted(target: str, start: int, length: int | None) -> tuple[bytes, int]:
        data, total = read(target, start, length)
        result.bytes_read += len(data)
        return data, total

    members = zip_members(url, counted)
    for name in libraries:
        member = members.get(name)
        if member is None:
            result.missing.append(name)
            continue
        scanner = FatbinScanner(name)
        for piece in member_chunks(url, counted, member, chunk=chunk):
            scanner.feed(piece)
        if scanner.size != member.size:
            raise NetworkError(
                f"{url}: {name} inflated to {scanner.size} bytes, the directory says {member.size}"
            )
        result.libraries[name] = scanner.result()
    return result


def code_drift(version: str, platform: str, code: DeviceCode) -> list[dict[str, object]]:
    """Differences between the archs and PTX the tables give the release's default (PyPI)
    variant and those of its ``libtorch_cuda.so`` (the targets with at least half as
    many kernels as the most common one: :meth:`DeviceCode.primary_targets`)."""
    from fdl.compat import release
    from fdl.errors import UsageError

    if platform != "linux-x86_64":
        return []  # the tables describe the x86_64 builds
    try:
        variant = next(v for v in release(version).variants if v.default)
    except (UsageError, StopIteration):
        return []  # wheel_drift reports the missing release
    table = variant.targets_for(version)
    found = code.primary_targets()
    source = f"fatbin of libtorch_cuda.so in the {platform} wheel of torch {version} on PyPI"
    drift: list[dict[str, object]] = []
    for fact, want, got in (
        ("archs", [t.code for t in table.cubins], [t.code for t in found.cubins]),
        ("ptx", [t.code for t in table.ptx], [t.code for t in found.ptx]),
    ):
        if want != got:
            drift.append(
                {
                    "torch": version,
                    "fact": f"default.{fact}",
                    "variant": variant.name,
                    "table": " ".join(want) or "none",
                    "artefact": " ".join(got) or "none",
                    "source": source,
                }
            )
    return drift


def wheel_code_report(
    version: str, platform: str, url: str, read: ReadRange | None = None
) -> tuple[dict[str, object], list[dict[str, object]]]:
    """Stream the wheel's ``libtorch_cuda.so`` and report its code, what the reading cost,
    and the drift against the tables: (report, drift).

    Raises:
        NetworkError: the wheel cannot be read.
    """
    import time

    from fdl.net import read_range

    started = time.monotonic()
    wheel = wheel_device_code(url, read or read_range)
    seconds = round(time.monotonic() - started, 1)
    code = wheel.libraries.get(DEFAULT_LIBRARIES[0])
    if code is None:
        report: dict[str, object] = {
            "summary": "no libtorch_cuda.so (a CPU wheel)",
            "bytes_read": wheel.bytes_read,
            "seconds": seconds,
        }
        return report, []
    primary = code.primary_targets()
    report = {
        "library": DEFAULT_LIBRARIES[0],
        "cubins": [t.code for t in primary.cubins],
        "ptx": [t.code for t in primary.ptx],
        "extra": sorted(set(code.counts()) - set(primary.codes())),
        "counts": code.counts(),
        "compression": sorted({e.compression or "none" for e in code.entries if e.is_code}),
        "bytes_read": wheel.bytes_read,
        "seconds": seconds,
        "summary": (
            f"libtorch_cuda.so: cubins {' '.join(t.code for t in primary.cubins) or 'none'}; "
            f"PTX {' '.join(t.code for t in primary.ptx) or 'none'}; "
            f"{wheel.bytes_read / 1e6:.0f} MB streamed in {seconds} s"
        ),
    }
    return report, code_drift(version, platform, code)
