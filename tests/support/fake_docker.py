"""Fake ``docker`` executables: small shell scripts that answer like real clients.

``make_fake_docker(folder, version="28.2.2", buildx=False)`` writes
``folder/docker``, which answers ``version``, ``--version``, ``buildx version``,
``compose version`` and ``info`` like a client of that kind, and logs every
call (its arguments and DOCKER_BUILDKIT) so tests can read what fdl ran.
Any other command answers what :meth:`FakeDocker.respond` set for its first
word (default: nothing, status 0) and writes ``sha256:fake`` to an ``--iidfile``.
``forward_to`` makes the other commands run a real docker instead.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FakeDocker", "make_fake_docker"]

SEP = "\x1f"
NO_DAEMON = (
    "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
    "Is the docker daemon running?"
)


@dataclass(frozen=True)
class FakeDocker:
    """A fake docker client on disk."""

    path: Path
    log: Path

    @property
    def folder(self) -> Path:
        return self.path.parent

    def respond(self, command: str, *, stdout: str = "", stderr: str = "", rc: int = 0) -> None:
        """Set the answer to ``command`` (its first word: build, buildx, run, cp, ...)."""
        (self.folder / f"out.{command}").write_text(stdout)
        (self.folder / f"err.{command}").write_text(stderr)
        (self.folder / f"rc.{command}").write_text(f"{rc}\n")

    def _records(self) -> list[list[str]]:
        """Each invocation's DOCKER_BUILDKIT and arguments (an argument may hold newlines,
        as `compose run`'s script does: a record ends with SEP and a newline)."""
        if not self.log.exists():
            return []
        return [record.split(SEP) for record in self.log.read_text().split(SEP + "\n")[:-1]]

    def calls(self) -> list[list[str]]:
        """Every invocation's arguments (without the executable), in order."""
        return [record[1:] for record in self._records()]

    def buildkit_env(self) -> list[str]:
        """DOCKER_BUILDKIT as each invocation saw it (empty when unset)."""
        return [record[0] for record in self._records()]

    def calls_of(self, command: str) -> list[list[str]]:
        """The invocations whose arguments start with ``command`` (e.g. ``buildx build``)."""
        words = command.split()
        return [call for call in self.calls() if call[: len(words)] == words]


def make_fake_docker(
    folder: Path,
    *,
    version: str = "28.2.2",
    buildx: bool = False,
    compose: bool = False,
    daemon: bool = True,
    server_version: str = "20.10.24+dfsg1",
    json_version: bool = True,
    forward_to: str | None = None,
) -> FakeDocker:
    """Write ``folder/docker`` answering like the described client."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "docker"
    log = folder / "docker.calls"
    client = {"Version": version, "ApiVersion": "1.41", "Os": "linux", "Arch": "amd64"}
    if json_version:
        with_server = json.dumps({"Client": client, "Server": {"Version": server_version}})
        without_server = json.dumps({"Client": client, "Server": None})
    else:  # a client whose --format output fdl cannot read
        with_server = without_server = "Client: Docker Engine"
    if forward_to:
        other = f'exec {shlex.quote(forward_to)} "$@"'
    else:
        other = f"""
key="$1"; dir={shlex.quote(str(folder))}
show() {{ while IFS= read -r l || [ -n "$l" ]; do printf '%s\\n' "$l"; done < "$1"; }}
if [ -f "$dir/out.$key" ]; then show "$dir/out.$key"; fi
if [ -f "$dir/err.$key" ]; then show "$dir/err.$key" >&2; fi
rc=0; if [ -f "$dir/rc.$key" ]; then read -r rc < "$dir/rc.$key"; fi
iid=""; prev=""
for a in "$@"; do
  if [ "$prev" = "--iidfile" ]; then iid="$a"; fi
  prev="$a"
done
if [ -n "$iid" ] && [ "$rc" = 0 ]; then printf 'sha256:fake' > "$iid"; fi
exit "$rc"
"""
    script = f"""#!/bin/sh
{{ printf '%s' "${{DOCKER_BUILDKIT:-}}"; for a in "$@"; do printf '\\037%s' "$a"; done; printf '\\037\\n'; }} >> {shlex.quote(str(log))}
case "$1" in
  version)
    if [ {"yes" if daemon else "no"} = yes ]; then
      printf '%s\\n' {shlex.quote(with_server)}; exit 0
    fi
    printf '%s\\n' {shlex.quote(without_server)}
    echo {shlex.quote(NO_DAEMON)} >&2; exit 1 ;;
  --version) echo "Docker version {version}, build fake"; exit 0 ;;
  buildx)
    if [ {"yes" if buildx else "no"} = yes ] && [ "$2" = version ]; then
      echo "github.com/docker/buildx v0.12.1 fake"; exit 0
    fi
    if [ {"yes" if buildx else "no"} = no ]; then
      echo "docker: unknown command: docker buildx" >&2; exit 1
    fi ;;
  compose)
    if [ {"yes" if compose else "no"} = yes ]; then echo "Docker Compose version v2.24.6"; exit 0; fi
    echo "docker: unknown command: docker compose" >&2; exit 1 ;;
  info)
    if [ {"yes" if daemon else "no"} = yes ]; then echo "Server Version: {server_version}"; exit 0; fi
    echo {shlex.quote(NO_DAEMON)} >&2; exit 1 ;;
esac
{other}
"""
    path.write_text(script)
    path.chmod(0o755)
    return FakeDocker(path, log)
