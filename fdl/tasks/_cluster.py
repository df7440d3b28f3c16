"""A ``cluster: true`` command: the variables floDl's launcher reads, as floDl's CLI 0.8.0
exports them (``flodl-cli`` 0.8.0 ``src/cli/config.rs:117-245``, ``src/cluster.rs:1-32,
43-122, 213-300``, ``src/gpus.rs:120-170``, ``src/config/cluster.rs:89-222, 537-905``).

fdl does not fan out: the training binary (``flodl::distributed::launcher``) does, over ssh,
once it sees ``FLODL_INTERNAL_FULL_CLUSTER_JSON``. The envelope comes from ``--gpus`` with two
or more devices (one host, ranks over loopback) or from the manifest's ``cluster:`` block.
Unlike floDl's CLI, fdl asks no host over ssh how many GPUs it has: a worker's
``local_devices`` must list them (``all`` is refused with that fix), and there is no
pre-flight build or mount check (``--no-prebuild`` is the only mode).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from fdl.errors import Location, ManifestError, UsageError
from fdl.manifest.sections.cluster import reserved_env_key
from fdl.tasks._contract import ALL_GPUS, gpu_mask
from fdl.tasks._env import EnvChange

TYPE_CHECKING = False  # typing costs start-up: annotations only
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

__all__ = ["ClusterRun", "cluster_run", "hex_encode", "local_cluster", "testing_envelope"]

DEFAULT_PORT = 1337  # config/cluster.rs DEFAULT_CONTROLLER_PORT
RECURSIVE = "FLODL_INTERNAL_CLUSTER_JSON"  # set by the launcher on its ranks (cluster.rs:48)

# The keys of each part in the order floDl serialises them (config/cluster.rs:89-222, 563-700).
_CONTROLLER = ("host", "port", "path", "docker", "arch", "data_path", "join")
_JOIN = (
    "min_rank_start",
    "join_timeout",
    "target_ranks",
    "max_join_timeout",
    "open_admission",
    "discovery",
    "token",
    "tunnel_only",
    "start",
)
_WORKER = (
    "host",
    "local_devices",
    "nccl_socket_ifname",
    "path",
    "ssh",
    "tunnel",
    "arch",
    "data_path",
    "gpu_ram_share",
    "docker",
    "env",
)
_SSH = ("target", "port", "user", "identity_file", "options")


@dataclass
class ClusterRun:
    """What a command gets for ``--gpus`` and ``cluster: true``: variables and notes."""

    exports: list[EnvChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def hex_encode(text: str) -> str:
    """Lower-case hex of the UTF-8 bytes (cluster.rs:725-733)."""
    return text.encode("utf-8").hex()


def _devices(spec: str | tuple[int, ...], count_gpus: Callable[[], int]) -> tuple[int, ...]:
    if spec != ALL_GPUS:
        assert isinstance(spec, tuple)
        return spec
    count = count_gpus()
    if count <= 0:
        raise UsageError("--gpus all: no GPU is visible on this machine", hint="see `fdl diagnose`")
    return tuple(range(min(count, 256)))


def local_cluster(devices: Sequence[int], host: str, path: str, port: int) -> dict[str, Any]:
    """The single-host envelope floDl's CLI builds from ``--gpus`` (gpus.rs:120-170): the
    controller on 127.0.0.1, one worker with one rank per device over ``lo``."""
    worker = {
        "host": host,
        "ranks": list(range(len(devices))),
        "local_devices": list(devices),
        "nccl_socket_ifname": "lo",
        "path": path,
    }
    return {"controller": {"host": "127.0.0.1", "port": port, "path": path}, "workers": [worker]}


class _Block:
    """The manifest's ``cluster:`` block read into floDl's envelope, refusals with its place."""

    def __init__(self, where: Location | None, local: Callable[[], int] | None = None) -> None:
        self.where = where
        self.local = local  # counts `local_devices: all` here (the testing envelope) or refuses

    def fail(self, path: str, message: str, hint: str) -> ManifestError:
        where = f"cluster.{path}" if path else "cluster"
        return ManifestError(f"{where}: {message}", location=self.where, hint=hint)

    def part(self, path: str, value: object, keys: Sequence[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, "must be a mapping", "see floDl's fdl.cluster.yml example")
        unknown = [str(k) for k in value if k not in keys]
        if unknown:
            raise self.fail(
                path, f"unknown key {unknown[0]!r}", f"the keys here are: {', '.join(keys)}"
            )
        return {k: value[k] for k in keys if value.get(k) is not None}

    def text(self, path: str, value: object) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(path, "must be a non-empty string", "give it a value")
        return value

    def env(self, path: str, value: object) -> dict[str, str]:
        if not isinstance(value, dict):
            raise self.fail(path, "must be a mapping of names to values", "fix it")
        for key in value:
            if reserved_env_key(str(key)):
                raise self.fail(
                    f"{path}.{key}",
                    "is reserved (the launcher sets it per rank)",
                    f"remove {key} from {path}",
                )
        return {str(k): str(value[k]) for k in sorted(value, key=str)}

    def read(self, block: object) -> dict[str, Any]:
        top = self.part("", block, ("controller", "workers", "env", "gpu_ram_share"))
        controller = self.part("controller", top.get("controller"), _CONTROLLER)
        self.text("controller.host", controller.get("host"))
        self.text("controller.path", controller.get("path"))
        controller.setdefault("port", DEFAULT_PORT)
        if "join" in controller:
            controller["join"] = self.part("controller.join", controller["join"], _JOIN)
            start = controller["join"].get("start")
            if start is not None and start not in ("auto", "manual", "hybrid"):
                raise self.fail("controller.join.start", f"is {start!r}", "auto, manual or hybrid")
        discovery = (controller.get("join") or {}).get("discovery") is True
        workers = top.get("workers") or []
        if not isinstance(workers, list) or (not workers and not discovery):
            raise self.fail(
                "workers",
                "must be a non-empty list",
                "list the hosts, or set controller.join.discovery: true",
            )
        envelope: dict[str, Any] = {"controller": self.order(controller, _CONTROLLER)}
        envelope["workers"] = self.workers(workers)
        if top.get("env"):
            envelope["env"] = self.env("env", top["env"])
        if "gpu_ram_share" in top:
            envelope["gpu_ram_share"] = self.share("gpu_ram_share", top["gpu_ram_share"])
        return envelope

    def workers(self, workers: list[object]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        rank = 0
        for index, raw in enumerate(workers):
            path = f"workers[{index}]"
            if isinstance(raw, dict) and "ranks" in raw:
                raise self.fail(f"{path}.ranks", "is set by floDl, not written", "remove it")
            worker = self.part(path, raw, _WORKER)
            host = self.text(f"{path}.host", worker.get("host"))
            self.text(f"{path}.path", worker.get("path"))
            devices = worker.get("local_devices")
            count = len(devices) if isinstance(devices, list) else 0
            if devices == "all" and self.local is not None:
                count = self.local()
                if count <= 0:
                    raise self.fail(
                        f"{path}.local_devices",
                        "is 'all', but no GPU is visible here",
                        "list the devices",
                    )
            elif devices == "all":
                raise self.fail(
                    f"{path}.local_devices",
                    f"is 'all', which floDl's CLI counts over ssh on {host}; fdl does not ssh",
                    "list the devices, e.g. local_devices: [0, 1]",
                )
            elif (
                not isinstance(devices, list)
                or not devices
                or not all(isinstance(d, int) and 0 <= d <= 255 for d in devices)
            ):
                raise self.fail(f"{path}.local_devices", "must list device indices", "e.g. [0, 1]")
            ifname = worker.get("nccl_socket_ifname")
            if not isinstance(ifname, str) or (len(workers) > 1 and not ifname.strip()):
                raise self.fail(
                    f"{path}.nccl_socket_ifname", "must name a network interface", "e.g. eth0"
                )
            if "ssh" in worker:
                worker["ssh"] = self.order(self.part(f"{path}.ssh", worker["ssh"], _SSH), _SSH)
            if worker.get("env"):
                worker["env"] = self.env(f"{path}.env", worker["env"])
            else:
                worker.pop("env", None)
            if "gpu_ram_share" in worker:
                worker["gpu_ram_share"] = self.share(
                    f"{path}.gpu_ram_share", worker["gpu_ram_share"]
                )
            if not worker.get("tunnel"):
                worker.pop("tunnel", None)
            worker["ranks"] = list(range(rank, rank + count))
            rank += count
            out.append(self.order(worker, ("host", "ranks", *_WORKER[1:])))
        return out

    def share(self, path: str, value: object) -> float:
        """A fraction, written as floDl's f64 (``1.0``, not ``1``)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(path, "must be a number", "e.g. 0.5")
        return float(value)

    @staticmethod
    def order(part: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
        return {k: part[k] for k in keys if k in part}


def testing_envelope(block: object, where: Location | None, count_gpus: Callable[[], int]) -> str:
    """``FLODL_TESTING_CLUSTER_JSON``: the block's envelope for floDl's test binaries, which
    floDl's CLI exports for every command of an overlay with a ``cluster:`` block
    (config.rs:66-100, cluster.rs:340-360): ``local_devices: all`` counted here, no name
    lookups.

    Raises:
        ManifestError: a block floDl's launcher would not take.
    """
    envelope = _Block(where, count_gpus).read(block)
    return hex_encode(json.dumps(envelope, indent=2, ensure_ascii=False))


def _net_timeout_scale(environ: Mapping[str, str]) -> None:
    """``FLODL_NET_TIMEOUT_SCALE`` set: a finite number >= 0.1 (cluster.rs:133-150)."""
    raw = environ.get("FLODL_NET_TIMEOUT_SCALE")
    if raw is None:
        return
    try:
        value = float(raw.strip())
    except ValueError:
        value = float("nan")
    if not (value >= 0.1 and value != float("inf")):
        raise UsageError(
            f"FLODL_NET_TIMEOUT_SCALE={raw.strip()!r} is not a scale factor >= 0.1",
            hint="unset it, or set e.g. FLODL_NET_TIMEOUT_SCALE=3 for a slow link",
        )


def _resolve_ip(host: str) -> tuple[str | None, str | None]:
    """``host``'s address, a non-loopback one first (cluster.rs:594-644), and a warning."""
    import ipaddress
    import socket

    try:
        ipaddress.ip_address(host)
        return host, None
    except ValueError:
        pass
    try:
        found = [info[4][0] for info in socket.getaddrinfo(host, 0)]
    except (OSError, UnicodeError) as exc:
        return None, f"host {host!r} did not resolve here: {exc}"
    for address in found:
        if not ipaddress.ip_address(str(address)).is_loopback:
            return str(address), None
    if found:
        return str(found[0]), f"host {host!r} resolves only to loopback {found[0]} here"
    return None, None


def _host_user(environ: Mapping[str, str]) -> str | None:
    user = (environ.get("USER") or "").strip()
    if user:
        return user
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name or None
    except (KeyError, ImportError):
        return None


def cluster_run(
    *,
    marked: bool,
    block: object,
    block_at: Location | None,
    gpus: str | tuple[int, ...] | None,
    command: str,
    directory: Path,
    environ: Mapping[str, str],
    count_gpus: Callable[[], int],
    hostname: str,
) -> ClusterRun:
    """The variables for ``--gpus`` and a ``cluster: true`` command (config.rs:117-245).

    Raises:
        UsageError: ``--gpus`` with a ``cluster:`` block, ``--gpus all`` without GPUs, a bad
            ``FLODL_NET_TIMEOUT_SCALE``.
        ManifestError: a ``cluster:`` block floDl's launcher would not take.
    """
    run = ClusterRun()
    devices = _devices(gpus, count_gpus) if gpus is not None else None
    if not marked or RECURSIVE in environ:
        if devices is not None:
            run.exports.extend(gpu_mask(devices))
        return run
    if block is not None and devices is not None:
        raise UsageError(
            "--gpus cannot be combined with a `cluster:` block in fdl.yml",
            hint="remove one or the other",
        )
    envelope: dict[str, Any] | None = None
    if block is not None:
        envelope = _Block(block_at).read(block)
        ip, warning = _resolve_ip(envelope["controller"]["host"])
        if ip is not None:
            envelope["controller"]["host"] = ip
        if warning:
            run.notes.append(warning)
    elif devices is not None and len(devices) < 2:
        run.exports.extend(gpu_mask(devices))
    elif devices is not None:
        port_text = environ.get("FLODL_CONTROLLER_PORT", "")
        port = int(port_text) if port_text.isdigit() and int(port_text) < 65536 else DEFAULT_PORT
        envelope = local_cluster(devices, hostname, str(directory), port)
    if envelope is None:
        return run
    _net_timeout_scale(environ)
    text = json.dumps(envelope, indent=2, ensure_ascii=False)
    run.exports += [
        EnvChange("FLODL_INTERNAL_FULL_CLUSTER_JSON", hex_encode(text)),
        EnvChange("FLODL_INTERNAL_FDL_CMD", command),
    ]
    user = _host_user(environ)
    if user:
        run.exports.append(EnvChange("FLODL_INTERNAL_HOST_USER", user))
    pairs = []
    for worker in envelope["workers"]:
        ip, warning = _resolve_ip(worker["host"])
        if ip is not None:
            pairs.append(f"{worker['host']}:{ip}")
        if warning and not (worker.get("ssh") or {}).get("target"):  # cluster.rs:552-576
            run.notes.append(warning)
    if pairs:
        run.exports.append(EnvChange("FLODL_INTERNAL_CLUSTER_EXTRA_HOSTS", " ".join(pairs)))
    hosts = len(envelope["workers"])
    run.notes.append(
        f"cluster mode: floDl's launcher in the program fans out over {hosts} host(s); "
        "fdl exports its envelope and does not ssh, probe or pre-build"
    )
    return run
