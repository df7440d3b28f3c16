"""Where the docker executables are: PATH and ``FDL_DOCKER``, without asking them (cheap to
import: the kept probe answers are found from these alone, fdl.engine._memory)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from fdl.errors import EnvironmentProblem

__all__ = ["candidate_paths", "which_on"]


def candidate_paths(environ: Mapping[str, str] | None = None) -> tuple[list[str], str]:
    """The docker executables to consider, in order, and where the list came from.

    ``$FDL_DOCKER`` (a path or a command name) wins alone; otherwise every
    ``docker`` on PATH, each real file once (``/bin`` is often ``/usr/bin``).
    """
    env = os.environ if environ is None else environ
    chosen = env.get("FDL_DOCKER", "").strip()
    if chosen:
        path = which_on(chosen, env)
        if path is None:
            raise EnvironmentProblem(
                f"FDL_DOCKER={chosen} is not an executable docker client",
                hint="point FDL_DOCKER at a docker CLI (e.g. /usr/bin/docker), or unset it",
            )
        return [path], "FDL_DOCKER"
    found: list[str] = []
    seen: set[str] = set()
    for folder in env.get("PATH", "").split(os.pathsep):
        if not folder:
            continue
        path = os.path.join(folder, "docker")
        if not _executable(path):
            continue
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        found.append(path)
    return found, "PATH"


def which_on(name: str, env: Mapping[str, str]) -> str | None:
    """``name`` resolved against ``env``'s PATH (not this process's); None when absent.

    An empty PATH finds nothing (``shutil.which`` would look in the working directory).
    """
    search = env.get("PATH", "")
    if os.sep in name:  # a path: PATH plays no part
        return name if _executable(name) else None
    for folder in search.split(os.pathsep):  # shutil.which's answer, without shutil
        path = os.path.join(folder, name)
        if folder and _executable(path):
            return path
    return None


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)
