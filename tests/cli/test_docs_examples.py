"""Every shell example of the manual (docs/**/*.md) and the README runs, in a fresh
directory, and ends with the status its page gives; an example that cannot run here says
why in its marker (tests/support/doc_examples.py). A console example's shown output must be
what the command prints."""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.doc_examples import (
    Example,
    MarkerError,
    console_steps,
    examples,
    indented_commands,
    missing_lines,
    normalized,
    parse_marker,
    rewrite,
)

REPO = Path(__file__).resolve().parents[2]
PAGES = [*sorted((REPO / "docs").rglob("*.md")), REPO / "README.md"]
GTX_1060 = "0, NVIDIA GeForce GTX 1060 6GB, 6.1, 6144, {driver}"
RTX_5060_TI = "1, NVIDIA GeForce RTX 5060 Ti, 12.0, 16384, {driver}"


def _all_examples() -> list[Example]:
    found: list[Example] = []
    for page in PAGES:
        found += examples(page, page.relative_to(REPO))
    return found


EXAMPLES = _all_examples()
RUN = [e for e in EXAMPLES if e.skip is None]


def _machine(tmp_path: Path, example: Example) -> dict[str, str]:
    """A fresh HOME, fdl home and cache; `fdl` is this checkout; no network (every index,
    proxy and PyPI address refuses at once); no GPU unless the marker asks for the rig."""
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    fdl = bin_dir / "fdl"
    fdl.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m fdl "$@"\n')
    fdl.chmod(0o755)
    # no GPU unless the marker asks for the rig: an nvidia-smi that lists none stands before
    # the machine's own, so an example prints the same on a GPU machine
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexit 0\n")
    if example.options.get("rig") == "mixed":
        driver = example.options.get("driver", "570.00")
        rows = "".join(f"{r.format(driver=driver)}\\n" for r in (GTX_1060, RTX_5060_TI))
        smi.write_text(f"#!/bin/sh\nprintf '{rows}'\n")
    smi.chmod(0o755)
    dead = "http://127.0.0.1:9"
    env = {
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path / ".user"),
        "PYTHONPATH": str(REPO),
        "FDL_HOME": str(tmp_path / ".fdl-home"),
        "FDL_CACHE_DIR": str(tmp_path / ".fdl-cache"),
        "FDL_IN_CONTAINER": "0",
        "FDL_COMPOSE": "docker compose",
        "FDL_NVML": "0",
        "FDL_PYPI_URL": f"{dead}/pypi",
        "FDL_COMPAT_MAX_AGE_DAYS": "0",
        "FDL_NET_DEADLINE": "10",
        "PIP_INDEX_URL": f"{dead}/simple",
        "http_proxy": dead,
        "https_proxy": dead,
        "HTTP_PROXY": dead,
        "HTTPS_PROXY": dead,
        "NO_COLOR": "1",
        "COLUMNS": "100",
        "LANG": "C.UTF-8",
        # stdout and stderr in the order fdl writes them, as a terminal shows them
        "PYTHONUNBUFFERED": "1",
    }
    return env


