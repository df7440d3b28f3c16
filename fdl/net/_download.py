"""Download one file: streamed, resumed, retried, verified, then renamed into place."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO

from fdl._files import file_sha256
from fdl._grammar import count
from fdl.errors import EnvironmentProblem, NetworkError
from fdl.locking import FileLock
from fdl.net._deadline import DEFAULT_DEADLINE, deadline_error, net_deadline
from fdl.net._partial import PartFile, Validator
from fdl.net._request import Request, content_range
from fdl.net._results import DownloadResult, Progress, ProgressCallback, RateMeter
from fdl.net._retry import RetryPolicy, is_retryable_status, parse_retry_after
from fdl.net._transport import (
    Fatal,
    Response,
    Transient,
    Transport,
    default_user_agent,
    open_transport,
    rebase_url,
)

__all__ = ["DownloadResult", "Progress", "ProgressCallback", "download"]

# How often the server may change the file under us (or ignore our range) before we stop.
MAX_RESTARTS = 3
PROGRESS_INTERVAL = 0.1


class _Retry(Exception):
    def __init__(self, cause: str, retry_after: float | None = None) -> None:
        super().__init__(cause)
        self.retry_after = retry_after


class _Restart(Exception):
    """Start over from zero at once (no backoff): the server's file is not the one we had."""


def download(
    url: str,
    dest: Path | str,
    *,
    sha256: str | None = None,
    size: int | None = None,
    mirror: str | None = None,
    on_progress: ProgressCallback | None = None,
    retry: RetryPolicy | None = None,
    timeout: tuple[float, float] = (15.0, 60.0),
    sleep: Callable[[float], None] = time.sleep,
    user_agent: str | None = None,
    label: str | None = None,
    not_found_hint: str | None = None,
    lock_timeout: float | None = None,
    on_wait: Callable[[str], None] | None = None,
    chunk_size: int = 1 << 20,
) -> DownloadResult:
    """Download ``url`` to ``dest``; the file appears only once complete and verified.

    Bytes go to ``<dest>.part`` (its validator in ``<dest>.part.json``), so an
    interrupted download, in this call or a later one, resumes with an HTTP
    Range request. ``<dest>.lock`` keeps two processes off the same part.

    Args:
        url: http(s):// or file:// URL.
        dest: Where the file goes (replaced if present, unless ``sha256`` is
            given and it already matches: then nothing is fetched).
        sha256: Expected hex digest, checked before the file appears.
        size: Expected size in bytes.
        mirror: Base URL of a mirror holding the same paths as ``url``'s host
            (see :func:`rebase_url`).
        on_progress: Called with a :class:`Progress` as bytes arrive.
        retry: Backoff policy for connection errors, timeouts, 5xx, 408, 429.
        timeout: Connect and read timeouts in seconds.
        sleep: Waits between attempts (tests pass a recorder).
        user_agent: Defaults to ``fdl/<version> (+<project URL>)``.
        label: What is downloaded, for messages (``libtorch 2.8.0 (cu128)``).
        not_found_hint: Replaces the default hint of a 404 error.
        lock_timeout: Seconds to wait for another process downloading to ``dest``.
        on_wait: Told (once) when another process holds the lock.
        chunk_size: Largest read in bytes.

    Returns:
        A :class:`DownloadResult` with the transfer statistics.

    Raises:
        NotFound: HTTP 404/410 or a missing file:// path.
        SizeMismatch: The size differs from ``size`` or from what the server announced.
        ChecksumMismatch: The bytes do not hash to ``sha256``.
        RetriesExhausted: Transient failures went on; ``.part`` is kept for the next run.
        NetworkError: Any other refusal (403, 401, bad URL, TLS failure).
        LockBusy: Another process kept the lock past ``lock_timeout``.
    """
    dest = Path(dest)
    source = rebase_url(url, mirror) if mirror else url
    request = Request(
        url=source,
        source_url=url,
        sha256=sha256.lower() if sha256 else None,
        size=size,
        label=label or dest.name,
        not_found_hint=not_found_hint,
        user_agent=user_agent or default_user_agent(),
        retry=retry or RetryPolicy(),
        sleep=sleep,
        on_progress=on_progress,
        chunk_size=chunk_size,
    )
    dest.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(
        dest.with_name(dest.name + ".lock"),
        timeout=lock_timeout,
        purpose=f"downloading {dest.name}",
        on_wait=on_wait,
    )
    deadline = net_deadline()
    timeout = (min(timeout[0], deadline), min(timeout[1], deadline))
    with lock:
        started = time.monotonic()
        existing = _already_there(dest, request, started)
        if existing is not None:
            return existing
        try:
            transport = open_transport(source, user_agent=request.user_agent, timeout=timeout)
        except Fatal as exc:
            raise NetworkError(str(exc), hint=exc.hint) from None
        transfer = _Transfer(dest, request, transport, started, deadline)
        try:
            return transfer.run()
        finally:
            transfer.part.close()
            transport.close()


