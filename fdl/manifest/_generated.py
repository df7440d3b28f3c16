"""What a value fdl writes into a generated file (a Dockerfile, a script, a workflow) may not
hold: a control character, a GitHub expression, a secret in clear. The schema's ``Str``
and ``MapOf`` ask these for the values :func:`~fdl.manifest.schema.for_generated_files`
marks."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from fdl.manifest._nodes import ScalarNode

__all__ = ["OWN_SECRET_CHECKS", "control_character", "generated_file_problem", "secret_problem"]


def control_character(text: str, *, newlines: bool = False) -> str | None:
    """The first control character of ``text`` as ``U+000A``, or None (a line break,
    a carriage return, an escape... : each can start a new line or instruction). A tab
    is not one; with ``newlines``, ``\\n`` is not either (a multi-line script whose lines
    fdl joins itself)."""
    for char in text:
        code = ord(char)
        if char == "\t" or (newlines and char == "\n"):
            continue
        if code < 0x20 or 0x7F <= code <= 0x9F or char in "\u2028\u2029":
            return f"U+{code:04X}"
    return None


def generated_file_problem(
    text: str, *, expressions: bool = False, newlines: bool = False
) -> tuple[str, str] | None:
    """What is wrong with ``text`` as a value fdl writes into a generated file, with the
    fix, or None: a control character (a newline would start a new Dockerfile instruction
    or script line); with ``expressions``, ``${{`` (GitHub evaluates it in a workflow
    before any shell runs: script injection)."""
    char = control_character(text, newlines=newlines)
    if char is not None:
        return (
            f"holds a control character ({char}); the value is written into a generated "
            "Dockerfile, script or workflow, where a line break starts a new instruction",
            "write it on one line (join commands with &&, or put them in a script of the "
            "project and run that)",
        )
    if expressions and "${{" in text:
        return (
            "holds `${{`, which GitHub Actions would evaluate inside the generated workflow "
            "before any shell runs (an event's text could run as code)",
            "remove the expression; give the workflow's values through its env: "
            "(e.g. an environment variable the command reads)",
        )
    return None


# Maps whose secrets their planners refuse with the fix of that place (`env:`), or whose
# values say where a secret is kept (`secret-env: {HF_TOKEN: secret/key}`).
OWN_SECRET_CHECKS = (("env",), ("secret-env",))


def secret_problem(node: ScalarNode, path: tuple[str, ...]) -> tuple[str, str] | None:
    """What makes a value of a generated file a secret written in clear: a ``!secret``
    tag, a key named like a secret, or a token's shape (never quoting the value).
    ``env:`` maps are left to their planners, whose refusals name the fix of that place
    (``images.<p>.pass-env``, ``deploy.<t>.pass-env``)."""
    from fdl.manifest._nodes import TAG_SECRET
    from fdl.manifest._secrets import is_secret_key, token_kind

    value = node.value
    if not isinstance(value, str) or not value:
        return None
    if node.tag == TAG_SECRET:
        what = "is tagged !secret"
    elif path and is_secret_key(path[-1]):
        what = f"is named like a secret ({path[-1]})"
    else:
        kind = token_kind(value)
        if kind is None:
            return None
        what = f"looks like {kind}"
    return (
        f"{what}, and this value is written in clear where fdl writes it (a generated "
        "Dockerfile, script or workflow, the results file) and printed by --dry-run",
        "take it out of the manifest (revoke it if it was committed) and give it at run "
        "time: `pass-env:` (images, SLURM targets), `secret-env:` (Kubernetes targets), "
        "`secrets:` (image builds), or a file the program reads",
    )
