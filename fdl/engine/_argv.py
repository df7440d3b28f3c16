"""The docker command lines for a build and a run (pure functions, tested by text)."""

from __future__ import annotations

import re
from pathlib import Path

from fdl.engine._facts import docker_facts
from fdl.engine._types import Builder, BuildSpec, DockerClient, Mount, RunSpec
from fdl.errors import EnvironmentProblem

__all__ = ["build_command", "buildkit_reasons", "mount_option", "run_command"]

# Dockerfile syntax the classic builder rejects, with the words for the error.
_BUILDKIT_SYNTAX = (
    (
        re.compile(r"^[ \t]*RUN\b[^\n]*--mount=[^\n]*type=cache", re.I | re.M),
        "RUN --mount=type=cache",
    ),
    (
        re.compile(r"^[ \t]*RUN\b[^\n]*--mount=[^\n]*type=secret", re.I | re.M),
        "RUN --mount=type=secret",
    ),
    (re.compile(r"^[ \t]*RUN\b[^\n]*--mount=", re.I | re.M), "RUN --mount"),
    (re.compile(r"^[ \t]*(COPY|ADD)\b[^\n]*--link\b", re.I | re.M), "COPY --link"),
    (re.compile(r"^[ \t]*#[ \t]*syntax\s*=", re.I | re.M), "a # syntax= directive"),
    (re.compile(r"^[ \t]*(RUN|COPY)\b[^\n]*<<-?\s*['\"]?\w+", re.I | re.M), "a here-document"),
)


def buildkit_reasons(spec: BuildSpec, dockerfile_text: str) -> list[str]:
    """Why this build cannot run on the classic builder (empty: it can)."""
    reasons = [words for pattern, words in _BUILDKIT_SYNTAX if pattern.search(dockerfile_text)]
    if any(words.startswith("RUN --mount=") for words in reasons):
        reasons.remove("RUN --mount")  # the specific kind says it better
    if spec.secrets:
        reasons.append("build secrets")
    if spec.cache_to:
        reasons.append("cache export (cache_to)")
    return reasons


def build_command(
    client: DockerClient, spec: BuildSpec, dockerfile: Path, iidfile: Path
) -> tuple[list[str], dict[str, str]]:
    """The argv of a build and the variables to add to its environment.

    Raises:
        EnvironmentProblem: A cache source or export this client cannot handle.
    """
    builder = client.builder
    if builder is Builder.BUILDX:
        argv = [client.path, "buildx", "build", "--load", "--progress=plain"]
        env: dict[str, str] = {}
    elif builder is Builder.BUILDKIT:
        argv = [client.path, "build", "--progress=plain"]
        env = {"DOCKER_BUILDKIT": "1"}
    else:
        # The classic builder rejects --progress on newer clients; 0 also silences
        # a user's DOCKER_BUILDKIT=1, which would fail without buildx.
        argv = [client.path, "build"]
        env = {"DOCKER_BUILDKIT": "0"}
    argv += ["--file", str(dockerfile), "--iidfile", str(iidfile)]
    for tag in spec.tags:
        argv += ["--tag", tag]
    build_args = dict(spec.build_args)
    for key in sorted(build_args):
        argv += ["--build-arg", f"{key}={build_args[key]}"]
    for key in sorted(spec.labels):
        argv += ["--label", f"{key}={spec.labels[key]}"]
    if spec.target:
        argv += ["--target", spec.target]
    for ident in sorted(spec.secrets):
        secret = spec.secrets[ident]
        source = f"src={secret.file}" if secret.file is not None else f"env={secret.env}"
        argv += ["--secret", f"id={ident},{source}"]
    for source in spec.cache_from:
        argv += ["--cache-from", _cache_source(source, builder)]
    for export in spec.cache_to:
        argv += _cache_export(export, builder)
    if spec.no_cache:
        argv.append("--no-cache")
    if spec.pull:
        argv.append("--pull")
    if spec.platform:
        argv += ["--platform", spec.platform]
    if spec.network:
        argv += ["--network", spec.network]
    argv.append(str(spec.context))
    return argv, env


def _cache_source(source: str, builder: Builder) -> str:
    """``--cache-from``: any form with buildx, an image reference otherwise."""
    if builder is Builder.BUILDX or not source.startswith("type="):
        return source
    fields = dict(part.split("=", 1) for part in source.split(",") if "=" in part)
    if fields.get("type") == "registry" and "ref" in fields:
        return fields["ref"]
    raise EnvironmentProblem(
        f"cache source {source!r} needs docker buildx; this client only reads image references",
        hint=f"{docker_facts().buildx_install}, or give cache_from an image reference",
    )


def _cache_export(export: str, builder: Builder) -> list[str]:
    """``--cache-to``: buildx takes any; a built-in BuildKit only inline caches."""
    if builder is Builder.BUILDX:
        return ["--cache-to", export]
    if export.replace(" ", "") == "type=inline":
        return ["--build-arg", "BUILDKIT_INLINE_CACHE=1"]
    raise EnvironmentProblem(
        f"cache export {export!r} needs docker buildx (this client can only embed an inline cache)",
        hint=f"{docker_facts().buildx_install}, or use cache_to=('type=inline',)",
    )


def _csv_field(text: str) -> str:
    """Quote one field of a ``--mount`` value (it is parsed as CSV)."""
    if any(char in text for char in ',"\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def mount_option(mount: Mount) -> str:
    """The ``--mount`` value of a mount."""
    fields = [f"type={mount.type}"]
    if mount.type != "tmpfs":
        fields.append(f"source={mount.source}")
    fields.append(f"target={mount.target}")
    if mount.read_only:
        fields.append("readonly")
    return ",".join(_csv_field(field) for field in fields)


def run_command(client: DockerClient, spec: RunSpec) -> list[str]:
    """The argv of ``docker run`` for a run spec."""
    argv = [client.path, "run"]
    flags = (
        (spec.remove, "--rm"),
        (spec.interactive, "--interactive"),
        (spec.tty, "--tty"),
    )
    argv += [flag for wanted, flag in flags if wanted]
    options = (
        ("--name", spec.name),
        ("--network", spec.network),
        ("--user", spec.user),
        ("--workdir", spec.workdir),
        ("--gpus", spec.gpus),
        ("--shm-size", spec.shm_size),
        ("--entrypoint", spec.entrypoint),
        ("--pull", spec.pull),
    )
    for option, value in options:
        if value is not None:
            argv += [option, value]
    env = dict(spec.env)
    for key in sorted(env):
        value = env[key]
        argv += ["--env", key if value is None else f"{key}={value}"]
    for mount in spec.mounts:
        argv += ["--mount", mount_option(mount)]
    argv += list(spec.extra_args)
    argv.append(spec.image)
    argv += list(spec.argv)
    return argv
