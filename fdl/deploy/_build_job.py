"""``fdl libtorch build --on TARGET``: the source build as a SLURM job (pure; template
``templates/deploy/build.sbatch.sh.j2``).

The job runs ``fdl libtorch build ... --push --json`` on one node of the target, in the
submitting directory (fdl.yml's ``libtorch.build``, recipes and relative paths hold as they
do here), with the target's CPUs (``--jobs``), memory, time limit, partition, account and
qos. It pushes to the team's registry and writes fdl's JSON answer (the pushed reference,
by digest, and where the variant was installed) to
``<project>/.fdl/deploy/libtorch-build/<job id>.json``: the cluster shares the project's
filesystem, so the submitting machine reads it there. The variant lands in the project's
``libtorch/`` like a local build's; where the submitting machine does not see it there, it
pulls the pushed reference by digest.

The backend: what the command line asked (``--docker``/``--native``); otherwise the Docker
backend where the target runs docker, the native one where it runs podman, apptainer or
pyxis (no docker daemon for users on those clusters). The archs: ``--archs`` as given, else
the GPUs the target declares (``deploy.T.gpus``): the build is for the cluster's GPUs, not
the submitting machine's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fdl._assets import asset_dir, template_environment
from fdl._files import read_small_text, reason_of
from fdl._grammar import quoted
from fdl._text import printable
from fdl.deploy._slurm import sbatch_directive, sbatch_options, slurm_literal
from fdl.deploy._target import DeployTarget
from fdl.errors import EnvironmentProblem, UsageError

__all__ = ["BuildJob", "build_job_dir", "plan_build_job", "read_build_result"]

# Options the job decides itself, or that make no sense on a node.
_REFUSED = {"--fetch-only": "fetch on the node: run the build there (without --fetch-only)"}


def build_job_dir(state_dir: Path) -> Path:
    """``<project>/.fdl/deploy/libtorch-build``: the jobs' answers."""
    return state_dir / "libtorch-build"


@dataclass(frozen=True)
class BuildJob:
    """A planned build job: the script and where its answer will be."""

    target: DeployTarget
    job_name: str
    registry: str
    backend: str
    argv: tuple[str, ...]
    results: Path
    text: str

    @property
    def filename(self) -> str:
        return f"{self.target.name}-libtorch-build.sbatch"

    def result_path(self, job_id: str) -> Path:
        return self.results / f"{job_id}.json"

    def to_json(self) -> dict[str, Any]:
        return {
            "action": "submit",
            "target": self.target.name,
            "job_name": self.job_name,
            "registry": self.registry,
            "backend": self.backend,
            "command": list(self.argv),
            "results": str(self.results),
            "script": self.text,
        }


def _gpu_archs(target: DeployTarget) -> str:
    capabilities = sorted({g.capability for g in target.offered()}, key=_capability_key)
    if not capabilities:
        raise UsageError(
            f"deploy target {target.name!r} declares no GPUs to build for",
            hint=f"pass --archs (e.g. --archs '8.0;9.0'), --cpu, or declare them under "
            f"deploy.{target.name}.gpus (at {target.origin})",
        )
    return ";".join(capabilities)


def _capability_key(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split("."))
    except ValueError:
        return (1 << 30,)


