"""The active libtorch against the project's framework, before a project command runs.

Without this, a tch-rs project with the wrong release active learns it from torch-sys's
build script ("this tch version expects PyTorch 2.10.0, got 2.13.0"), after cargo has
compiled the build's dependencies, and floDl's or CMake's from a compiler or linker error.
The project's torch is decided once (:func:`fdl.libtorch.framework_torch`); this asks that
decision about the variant the command would be given, and says what to run instead.
"""

from __future__ import annotations

from fdl.errors import EnvironmentProblem
from fdl.libtorch import CHECK_KEY, TorchDecision, framework_torch, variants
from fdl.manifest import Manifest
from fdl.paths import Context
from fdl.tasks._libtorch_env import LibtorchState, read_variant

__all__ = ["framework_refusal"]


def framework_refusal(
    root: Manifest, state: LibtorchState, command: str
) -> EnvironmentProblem | None:
    """Why the project's framework cannot compile against the active variant, as the
    error to raise (with the fix), or None when it can or nothing says which release
    the variant is.

    Args:
        root: The project's root manifest.
        state: Its libtorch directory and active variant.
        command: The command's words (``build``), for the fix.

    Raises:
        ManifestError: the manifest's ``libtorch.torch`` contradicts the framework.
    """
    active = state.active
    if active is None or not active.torch:
        return None
    decision = framework_torch(root)
    reason = decision.refusal(active.torch)
    if reason is None:
        return None
    return EnvironmentProblem(
        f"the active libtorch {active.name} is torch {active.torch}, and {reason}",
        hint=_fix(decision, state, command),
    )


def _fix(decision: TorchDecision, state: LibtorchState, command: str) -> str:
    anyway = f"to run it anyway: fdl --set {CHECK_KEY}=false {command}"
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
    """Installed variants (other than the active one) the framework compiles against."""
    context = Context(state.directory.parent, project=True)
    found = []
    for name in variants.list_variants(context):
        torch = read_variant(state.directory, name).torch
        if state.active is not None and name == state.active.name:
            continue
        if torch and decision.refusal(torch) is None:
            found.append(name)
    return found
