"""floDl 0.8's tree schemas: a program whose `--fdl-schema` answers `description` and
`commands {name: Schema}` (flodl-cli-macros 0.8.0's derive on an enum of sub-commands).
fdl lists the sub-commands in `fdl <command> --help`, shows each one's options in `fdl
<command> <sub-command> --help`, and checks the words after the sub-command against its
schema before the program starts (flodl-cli-0.8.0/src/config/validation.rs:112-135)."""

from __future__ import annotations

import json
from pathlib import Path

TREE = {
    "description": "letter model CLI",
    "commands": {
        "train": {
            "description": "Train a letter model \x1b[31mnow\x1b[0m",
            "options": {"epochs": {"type": "int", "description": "epochs \x1b]0;pwned\x07to run"}},
            "strict": True,
        },
        "eval": {
            "description": "Evaluate a trained model",
            "args": [{"name": "split", "choices": ["test", "valid"]}],
        },
    },
}


def _project(root: Path, schema: dict[str, object]) -> Path:
    (root / "fdl.yml").write_text("commands:\n  letters:\n    path: ./letters/\n")
    letters = root / "letters"
    letters.mkdir()
    (letters / "fdl.yml").write_text("entry: sh run.sh\ncompile: true\n")
    (letters / "run.sh").write_text(
        'if [ "$1" = "--fdl-schema" ]; then\n'
        f"  cat <<'JSON'\n{json.dumps(schema)}\nJSON\n  exit 0\nfi\n"
        'echo "letters $*"\n'
    )
    return letters


def test_help_lists_the_program_sub_commands_with_their_descriptions(run_fdl, tmp_path) -> None:
    _project(tmp_path, TREE)
    helped = run_fdl(["letters", "--help"], cwd=tmp_path)
    assert helped.exit_code == 0, helped.output
    assert "fdl letters - letter model CLI" in helped.stdout
    assert "Sub-commands (of the program):" in helped.stdout
    assert "eval   Evaluate a trained model" in helped.stdout
    # a description from outside is printed as text: its escape sequence cannot act
    assert "Train a letter model \\x1b[31mnow\\x1b[0m" in helped.stdout
    assert "\x1b" not in helped.stdout
    sub = run_fdl(["letters", "train", "--help"], cwd=tmp_path)
    assert sub.exit_code == 0, sub.output
    assert sub.stdout.startswith("fdl letters train - Train a letter model")
    assert "--epochs N" in sub.stdout and "Usage: fdl letters train [--dry-run]" in sub.stdout
    assert "epochs \\x1b]0;pwned\\x07to run" in sub.stdout and "\x1b" not in sub.stdout


def test_the_words_after_a_sub_command_are_checked_against_its_schema(run_fdl, tmp_path) -> None:
    _project(tmp_path, TREE)
    assert run_fdl(["letters", "train", "--epochs", "3"], cwd=tmp_path).exit_code == 0
    ran = run_fdl(["letters", "train", "--epochs", "3", "--dry-run"], cwd=tmp_path)
    assert ran.exit_code == 0, ran.output
    assert "sh train --epochs 3" in ran.stdout  # the answer is cached: checked and shown
    wrong = run_fdl(["letters", "train", "--epochs", "many"], cwd=tmp_path)
    assert wrong.exit_code == 2 and "--epochs" in wrong.stderr
    assert "fdl letters train --help" in wrong.stderr
    unknown = run_fdl(["letters", "train", "--epoch", "3"], cwd=tmp_path)  # strict
    assert unknown.exit_code == 2 and "did you mean --epochs" in unknown.stderr
    choice = run_fdl(["letters", "eval", "train"], cwd=tmp_path)
    assert choice.exit_code == 2 and "allowed: test, valid" in choice.stderr
    typo = run_fdl(["letters", "trian"], cwd=tmp_path)
    assert typo.exit_code == 2
    assert "`trian` is not a sub-command of `fdl letters`" in typo.stderr
    assert "did you mean `fdl letters train`" in typo.stderr
    # a flag first: left to the program, as floDl does (its value could pass for a name)
    assert run_fdl(["letters", "--seed", "4", "--dry-run"], cwd=tmp_path).exit_code == 0


def test_a_schema_that_is_both_a_leaf_and_a_branch_is_refused(run_fdl, tmp_path) -> None:
    both = {**TREE, "options": {"seed": {"type": "int"}}}
    _project(tmp_path, both)
    helped = run_fdl(["letters", "--help"], cwd=tmp_path)
    assert helped.exit_code == 0  # help always renders, with a note
    assert "a schema with `commands` (sub-commands) cannot also have its own `options`" in (
        helped.output
    )
    assert "Sub-commands (of the program):" not in helped.stdout


def test_tab_completes_sub_commands_then_their_options(run_fdl, tmp_path) -> None:
    _project(tmp_path, TREE)
    assert run_fdl(["letters", "--refresh-schema"], cwd=tmp_path).exit_code == 0
    subs = run_fdl(["__complete", "zsh", "--", "letters", ""], cwd=tmp_path)
    assert "eval\tEvaluate a trained model" in subs.stdout.splitlines()
    assert "train\tTrain a letter model \\x1b[31mnow\\x1b[0m" in subs.stdout.splitlines()
    options = run_fdl(["__complete", "bash", "--", "letters", "train", "--"], cwd=tmp_path)
    assert "--epochs" in options.stdout.split()
    choices = run_fdl(["__complete", "bash", "--", "letters", "eval", ""], cwd=tmp_path)
    assert choices.stdout.split() == ["test", "valid"]
