"""What generated CI files need to know: ``fdl/data/ci/ci.yml``, loaded once."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from fdl._assets import data_dir

__all__ = ["CiData", "ci_data"]


@dataclass(frozen=True)
class CiData:
    """The contents of ci.yml.

    Attributes:
        defaults: Defaults of the ``ci:`` section's keys.
        actions: GitHub Actions by role (``checkout`` -> ``actions/checkout@v4``).
        timeouts: Job time limits in minutes (``images``, ``source_build`` on hosted
            runners, ``source_build_self_hosted``).
        hosted_machine: A hosted runner's ``cores`` and ``ram_gb``.
        hosted_runners: Labels of GitHub-hosted runners.
        hosted_cleanup: Directories deleted on them before CUDA work.
        token_registries: Registry host -> login (username, password expressions).
        other_login: The login of any other registry.
        platforms: Docker platform -> fdl's libtorch platform name.
    """

    defaults: dict[str, Any]
    actions: dict[str, str]
    timeouts: dict[str, int]
    hosted_machine: dict[str, float]
    hosted_runners: tuple[str, ...]
    hosted_cleanup: tuple[str, ...]
    token_registries: dict[str, tuple[str, str]]
    other_login: tuple[str, str]
    platforms: dict[str, str]

    def default_test(self, kind: str) -> tuple[str, ...]:
        """The arguments of the test run of an image of ``kind``."""
        return tuple(str(arg) for arg in self.defaults["tests"].get(kind) or ())

    def login(self, host: str) -> tuple[str, str]:
        """(username, password) expressions for logging in to ``host``."""
        return self.token_registries.get(host, self.other_login)


def _login(entry: dict[str, Any]) -> tuple[str, str]:
    return str(entry["username"]), str(entry["password"])


@functools.cache
def ci_data() -> CiData:
    """Load the table once."""
    import yaml

    raw: dict[str, Any] = yaml.safe_load((data_dir() / "ci" / "ci.yml").read_text(encoding="utf-8"))
    return CiData(
        defaults=dict(raw["defaults"]),
        actions={str(k): str(v) for k, v in raw["actions"].items()},
        timeouts={str(k): int(v) for k, v in raw["timeouts"].items()},
        hosted_machine={str(k): float(v) for k, v in raw["hosted_machine"].items()},
        hosted_runners=tuple(str(r) for r in raw["hosted_runners"]),
        hosted_cleanup=tuple(str(p) for p in raw["hosted_cleanup"]),
        token_registries={str(k): _login(v) for k, v in raw["token_registries"].items()},
        other_login=_login(raw["other_registries"]),
        platforms={str(k): str(v) for k, v in raw["platforms"].items()},
    )
