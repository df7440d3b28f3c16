"""The generators' fuzzer (issue 42, point 1): every hostile value class fed into every
generator that writes a value from outside into a file (CMake, linker script, one-line
files, shell, Dockerfile, #SBATCH, YAML, JSON). Each value is either refused (an FdlError
of exit 4/5, or the sbatch line's documented exit 2) or written so that the file, read as
its own tool reads it, holds exactly the template's structure and the value as one piece."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from fdl._grammar import KINDS, checked, count
from fdl.errors import EnvironmentProblem, FdlError, NetworkError, UsageError
from fdl.libtorch.sources._cpu_view import _FILL, CpuView, ViewWheel
from fdl.libtorch.sources._generated import (
    write_build_files,
    write_cmake_package,
    write_link_script,
)

# each hostile class of round 4 (line breaks, ')', '"', ${...}, */, INPUT(, NUL, escapes,
# shell metacharacters, very long), after an honest-looking start
HOSTILE = [
    "cu128\nexecute_process(COMMAND touch pwned)\n#",
    "cu128\r\nexecute_process(COMMAND touch pwned)",
    "cu128\u2028x",
    "cu128)",
    'cu128")\nmessage(FATAL_ERROR x)',
    "cu128${CMAKE_COMMAND}",
    "cu128$ENV{HOME}",
    "cu128*/INPUT(/etc/passwd)/*",
    "cu128 INPUT(/etc/passwd)",
    "cu128\x00x",
    "cu128\x1b[2J\x1b]0;title\x07",
    "cu128\\",
    "cu128;touch pwned",
    "cu128$(touch pwned)",
    "cu128`touch pwned`",
    "cu128|&<>'",
    "cu128#x",
    "cu128\u202ex",
    "cu" + "1" * 5000,
]
HONEST = "cu128"


def _view(local: str) -> CpuView:
    filename = f"torch-2.10.0+{local}-cp311-cp311-manylinux_2_28_x86_64.whl"
    return CpuView(torch="2.10.0", wheel=ViewWheel(filename, "http://i/x.whl"), index="http://i")


def cmake_structure(text: str) -> tuple[list[str], int]:
    """The commands a CMake file calls (name per top-level ``name(``) and the variable
    references (``${`` outside comments), as cmake reads them."""
    commands, references = [], 0
    depth, index, word = 0, 0, ""
    while index < len(text):
        char = text[index]
        if char == "#" and not (index + 1 < len(text) and text[index + 1] == "["):
            index = text.find("\n", index)
            index = len(text) if index < 0 else index
            word = ""
            continue
        if char == '"':
            end = index + 1
            while end < len(text) and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            references += text[index:end].count("${")
            index = end + 1
            continue
        if char == "$" and text[index : index + 2] == "${":
            references += 1
        if char == "(":
            if depth == 0:
                commands.append(word.strip())
            depth += 1
            word = ""
        elif char == ")":
            depth -= 1
        elif depth == 0:
            word = word + char if (char.isalnum() or char == "_") else ""
        index += 1
    return commands, references


def linker_structure(text: str) -> str:
    """What GNU ld reads of a script: the text outside its ``/* */`` comments."""
    return re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL).split()


def _refused(exc: FdlError) -> None:
    assert isinstance(exc, (EnvironmentProblem, NetworkError)), exc
    assert int(exc.exit_code) in (4, 5)
    assert "\n" not in exc.message and "\x1b" not in exc.message  # the value shown escaped


def _written_or_refused(write, value: str):  # type: ignore[no-untyped-def]
    """What ``write(value)`` gives, or None when it refuses the value: a usage error (exit
    2) whose message shows the value escaped, on one line."""
    try:
        return write(value)
    except UsageError as exc:
        assert "\n" not in exc.message and "\x1b" not in exc.message
        return None


def _generate(tmp_path: Path, local: str) -> dict[str, str] | None:
    tree = tmp_path / local.encode("unicode_escape").hex()[:32]
    (tree / "lib").mkdir(parents=True, exist_ok=True)
    view = _view(local)
    try:
        write_cmake_package(tree, view.build_version, view.torch, **_FILL)
        write_link_script(tree / "lib", view.build_version, **_FILL)
        write_build_files(tree, view.build_version, view.git_version, **_FILL)
    except FdlError as exc:
        _refused(exc)
        return None
    return {
        "cmake": (tree / "share/cmake/Torch/TorchConfig.cmake").read_text(),
        "version": (tree / "share/cmake/Torch/TorchConfigVersion.cmake").read_text(),
        "linker": (tree / "lib/libtorch.so").read_text(),
        "build-version": (tree / "build-version").read_text(),
    }


def _assert_like_honest(files: dict[str, str], honest: dict[str, str], local: str) -> None:
    assert cmake_structure(files["cmake"]) == cmake_structure(honest["cmake"])
    assert cmake_structure(files["version"]) == cmake_structure(honest["version"])
    assert linker_structure(files["linker"]) == linker_structure(honest["linker"])
    assert files["build-version"] == _view(local).build_version + "\n"
    assert len(files["build-version"].splitlines()) == 1


@pytest.mark.parametrize("value", HOSTILE, ids=lambda v: v[:24].encode("unicode_escape").decode())
def test_every_hostile_class_is_refused_by_the_cpu_view_s_generators(
    tmp_path: Path, value: str
) -> None:
    assert _generate(tmp_path, HONEST) is not None  # the honest value is written
    assert _generate(tmp_path, value) is None
    assert not list(tmp_path.rglob("pwned"))


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=40))
def test_any_local_version_is_refused_or_written_as_one_piece(tmp_path_factory, local) -> None:
    tmp_path = tmp_path_factory.mktemp("g")
    honest = _generate(tmp_path, HONEST)
    assert honest is not None
    files = _generate(tmp_path, local)
    if files is not None:
        _assert_like_honest(files, honest, local)


# --- the other generators' writers, against the same classes ---------------------------


@pytest.mark.parametrize("value", HOSTILE, ids=lambda v: v[:24].encode("unicode_escape").decode())
def test_every_hostile_class_is_one_piece_or_refused_by_every_quoting_writer(value: str) -> None:
    from fdl._grammar import quoted, sbatch_directive
    from fdl.manifest.render import format_scalar

    readers = {
        "shell": _shell_word,
        "run": _shell_word,
        "dockerfile": _dockerfile_string,
        "yaml": _json_text,
        "json": _json_text,
        "hcl": lambda token: json.loads(token.replace("$${", "${").replace("%%{", "%{")),
    }
    for kind, read in readers.items():
        try:
            token = quoted(kind, value)
        except UsageError as exc:  # refused (exit 2) only what the kind's grammar refuses
            assert KINDS[kind].first_refused(value) is not None, (kind, value)
            assert "\n" not in exc.message and "\x1b" not in exc.message
            continue
        if kind != "shell":  # sh's single quotes hold a line break; the others are one line
            assert "\n" not in token and "\r" not in token
        assert read(token) == value, (kind, token)
    # #SBATCH: one directive, or refused (exit 2) naming the option
    try:
        directive = sbatch_directive("chdir", value)
    except UsageError as exc:
        assert "--chdir" in exc.message
    else:
        assert shlex.split(directive) == [f"--chdir={value}"]
    # the manifest's own YAML writer: the value reads back as itself
    assert yaml.safe_load(f"key: {format_scalar(value)}") == {"key": value}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("value", HOSTILE, ids=lambda v: v[:24].encode("unicode_escape").decode())
def test_the_grammars_refuse_what_their_file_kind_cannot_hold(kind: str, value: str) -> None:
    try:
        checked(kind, value, what="v", source="s", hint="h")
    except EnvironmentProblem as exc:
        assert exc.message.startswith("s: v '") and "nothing was written" in exc.message
        return
    # one-line files take any printable line; the others are quoting writers
    assert kind in ("line", "shell", "run", "json", "yaml", "hcl", "dockerfile", "sbatch")
    assert len(value) <= KINDS[kind].longest
    if kind in ("line", "run", "dockerfile", "sbatch"):
        assert value.isprintable(), value


@pytest.mark.parametrize(
    ("text", "number"),
    [
        *[("12", 12), (" 7\n", 7), (b"42", 42), ("²", None), ("٣", None), ("-1", None)],
        *[("1" * 5000, None), ("", None), (None, None), ("1_000", None), ("0x10", None)],
    ],
)
def test_the_one_number_parser_is_bounded(text: str | bytes | None, number: int | None) -> None:
    assert count(text) == number


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("http://user:tok@host/simple", "http://***@host/simple"),
        (
            "see https://tok@h.example:8443/x and ftp://a:b@c/",
            "see https://***@h.example:8443/x and ftp://***@c/",
        ),
        ('{"index": "http://u:p%40q@127.0.0.1:1/s"}', '{"index": "http://***@127.0.0.1:1/s"}'),
        ("image@sha256:abc user@example.com", "image@sha256:abc user@example.com"),
        ("http://host/path@v1", "http://host/path@v1"),
    ],
)
def test_public_url_hides_every_url_s_user_info_and_nothing_else(text: str, shown: str) -> None:
    from fdl._text import public_url

    assert public_url(text) == shown


def test_public_url_hides_user_info_and_leaves_placeholders() -> None:
    from fdl._text import public_url

    assert public_url("pip: http://bob:t0k3n@mirror/simple") == "pip: http://***@mirror/simple"
    assert public_url("https://u:p[w@h/x") == "https://***@h/x"  # odd passwords too
    # floDl's documented forms: `[user@]` is a placeholder, not user info
    assert public_url("sshfs://[user@]host[:port]/abs") == "sshfs://[user@]host[:port]/abs"
    assert public_url("rsync://[user@]host:/p or git+https://host/o/r#ref") == (
        "rsync://[user@]host:/p or git+https://host/o/r#ref"
    )


# --- every REAL generator, fed every hostile class where a value from outside enters ----
#
# Each generator renders twice: with an honest value that its writer must quote ("honest
# value") and with the hostile one. The hostile file is the honest file with each quoted
# honest value replaced by one same token (the template's structure unchanged), and that
# token, read by the file kind's own reader, is the value (one piece); or it is refused.

MARK = "honest value"


def _dockerfile_string(token: str) -> str:
    """A Dockerfile double-quoted value as BuildKit reads it (ENV, LABEL: no expansion
    of an escaped ``$``, one line)."""
    if not token.startswith('"'):  # a plain word, written bare (the builder's ENV)
        assert re.fullmatch(r"[A-Za-z0-9._/:=+,@%-]+", token), token
        return token
    assert token.endswith('"'), token
    inner = token[1:-1]
    assert re.fullmatch(r'(?:[^"\\$\n\r]|\\.)*', inner, flags=re.DOTALL), token
    return re.sub(r"\\(.)", r"\1", inner, flags=re.DOTALL)


def _shell_word(token: str) -> str:
    words = shlex.split(token)
    assert len(words) == 1, token
    return words[0]


def _json_text(token: str) -> str:
    assert yaml.safe_load(token) == json.loads(token)
    return str(json.loads(token))


READERS = {
    "shell": (_shell_word, shlex.quote(MARK)),
    "run": (_shell_word, shlex.quote(MARK)),
    "dockerfile": (_dockerfile_string, f'"{MARK}"'),
    "yaml": (_json_text, json.dumps(MARK)),
    "json": (_json_text, json.dumps(MARK)),
}


def _one_piece(render, kind: str, value: str, expected: str | None = None) -> None:  # type: ignore[no-untyped-def]
    reader, honest_token = READERS[kind]
    honest = render(MARK)
    parts = honest.split(honest_token)
    assert len(parts) >= 2, f"the honest value is not in the file:\n{honest}"
    try:
        text = render(value)
    except FdlError as exc:
        assert int(exc.exit_code) in (2, 4, 5), exc  # a manifest's/user's value: 2
        assert "\n" not in exc.message and "\x1b" not in exc.message
        return
    size = (len(text) - sum(map(len, parts))) // (len(parts) - 1)
    token = text[len(parts[0]) : len(parts[0]) + size]
    assert token.join(parts) == text, "the template's structure changed"
    assert reader(token) == (value if expected is None else expected)


def _flat(value: str) -> str:
    return " ".join(value.split()) if "\n" in value or "\r" in value else value


def _image_spec(tmp_path: Path, kind: str):  # type: ignore[no-untyped-def]
    from fdl.images import plan_images
    from fdl.manifest import load_manifest
    from tests.support.images import make_project, make_variant

    project = make_project(tmp_path, "images:\n  train: {}\n  dev: {}\n")
    make_variant(project)
    return next(s for s in plan_images(load_manifest(project), fdl_version="1.0") if s.kind == kind)


def _deploy_target(**fields):  # type: ignore[no-untyped-def]
    from fdl.deploy import DeployTarget

    return DeployTarget("lab", "slurm", nodes=2, gpus_per_node=4, **fields)


def _generators(tmp_path: Path) -> dict[str, tuple]:  # type: ignore[type-arg]
    """name -> (render(value) -> text, file kind, expected(value) or None)."""
    from dataclasses import replace

    from fdl.compat import ArchList
    from fdl.deploy._slurm import render_sbatch
    from fdl.images import render_compose, render_dockerfile
    from fdl.libtorch.build._dockerfile import render_dockerfile as builder_dockerfile
    from fdl.nccl._plan import render_dockerfile as nccl_dockerfile
    from fdl.tasks._env import EnvChange, export_line
    from fdl.tasks._plan import CommandPlan
    from fdl.tasks._render import render_script
    from tests.unit.test_builder_tools import COMMON

    train = _image_spec(tmp_path / "t", "train")
    image = "r.example/a@sha256:" + "ab" * 32

    def builder(**values):  # type: ignore[no-untyped-def]
        given = {**COMMON, "env": {}, "archs": ArchList(), "use_cudnn": False, **values}
        return builder_dockerfile(**given)

    def nccl(clone: str) -> str:
        text = nccl_dockerfile(
            base_image="b", tag="v2.27.5-1", version="2.27.5", gencode="-gencode=x",
            jobs=2, clone=clone, arch_text="8.0",
        )  # fmt: skip
        return re.sub(r"id=fdl-nccl-src-[^,]*", "id=ID", text)  # the clone's hash

    def build_job(registry: str) -> str:
        from fdl._text import printable
        from fdl.deploy._build_job import plan_build_job
        from tests.unit.test_build_job import FDL, LAB

        text = plan_build_job(
            LAB, {}, registry=registry, state_dir=tmp_path / "s", workdir=tmp_path, fdl=FDL
        ).text
        lines = text.split("\n")
        assert lines[1].startswith("# Generated") and lines[1].endswith(
            f"pushed to {printable(registry)}."
        )  # the comment naming it: one line of its own, whatever the value holds
        return "\n".join(lines[:1] + lines[2:])

    def plan(arg: str, cwd: str = "/p") -> CommandPlan:
        return CommandPlan(
            name="x", kind="run", description=None, script='echo "$@"',
            argv=("sh", "-c", 'echo "$@"', "sh", arg), cwd=Path(cwd), env=(),
        )  # fmt: skip

    return {
        "image ENV": (lambda v: render_dockerfile(replace(train, env=(("A", v),))), "dockerfile", _flat),
        "image LABEL": (lambda v: render_dockerfile(replace(train, labels=(("a", v),))), "dockerfile", _flat),
        "image files": (lambda v: render_dockerfile(replace(train, files=(v,))), "run", None),
        "image CMD": (lambda v: render_dockerfile(replace(train, args=(v,))), "json", None),
        "compose shm_size": (lambda v: render_compose([replace(train, shm_size=v)]), "yaml", None),
        "builder ENV": (lambda v: builder(env={"A": v}), "dockerfile", None),
        "builder deps": (lambda v: builder(deps=(v,)), "run", None),
        "builder clone": (lambda v: builder(clone=(v,), tag="v2.10.0"), "dockerfile", None),
        "nccl clone": (nccl, "run", None),
        "sbatch env": (lambda v: render_sbatch(_deploy_target(env=(("A", v),)), image=image, job_name="j", command=["x"]), "shell", None),
        "sbatch command": (lambda v: render_sbatch(_deploy_target(), image=image, job_name="j", command=[v]), "shell", None),
        "dry-run argument": (lambda v: render_script(plan(v)), "shell", None),
        "dry-run directory": (lambda v: render_script(plan("a", v)), "shell", None),
        "env line": (lambda v: export_line(EnvChange("A", v)), "shell", None),
        "build job registry": (build_job, "shell", None),
    }  # fmt: skip


GENERATORS = [
    "image ENV", "image LABEL", "image files", "image CMD", "compose shm_size", "builder ENV",
    "builder deps", "builder clone", "nccl clone", "sbatch env", "sbatch command",
    "dry-run argument", "dry-run directory", "env line", "build job registry",
]  # fmt: skip


@pytest.mark.parametrize("generator", GENERATORS)
def test_every_real_generator_writes_each_hostile_value_as_one_piece_or_refuses_it(
    tmp_path: Path, generator: str
) -> None:
    render, kind, expected = _generators(tmp_path)[generator]
    for value in HOSTILE:
        _one_piece(render, kind, value, expected(value) if expected else None)


def test_the_kubernetes_objects_read_back_as_rendered_or_are_refused() -> None:
    from fdl.deploy import DeployTarget
    from fdl.deploy._kube import render_kubernetes, to_yaml

    for value in [MARK, *HOSTILE]:
        target = DeployTarget("k", "kubernetes", env=(("A", value),))
        objects = render_kubernetes(target, image="r/a@sha256:" + "ab" * 32, name="j", args=[value])
        text = _written_or_refused(to_yaml, objects)
        if text is None:
            assert value != MARK  # the honest value is written
            continue
        assert list(yaml.safe_load_all(text)) == objects  # every value whole, nothing added


def test_the_sbatch_script_s_directives_hold_each_hostile_value_or_refuse_it() -> None:
    from fdl.deploy._slurm import render_sbatch
    from tests.support.sbatch_grammar import sbatch_options_of

    image = "r.example/a@sha256:" + "ab" * 32
    honest = sbatch_options_of(
        render_sbatch(_deploy_target(partition="p"), image=image, job_name="j", command=["x"])
    )
    for value in HOSTILE:
        try:
            script = render_sbatch(
                _deploy_target(partition=value), image=image, job_name=value, command=["x"]
            )
        except UsageError as exc:
            assert exc.message.startswith("#SBATCH --") and "\n" not in exc.message
            continue
        expected = [
            f"--job-name={value}" if o == "--job-name=j" else o.replace("=p", f"={value}")
            for o in honest
        ]
        assert sbatch_options_of(script) == expected


def _replaced(value: object, old: str, new: str) -> object:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [_replaced(item, old, new) for item in value]
    if isinstance(value, dict):
        return {_replaced(k, old, new): _replaced(v, old, new) for k, v in value.items()}
    return value


def test_the_workflow_holds_each_hostile_value_where_the_honest_one_was_or_refuses_it(
    tmp_path: Path,
) -> None:
    """The workflow, read by a YAML reader, is the honest one with the value in its place
    (the working directory), and a branch stays one literal of its GitHub expression."""
    from dataclasses import replace

    from fdl.ci import render_workflow
    from tests.support.ci import ci_project, plan

    matrix = plan(ci_project(tmp_path))

    def render(**config: str) -> str:
        return render_workflow(replace(matrix, config=replace(matrix.config, **config)))

    honest = yaml.safe_load(render(working_directory=MARK, branch="b"))
    for value in HOSTILE:
        branch = "".join(value.split()) or "b"
        text = _written_or_refused(lambda v, b=branch: render(working_directory=v, branch=b), value)
        if text is None:
            continue
        parsed = yaml.safe_load(text)
        expression = parsed["env"]["FDL_PUSH"]
        literal = re.search(r"github\.ref == '((?:[^']|'')*)' }}$", expression)
        assert literal is not None, expression
        assert literal.group(1).replace("''", "'") == f"refs/heads/{branch}"
        parsed["env"]["FDL_PUSH"] = honest["env"]["FDL_PUSH"]
        assert parsed[True]["push"]["branches"] == [branch]  # `on:` is True to YAML 1.1
        parsed[True]["push"]["branches"] = ["b"]
        assert parsed == _replaced(honest, MARK, value)


def test_the_image_s_workdir_is_one_word_of_its_run_line(tmp_path: Path) -> None:
    from dataclasses import replace

    from fdl.images import render_dockerfile

    train = _image_spec(tmp_path, "train")
    text = render_dockerfile(replace(train, workdir="/w; touch pwned"))
    run = text[text.index("RUN groupadd") :].split("\nWORKDIR", 1)[0]
    assert "mkdir -p '/w; touch pwned'" in run and "chown " in run
    assert "WORKDIR /w; touch pwned\n" in text  # WORKDIR takes the rest of its line


def test_the_bake_file_holds_each_hostile_value_where_the_honest_one_was_or_refuses_it(
    tmp_path: Path,
) -> None:
    """docker buildx bake's HCL, read by an HCL parser: a cell's build argument is the
    value, `${` and `%{` kept literal, and every block as in the honest file."""
    from dataclasses import replace

    import hcl2

    from fdl.ci import render_bake
    from tests.support.ci import ci_project, plan

    matrix = plan(ci_project(tmp_path))
    first = matrix.cells[0]

    def parsed(value: str) -> object:
        cell = replace(first, args=(*first.args, ("FUZZ", value)))
        return hcl2.loads(render_bake(replace(matrix, cells=(cell, *matrix.cells[1:]))))

    honest = parsed(MARK)
    assert json.dumps(MARK) in str(honest)
    for value in HOSTILE:
        bake = _written_or_refused(parsed, value)
        if bake is None:
            continue
        # python-hcl2 keeps a literal's quotes and escapes; it reads `$${` as written
        shown = json.dumps(value).replace("${", "$${").replace("%{", "%%{")
        assert bake == _replaced(honest, json.dumps(MARK), shown)


def test_the_answers_file_of_fdl_init_reads_back_each_answer_or_refuses_it() -> None:
    """fdl init's .fdl-answers.yml, read by a YAML reader: the answer (here the driver,
    unchecked as a crafted answers file would give it) is the value, the rest as honest."""
    from dataclasses import replace

    from fdl.scaffold import plan_project
    from tests.support.scaffold import VERSION, answers

    def parsed(value: str) -> object:
        files = plan_project(replace(answers("cpp", "native"), driver=value), fdl_version=VERSION)
        return yaml.safe_load(next(f.content for f in files if f.path == ".fdl-answers.yml"))

    honest = parsed(MARK)
    assert honest["answers"]["driver"] == MARK  # type: ignore[index]
    for value in HOSTILE:
        read = _written_or_refused(parsed, value)
        if read is None:
            continue
        assert read == _replaced(honest, MARK, value)


@pytest.mark.parametrize(
    "value", HOSTILE[:12], ids=lambda v: v[:24].encode("unicode_escape").decode()
)
def test_a_builder_base_image_fdl_cannot_write_as_one_from_word_is_refused(
    run_fdl, tmp_path: Path, value: str
) -> None:  # type: ignore[no-untyped-def]
    """`FROM {base}` of the builder Dockerfile: a line break there started an instruction."""
    args = ["libtorch", "build", "--cpu", "--docker", "--base-image", value, "--dry-run"]
    env = {"FDL_HOME": str(tmp_path / "home"), "FDL_CACHE_DIR": str(tmp_path / "cache")}
    result = run_fdl(args, cwd=tmp_path, env=env)
    assert result.exit_code == 2, result.output
    assert "--base-image" in result.stderr and "\x1b" not in result.stderr


def test_a_long_argument_or_script_is_one_shell_word_not_a_refusal() -> None:
    """The quoting writers bound a value far above a fact's 4096: a user's argument or a
    command's script travels whole (the shell's positional parameters)."""
    from fdl.tasks._compose import quote

    for value in ("x" * 100_000, "line\n" * 20_000):
        assert shlex.split(quote(value)) == [value]
