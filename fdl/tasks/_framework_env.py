"""What a project command's framework makes of the active libtorch: notes, the refusal
of a run, and ``LIBTORCH_BYPASS_VERSION_CHECK`` where the user switched fdl's check off.

tch-rs's ``torch-sys`` build script compares ``$LIBTORCH/build-version`` with the release
it was made for and refuses any other unless ``LIBTORCH_BYPASS_VERSION_CHECK`` is set
(torch-sys/build.rs); floDl and CMake projects fail later, at compile time. So before the
command runs, fdl says when the active variant is not a release the project's framework
compiles against, with the fix, rather than leave it to the framework's own error: a
dry run or help notes it, a run is refused (before cargo has compiled the build's
dependencies, which torch-sys's check waits for).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fdl.errors import EnvironmentProblem, FdlError
from fdl.manifest import Manifest
from fdl.tasks._env import EnvChange
from fdl.tasks._libtorch_env import LibtorchState, read_variant

TYPE_CHECKING = False  # typing costs start-up: annotations only
if TYPE_CHECKING:
    from fdl.libtorch import TorchDecision

__all__ = ["BYPASS", "FrameworkEnv", "build_tools", "framework_env"]

BYPASS = "LIBTORCH_BYPASS_VERSION_CHECK"


# A build tool at a command position of the script: its start, or after ; & | ( or a
# newline, past `VAR=value` assignments and `exec`/`time`/`env`.
_TOOL = re.compile(
    r"(?:^|[;&|(\n])[ \t]*(?:(?:\w+=\S*|exec|time|env)[ \t]+)*(cargo|cmake)(?=\s|$|;|&|\|)", re.M
)


def build_tools(script: str) -> frozenset[str]:
    """The build tools (``cargo``, ``cmake``) ``script`` runs."""
    return frozenset(found.group(1) for found in _TOOL.finditer(script))


@dataclass
class FrameworkEnv:
    """Notes for the user, variables to export, and the refusal of a run (its note is
    among ``notes``, for dry runs and help)."""

    notes: list[str] = field(default_factory=list)
    exports: list[EnvChange] = field(default_factory=list)
    refusal: EnvironmentProblem | None = None


def framework_env(root: Manifest, state: LibtorchState, command: str) -> FrameworkEnv:
    """What the project's framework (read from its files, see
    :func:`fdl.libtorch.framework_torch`) makes of the active variant in ``state``;
    ``command`` (the command's words) goes into the fix."""
    from fdl.libtorch import framework_torch

    found = FrameworkEnv()
    try:
        decision = framework_torch(root)
    except FdlError:  # a contradicting pin: the libtorch commands report it at its line
        return found
    if not decision.pins:
        return found
    labels = ", ".join(p.label for p in decision.pins)
    if state.active is None:
        if state.problem is None and root.data.get("libtorch") is None:
            reads = ", ".join(sorted({p.reads for p in decision.pins if p.reads}))
            needs = f"torch {decision.torch}" if decision.torch else "a libtorch"
            found.notes.append(
                f"no active libtorch variant in {state.directory}: {reads or 'LIBTORCH'} "
                f"is not set, and {labels} needs {needs}; install one with `fdl setup`"
            )
        return found
    torch = state.active.torch
    if not torch:
        return found
    name = state.active.name
    if decision.checked:
        reason = decision.refusal(torch.split("+")[0])
        if reason:
            fix = f"fdl setup (torch {decision.torch})" if decision.torch else "fdl setup"
            found.notes.append(
                f"the active libtorch {name} is torch {torch}: {reason}; the build will fail "
                f"with it: {fix}, or fdl libtorch activate a variant of that release"
            )
            found.refusal = EnvironmentProblem(
                f"the active libtorch {name} is torch {torch}: {reason}",
                hint=_fix(decision, state, command),
            )
        return found
    tch = [p for p in decision.pins if p.framework == "tch" and p.refusal(torch.split("+")[0])]
    if tch:
        # libtorch.framework-check: false is the user's word that this release is meant;
        # torch-sys would still refuse it without the bypass
        found.exports.append(EnvChange(BYPASS, "1"))
        found.notes.append(
            f"libtorch.framework-check is false: the active {name} is torch {torch}, which "
            f"{tch[0].label} was not made for; {BYPASS}=1 is exported so that torch-sys "
            "accepts it"
        )
    return found


def _fix(decision: TorchDecision, state: LibtorchState, command: str) -> str:
    anyway = f"to run it anyway: fdl --set libtorch.framework-check=false {command}"
    fitting = _installed_fitting(decision, state)
    if fitting:
        return f"fdl libtorch activate {fitting[0]} (installed, fits); {anyway}"
    if decision.torch:
        return (
            f"fdl setup (installs torch {decision.torch} for this machine's GPUs) or "
            f"fdl libtorch install --from-wheel --cpu --torch {decision.torch}; {anyway}"
        )
    return f"fdl setup (installs a torch the framework accepts); {anyway}"


def _installed_fitting(decision: TorchDecision, state: LibtorchState) -> list[str]:
    """Installed variants, other than the active one, the framework compiles against."""
    from fdl.libtorch import variants
    from fdl.paths import Context

    found = []
    for name in variants.list_variants(Context(state.directory.parent, project=True)):
        if state.active is not None and name == state.active.name:
            continue
        torch = read_variant(state.directory, name).torch
        if torch and decision.refusal(torch.split("+")[0]) is None:
            found.append(name)
    return found
