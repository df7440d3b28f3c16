"""The built-in command groups: name -> module and one-line summary.

Each module ``fdl.cli.commands.<name>`` exports a typer ``app``; it is imported
only when its group runs, so ``fdl --help`` stays fast.
"""

from __future__ import annotations

__all__ = ["BUILTINS", "Builtin"]


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
    )
}
