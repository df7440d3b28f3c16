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
def test_every_hostile_class_is_one_word_or_refused_in_every_other_file_kind(value: str) -> None:
    from fdl.deploy._slurm import sbatch_directive
    from fdl.images._render import quote as dockerfile_quote
    from fdl.manifest.render import format_scalar
    from fdl.tasks._compose import quote as shell_quote

    # shell: one word, exactly the value
    assert shlex.split(shell_quote(value)) == [value]
    # Dockerfile: one double-quoted value on one line, nothing expanded or closed early
    line = dockerfile_quote(value)
    assert "\n" not in line and "\r" not in line
    inner = line[1:-1]
    assert re.fullmatch(r'(?:[^"\\$]|\\.)*', inner, flags=re.DOTALL), line
    # #SBATCH: one directive, or refused (exit 2) naming the option
    try:
        directive = sbatch_directive("chdir", value)
    except UsageError as exc:
        assert "--chdir" in exc.message
    else:
        assert shlex.split(directive) == [f"--chdir={value}"]
    # YAML and JSON: the value reads back as itself
    assert yaml.safe_load(f"key: {format_scalar(value)}") == {"key": value}
    assert json.loads(json.dumps({"key": value})) == {"key": value}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("value", HOSTILE, ids=lambda v: v[:24].encode("unicode_escape").decode())
def test_the_grammars_refuse_what_their_file_kind_cannot_hold(kind: str, value: str) -> None:
    try:
        checked(kind, value, what="v", source="s", hint="h")
    except EnvironmentProblem as exc:
        assert exc.message.startswith("s: v '") and "nothing was written" in exc.message
        return
    # one-line files take any printable line; the others are quoting writers
    assert kind in ("line", "shell", "json", "yaml", "dockerfile", "sbatch")
    assert len(value) <= KINDS[kind].longest
    if kind in ("line", "dockerfile", "yaml", "sbatch"):
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
