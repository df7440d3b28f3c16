"""Archives: test a zip, extract zip or tar safely, read one member.

Extraction never writes outside the target: every member is checked before
anything is written, and a member is refused (naming it) when it is absolute,
names a drive, climbs with ``..``, is a device, FIFO or socket, would be
written through a symlink, or is a symlink resolving outside the target.
The content goes to a staging directory beside the target, which is renamed
to the target only when complete, so the target is whole or absent.

A zip on a server (a wheel) is read without downloading it: :func:`zip_members` reads its
directory by HTTP Range, :func:`plan_spans` says which byte ranges hold the members
wanted, :func:`extract_span` inflates them from those ranges, checking each CRC-32.
Hold a :class:`fdl.locking.FileLock` around extraction when several
processes may install the same target.
"""

from __future__ import annotations

from fdl.archive._plan import ArchiveError
from fdl.archive._remote import Span, ZipMember, extract_span, plan_spans, zip_members
from fdl.archive._staging import ExtractResult, make_staging, publish, remove_stale_staging
from fdl.archive._tar import read_tar_members, safe_extract_tar
from fdl.archive._zip import read_member, safe_extract_zip, test_zip

__all__ = [
    "ArchiveError",
    "ExtractResult",
    "Span",
    "ZipMember",
    "extract_span",
    "make_staging",
    "plan_spans",
    "publish",
    "read_member",
    "read_tar_members",
    "remove_stale_staging",
    "safe_extract_tar",
    "safe_extract_zip",
    "test_zip",
    "zip_members",
]
