"""pip as fdl's downloads are: a failure ends in the exit code of its cause with the fix.

``pip download`` fails for three kinds of reasons, told apart by its output: a pip
constraint of the environment (``PIP_CONSTRAINT``, ``constraint =`` in a pip.conf)
excludes the version asked for (exit 4, a limit of the environment; the resolver says so
before it needs the index), the index cannot be reached or serves no such package (exit
5, as a failed download), or anything else (the command failed, exit 1).
pip's own lines (its retries, the resolver's report) are kept for ``-v``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from fdl.errors import CommandFailed, EnvironmentProblem, FdlError, NetworkError
from fdl.runner import Completed, LineCallback, Runner

__all__ = ["Pip", "pip_download", "pip_failure"]

# What pip (and urllib3 under it) prints when the index cannot be reached.
_NETWORK = re.compile(
    r"NewConnectionError|Failed to establish a new connection|Connection refused|"
    r"Max retries exceeded|Temporary failure in name resolution|Name or service not known|"
    r"ConnectTimeoutError|ReadTimeoutError|Network is unreachable|ProxyError|"
    r"Could not fetch URL|No route to host|SSLError|CERTIFICATE_VERIFY_FAILED"
)
# The resolver's report of a constraint: "The user requested (constraint) torch<=2.14.1".
_CONSTRAINT = re.compile(r"requested \(constraint\) ([A-Za-z0-9_.-]+\s*[<>=!~][^\s,]*(?:,[^\s]+)*)")
_INDEX = re.compile(r"Looking in indexes: (\S+)")


def _where_constraints(environ: Mapping[str, str]) -> str:
    given = environ.get("PIP_CONSTRAINT")
    if given:
        return f"PIP_CONSTRAINT={given}"
    return "a pip configuration file (`pip config list` names it)"


def pip_failure(
    argv: Sequence[str],
    done: Completed,
    *,
    what: str,
    index_url: str | None,
    environ: Mapping[str, str] | None = None,
) -> FdlError:
    """The error for a failed ``pip download`` of ``what``, by its cause."""
    output = done.stdout + "\n" + done.stderr
    environ = os.environ if environ is None else environ
    index = index_url or next(iter(_INDEX.findall(output)), None) or "PyPI"
    error: FdlError
    constraints = _CONSTRAINT.findall(output)
    if constraints:
        caps = ", ".join(dict.fromkeys(c.strip() for c in constraints))
        where = _where_constraints(environ)
        error = EnvironmentProblem(
            f"a pip constraint of this environment excludes {what}: {caps} (from {where})",
            hint="ask for a version it allows (--torch VERSION), or lift it for this "
            "command: `PIP_CONSTRAINT=/dev/null fdl libtorch install ...` (or remove the "
            "line from the constraint file)",
        )
    elif _NETWORK.search(output) or (index_url and "(from versions: none)" in output):
        error = NetworkError(
            f"pip could not reach the package index {index} to download {what}"
            + ("" if _NETWORK.search(output) else " (or it serves no such package)"),
            hint="check the address and the network (a proxy: HTTPS_PROXY), pass a "
            "reachable mirror with --index-url, or install from a wheel file: "
            "`fdl libtorch install --from-wheel PATH.whl`; `fdl libtorch download` "
            "fetches the official libtorch zip instead",
        )
    else:
        tail = "\n".join(output.strip().splitlines()[-20:])
        return CommandFailed(
            list(argv),
            done.returncode,
            output_tail=tail,
            message=f"pip could not download {what} (exit status {done.returncode})",
        )
    error.verbose_details = output.strip()
    return error


def pip_download(
    runner: Runner,
    argv: Sequence[str],
    *,
    what: str,
    index_url: str | None,
    on_line: LineCallback | None = None,
    cwd: Path | None = None,
) -> Completed:
    """Run ``pip download`` (``argv``); its output on success.

    Raises:
        NetworkError: the index could not be reached.
        EnvironmentProblem: a pip constraint excludes what was asked for.
        CommandFailed: pip failed otherwise.
    """
    done = runner.stream(argv, on_line=on_line, check=False, cwd=cwd)
    if not done.ok:
        raise pip_failure(argv, done, what=what, index_url=index_url)
    return done


@dataclass(frozen=True)
class Pip:
    """How fdl runs ``pip download``: ``python``'s pip through ``runner``, from
    ``index_url`` (None: pip's own configuration), its output to ``on_line``."""

    python: str
    runner: Runner
    index_url: str | None = None
    on_line: LineCallback | None = None

    def download(
        self, requirements: Sequence[str], dest: Path, *, what: str, options: Sequence[str] = ()
    ) -> Completed:
        """The binary wheels of ``requirements`` into ``dest`` (``options``: ``--no-deps``,
        ``--find-links DIR``), through :func:`pip_download`."""
        dest.mkdir(parents=True, exist_ok=True)
        argv = [self.python, "-m", "pip", "download", "--only-binary=:all:"]
        argv += ["--progress-bar", "off", "--dest", str(dest), *options]
        if self.index_url:
            argv += ["--index-url", self.index_url]
        return pip_download(
            self.runner,
            [*argv, *requirements],
            what=what,
            index_url=self.index_url,
            on_line=self.on_line,
        )
