"""The planner: template + answers -> the sorted list of files of the project.

Pure apart from a scratch directory in which the generated manifest is loaded
(and so validated) before its images are planned.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fdl._grammar import quoted
from fdl.scaffold._docs import layout, next_steps, workflow_jobs
from fdl.scaffold._images import plan_generated
from fdl.scaffold._project_files import GENERATED, USER, Answers, FileSpec
from fdl.scaffold._templates import Template, render, scaffold_data, template, template_files
from fdl.scaffold._values import template_values

__all__ = ["OVERLAY", "READ_BY_IMAGES", "plan_project"]

CI_ENV = "ci"
OVERLAY = f"fdl.{CI_ENV}.yml"
# Project files fdl.images reads when planning (the default program of a train image).
READ_BY_IMAGES = ("CMakeLists.txt",)
WORKFLOW = ".github/workflows/ci.yml"


def plan_project(
    answers: Answers,
    *,
    fdl_version: str | None = None,
    existing: Mapping[str, str] | None = None,
    ci_files: bool = True,
) -> list[FileSpec]:
    """Every file of a new project, sorted by path.

    The manifest and its CI overlay are the user's once they exist: the files fdl
    derives from them (Dockerfiles, compose file, .dockerignore) are then planned
    from the project's own versions, passed in ``existing``.

    Args:
        answers: The validated answers (see :func:`fdl.scaffold.make_answers`).
        fdl_version: Recorded in the files (default: this fdl's version).
        existing: The project's own manifest, overlay and :data:`READ_BY_IMAGES` files
            that exist (name -> text), see :func:`fdl.scaffold.read_existing`.
        ci_files: Plan the files of ``fdl ci generate`` for the manifest's ``ci:``
            section (False when the project is not its repository's root: those
            files then belong at the root, outside the project).

    Raises:
        UsageError: fdl's tables do not know the torch version.
        ManifestError: the project's own manifest is invalid.
    """
    from fdl import __version__

    version = fdl_version or __version__
    chosen = template(answers.template)
    values = template_values(answers, chosen, version)
    manifest = render(f"{chosen.name}/fdl.yml.j2", values)
    overlay = render(f"{chosen.name}/fdl.ci.yml.j2", values)
    own = existing or {}
    sources = _own_files(chosen, values)
    read = {spec.path: spec.content for spec in sources if spec.path in READ_BY_IMAGES}
    data, specs, ci = plan_generated(
        answers,
        own.get(answers.manifest_file, manifest),
        {CI_ENV: own.get(OVERLAY, overlay)},
        version,
        sources={**read, **{name: text for name, text in own.items() if name in READ_BY_IMAGES}},
        own=answers.manifest_file in own,
    )
    files = [
        *sources,
        FileSpec(answers.manifest_file, manifest, kind=USER),
        FileSpec(OVERLAY, overlay, kind=USER),
        *_image_files(answers, specs, values["dockerfile_dir"]),
        *_common_files(answers, chosen, values, data),
        *(FileSpec(path, text, kind=GENERATED) for path, text in ci if ci_files),
    ]
    return sorted(files, key=lambda spec: spec.path)


def _own_files(chosen: Template, values: dict[str, Any]) -> list[FileSpec]:
    """The template's sources: ``.j2`` files rendered, the others as they are; with the
    HuggingFace playground (``hf``), its files under its directory."""
    parts = [("files", "")]
    if values.get("hf"):
        parts.append(("hf", f"{values['hf_data']['directory']}/"))
    files = []
    for part, prefix in parts:
        for relative, source in template_files(chosen, part):
            if relative.endswith(".j2"):
                text = render(f"{chosen.name}/{part}/{relative}", values)
                if not text.strip():  # a file of some modes only (.env.example)
                    continue
                path = prefix + relative.removesuffix(".j2")
                files.append(FileSpec(path, text, kind=USER))
            else:
                text = source.read_text(encoding="utf-8")
                files.append(FileSpec(prefix + relative, text, kind=USER))
    return files


def _image_files(answers: Answers, specs: list[Any], dockerfile_dir: str) -> list[FileSpec]:
    from fdl.images import dockerfile_name, render_compose, render_dockerfile, render_dockerignore

    files = [
        FileSpec(
            f"{dockerfile_dir}/{dockerfile_name(spec)}",
            render_dockerfile(spec, regenerate="fdl init . --force"),
            kind=GENERATED,
        )
        for spec in specs
    ]
    if answers.containers:
        compose = render_compose(specs, context=".", dockerfile_dir=dockerfile_dir)
        files.append(FileSpec("docker-compose.yml", compose, kind=GENERATED))
    files.append(FileSpec(".dockerignore", render_dockerignore(specs), kind=GENERATED))
    return files


SCHEMA_FILE = ".fdl/fdl.schema.json"


def _editor_files() -> list[FileSpec]:
    """What editors with the YAML language server need to validate and complete fdl.yml:
    the schema where the manifests' modeline points, and fdl's tags declared (VS Code
    reads .vscode/settings.json; Neovim's yamlls takes the same `yaml` settings)."""
    import json

    from fdl.manifest.sections import CUSTOM_TAGS, schema_document

    settings = {
        "yaml.customTags": list(CUSTOM_TAGS),
        "yaml.schemas": {f"./{SCHEMA_FILE}": ["fdl.yml", "fdl.*.yml", "fdl.yml.example"]},
    }
    return [
        FileSpec(
            SCHEMA_FILE,
            json.dumps(schema_document(), indent=2, sort_keys=True) + "\n",
            kind=GENERATED,
        ),
        FileSpec(".vscode/settings.json", json.dumps(settings, indent=2) + "\n", kind=USER),
    ]


def _answers_text(answers: Answers, chosen: Template, version: str) -> str:

    # JSON scalars are YAML scalars: strings stay strings (`torch: "2.13.0"`).
    pairs = [
        (key, _json_scalar(value)) for key, value in answers.to_json().items() if key != "template"
    ]
    return render(
        "common/answers.yml.j2",
        {
            "template": chosen.name,
            "template_version": chosen.version,
            "fdl_version": _json_scalar(version),
            "answers": pairs,
        },
    )


def _common_files(
    answers: Answers, chosen: Template, values: dict[str, Any], data: dict[str, Any]
) -> list[FileSpec]:
    """README, .gitignore, the workflow and the answers file."""
    steps = next_steps(answers)
    commands = [
        {"name": name, "description": (spec or {}).get("description") or ""}
        for name, spec in (data.get("commands") or {}).items()
    ]
    mode_text = {
        "mounted": "Its commands run in a dev container with libtorch mounted from this machine.",
        "baked": "Its commands run in a dev container with libtorch baked into the image.",
        "native": "Its commands run on this machine (no containers).",
    }[answers.mode]
    readme = render(
        "common/README.md.j2",
        {
            **values,
            "summary": chosen.description,
            "mode_text": mode_text,
            "first_steps": steps,
            "first_steps_width": max(len(command) for command, _ in steps),
            "layout": layout(answers, chosen, values["dockerfile_dir"]),
            "commands": commands,
        },
    )

    from fdl.ci import derived_install

    install = derived_install().run()
    # One line: a JSON string is a YAML scalar; more: a block, taken as written.
    lines = [_json_scalar(install[0])] if len(install) == 1 else install
    workflow = render(
        "common/ci.yml.j2", {**values, "jobs": workflow_jobs(chosen), "fdl_install": lines}
    )
    return [
        *_editor_files(),
        FileSpec("README.md", readme, kind=USER),
        FileSpec(".gitignore", render("common/gitignore.j2", values), kind=USER),
        FileSpec(WORKFLOW, workflow, kind=GENERATED),
        FileSpec(
            str(scaffold_data()["answers_file"]),
            _answers_text(answers, chosen, values["fdl_version"]),
            kind=GENERATED,
        ),
    ]


def _json_scalar(value: object) -> str:
    """An answer as a YAML scalar (JSON's, which YAML reads): a text by the YAML writer
    of :func:`fdl._grammar.quoted`, which refuses what no YAML file holds (exit 2)."""
    import json

    if isinstance(value, str):
        return quoted("yaml", value, what="an answer", source="fdl init")
    return json.dumps(value)
