"""Every value fdl writes on an ``#SBATCH`` line is read back by sbatch as exactly that
value, or refused (issue 46): a property test over sbatch's own grammar, for every option
fdl writes and for the whole rendered script.

The reader (tests/support/sbatch_grammar.py) follows sbatch's own ``_get_argument``. The
tests used ``shlex.split`` before, which reads ``#`` as a letter: a value with ``#`` was
cut by sbatch there (`--job-name=a#b` ran as job `a`) and no test noticed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fdl.deploy import DeployTarget
from fdl.deploy._slurm import render_sbatch, sbatch_directive
from fdl.errors import UsageError
from tests.support.sbatch_grammar import Unmatched, sbatch_arguments, sbatch_options_of


def test_the_reader_follows_sbatchs_rules() -> None:
    assert sbatch_arguments(' --a=x "--b=y z" --c=\'q r\' --d=\\"e') == [
        "--a=x", "--b=y z", "--c=q r", '--d="e',
    ]  # fmt: skip
    assert sbatch_arguments(" --d=e\\ f") == ["--d=e", "f"]  # a space is checked first
    assert sbatch_arguments(" --job-name=a#b --x") == ["--job-name=a"]  # a comment
    assert sbatch_arguments(' --job-name="a#b"') == ["--job-name=a#b"]
    assert sbatch_arguments(' --x="it\'s"') == ["--x=it's"]
    with pytest.raises(Unmatched):
        sbatch_arguments(' --x="a')


# The grammar's own characters, over-drawn so that every example meets several.
SPECIAL = " \t\"'\\#$`%=,:;&|<>(){}*?!~\n\r\x0b\x0c\x85\u2028\u2029\x00é"
VALUES = st.text(
    st.one_of(st.sampled_from(SPECIAL), st.characters(blacklist_categories=("Cs",))),
    min_size=1,
    max_size=24,
)
# Every option fdl writes with a value (sbatch_options), and --chdir (the build job).
OPTIONS = [
    "job-name", "nodes", "ntasks-per-node", "gres", "gpus-per-node", "cpus-per-task", "mem",
    "time", "partition", "account", "qos", "output", "chdir",
]  # fmt: skip


def _unwritable(value: str) -> bool:
    return any(not c.isprintable() or c in '"\\' for c in value)


@settings(max_examples=1000, deadline=None)
@given(option=st.sampled_from(OPTIONS), value=VALUES)
def test_a_value_is_read_back_as_written_or_refused(option: str, value: str) -> None:
    try:
        directive = sbatch_directive(option, value)
    except UsageError as refused:
        assert _unwritable(value), value  # refused only when no #SBATCH line can hold it
        assert refused.message.startswith(f"#SBATCH --{option}=")
        assert "fdl.yml" in (refused.hint or "")
        return
    assert not _unwritable(value)
    line = "#SBATCH " + directive
    assert len(line.splitlines()) == 1  # nothing starts a line of its own
    assert sbatch_arguments(line[len("#SBATCH") :]) == [f"--{option}={value}"]


WORDS = st.text(
    st.one_of(st.sampled_from(" '#$%:;,=`"), st.characters(whitelist_categories=("L", "N"))),
    min_size=1,
    max_size=16,
)


@settings(max_examples=200, deadline=None)
@given(
    partition=WORDS,
    account=WORDS,
    qos=WORDS,
    time=WORDS,
    memory=WORDS,
    output=WORDS.map(lambda w: "/scratch/" + w),
    job_name=WORDS,
)
def test_the_rendered_script_gives_sbatch_every_value(
    partition: str, account: str, qos: str, time: str, memory: str, output: str, job_name: str
) -> None:
    """The whole script, as sbatch reads it: each option once, each value whole, and no
    directive cut short by a quote, a space or a `#` in an earlier one."""
    target = DeployTarget(
        "lab", "slurm", nodes=2, gpus_per_node=4, cpus_per_task=8, partition=partition,
        account=account, qos=qos, time=time, memory=memory, output=output,
        sbatch=("--exclusive",),
    )  # fmt: skip
    script = render_sbatch(
        target, image="r.example/a@sha256:" + "ab" * 32, job_name=job_name, command=["x"]
    )
    assert sbatch_options_of(script) == [
        f"--job-name={job_name}", "--nodes=2", "--ntasks-per-node=1", "--gpus-per-node=4",
        "--cpus-per-task=8", f"--mem={memory}", f"--time={time}", f"--partition={partition}",
        f"--account={account}", f"--qos={qos}", f"--output={output}", "--exclusive",
    ]  # fmt: skip
