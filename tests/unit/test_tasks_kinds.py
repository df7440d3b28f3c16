"""Command kinds and nested manifests are checked when the manifest loads, with file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdl.errors import ManifestError, ManifestErrors
from fdl.manifest import load_manifest
from fdl.tasks import command_kind, load_nested, preset_problems
from tests.support.tasks_helpers import write


def problems(error: ManifestError) -> list[str]:
    errors = error.errors if isinstance(error, ManifestErrors) else [error]
    return [str(e) for e in errors]


def root_problems(tmp_path: Path, text: str) -> list[str]:
    write(tmp_path, {"fdl.yml": text})
    with pytest.raises(ManifestError) as caught:
        load_manifest(tmp_path, environ={})
    return problems(caught.value)


def nested_problems(tmp_path: Path, text: str) -> list[str]:
    write(tmp_path, {"fdl.yml": "commands:\n  sub:\n", "sub/fdl.yml": text})
    with pytest.raises(ManifestError) as caught:
        load_nested(tmp_path / "sub", None, tmp_path)
    return problems(caught.value)


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            "dp:\n    docker: dev",
            "fdl.yml:5:13: commands.dp.docker: command 'dp' has `docker:` but no `run:`",
        ),
        (
            "ap:\n    append: -x",
            "fdl.yml:5:13: commands.ap.append: command 'ap' has `append:` but no `run:`",
        ),
        (
            "both:\n    run: a\n    path: b",
            "fdl.yml:6:11: commands.both.path: command 'both' has both `run:` and `path:`",
        ),
        (
            "p:\n    options: {a: 1}",
            "fdl.yml:5:14: commands.p.options: command 'p' is a preset (only `options:`) at the top level",
        ),
        (
            "p:\n    training: {epochs: 2}",
            "fdl.yml:5:15: commands.p.training: command 'p' is a preset (only `training:`) at the top level",
        ),
        (
            "r:\n    run: a\n    options: {x: 1}",
            "fdl.yml:6:14: commands.r.options: command 'r' has `options:` and `run:`",
        ),
        ("t:\n    run: a\n    dokcer: dev", "fdl.yml:6:5: commands.t.dokcer: unknown key 'dokcer'"),
        ("t:\n    run: 5", "fdl.yml:5:10: commands.t.run: expected a string, got an integer (5)"),
    ],
)
def test_kind_errors_are_reported_at_load_with_their_line(
    tmp_path: Path, entry: str, expected: str
) -> None:
    found = root_problems(tmp_path, f"commands:\n  ok:\n    run: echo\n  {entry}\n")
    assert found == [expected]


def test_every_kind_error_is_reported_not_only_the_first(tmp_path: Path) -> None:
    found = root_problems(
        tmp_path, "commands:\n  a:\n    docker: dev\n  b:\n    append: x\n  c:\n    run: 1\n"
    )
    assert len(found) == 3


def test_unknown_root_keys_such_as_entry_are_errors(tmp_path: Path) -> None:
    found = root_problems(tmp_path, "entry: python x.py\ncommands: {}\n")
    assert found == ["fdl.yml:1:1: entry: unknown key 'entry'"]


@pytest.mark.parametrize(
    ("spec", "kind"),
    [
        (None, "path"),
        ({}, "path"),
        ({"description": "x"}, "path"),
        ({"run": "x"}, "run"),
        ({"path": "d"}, "path"),
        ({"options": {"a": 1}}, "preset"),
        ({"training": {"epochs": 1}}, "preset"),
        ({"options": {}}, "path"),
    ],
)
def test_command_kind(spec: dict[str, object] | None, kind: str) -> None:
    assert command_kind(spec) == kind


def test_nested_errors_name_the_nested_file_relative_to_the_project(tmp_path: Path) -> None:
    found = nested_problems(tmp_path, "entry: x\ncommands:\n  q:\n    training: {epochs: five}\n")
    assert found == [
        "sub/fdl.yml:4:24: commands.q.training.epochs: expected an integer, got a string ('five')"
    ]


def test_a_bad_preset_value_is_that_presets_problem_not_the_manifests(tmp_path: Path) -> None:
    """The manifest loads (its other presets and its help work); each preset whose values
    do not fit the schema carries its errors, raised when it runs."""
    write(
        tmp_path,
        {
            "fdl.yml": "commands:\n  sub:\n",
            "sub/fdl.yml": """\
        entry: python train.py
        schema:
          options:
            model: {type: string, choices: [mlp, lenet]}
            epochs: {type: int}
          strict: true
        commands:
          good: {options: {model: lenet, epochs: 3}}
          badchoice: {options: {model: vgg}}
          badtype: {options: {epochs: many}}
          unknown: {options: {zz: 1}}
        """,
        },
    )
    nested = load_nested(tmp_path / "sub", None, tmp_path)
    assert nested is not None
    found = {
        name: [str(e) for e in errors] for name, errors in preset_problems(nested, tmp_path).items()
    }
    assert found == {
        "badchoice": [
            "sub/fdl.yml:9:32: commands.badchoice.options.model: option 'model' is 'vgg'; allowed: mlp, lenet"
        ],
        "badtype": [
            "sub/fdl.yml:10:31: commands.badtype.options.epochs: option 'epochs' must be a int value"
        ],
        "unknown": [
            "sub/fdl.yml:11:27: commands.unknown.options.zz: option 'zz' is not declared in schema.options (the schema is strict)"
        ],
    }


def test_presets_need_an_entry(tmp_path: Path) -> None:
    found = nested_problems(tmp_path, "commands:\n  quick:\n    options: {a: 1}\n")
    assert found == ["sub/fdl.yml:3:5: commands.quick: preset 'quick' has no `entry:` to run"]


def test_nested_docker_without_entry_is_an_error(tmp_path: Path) -> None:
    found = nested_problems(tmp_path, "docker: dev\ncommands:\n  a: {run: x}\n")
    assert found[0].startswith("sub/fdl.yml:1:9: docker: `docker:` at the top of a nested manifest")


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ("options: {help: {type: bool}}", "option --help is read by fdl itself"),
        ("options: {dry-run: {type: bool}}", "option --dry-run is read by fdl itself"),
        ("options: {x: {type: bool, short: h}}", "short -h is read by fdl itself"),
        ("options: {x: {type: integer}}", "'integer' is not one of string, int, float, bool"),
        ("options: {x: {short: xy}}", "'xy' is not valid here"),
        ("options: {a: {short: m}, b: {short: m}}", "-m is also the short of --a"),
        ("options: {n: {type: int, default: many}}", "default is not a int value"),
        ("options: {n: {type: int, choices: [1, two]}}", "choice is not int"),
        ("args: [{name: a}, {name: a}]", "argument <a> is declared twice"),
        (
            "args: [{name: a, variadic: true}, {name: b}]",
            "variadic argument <a> must be the last one",
        ),
        (
            "args: [{name: a, required: true, default: 1}]",
            "argument <a> is required and has a default",
        ),
        (
            "args: [{name: a, required: false}, {name: b}]",
            "required argument <b> follows an optional one",
        ),
    ],
)
def test_schema_mistakes_are_located(tmp_path: Path, schema: str, message: str) -> None:
    found = nested_problems(tmp_path, f"entry: x\nschema:\n  {schema}\n")
    assert any(message in problem and problem.startswith("sub/fdl.yml:") for problem in found), (
        found
    )


def test_a_valid_nested_manifest_loads(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "sub/fdl.yml": """\
            description: Training
            entry: python train.py
            docker: dev
            arg-name: recipe
            schema:
              args: [{name: run-id, required: false}]
              options:
                model: {type: string, choices: [mlp], short: m, default: mlp, env: MODEL}
                tags: {type: "list[string]"}
            options: {model: mlp}
            training: {epochs: 5, lr: 0.001}
            ddp: {anchor: auto, speed_hint: {slow_rank: 1, ratio: 0.5}}
            output: {dir: runs/, monitor: 3000, timeline: true}
            commands:
              quick: {description: smoke, training: {epochs: 1}}
              helper: {run: ls, docker: dev}
            """
        },
    )
    nested = load_nested(tmp_path / "sub", None, tmp_path)
    assert nested is not None
    assert nested.data["training"] == {"epochs": 5, "lr": 0.001}
    assert nested.data["commands"]["quick"]["training"] == {"epochs": 1}


def test_missing_nested_manifest_is_none(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert load_nested(tmp_path / "empty", None, tmp_path) is None