def plan_build_job(
    target: DeployTarget,
    given: dict[str, tuple[Any, str]],
    *,
    registry: str,
    state_dir: Path,
    workdir: Path,
    fdl: tuple[str, ...],
    no_registry: bool = False,
) -> BuildJob:
    """The job that builds what ``given`` asks on ``target`` and pushes it to ``registry``.

    Args:
        target: A SLURM target.
        given: ``{setting: (value, flag)}`` from the command line (the build's options).
        registry: The team's repository (``host/namespace/name``).
        state_dir: ``<project>/.fdl/deploy``.
        workdir: Where the job runs (the submitting directory: fdl.yml, recipes, relative
            paths resolve as they did here).
        fdl: How the node runs fdl (the cluster shares the filesystem: this interpreter).
        no_registry: Build even when the registry holds a variant that fits.

    Raises:
        UsageError: not a SLURM target, an option that makes no sense on a node, or no
            archs to build for.
    """
    if target.kind != "slurm":
        raise UsageError(
            f"deploy target {target.name!r} is a {target.kind} target; build --on runs on "
            "SLURM targets",
            hint="name a `kind: slurm` target, or build here and push: fdl libtorch build --push",
        )
    for _, flag in given.values():
        if flag in _REFUSED:
            raise UsageError(f"{flag} cannot be used with --on", hint=_REFUSED[flag])
    from fdl.libtorch.build import build_settings

    takes_value = {flag for setting in build_settings() for flag in setting.option}
    argv: list[str] = []
    for key, (value, flag) in given.items():
        if flag not in takes_value:
            argv.append(flag)  # a switch (--cpu, --docker, --no-flash-attention, ...)
            continue
        # The job runs in this directory; a source tree is named exactly all the same.
        text = str((workdir / str(value)).resolve()) if key == "source" else str(value)
        argv += [flag, text]
    backend = str(given["backend"][0]) if "backend" in given else None
    if backend is None:
        backend = "docker" if target.runtime == "docker" else "native"
        argv.append(f"--{backend}")
    if "archs" not in given and "cpu" not in given:
        argv += ["--archs", _gpu_archs(target)]
    if "jobs" not in given and target.cpus_per_task:
        argv += ["--jobs", str(target.cpus_per_task)]
    if no_registry:
        argv.append("--no-registry")
    argv += ["--push", "--json"]
    job_name = f"fdl-libtorch-build-{target.name}"
    # One node, one task, no GPU: nvcc compiles for archs it does not run on. The job runs
    # in `workdir`: a relative output file is kept beside the job records, as deploy's.
    # The project's own path is literal to sbatch (a `%` in it is no filename pattern).
    output = (
        target.output
        if target.output.startswith("/")
        else f"{slurm_literal(str(state_dir))}/{target.output}"
    )
    node = replace(target, nodes=1, tasks_per_node=1, gpus_per_node=0, output=output)
    options = [*sbatch_options(node, job_name), sbatch_directive("chdir", workdir)]
    results = build_job_dir(state_dir)
    command = [*fdl, "libtorch", "build", *argv]
    env = template_environment(asset_dir("templates") / "deploy")
    text = env.get_template("build.sbatch.sh.j2").render(
        target=target.name,
        registry=_word(registry),
        registry_shown=printable(registry),  # a comment: one line
        options=options,
        results=_word(str(results)),
        backend=backend,
        command=" ".join(_word(w) for w in command),
    )
    return BuildJob(
        target=target,
        job_name=job_name,
        registry=registry,
        backend=backend,
        argv=tuple(command),
        results=results,
        text=text,
    )


def read_build_result(path: Path) -> dict[str, Any]:
    """The job's answer: ``{"reference": repo@digest, "digest": ..., "variant": ...,
    "path": where the job installed it, "pulled_instead": bool}``.

    Raises:
        EnvironmentProblem: no answer (the job ended before writing it), or not one.
    """
    try:
        text = read_small_text(path, limit=1 << 20)
        data = json.loads(text) if text is not None else None
    except (OSError, ValueError, RecursionError) as exc:
        raise _no_result(path, reason_of(exc)) from None
    if text is None:
        raise _no_result(path, "it does not exist")
    if not isinstance(data, dict):
        raise _no_result(path, "it is not a JSON object")
    pushed = data.get("pushed")
    if isinstance(pushed, dict) and isinstance(pushed.get("reference"), str):
        return {
            "reference": pushed["reference"],
            "digest": pushed.get("digest"),
            "variant": data.get("variant"),
            "path": data.get("path"),
            "pulled_instead": False,
        }
    if data.get("action") == "pull" and isinstance(data.get("reference"), str):
        # The registry already held a variant that fits: the job pulled it, built nothing.
        return {
            "reference": data["reference"],
            "digest": data.get("digest"),
            "variant": data.get("variant"),
            "path": data.get("path"),
            "pulled_instead": True,
        }
    raise _no_result(path, "it names no pushed reference")


def _no_result(path: Path, reason: str) -> EnvironmentProblem:
    return EnvironmentProblem(
        f"the build job left no answer fdl can read in {path}: {reason}",
        hint="read the job's output (fdl deploy logs TARGET --job ID); the job pushed "
        "nothing fdl can name, so build again: fdl libtorch build --on TARGET",
    )


def _word(word: str) -> str:
    return quoted("shell", word, what="a word", source="the build job's script")