def _already_there(dest: Path, request: Request, started: float) -> DownloadResult | None:
    """A result for ``dest`` when it exists with the expected sha256 (and size)."""
    if request.sha256 is None or not dest.is_file():
        return None
    if request.size is not None and dest.stat().st_size != request.size:
        return None
    if file_sha256(dest) != request.sha256:
        return None
    return DownloadResult(
        path=dest,
        url=request.url,
        size=dest.stat().st_size,
        sha256=request.sha256,
        bytes_transferred=0,
        resumed_from=0,
        attempts=0,
        restarts=0,
        elapsed=time.monotonic() - started,
    )


class _Transfer:
    """The state of one download call: the part, what the server said, statistics."""

    def __init__(
        self,
        dest: Path,
        request: Request,
        transport: Transport,
        started: float,
        deadline: float = DEFAULT_DEADLINE,
    ) -> None:
        self.request = request
        self.deadline = deadline
        self.last_progress = time.monotonic()  # a byte received (or the start)
        self.transport = transport
        self.part = PartFile(dest)
        self.started = started
        self.validator: Validator | None = None
        self.total: int | None = None
        self.attempts = 0
        self.restarts = 0
        self.transferred = 0
        self.resumed_from: int | None = None
        self.spliced = False  # the part holds bytes of more than one response
        self.resumable = True  # False when the server compresses: ranges would not line up
        self.high_water = 0  # the largest the part has been (progress that counts)
        self.clean_retry_done = False
        self.meter = RateMeter()
        self.last_report = 0.0

    def run(self) -> DownloadResult:
        self.validator = self.part.load(
            self.request.url, trust_without_validator=self.request.sha256 is not None
        )
        if self.validator is None:
            self.part.reset()
        else:
            self.total = self.validator.total
        policy = self.request.retry
        failures = 0
        while True:
            if self.attempts >= policy.max_attempts:
                raise self.request.exhausted_error(
                    self.attempts,
                    f"stopped after {policy.max_attempts} attempts",
                    self.part.size,
                    self.part.path,
                )
            self.attempts += 1
            before = self.high_water
            try:
                self._attempt()
                return self._finish()
            except _Restart as restart:
                self._restart(str(restart))
            except _Retry as problem:
                # Only new bytes count as progress: a server that ignores ranges and
                # drops at the same place must still run out of attempts.
                self.high_water = max(self.high_water, self.part.size)
                failures = 1 if self.high_water > before else failures + 1
                if failures >= policy.attempts or self.attempts >= policy.max_attempts:
                    raise self.request.exhausted_error(
                        self.attempts, str(problem), self.part.size, self.part.path
                    ) from None
                left = self.deadline - (time.monotonic() - self.last_progress)
                policy_delay = policy.delay(failures, retry_after=problem.retry_after)
                if policy_delay >= left:  # the next attempt would start past the deadline
                    raise deadline_error(
                        f"download of {self.request.where}", self.deadline, str(problem)
                    ) from None
                self.request.sleep(policy_delay)

    def _restart(self, reason: str) -> None:
        self.restarts += 1
        if self.restarts > MAX_RESTARTS:
            self.part.discard()
            raise self.request.restart_error(reason)
        self.part.reset()
        self.validator = None
        self.total = None
        self.spliced = False
        self.resumable = True
        self.high_water = 0

    def _attempt(self) -> None:
        offset = self.part.size
        headers = {"Accept-Encoding": "identity"}
        if offset > 0:
            headers["Range"] = f"bytes={offset}-"
            if self.validator is not None and self.validator.if_range:
                headers["If-Range"] = self.validator.if_range
        try:
            response = self.transport.open(self.request.url, headers)
        except Transient as exc:
            raise _Retry(str(exc)) from None
        except Fatal as exc:
            self.part.discard()
            raise NetworkError(str(exc), hint=exc.hint) from None
        try:
            if self._accept(response, offset):
                self._receive(response)
        finally:
            response.close()

    def _accept(self, response: Response, offset: int) -> bool:
        """Check the status and headers; False when the part is already complete."""
        status = response.status
        if status == 200:
            self._accept_full(response, offset)
            return True
        if status == 206:
            self._accept_partial(response, offset)
            return True
        if status == 416:
            _, _, total = content_range(response.header("Content-Range"))
            if offset > 0 and total == offset and self.total in (None, offset):
                self.total = total
                self._note_first(offset)
                return False
            raise _Restart("the server cannot serve the rest of our partial file (HTTP 416)")
        if is_retryable_status(status):
            retry_after = parse_retry_after(response.header("Retry-After"))
            raise _Retry(f"HTTP {status} from {self.request.url}", retry_after)
        self.part.discard()
        raise self.request.http_error(status)

    def _seen(self, response: Response, total: int | None) -> Validator:
        return Validator(
            url=self.request.url,
            etag=response.header("ETag"),
            last_modified=response.header("Last-Modified"),
            total=total,
        )

    def _encoded(self, response: Response) -> bool:
        encoding = (response.header("Content-Encoding") or "identity").strip().lower()
        return encoding != "identity"

    def _accept_full(self, response: Response, offset: int) -> None:
        if offset > 0:
            # The server ignored our range, or If-Range said the file changed.
            self.restarts += 1
            self.part.reset()
            self.spliced = False
        length = response.header("Content-Length")
        encoded = self._encoded(response)
        total = count(length) if not encoded else None
        self._note_first(0)
        self._set_total(total)
        self.resumable = not encoded
        self.validator = self._seen(response, total)
        if self.resumable:
            self.part.save_meta(self.validator)

    def _accept_partial(self, response: Response, offset: int) -> None:
        start, end, total = content_range(response.header("Content-Range"))
        seen = self._seen(response, total)
        if (
            start != offset
            or (total is not None and end is not None and end != total - 1)
            or (self.validator is not None and not self.validator.same_version(seen))
        ):
            raise _Restart(f"the server answered our range with {response.header('Content-Range')}")
        self._note_first(offset)
        self._set_total(total)
        self.spliced = True
        merged = seen if self.validator is None else _merge(self.validator, seen)
        if merged != self.validator:
            self.validator = merged
            self.part.save_meta(merged)

    def _note_first(self, offset: int) -> None:
        if self.resumed_from is None:
            self.resumed_from = offset

    def _set_total(self, total: int | None) -> None:
        self.total = total
        expected = self.request.size
        if total is not None and expected is not None and total != expected:
            self.part.discard()
            raise self.request.announced_size_error(total)

    def _receive(self, response: Response) -> None:
        handle = self.part.open_append()
        try:
            for chunk in response.chunks(self.request.chunk_size):
                self._write(handle, chunk)
                self.last_progress = time.monotonic()
                self.transferred += len(chunk)
                self._report(final=False)
                if self.total is not None and self.part.size > self.total:
                    self.part.discard()
                    raise self.request.size_error(f"more than the announced {self.total} bytes")
        except Transient as exc:
            if not self.resumable:
                self.part.reset()
            raise _Retry(str(exc)) from None
        finally:
            handle.close()
        if self.total is not None and self.part.size < self.total:
            raise _Retry(f"the connection closed after {self.part.size} of {self.total} bytes")

    def _write(self, handle: BinaryIO, chunk: bytes) -> None:
        try:
            self.part.write(handle, chunk)
        except OSError as exc:
            raise EnvironmentProblem(
                f"cannot write {self.part.path}: {exc.strerror or exc}",
                hint="free some disk space (or fix the permissions) and run again; "
                "the bytes already downloaded are kept and the download resumes",
            ) from None

    def _finish(self) -> DownloadResult:
        size = self.part.size
        expected = self.request.size
        if expected is not None and size != expected:
            self.part.discard()
            raise self.request.size_error(f"{size} bytes, expected {expected}")
        digest = self.part.hasher.hexdigest()
        wanted = self.request.sha256
        if wanted is not None and digest != wanted:
            if self.spliced and not self.clean_retry_done:
                # The resumed bytes may come from another version of the file: try
                # once more from zero before blaming the file itself.
                self.clean_retry_done = True
                raise _Restart("the resumed file did not match its sha256")
            self.part.discard()
            raise self.request.checksum_error(digest)
        self._report(final=True)
        self.part.commit()
        return DownloadResult(
            path=self.part.dest,
            url=self.request.url,
            size=size,
            sha256=digest,
            bytes_transferred=self.transferred,
            resumed_from=self.resumed_from or 0,
            attempts=self.attempts,
            restarts=self.restarts,
            elapsed=time.monotonic() - self.started,
        )

    def _report(self, *, final: bool) -> None:
        callback = self.request.on_progress
        if callback is None:
            return
        now = time.monotonic()
        rate = self.meter.add(now, self.transferred)
        if final or now - self.last_report >= PROGRESS_INTERVAL:
            self.last_report = now
            callback(Progress(done=self.part.size, total=self.total, rate=rate))


def _merge(old: Validator, new: Validator) -> Validator:
    """``old`` completed with what ``new`` adds (a total learnt later, say)."""
    return replace(
        old,
        etag=old.etag or new.etag,
        last_modified=old.last_modified or new.last_modified,
        total=old.total if old.total is not None else new.total,
    )
