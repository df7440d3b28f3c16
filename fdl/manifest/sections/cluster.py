"""floDl 0.8.0's launcher blocks: ``cluster:``, ``join:`` and ``publish:``.

floDl's own CLI reads them (flodl-cli-0.8.0/src/config/schema.rs:30-49); fdl launches nothing
from them (``cluster: true`` commands are refused with the fix, fdl/tasks/_resolve.py), but a
project written for floDl must load, and a typo must be found where it is written, not on
the first host floDl's launcher touches. So the shapes, types and load-time checks are the
reference's (``deny_unknown_fields`` everywhere):

- ``cluster:`` config/cluster.rs:89-222, 537-717; required keys as its serde structs have
  them; a user-written ``workers[].ranks`` is refused (config/loading.rs:273-298);
  ``gpu_ram_share`` is a non-negative fraction (loading.rs:242-271); ``controller.join.start``
  is ``auto|manual|hybrid`` and ``env:`` keys the launcher owns are refused (cluster.rs:754-800,
  src/cluster.rs:100-112; the reference checks these two when a cluster command starts).
- ``join:`` config/cluster.rs:239-407; ``publish:`` config/cluster.rs:410-446.

Defaults (the reference's, applied by floDl, not written into the data): controller port
1337, data path ``/flodl/data``, ``persist: false``, ``publish.to: ~/.flodl/run``.
"""

from __future__ import annotations

from fdl.manifest._nodes import MapNode, ScalarNode, SeqNode
from fdl.manifest.schema import (
    Bool,
    Checker,
    Enum,
    Float,
    Int,
    ListOf,
    MapOf,
    Obj,
    OneOf,
    Spec,
    Str,
)

__all__ = ["RESERVED_ENV", "SECTIONS", "START_MODES", "reserved_env_key"]

START_MODES = ("auto", "manual", "hybrid")
# Launcher-owned variables (flodl-cli-0.8.0/src/cluster.rs:100-112): an env block that set
# one would override the launcher's per-rank value.
RESERVED_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "FLODL_HOST_NAME",
    "FDL_ENV",
)
_RANKS_FIX = (
    "ranks are not configuration: floDl computes them from each host's probed device count "
    "when a run starts (flodl-cli 0.8.0, config/loading.rs:273); remove the key"
)


def reserved_env_key(key: str) -> bool:
    """True for a variable floDl's launcher sets per rank (``FLODL_INTERNAL_*`` and the
    device masks)."""
    return key.startswith("FLODL_INTERNAL_") or key in RESERVED_ENV


def _check_env(node: MapNode, path: tuple[str, ...], checker: Checker) -> None:
    env = node.entries.get("env")
    if not isinstance(env, MapNode):
        return
    for key in env.entries:
        if reserved_env_key(key):
            checker.fail(
                env.entries[key],
                (*path, "env", key),
                f"{key} is set by floDl's launcher for each rank; an env block would override it",
                "remove it (a worker's `local_devices:` chooses its GPUs)",
            )


def _check_share(node: MapNode, path: tuple[str, ...], checker: Checker) -> None:
    share = node.entries.get("gpu_ram_share")
    if not isinstance(share, ScalarNode) or isinstance(share.value, bool):
        return
    value = share.value
    if isinstance(value, (int, float)) and not (value >= 0 and value != float("inf")):
        checker.fail(
            share,
            (*path, "gpu_ram_share"),
            f"must be a non-negative fraction of host RAM, got {share.text}",
            "e.g. 0.5 (above 1.0 is allowed where the platform under-states the aperture)",
        )


def _checks(node: MapNode, path: tuple[str, ...], checker: Checker) -> None:
    _check_env(node, path, checker)
    _check_share(node, path, checker)


def _workers_or_discovery(node: MapNode, path: tuple[str, ...], checker: Checker) -> None:
    """``workers: []`` needs a roster-free window (cluster.rs:761-770)."""
    workers = node.entries.get("workers")
    if not isinstance(workers, SeqNode) or workers.items:
        return
    controller = node.entries.get("controller")
    join = controller.entries.get("join") if isinstance(controller, MapNode) else None
    discovery = join.entries.get("discovery") if isinstance(join, MapNode) else None
    if not (isinstance(discovery, ScalarNode) and discovery.value is True):
        checker.fail(
            workers,
            (*path, "workers"),
            "is empty: a cluster needs workers, or a roster-free window",
            "list the hosts, or set cluster.controller.join.discovery: true (with min_rank_start)",
        )


def _path(description: str) -> Str:
    return Str(description, example="/srv/flodl")


def _ssh() -> Obj:
    return Obj(
        {
            "target": Str("ssh destination (a host, or an alias of ~/.ssh/config)."),
            "port": Int("ssh port.", minimum=0, maximum=65535),
            "user": Str("ssh user."),
            "identity_file": Str("Private key file (ssh -i)."),
            "options": ListOf(Str(), "Extra `-o` options, e.g. StrictHostKeyChecking=no."),
        },
        "How floDl's launcher reaches the host over ssh.",
    )


_WINDOW = Obj(
    {
        "min_rank_start": Int("Quorum in ranks: the run cannot start below it.", minimum=0),
        "join_timeout": Int("Join window in seconds (floDl's default 300).", minimum=0),
        "target_ranks": Int("The window closes as soon as this many ranks are in.", minimum=0),
        "max_join_timeout": Int("Hard cap in seconds (floDl's default 600).", minimum=0),
        "open_admission": Bool("Accept joins without the pre-shared salt (warned by floDl)."),
        "discovery": Bool("Roster-free window: `workers:` may be empty; needs min_rank_start."),
        "token": Str("Pre-shared session salt, hex (32 characters); masked by `config show`."),
        "tunnel_only": Bool("Bind loopback only: walk-ins arrive through an ssh forward."),
        "start": Enum(
            START_MODES,
            "Who closes the window once quorum is met: auto (the clock; default), manual "
            "(floDl's `fdl start`), hybrid (the clock, or the operator earlier).",
        ),
    },
    "floDl's join window (dial-in membership); unset keys keep floDl's defaults.",
)

