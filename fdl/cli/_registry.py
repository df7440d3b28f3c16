"""The built-in command groups: name -> module and one-line summary.

Each module ``fdl.cli.commands.<name>`` exports a typer ``app``; it is imported
only when its group runs, so ``fdl --help`` stays fast.
"""

from __future__ import annotations

__all__ = ["BUILTINS", "FLODL_ONLY", "Builtin"]


class Builtin:
    """A built-in command group.

    ``single`` marks a built-in that is one command (``fdl setup``), not a group of
    sub-commands: a project command of the same name is then reached with ``fdl run NAME``
    only. A group yields ``fdl NAME`` to a project command of that name unless one of its
    sub-commands follows.
    """

    __slots__ = ("module", "name", "single", "summary")

    def __init__(self, name: str, summary: str, module: str, *, single: bool = False) -> None:
        self.name = name
        self.summary = summary
        self.module = module
        self.single = single


BUILTINS: dict[str, Builtin] = {
    b.name: b
    for b in (
        Builtin(
            "init",
            "create a project that builds and trains (flodl, tch or cpp; containers or native)",
            "fdl.cli.commands.init",
            single=True,
        ),
        Builtin(
            "add",
            "add a part of the template to a project made by fdl init (flodl-hf)",
            "fdl.cli.commands.add",
            single=True,
        ),
        Builtin("config", "show, explain, validate the merged manifest", "fdl.cli.commands.config"),
        Builtin("image", "render, build, size and run Docker images", "fdl.cli.commands.image"),
        Builtin(
            "ci",
            "the image matrix as a bake file and workflow; drift check",
            "fdl.cli.commands.ci",
        ),
        Builtin(
            "libtorch",
            "install, verify and switch libtorch variants (download, wheel, build)",
            "fdl.cli.commands.libtorch",
        ),
        Builtin(
            "deploy",
            "submit the train image to SLURM or Kubernetes, placed by arch",
            "fdl.cli.commands.deploy",
        ),
        Builtin(
            "diagnose",
            "check that GPUs, toolchain and the active libtorch fit together",
            "fdl.cli.commands.diagnose",
            single=True,
        ),
        Builtin(
            "probe",
            "is this machine ready for a long job? GPUs, libtorch, NCCL, data mount (exit 1 if not)",
            "fdl.cli.commands.probe",
            single=True,
        ),
        Builtin(
            "nccl",
            "build NVIDIA's NCCL for every GPU of the rig, matched to the libtorch (LD_PRELOAD)",
            "fdl.cli.commands.nccl",
        ),
        Builtin(
            "setup",
            "detect this machine and install the libtorch that fits",
            "fdl.cli.commands.setup",
            single=True,
        ),
        Builtin(
            "cache",
            "fdl's caches (downloads, wheels, compiler, builds, images): list, clean",
            "fdl.cli.commands.cache",
        ),
        Builtin(
            "bench",
            "benchmarks with honest variance: run (interleaved rounds), report, compare",
            "fdl.cli.commands.bench",
        ),
        Builtin(
            "schema",
            "the schemas entries gave about themselves (--fdl-schema): list, clear, refresh",
            "fdl.cli.commands.schema",
        ),
        Builtin(
            "run",
            "run a project command by name (also one a built-in shadows)",
            "fdl.cli.commands.run",
            single=True,
        ),
        Builtin("version", "print the version of fdl", "fdl.cli.commands.version", single=True),
        Builtin(
            "completions",
            "print the shell completion script (bash, zsh, fish)",
            "fdl.cli.commands.completions",
            single=True,
        ),
        Builtin(
            "autocomplete",
            "install the completions into your shell's start-up file (floDl's spelling)",
            "fdl.cli.commands.autocomplete",
            single=True,
        ),
    )
}


# floDl 0.8.0's built-ins that fdl does not build (flodl-cli-0.8.0/src/builtins.rs:78-386,
# 539-557): floDl's multi-host launcher protocol (its NCCL build is `fdl nccl build`). `fdl NAME` says
# what the command is in floDl and what to run instead (exit 2), unless the project
# declares a command of that name: then the project's runs (floDl matches its built-ins
# first, main.rs:159-213; fdl lets the project win, so fdl init's `start` keeps working).
_FLODL_CLI = "floDl's own CLI (`cargo install flodl-cli`)"
_LAUNCHER = "its cluster launcher protocol"
FLODL_ONLY: dict[str, tuple[str, str, str]] = {
    "status": (
        _LAUNCHER,
        "asks a running floDl cluster controller how its run stands (GET /state.json on the "
        "training port, 1337)",
        f"`fdl deploy status` for a run fdl submitted; for a floDl cluster, {_FLODL_CLI}",
    ),
    "start": (
        _LAUNCHER,
        "opens a floDl join window by hand (`cluster.controller.join.start: manual|hybrid`, "
        "POST /start to the controller)",
        f"{_FLODL_CLI}; or declare a `start:` command in fdl.yml",
    ),
    "join": (
        _LAUNCHER,
        "turns this machine into a walk-in worker of a floDl cluster (fetches and builds the "
        "training program, then runs it in agent role)",
        f"`fdl deploy submit` for multi-node runs on SLURM or Kubernetes; {_FLODL_CLI}",
    ),
    "join-config": (
        _LAUNCHER,
        "writes a floDl walk-in worker's credentials (fdl.<label>.yml with its token, an ssh "
        "key, sshd and cloud-init files)",
        _FLODL_CLI,
    ),
    "publish": (
        _LAUNCHER,
        "publishes the source tree to ~/.flodl/run for floDl's walk-in workers, after a build gate",
        f"`fdl image build` to ship the code as an image; {_FLODL_CLI}",
    ),
}
