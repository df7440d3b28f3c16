"""Value grammars several sections share, written once so that they cannot drift apart:
an environment variable's name, an image profile's name, a registry, a mount, a path
that stays inside the repository, a word without spaces."""

from __future__ import annotations

from fdl.manifest.schema import Str

__all__ = [
    "ENV_NAME",
    "ENV_RULE",
    "MOUNT",
    "NO_SPACES",
    "PROFILE_NAME",
    "REGISTRY",
    "RELATIVE",
    "RELATIVE_RULE",
    "env_name",
    "word",
]

ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
ENV_RULE = "a variable name: letters, digits and '_', not starting with a digit"
# an image profile (images:), as ci: and deploy: name one
PROFILE_NAME = r"[a-z0-9][a-z0-9_.-]*"
# host[:port]/namespace, where images and caches are pushed
REGISTRY = r"[a-zA-Z0-9.-]+(?::[0-9]+)?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
# host:container[:ro|rw]
MOUNT = r"[^:]+:/[^:]*(?::(?:ro|rw))?"
RELATIVE = r"(?!/)(?!.*(?:^|/)\.\.(?:/|$)).+"
RELATIVE_RULE = "a relative path that stays inside the repository (no leading '/', no '..')"
NO_SPACES = "no spaces"


def env_name(example: str, description: str = "") -> Str:
    """An environment variable's name."""
    return Str(description, pattern=ENV_NAME, example=example, rule=ENV_RULE)


def word(example: str, description: str = "") -> Str:
    """A value without spaces (a branch, a SLURM partition, a kubeconfig context)."""
    return Str(description, pattern=r"\S+", example=example, rule=NO_SPACES)
