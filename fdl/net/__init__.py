"""Downloads: streamed to a ``.part``, resumed with Range, retried with backoff, verified.

requests is imported only when an HTTP download starts, so importing this
package costs nothing at start-up.

Example::

    from fdl.net import download

    result = download(
        "https://download.pytorch.org/libtorch/cpu/libtorch-shared-with-deps-2.8.0%2Bcpu.zip",
        cache / "libtorch-2.8.0+cpu.zip",
        mirror=os.environ.get("FDL_LIBTORCH_MIRROR"),
        on_progress=show,
    )
"""

from __future__ import annotations

from fdl.net._deadline import DEADLINE_ENV, net_deadline
from fdl.net._download import download
from fdl.net._errors import ChecksumMismatch, NotFound, RetriesExhausted, SizeMismatch
from fdl.net._index import PYPI_SIMPLE, IndexFile, default_index, file_link, index_files
from fdl.net._limits import (
    MAX_BODY,
    MAX_LAYER,
    MAX_LAYERS,
    MAX_PAGES,
    MAX_RATIO,
    RATIO_FLOOR,
    Limit,
)
from fdl.net._names import is_digest, is_loopback, is_tag, read_json, registry_url
from fdl.net._ranges import fetch_range, read_range
from fdl.net._registry import BlobFetch, Manifest, RegistryClient, RegistryError
from fdl.net._results import DownloadResult, Progress, ProgressCallback
from fdl.net._retry import RetryPolicy
from fdl.net._transport import default_user_agent, file_url_path, rebase_url

__all__ = [
    "DEADLINE_ENV",
    "MAX_BODY",
    "MAX_LAYER",
    "MAX_LAYERS",
    "MAX_PAGES",
    "MAX_RATIO",
    "PYPI_SIMPLE",
    "RATIO_FLOOR",
    "BlobFetch",
    "ChecksumMismatch",
    "DownloadResult",
    "IndexFile",
    "Limit",
    "Manifest",
    "NotFound",
    "Progress",
    "ProgressCallback",
    "RegistryClient",
    "RegistryError",
    "RetriesExhausted",
    "RetryPolicy",
    "SizeMismatch",
    "default_index",
    "default_user_agent",
    "download",
    "fetch_range",
    "file_link",
    "file_url_path",
    "index_files",
    "is_digest",
    "is_loopback",
    "is_tag",
    "net_deadline",
    "read_json",
    "read_range",
    "rebase_url",
    "registry_url",
]