_CONTROLLER = Obj(
    {
        "host": Str("Bind address workers dial (the rendezvous endpoint)."),
        "port": Int("Bind port (default 1337).", minimum=0, maximum=65535),
        "path": _path("The project's root as the controller sees it."),
        "docker": Str("Compose service the pre-flight build runs in (e.g. cuda)."),
        "arch": Str("libtorch variant for the pre-flight build, e.g. precompiled/cu128."),
        "data_path": _path("Shared data root (default /flodl/data)."),
        "join": _WINDOW,
    },
    "The host floDl's CLI runs on (not a rank itself).",
    required=("host", "path"),
)

_WORKER = Obj(
    {
        "host": Str("The worker's name (and ssh host unless ssh.target says otherwise)."),
        "local_devices": OneOf(
            Enum(["all"]),
            ListOf(Int(minimum=0, maximum=255)),
            description="GPU indices to run one rank each on, or `all`.",
        ),
        "nccl_socket_ifname": Str("Network interface NCCL uses (NCCL_SOCKET_IFNAME), e.g. eth0."),
        "path": _path("The project's checkout on this host."),
        "ssh": _ssh(),
        "tunnel": Bool("Reach the controller through an ssh tunnel (default false)."),
        "arch": Str("libtorch variant on this host, e.g. precompiled/rocm70."),
        "data_path": _path("Data root on this host (default: the controller's)."),
        "gpu_ram_share": Float("Integrated GPU: fraction of host RAM its aperture claims."),
        "docker": Str("Compose service the ranks run in on this host."),
        "env": MapOf(Str(), "Variables for this host's ranks (win over cluster.env)."),
    },
    "One host of the fan-out.",
    required=("host", "local_devices", "nccl_socket_ifname", "path"),
    validators=[_checks],
    renamed={"ranks": _RANKS_FIX},
)

CLUSTER = Obj(
    {
        "controller": _CONTROLLER,
        "workers": ListOf(_WORKER, "The hosts floDl's launcher fans a `cluster: true` run out to."),
        "env": MapOf(Str(), "Variables for every rank on every host."),
        "gpu_ram_share": Float("Fleet default for integrated GPUs' share of host RAM."),
    },
    "floDl's multi-host topology (usually fdl.cluster.yml), read by floDl's own CLI and "
    "launcher. fdl checks it as floDl 0.8.0 does and fans nothing out itself: a command "
    "marked `cluster: true` gets the envelope floDl's launcher reads "
    "(FLODL_INTERNAL_FULL_CLUSTER_JSON), and the program's launcher starts the ranks.",
    required=("controller", "workers"),
    validators=[_checks, _workers_or_discovery],
)

_SOURCE = Obj(
    {
        "from": Str(
            "Where the tree comes from: file:///abs/path, rsync://[user@]host[:port]:/abs/path "
            "or git+https://host/owner/repo#ref.",
            example="git+https://github.com/acme/model#v1",
        ),
        "cwd": Str("Project directory inside the tree (default its root)."),
        "build": Str("Build command, a shell line (default cargo build --release)."),
        "bin": Str("Built program, relative to cwd (e.g. target/release/train)."),
    },
    "Build the training program on this box from a fetched tree.",
    required=("from",),
)

JOIN = Obj(
    {
        "controller": Str("Controller address, host[:port] (port 1337 by default)."),
        "ssh": _ssh(),
        "token": Str("The run's pre-shared token (hex); masked by `config show`."),
        "bin": Str("The training program to run as an agent (or `source:`)."),
        "source": _SOURCE,
        "libtorch": Str("libtorch to fetch first: auto, cpu, cu126, cu128, rocm7.0, rocm7.1."),
        "host": Str("Host name presented when joining (default the hostname)."),
        "devices": ListOf(Int(minimum=0, maximum=255), "GPU indices offered, one rank each."),
        "persist": Bool("Keep re-dialing across runs (default false)."),
        "data_path": _path("Data root on this box (the mount point with data_source)."),
        "data_source": Str("How data_path is mounted: sshfs://[user@]host[:port]/abs/path."),
        "gpu_ram_share": Float("Integrated GPU: fraction of host RAM its aperture claims."),
        "sig_probe": Bool("Check the model signature before each dial (default true)."),
        "args": ListOf(Str(), "Arguments of the training program."),
    },
    "floDl's walk-in worker defaults (`fdl join` of floDl's CLI; fdl has no `join`).",
    validators=[_check_share],
)

PUBLISH = Obj(
    {
        "source": Str("What to publish: file://, rsync:// or git+https://...#ref."),
        "bin": Str("Built program, relative to the project directory."),
        "cwd": Str("Project directory inside the tree (default its root)."),
        "build": Str("Build command of the gate (default cargo build --release)."),
        "to": Str("Served directory (default ~/.flodl/run)."),
        "identity": Str("ssh identity file for a source pulled over ssh."),
        "args": ListOf(Str(), "The run's own arguments."),
    },
    "floDl's `fdl publish` defaults (floDl's CLI; fdl has no `publish`).",
)

SECTIONS: dict[str, Spec] = {"cluster": CLUSTER, "join": JOIN, "publish": PUBLISH}
