"""How a generated workflow installs fdl: the fdl the user has, never a name on an index.

fdl is installed from a checkout or a wheel built from one (README), so ``pip install
fdl==V`` would install whatever an index serves under that name, a name anyone could
take on PyPI. ``ci.fdl`` names a pip requirement the user controls; without it the
requirement is derived from how this fdl was installed (PEP 610's ``direct_url.json``):
a git URL at its commit, a wheel or checkout inside the repository, an archive URL.
Anything else (a directory outside the repository, an index pip did not record) cannot
be installed by a runner: the workflow's step then fails with the fix, and ``fdl ci
generate`` says so.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from fdl._grammar import quoted

TYPE_CHECKING = False
if TYPE_CHECKING:
    from fdl.manifest import Manifest

__all__ = ["FIX", "FdlInstall", "derived_install", "fdl_install", "installed_from"]

_INDEX_OPTIONS = ("-i", "--index-url")
FIX = (
    "set ci.fdl in fdl.yml to a pip requirement you control: a git URL at a commit "
    "(git+https://git.example.com/you/fdl@<commit>), a wheel committed in the repository "
    "(python3 -m pip wheel --no-deps -w vendor ./fdl, then ci.fdl: ./vendor/<wheel>), or "
    "your own index (ci.fdl: --index-url https://pypi.example.com/simple fdl==<version>)"
)


@dataclass(frozen=True)
class FdlInstall:
    """How the workflow installs fdl.

    Attributes:
        args: ``pip install`` arguments (empty: none a runner can use).
        origin: Where they come from, for ``fdl ci generate`` (may name a local path;
            never rendered into a file).
        problem: Why a runner cannot install this fdl (None: it can); deterministic
            text, rendered into the workflow's failing step.
    """

    args: tuple[str, ...]
    origin: str
    problem: str | None = None

    def run(self) -> list[str]:
        """The lines of the workflow's install step."""
        if self.problem is None:
            return ["python -m pip install " + " ".join(_word(a) for a in self.args)]
        lines = (f"error: fdl.yml sets no ci.fdl, and {self.problem}", f"fix: {FIX}")
        return [*(f"echo {_word(line)} >&2" for line in lines), "exit 1"]


def installed_from() -> dict[str, Any] | None:
    """This fdl's ``direct_url.json`` (None: installed from an index, or not recorded)."""
    from importlib import metadata

    try:
        text = metadata.distribution("fdl").read_text("direct_url.json")
        return dict(json.loads(text)) if text else None
    except (metadata.PackageNotFoundError, ValueError, OSError):
        return None


def _bare_names(words: list[str]) -> list[str]:
    """The words that are requirements by name only (``fdl``, ``fdl==1.0``): whatever an
    index serves under that name."""
    bare = []
    for word in words:
        if word.startswith("-") or word.startswith(("." + os.sep, "./", "../", "/")):
            continue
        if word in (".", "..") or any(mark in word for mark in ("/", "@", ":")):
            continue
        bare.append(word)
    return bare


def _given(manifest: Manifest, value: str) -> FdlInstall:
    """``ci.fdl`` as written: a requirement, or pip arguments when it starts with ``-``."""
    words = shlex.split(value) if value.startswith("-") else [value]
    option_values = {i + 1 for i, word in enumerate(words) if word in _INDEX_OPTIONS}
    has_index = bool(option_values) or any(w.startswith("--index-url=") for w in words)
    named = _bare_names([w for i, w in enumerate(words) if i not in option_values])
    if named and not has_index:
        raise manifest.error(
            "ci.fdl",
            f"{named[0]!r} installs whatever a package index serves under that name: fdl "
            "is installed from a checkout or a wheel, and anyone could publish that name "
            "on PyPI",
            hint=FIX.replace("set ci.fdl in fdl.yml to", "use"),
        )
    origin = manifest.origin("ci.fdl")
    where = origin.location() if origin is not None else None
    return FdlInstall(tuple(words), f"ci.fdl ({where})" if where else "ci.fdl")


def derived_install(project: Path | None = None, repo_root: Path | None = None) -> FdlInstall:
    """How a runner installs this fdl, derived from how it was installed (no ``ci.fdl``);
    without a repository every local path is outside it."""
    return _derived(installed_from(), project, repo_root)


def _derived(
    recorded: dict[str, Any] | None, project: Path | None, repo_root: Path | None
) -> FdlInstall:
    """The requirement a runner can install for the fdl recorded in ``recorded``."""
    if recorded is None:
        return FdlInstall(
            (),
            "this fdl was installed from a package index, and pip does not record which",
            problem="this fdl came from a package index that fdl cannot name",
        )
    url = str(recorded.get("url") or "")
    vcs = recorded.get("vcs_info") or {}
    if vcs.get("vcs") == "git" and vcs.get("commit_id"):
        requirement = f"git+{url}@{vcs['commit_id']}"
        return FdlInstall((requirement,), f"this fdl was installed from {requirement}")
    parsed = urlparse(url)
    if parsed.scheme in ("http", "https"):
        digests = (recorded.get("archive_info") or {}).get("hashes") or {}
        pinned = f"{url}#sha256={digests['sha256']}" if "sha256" in digests else url
        return FdlInstall((pinned,), f"this fdl was installed from {url}")
    if parsed.scheme == "file":
        path = Path(unquote(parsed.path))
        kind = "a wheel" if path.suffix == ".whl" else "a directory"
        if (
            project is None
            or repo_root is None
            or not path.resolve().is_relative_to(repo_root.resolve())
        ):
            return FdlInstall(
                (),
                f"this fdl was installed from {path}, {kind} outside the repository",
                problem=f"this fdl was installed from {kind} outside the repository",
            )
        relative = Path(os.path.relpath(path.resolve(), project.resolve())).as_posix()
        shown = relative if relative.startswith(".") else f"./{relative}"
        return FdlInstall((shown,), f"this fdl was installed from {shown} in the repository")
    return FdlInstall(
        (),
        f"this fdl was installed from {url or 'an unrecorded place'}",
        problem="this fdl was installed from a place a runner cannot reach",
    )


def fdl_install(manifest: Manifest, project: Path, repo_root: Path) -> FdlInstall:
    """How the workflow installs fdl: ``ci.fdl``, else derived from how this fdl was
    installed (:func:`derived_install`).

    Raises:
        ManifestError: ``ci.fdl`` names fdl by name only, with no index of the user's.
    """
    value = manifest.get("ci.fdl")
    if value:
        return _given(manifest, str(value))
    return derived_install(project, repo_root)


def _word(word: str) -> str:
    return quoted("shell", word, what="a word", source="the workflow's install step")
