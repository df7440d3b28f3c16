"""The Docker backend: build the planned builder Dockerfile, copy the result out.

The build context is a temporary directory holding only fdl's two scripts (and, with
``--source``, a copy of that tree): never the user's working directory. BuildKit cache mounts
keep the checkout, the build tree and the compiler cache, so a re-run after an interruption
resumes the compile instead of starting over.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from fdl._assets import asset_dir
from fdl._files import link_tree
from fdl.errors import EnvironmentProblem
from fdl.libtorch.build._buildplan import BuildPlan
from fdl.libtorch.build._dockerfile import SCRIPTS
from fdl.paths import owner_labels

__all__ = ["build_in_docker"]


def _copy_source(source: Path, dest: Path) -> None:
    """Copy a --source tree into the context (hard links when possible; no build trees)."""
    link_tree(source, dest, skip=frozenset({"build"}))


def _context(plan: BuildPlan, scratch: Path) -> Path:
    context = scratch / "context"
    (context / "fdl").mkdir(parents=True)
    for script in ("preflight.sh", "build.sh"):
        shutil.copy2(asset_dir("dockerfiles") / SCRIPTS / script, context / "fdl" / script)
    if plan.source_given:
        _copy_source(plan.source_dir, context / "src")
        _check_copied_submodules(plan.source_dir, context / "src")
    return context


def _check_copied_submodules(source: Path, copy: Path) -> None:
    """The planner's submodule check again, on what the image will see: a submodule that
    is a link to a directory outside the tree is a dangling link in the build context."""
    from fdl.libtorch.build._facts import declared_submodules

    missing = [name for name, present in declared_submodules(copy, within=copy) if not present]
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        raise EnvironmentProblem(
            f"the copy of {source} for the Docker build lacks {len(missing)} submodules "
            f"(missing, empty, or links to directories outside the tree): {shown}",
            hint=f"replace the links by the directories themselves, or run `git -C {source} "
            "submodule update --init --recursive`; or build with --native",
        )


def _secret_file(plan: BuildPlan, scratch: Path) -> Path | None:
    keys = [k for k in plan.env if k.startswith(("SCCACHE_", "CCACHE_"))]
    keys = [k for k in keys if k not in ("SCCACHE_DIR", "CCACHE_DIR")]
    if not keys:
        return None
    path = scratch / "cache_env"
    path.write_text("".join(f"{k}='{plan.env[k]}'\n" for k in sorted(keys)), encoding="utf-8")
    path.chmod(0o600)
    return path


def build_in_docker(
    plan: BuildPlan,
    staging: Path,
    *,
    on_line: Callable[[str], None] | None = None,
    fetch_only: bool = False,
) -> list[str]:
    """Build the builder image and copy the finished libtorch into ``staging``.

    Returns:
        The build's output lines that carry cache statistics (``fdl-cache-stats`` blocks).

    Raises:
        EnvironmentProblem: no docker engine, or no BuildKit.
        CommandFailed: the build failed (the log file has everything).
    """
    from fdl.engine import BuildSpec, Secret, default_engine

    assert plan.docker is not None
    engine = default_engine()
    if not engine.describe().client.builder.has_buildkit:
        raise EnvironmentProblem(
            "the docker client has no BuildKit; the libtorch builder needs RUN --mount",
            hint="install the buildx plugin, or set FDL_DOCKER=/usr/bin/docker (a client "
            "older than 23.0 with BuildKit built in)",
        )
    stats: list[str] = []
    capture = [False]

    def feed(line: str) -> None:
        text = line.split(" ", 2)[-1] if line.startswith("#") else line
        if "fdl-cache-stats-begin" in text:
            capture[0] = True
        if capture[0]:
            stats.append(text)
        if "fdl-cache-stats-end" in text:
            capture[0] = False
        if on_line is not None:
            on_line(line)

    with tempfile.TemporaryDirectory(prefix="fdl-libtorch-build-") as scratch_name:
        scratch = Path(scratch_name)
        context = _context(plan, scratch)
        secret = _secret_file(plan, scratch)
        spec = BuildSpec(
            context=context,
            dockerfile_text=plan.docker.dockerfile,
            tags=(plan.docker.tag,),
            labels={"org.fdl.variant": plan.variant, "org.fdl.torch": plan.torch, **owner_labels()},
            secrets={"cache_env": Secret(file=secret)} if secret else {},
            network=plan.docker.network,
        )
        plan.log_file.parent.mkdir(parents=True, exist_ok=True)
        if fetch_only:  # the fetch stage only: its cache mounts keep what it fetched
            fetch = replace(spec, target="fetch", tags=(f"{plan.docker.tag}-fetch",))
            engine.build(fetch, on_line=feed, log_file=plan.log_file)
            return []
        if plan.docker.offline:
            # The fetch stage (source, submodules, optional dependencies) with the network;
            # the compile stage as a build of its own with none (the fetch steps come from
            # the build cache; RUN --network needs a newer Dockerfile frontend than the
            # one built into docker 20.10, and pulling one needs Docker Hub).
            fetch = replace(spec, target="fetch", tags=(f"{plan.docker.tag}-fetch",))
            engine.build(fetch, on_line=feed, log_file=plan.log_file)
            spec = replace(spec, target="compile", network="none")
        engine.build(spec, on_line=feed, log_file=plan.log_file)
    engine.copy_out(plan.docker.tag, plan.docker.output, staging)
    return stats