def _workdir(tmp_path: Path, example: Example, env: dict[str, str]) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    template = example.options.get("project")
    if template is None:
        return work
    mode = example.options.get("mode", "native")
    name = example.options.get("name", "demo")
    made = subprocess.run(
        ["fdl", "init", name, "--template", template, "--mode", mode, "--yes"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0, f"{example.where}: fdl init for the example failed:\n{made.stderr}"
    return work / name


def _run(command: str, cwd: Path, env: dict[str, str], timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", command],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.parametrize("example", RUN, ids=[e.where for e in RUN])
def test_the_example_runs(example: Example, tmp_path: Path) -> None:
    env = _machine(tmp_path, example)
    cwd = _workdir(tmp_path, example, env)
    timeout = int(example.options.get("timeout", "120"))
    if example.lang != "console":
        done = _run(example.text, cwd, env, timeout)
        assert done.returncode == example.exit_code, (
            f"{example.where}: exit {done.returncode}, the page says {example.exit_code}:\n"
            f"{example.text}\n--- printed:\n{done.stdout}"
        )
        return
    steps = console_steps(example)
    assert steps, f"{example.where}: a console example without a `$ ` command"
    full = example.options.get("output") == "full"
    generated: list[str] = []
    for n, step in enumerate(steps):
        generated.append(f"$ {step.command}")
        if step.command.startswith("cd "):
            cwd = cwd / step.command[3:].strip()
            continue
        done = _run(step.command, cwd, env, timeout)
        expected = example.exit_code if n == len(steps) - 1 else 0
        assert done.returncode == expected, (
            f"{example.path}:{step.line}: `{step.command}` exited {done.returncode}, the page "
            f"says {expected}:\n{done.stdout}"
        )
        if full:
            printed = normalized(done.stdout, tmp_path / "work", tmp_path)
            generated += printed
            if os.environ.get("FDL_UPDATE_DOCS") == "1":
                continue
            diff = "\n".join(
                difflib.unified_diff(list(step.shown), printed, "the page", "printed", lineterm="")
            )
            assert list(step.shown) == printed, (
                f"{example.path}:{step.line}: `{step.command}` prints another output than the "
                f"page shows (FDL_UPDATE_DOCS=1 writes it there):\n{diff}"
            )
            continue
        missing = missing_lines(step.shown, done.stdout)
        assert not missing, (
            f"{example.path}:{step.line}: `{step.command}` no longer prints these lines "
            f"(shown on the page):\n" + "\n".join(missing) + f"\n--- it printed:\n{done.stdout}"
        )
    if full and os.environ.get("FDL_UPDATE_DOCS") == "1":
        rewrite(example, "\n".join(generated), REPO)


def test_every_example_not_run_says_why() -> None:
    skipped = [e for e in EXAMPLES if e.skip is not None]
    assert RUN and skipped  # both kinds exist
    for example in skipped:
        assert len(example.skip or "") >= 8, f"{example.where}: a skip reason says why"


def test_no_shell_example_hides_outside_a_fence() -> None:
    hidden = [line for page in PAGES for line in indented_commands(page, page.relative_to(REPO))]
    assert not hidden, "indented commands are not run: fence them (```bash):\n" + "\n".join(hidden)


def test_a_marker_is_read_strictly() -> None:
    assert parse_marker(' skip="needs a GPU" ', "p.md:1") == {"skip": "needs a GPU"}
    assert parse_marker("exit=2 project=cpp", "p.md:1") == {"exit": "2", "project": "cpp"}
    for bad, words in (
        ('skip=""', "skip needs its reason"),
        ("exit=two", "'two' is not a number"),
        ("rgi=mixed", "unknown example marker 'rgi=mixed'"),
    ):
        with pytest.raises(MarkerError, match=words):
            parse_marker(bad, "p.md:7")


def test_a_changed_output_is_named(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Intro.\n\n<!-- example: exit=2 -->\n```console\n$ fdl nope\nerror: ...nope...\n"
        "...\nfix: ...\n```\n\n```python\nprint(1)\n```\n"
    )
    (example,) = examples(page, Path("page.md"))
    assert (example.line, example.exit_code, example.lang) == (4, 2, "console")
    (step,) = console_steps(example)
    assert (step.line, step.command) == (5, "fdl nope")
    printed = "error: no command 'nope'\nsomething\n  fix: run fdl --help\n"
    assert missing_lines(step.shown, printed) == []
    assert missing_lines(step.shown, "error: no command 'nope'\n") == ["fix: ..."]
    assert missing_lines(("b", "a"), "a\nb\n") == ["a"]  # in order


def test_a_full_output_is_written_by_the_test_never_typed(tmp_path: Path) -> None:
    work, home = tmp_path / "x" / "work", tmp_path / "x"
    printed = f"root: {work}/demo  \nhome: {home}/.fdl-home\n\n\n"
    assert normalized(printed, work, home) == ["root: ~/work/demo", "home: ~/.fdl-home"]
    page = tmp_path / "docs" / "p.md"
    page.parent.mkdir()
    page.write_text("A.\n\n<!-- example: output=full -->\n```console\n$ fdl x\nold\n```\n\nB.\n")
    (example,) = examples(page, Path("docs/p.md"))
    assert example.options == {"output": "full"}
    rewrite(example, "$ fdl x\nnew\nlines", tmp_path)
    assert page.read_text() == (
        "A.\n\n<!-- example: output=full -->\n```console\n$ fdl x\nnew\nlines\n```\n\nB.\n"
    )
    with pytest.raises(MarkerError, match="the one value is output=full"):
        parse_marker("output=some", "p.md:3")
