"""The docker facts table (fdl/data/docker.yml) and turning docker failures into fdl errors."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from fdl._assets import data_dir
from fdl.errors import CommandFailed, EnvironmentProblem, FdlError, NetworkError

__all__ = ["DockerFacts", "Failure", "docker_facts", "translate_failure", "version_tuple"]

KINDS = ("environment", "network", "failure")


@dataclass(frozen=True)
class Failure:
    """A known docker failure: where it shows, what it means, how to fix it."""

    match: str
    kind: str
    message: str
    hint: str


@dataclass(frozen=True)
class DockerFacts:
    """The contents of fdl/data/docker.yml."""

    builtin_buildkit_before: tuple[int, ...]
    buildx_install: str
    compose_install: str
    failures: tuple[Failure, ...]


def version_tuple(text: str) -> tuple[int, ...]:
    """``20.10.24+dfsg1`` -> (20, 10, 24); () when it does not start with a number."""
    parts: list[int] = []
    for piece in text.strip().lstrip("v").split("."):
        digits = ""
        for char in piece:
            if not char.isdigit():
                break
            digits += char
        if not digits:
            break
        parts.append(int(digits))
        if len(digits) != len(piece):
            break
    return tuple(parts)


@functools.cache
def docker_facts() -> DockerFacts:
    """Load the table once."""
    import yaml

    raw: dict[str, Any] = yaml.safe_load((data_dir() / "docker.yml").read_text(encoding="utf-8"))
    failures = tuple(
        Failure(
            str(item["match"]),
            str(item["kind"]),
            str(item["message"]),
            " ".join(str(item["hint"]).split()),
        )
        for item in raw["failures"]
    )
    return DockerFacts(
        builtin_buildkit_before=version_tuple(str(raw["builtin_buildkit_before"])),
        buildx_install=" ".join(str(raw["buildx_install"]).split()),
        compose_install=" ".join(str(raw["compose_install"]).split()),
        failures=failures,
    )


def known_failure(output: str) -> Failure | None:
    """The first known failure whose text occurs in ``output``."""
    lowered = output.lower()
    for failure in docker_facts().failures:
        if failure.match.lower() in lowered:
            return failure
    return None


def translate_failure(error: CommandFailed, action: str, *, hint: str | None = None) -> FdlError:
    """Turn a failed docker command into the error a user should see.

    Args:
        error: What the runner raised (it carries docker's output tail).
        action: What fdl was doing, for the message (``building image x``).
        hint: The fix to offer when the failure is not a known one.
    """
    tail = error.details or ""
    known = known_failure(tail)
    if known is None:
        return CommandFailed(
            error.argv,
            error.returncode,
            output_tail=tail,
            log_file=error.log_file,
            hint=hint or error.hint,
            message=f"{action} failed: docker exited with status {error.returncode}",
        )
    message = f"{action} failed: {known.message}"
    if known.kind == "environment":
        return EnvironmentProblem(message, hint=known.hint, details=tail or None)
    if known.kind == "network":
        return NetworkError(message, hint=known.hint, details=tail or None)
    return CommandFailed(
        error.argv,
        error.returncode,
        output_tail=tail,
        log_file=error.log_file,
        hint=known.hint,
        message=message,
    )
