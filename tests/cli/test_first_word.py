"""The first-argument overlay form `fdl <env> <command>` (floDl's CHANGELOG 0.5.0, its
`--help`, its overlay files' headers), what wins when a command and an environment share a
name, and what `fdl @NAME --help` says about the commands the overlay refuses."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "fdl.yml").write_text(
        "commands:\n"
        "  build: {run: echo build}\n"
        "  train: {run: echo train}\n"
        "  check: {run: echo project-check}\n"
        "  ci: {run: echo full-ci}\n"
        "  sub:\n"
    )
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "fdl.yml").write_text(
        "entry: echo sub\ncommands:\n  quick: {options: {n: 1}}\n"
    )
    (tmp_path / "fdl.cluster.yml").write_text(
        "# fdl.cluster.yml -- use: fdl cluster <command>\n"
        "cluster:\n  controller: {host: 10.0.0.1, path: /srv/p}\n"
        "  workers: [{host: a, local_devices: all, nccl_socket_ifname: eth0, path: /srv/p}]\n"
        "commands:\n  build: {run: echo cluster-build}\n  train: {cluster: true}\n"
    )
    (tmp_path / "fdl.ci.yml").write_text("commands:\n  build: {run: echo ci-build}\n")
    return tmp_path


def test_a_first_word_that_names_only_an_environment_selects_it(run_fdl, project) -> None:
    result = run_fdl(["cluster", "build", "--dry-run"], cwd=project)
    assert result.exit_code == 0, result.output
    assert "echo cluster-build" in result.stdout
    assert "note:" not in result.stderr  # the documented form, no clash: nothing to say
    # a cluster command builds floDl's launcher envelope from the block: fdl counts no
    # host's GPUs over ssh, so `local_devices: all` is refused with the fix
    refused = run_fdl(["cluster", "train", "--dry-run"], cwd=project)
    assert refused.exit_code == 3, refused.output
    assert "fdl.cluster.yml:2:1: cluster.workers[0].local_devices: is 'all'" in refused.stderr
    assert "fix: list the devices, e.g. local_devices: [0, 1]" in refused.stderr
    # the overlay of the first word reaches nested manifests and `config show` too
    shown = run_fdl(["cluster", "config", "show", "--no-origin"], cwd=project)
    assert shown.exit_code == 0 and "host: 10.0.0.1" in shown.stdout
    # an explicit selection turns the form off (as in floDl's CLI): the word is a command
    explicit = run_fdl(["--env", "ci", "cluster", "build"], cwd=project)
    assert explicit.exit_code == 2 and "`fdl @cluster build`" in explicit.stderr


def test_a_name_of_a_command_and_an_environment_is_the_environment_before_a_command(
    run_fdl, project
) -> None:
    """floDl's repository: `ci` is a project command (and fdl's built-in) while its docs run
    `fdl ci test` with fdl.ci.yml. The next word decides, and a note says which reading."""
    overlay = run_fdl(["ci", "build", "--dry-run"], cwd=project)
    assert overlay.exit_code == 0, overlay.output
    assert "echo ci-build" in overlay.stdout
    assert "so this runs `fdl @ci build`" in overlay.stderr
    assert "`fdl run ci ...` runs the command `ci`" in overlay.stderr
    # no command follows: the command runs (the project's `ci`), without an overlay
    alone = run_fdl(["ci", "--dry-run"], cwd=project)
    assert alone.exit_code == 0 and "echo full-ci" in alone.stdout
    # a word the built-in `ci` takes as its sub-command: the command wins, with the note
    builtin = run_fdl(["ci", "check", "--help"], cwd=project)
    assert builtin.exit_code == 0 and builtin.stdout.startswith("Usage: fdl ci check")
    assert "running the command `fdl ci check`; `fdl @ci check` runs" in builtin.stderr
    explicit = run_fdl(["@ci", "check", "--dry-run"], cwd=project)
    assert explicit.exit_code == 0 and "echo project-check" in explicit.stdout


def test_the_help_of_an_environment_marks_its_cluster_commands(run_fdl, project) -> None:
    for args in (["@cluster", "--help"], ["cluster", "--help"]):
        result = run_fdl(args, cwd=project)
        assert result.exit_code == 0, result.output
        rows = {line.split()[0]: line for line in result.stdout.splitlines() if line[:2] == "  "}
        assert "[cluster: true: floDl's launcher fans it out]" in rows["train"]
        assert "cluster: true" not in rows["build"]
        assert "cluster (active)" in result.stdout
    plain = run_fdl(["--help"], cwd=project)
    assert "floDl's launcher fans it out" not in plain.stdout
    assert "ci (also a command)" in plain.stdout
    assert "`fdl NAME <command>`" in plain.stdout


def test_completion_follows_the_first_word_form(project) -> None:
    from fdl.cli._complete import complete_words

    def values(words: list[str]) -> list[str]:
        return [value for value, _ in complete_words(words, project, {}).candidates]

    assert "train" in values(["cluster", "tr"])  # a command, with the overlay selected
    top = values([""])
    assert "cluster" in top  # an environment that is no command is offered as a first word
    assert top.count("ci") == 1  # `ci` is offered once: the command it also is


def test_a_builtins_own_sub_command_needs_no_note(run_fdl, tmp_path: Path) -> None:
    """A floDl project made by `fdl init` has fdl.ci.yml and a `check` command, but no `ci`
    command: `fdl ci check` is the built-in's, and said on every run the note was noise
    (issue 34, point 14)."""
    (tmp_path / "fdl.yml").write_text("commands:\n  check: {run: echo project-check}\n")
    (tmp_path / "fdl.ci.yml").write_text("commands:\n  check: {run: echo ci-check}\n")
    builtin = run_fdl(["ci", "check", "--help"], cwd=tmp_path)
    assert builtin.exit_code == 0 and builtin.stdout.startswith("Usage: fdl ci check")
    assert "note:" not in builtin.stderr
    explicit = run_fdl(["@ci", "check", "--dry-run"], cwd=tmp_path)
    assert explicit.exit_code == 0 and "echo ci-check" in explicit.stdout
