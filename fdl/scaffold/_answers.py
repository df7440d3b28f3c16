"""Answers: validating them, their defaults, and the answers file a project keeps."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fdl._files import read_text_file, reason_of
from fdl.compat import FrameworkRelease
from fdl.errors import ManifestError, UsageError
from fdl.scaffold._project_files import MODES, Answers
from fdl.scaffold._templates import TEMPLATES, scaffold_data, template

__all__ = [
    "DEFAULTS",
    "answers_path",
    "make_answers",
    "read_answers",
    "suggest_name",
    "validate_name",
]

DEFAULTS: dict[str, Any] = {"template": "flodl", "mode": "mounted", "example": False}
_NAME = re.compile(r"[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*")
_MAX_NAME = 64
_TORCH = re.compile(r"[0-9]+\.[0-9]+(?:\.[0-9]+)?")


def suggest_name(text: str) -> str:
    """A valid name close to ``text`` (``My Model`` -> ``my-model``)."""
    cleaned = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    cleaned = re.sub(r"^[0-9-]+", "", cleaned)[:_MAX_NAME].strip("-")
    return cleaned or "my-model"


def validate_name(name: str, template_name: str) -> str:
    """Check a project name for the template; return it.

    The name becomes the directory, the image names (lowercase), the CMake project
    or the Cargo package (``-`` becomes ``_`` in the crate).

    Raises:
        UsageError: with what is wrong and a name that would do.
    """
    chosen = template(template_name)
    rule = (
        "use lowercase letters, digits, and single '-' or '_' between them, starting "
        f"with a letter (at most {_MAX_NAME} characters)"
    )
    if not _NAME.fullmatch(name) or len(name) > _MAX_NAME:
        raise UsageError(
            f"invalid project name {name!r}: {rule}", hint=f"e.g. {suggest_name(name)!r}"
        )
    crate = name.replace("-", "_")
    if name in chosen.reserved_names or crate in chosen.reserved_names:
        raise UsageError(
            f"invalid project name {name!r}: the {template_name} template reserves it "
            f"({'a Rust keyword or crate' if chosen.data.get('language') == 'rust' else 'a target it defines'})",
            hint=f"e.g. {name + '-model'!r}",
        )
    return name


def answers_path(directory: Path) -> Path:
    """Where a project keeps its answers."""
    return directory / str(scaffold_data()["answers_file"])


def read_answers(directory: Path) -> dict[str, Any] | None:
    """The answers recorded in ``directory`` (None when there is no answers file).

    Raises:
        ManifestError: the file exists but is not an answers file.
    """
    import yaml

    path = answers_path(directory)
    if not path.exists() and not path.is_symlink():
        return None
    # Anything else at its path (a directory, a FIFO, a device, a dangling link) is refused
    # below: taken for "no answers", init --force would rewrite the project with the
    # defaults of another template.
    try:
        data = yaml.safe_load(read_text_file(path) or "")
    except (OSError, yaml.YAMLError, RecursionError) as exc:
        raise ManifestError(
            f"{path}: cannot read the answers of `fdl init`: {reason_of(exc)}",
            hint="fix it, or delete it and pass every answer on the command line",
        ) from None
    answers = data.get("answers") if isinstance(data, dict) else None
    if not isinstance(answers, dict):
        raise ManifestError(
            f"{path}: not an answers file of `fdl init` (no `answers:` mapping)",
            hint="delete it, or pass every answer on the command line",
        )
    recorded = {"template": data.get("template"), **answers}
    for key, value in recorded.items():
        _check_recorded(path, key, value)
    return recorded


# The answers fdl records, and an example of each as fdl writes it.
_RECORDED = {
    "template": "cpp",
    "name": '"my-model"',
    "mode": '"native"',
    "torch": '"2.13.0"',
    "gpus": '"6.1,12.0"',
    "driver": '"570.86"',
    "example": "false",
    "hf": "true",
}


def _check_recorded(path: Path, key: str, value: object) -> None:
    """An answer is text (``example`` true or false): a list, a mapping or a YAML float
    (``torch: 2.10`` reads as 2.1) is refused at its key, with the quoted form."""
    example = _RECORDED.get(key)
    if example is None or value is None:
        return
    flag = key in ("example", "hf")
    if flag:
        fits = isinstance(value, bool)
    else:
        fits = isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
    if not fits:
        where = key if key == "template" else f"answers.{key}"
        raise ManifestError(
            f"{path}: {where}: expected {'true or false' if flag else 'text'}, got {value!r}",
            hint=f"write it as fdl does, e.g. {key}: {example}; or delete the file and pass "
            "every answer on the command line",
        )


def make_answers(name: str, given: Mapping[str, Any], recorded: Mapping[str, Any]) -> Answers:
    """The answers: what the user gave, else what the project recorded, else defaults.

    Raises:
        UsageError: an unknown template or mode, a malformed torch version, a bad name.
    """
    from fdl.compat.pytorch import default_torch_version

    def pick(key: str, default: Any) -> Any:
        for layer in (given, recorded):
            if layer.get(key) is not None:
                return layer[key]
        return default

    template_name = str(pick("template", DEFAULTS["template"]))
    if template_name not in TEMPLATES:
        raise UsageError(
            f"unknown template {template_name!r}", hint=f"choose one of: {', '.join(TEMPLATES)}"
        )
    mode = str(pick("mode", DEFAULTS["mode"]))
    if mode not in MODES:
        raise UsageError(f"unknown mode {mode!r}", hint=f"choose one of: {', '.join(MODES)}")
    pinned = _framework_torch(template_name)
    given_torch = given.get("torch")
    # A recorded torch the template's framework cannot compile against (an older fdl
    # wrote the newest release into floDl projects) gives way to the framework's.
    recorded_torch = recorded.get("torch") if pinned is None else None
    torch = str(given_torch or recorded_torch or (pinned.torch if pinned else None))
    if torch == "None":
        torch = default_torch_version()
    if not _TORCH.fullmatch(torch):
        raise UsageError(
            f"invalid torch version {torch!r}", hint="give a release such as 2.13 or 2.13.0"
        )
    if pinned is not None and _full_torch(torch) != pinned.torch:
        raise UsageError(
            f"--torch {torch}: the {template_name} template writes {pinned.label}, which "
            f"compiles against torch {pinned.torch} only",
            hint=f'drop --torch: fdl.yml gets libtorch.torch: "{pinned.torch}"',
        )
    hf = bool(pick("hf", False))
    if hf and template_name != "flodl":
        raise UsageError(
            f"the HuggingFace playground (flodl-hf) is floDl's; the {template_name} template "
            "has none",
            hint="drop --with-hf, or choose --template flodl",
        )
    return Answers(
        name=validate_name(name, template_name),
        template=template_name,
        mode=mode,
        torch=_full_torch(torch),
        example=bool(pick("example", DEFAULTS["example"])),
        gpus=_gpus(str(pick("gpus", "") or "")),
        driver=_driver(str(pick("driver", "") or "")),
        hf=hf,
        flodl=_flodl_release(pick("flodl", "")),
    )


_RELEASE = re.compile(r"(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})")


def _flodl_release(value: object) -> str:
    text = str(value or "")
    if text and not _RELEASE.fullmatch(text):
        raise UsageError(
            f"floDl release {text[:40]!r} is not one Rust's registry writes",
            hint='name a release such as 0.8.0 (Cargo.toml: flodl = "0.8.0")',
        )
    return text


def project_flodl_release(directory: Path) -> str | None:
    """The floDl release the project at ``directory`` uses: the ``flodl`` package of its
    ``Cargo.lock`` (the release Cargo resolved), else an exact ``flodl`` requirement of its
    ``Cargo.toml`` (``"0.8.0"``, ``"=0.8.0"``, ``{ version = "0.8.0" }``); None when it
    names none (a file that cannot be read or parsed names none)."""
    from fdl._files import load_toml, read_small_text

    def table(name: str) -> dict[str, Any]:
        try:
            text = read_small_text(directory / name, limit=4 << 20)
            return load_toml(text) if text is not None else {}
        except (OSError, ValueError):
            return {}

    packages = table("Cargo.lock").get("package")
    for package in packages if isinstance(packages, list) else []:
        if isinstance(package, dict) and package.get("name") == "flodl":
            version = str(package.get("version"))
            if _RELEASE.fullmatch(version):
                return version
    manifest = table("Cargo.toml")
    for section in (
        manifest.get("dependencies"),
        manifest.get("workspace", {}).get("dependencies"),
    ):
        spec = section.get("flodl") if isinstance(section, dict) else None
        if isinstance(spec, dict):
            spec = spec.get("version")
        if isinstance(spec, str) and _RELEASE.fullmatch(spec.strip().lstrip("=^")):
            return spec.strip().lstrip("=^")
    return None


def _framework_torch(template_name: str) -> FrameworkRelease | None:
    """The framework release a template writes into the project (the flodl template's
    floDl, the tch template's tch-rs), whose torch the project must use; None for a free
    template."""
    from fdl.compat import framework_release

    pin = template(template_name).framework
    return framework_release(*pin) if pin else None


def _gpus(text: str) -> str:
    """``6.1,12.0`` / ``sm_61 sm_120`` / ``none`` -> ``6.1,12.0`` (sorted, unique)."""
    from fdl.compat import parse_capability

    if text.strip().lower() in ("", "none", "cpu"):
        return ""
    caps = []
    for part in re.split(r"[,;\s]+", text.strip()):
        if not part:
            continue
        try:
            caps.append(parse_capability(part))
        except UsageError as exc:
            raise UsageError(
                f"--gpus: {exc.message}", hint="name compute capabilities, e.g. --gpus 6.1,12.0"
            ) from None
    return ",".join(str(c) for c in sorted(set(caps)))


def _driver(text: str) -> str:
    if text and not re.fullmatch(r"[0-9]+(\.[0-9]+){0,2}", text):
        raise UsageError(f"invalid driver version {text!r}", hint="e.g. --driver 570.86")
    return text


def _full_torch(version: str) -> str:
    """``2.13`` -> the newest known patch release (``2.13.0``); full versions stay."""
    if version.count(".") >= 2:
        return version
    from fdl.compat.pytorch import resolve_torch_version

    try:
        return resolve_torch_version(version)
    except UsageError:
        return version + ".0"
