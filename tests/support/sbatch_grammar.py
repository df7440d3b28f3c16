"""How sbatch reads a job script's ``#SBATCH`` lines, after its ``_get_argument``
(src/sbatch/opt.c, SLURM 22.05, the cluster of scripts/setup-slurm.sh): arguments split at
whitespace; ``'`` and ``"`` quote until the same quote; a backslash takes the next character
as it is (but a space after it still splits); an unquoted ``#`` ends the line (a comment);
an unmatched quote is fatal. tests/integration/test_sbatch_quoting_slurm.py holds it to the
real sbatch."""

from __future__ import annotations

__all__ = ["Unmatched", "sbatch_arguments", "sbatch_options_of"]

SPACE = " \t\n\v\f\r"  # C's isspace (sbatch reads bytes: no Unicode space splits)


class Unmatched(ValueError):
    """sbatch stops with `Unmatched ' in [...]`."""


def sbatch_arguments(line: str) -> list[str]:
    """The arguments sbatch reads from one ``#SBATCH`` line (the text after the magic word)."""
    arguments: list[str] = []
    at = 0
    while True:
        while at < len(line) and line[at] in SPACE and line[at] != "\n":
            at += 1
        if at >= len(line) or line[at] == "\n":
            return arguments
        argument, quote, escaped = "", "", False
        while at < len(line) and (quote or line[at] not in SPACE) and line[at] != "\n":
            char = line[at]
            at += 1
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
                continue
            elif quote:
                if char == quote:
                    quote = ""
                    continue
            elif char in "\"'":
                quote = char
                continue
            elif char == "#":
                if argument:
                    arguments.append(argument)
                return arguments
            argument += char
        if quote:
            raise Unmatched(line)
        if argument:
            arguments.append(argument)


def sbatch_options_of(script: str) -> list[str]:
    """Every option sbatch takes from a script's ``#SBATCH`` lines: those before the first
    line that is neither a comment nor blank (sbatch reads no further)."""
    options: list[str] = []
    for line in script.splitlines()[1:]:  # after the #! line
        if line.startswith("#SBATCH"):
            options += sbatch_arguments(line[len("#SBATCH") :])
        elif line.strip() and not line.startswith("#"):
            break
    return options
