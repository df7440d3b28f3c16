"""Rendering: deterministic text, quoting, no host paths, the .dockerignore policy."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fdl.images import (
    plan_images,
    render_compose,
    render_dockerfile,
    render_dockerignore,
)
from fdl.images._context import ensure_dockerignore, missing_essentials
from fdl.images._render import COMPILER_CACHE, quote
from fdl.manifest import load_manifest
from tests.support.images import make_project, make_variant

MANIFEST = """\
images:
  train:
    env: {B: "2", A: "1"}
    packages: [zlib1g, ca-certificates]
    mounts: ["./runs:/workspace/runs", "./data:/workspace/data:ro"]
  dev: {}
"""
REORDERED = """\
images:
  dev: {}
  train:
    mounts: ["./data:/workspace/data:ro", "./runs:/workspace/runs"]
    packages: [ca-certificates, zlib1g]
    env: {A: "1", B: "2"}
"""


def _texts(project: Path) -> dict[str, str]:
    specs = plan_images(load_manifest(project), fdl_version="1.0")
    # The manifest hash label differs: the manifests' lists are in other orders.
    out = {
        spec.profile: "\n".join(
            line for line in render_dockerfile(spec).splitlines() if "manifest-hash" not in line
        )
        for spec in specs
    }
    out["ignore"] = render_dockerignore(specs)
    return out


def test_rendering_does_not_depend_on_order_or_place(tmp_path: Path) -> None:
    first = make_project(tmp_path / "a", MANIFEST)
    second = make_project(tmp_path / "b", REORDERED)
    for project in (first, second):
        make_variant(project)
    a, b = _texts(first), _texts(second)
    assert a["train"] == b["train"] and a["dev"] == b["dev"] and a["ignore"] == b["ignore"]
    assert _texts(first) == a  # twice the same
    for text in a.values():
        assert str(tmp_path) not in text


def test_quote_keeps_values_literal_and_on_one_line() -> None:
    assert quote("plain") == '"plain"'
    assert quote('say "hi" $HOME \\n') == '"say \\"hi\\" \\$HOME \\\\n"'
    assert quote("two\nlines") == '"two lines"'


def test_label_values_cannot_break_out_of_the_dockerfile(tmp_path: Path) -> None:
    project = make_project(
        tmp_path, 'description: "evil\\"\\nRUN rm -rf / $HOME"\nimages:\n  dev: {}\n'
    )
    make_variant(project)
    (spec,) = plan_images(load_manifest(project), ["dev"])
    text = render_dockerfile(spec)
    assert "\nRUN rm -rf" not in text
    assert 'org.opencontainers.image.description="evil\\" RUN rm -rf / \\$HOME"' in text


def test_train_dockerfile_shape(tmp_path: Path) -> None:
    project = make_project(tmp_path, MANIFEST)
    make_variant(project)
    (spec,) = plan_images(load_manifest(project), ["train"])
    text = render_dockerfile(spec)
    froms = [line for line in text.splitlines() if line.startswith("FROM ")]
    assert froms == [
        "FROM ${LIBTORCH_IMAGE} AS libtorch",
        "FROM ${BASE_IMAGE} AS runtime-base",
        "FROM ${BUILD_BASE_IMAGE} AS build",
        "FROM runtime-base AS runtime",
    ]
    final = text.split("FROM runtime-base AS runtime", 1)[1]
    assert "g++" not in final and "cmake" not in final
    assert "USER 10001:10001" in final
    # libraries before the program: a source change leaves the library layer cached
    assert final.index("COPY --from=build /out/root/ /") < final.index(
        "COPY --from=build /out/app/"
    )
    assert f"id={COMPILER_CACHE},target=/root/.cache/ccache" in text
    assert "target=/src/build" not in text  # a cached build dir would trust file times
    for forbidden in ("# syntax=", "<<EOF", "--link", "--network"):
        assert forbidden not in text


def test_dockerignore_lists_build_dirs_and_mount_sources(tmp_path: Path) -> None:
    project = make_project(
        tmp_path,
        "images:\n  train:\n    build-dir: out\n    mounts: ['./datasets/big:/data:ro']\n",
    )
    make_variant(project)
    text = render_dockerignore(plan_images(load_manifest(project)))
    lines = text.splitlines()
    for pattern in ("**/.git", "**/.env", "libtorch", "build", "out", "datasets/big"):
        assert pattern in lines
    assert missing_essentials(text) == ()


def test_ensure_dockerignore_writes_refreshes_and_respects_the_users(tmp_path: Path) -> None:
    project = make_project(tmp_path, MANIFEST)
    make_variant(project)
    specs = plan_images(load_manifest(project))
    assert ensure_dockerignore(project, specs).action == "written"
    assert ensure_dockerignore(project, specs).action == "unchanged"
    path = project / ".dockerignore"
    path.write_text(path.read_text().replace("wandb\n", ""), encoding="utf-8")
    assert ensure_dockerignore(project, specs).action == "updated"
    path.write_text("# mine\n.git/\n", encoding="utf-8")
    own = ensure_dockerignore(project, specs)
    # a top-level .git leaves the .git of submodules and vendored repositories in the context
    assert (own.action, own.missing) == ("user", ("**/.env", "**/.git", "libtorch"))
    assert path.read_text() == "# mine\n.git/\n"
    assert missing_essentials("*\n!src\n") == ()
    assert missing_essentials("**/.git\n**/.env\n/libtorch/\n") == ()


@pytest.mark.parametrize(("context", "dockerfiles"), [(".", "."), ("..", "docker")])
def test_compose_is_valid_yaml_with_relative_paths(
    tmp_path: Path, context: str, dockerfiles: str
) -> None:
    project = make_project(tmp_path, MANIFEST)
    make_variant(project)
    specs = plan_images(load_manifest(project))
    data = yaml.safe_load(render_compose(specs, context=context, dockerfile_dir=dockerfiles))
    dev, train = data["services"]["dev"], data["services"]["train"]
    assert dev["build"]["context"] == context
    assert dev["build"]["dockerfile"].endswith("dev.Dockerfile")
    assert f"{context}:/workspace" in dev["volumes"]
    default = "./libtorch/precompiled/cpu" if context == "." else "../libtorch/precompiled/cpu"
    assert f"${{LIBTORCH_HOST_PATH:-{default}}}:/opt/libtorch:ro" in dev["volumes"]
    assert dev["user"] == "${FDL_UID:-1000}:${FDL_GID:-1000}"
    assert train["build"]["args"] == {"LIBTORCH_IMAGE": "fdl-libtorch:cpp-train-precompiled-cpu"}
    assert "user" not in train
    assert f"{context}/data:/workspace/data:ro".replace("./", "") in [
        volume.replace("./", "") for volume in train["volumes"]
    ]


def test_compose_mounts_a_pinned_variant_whatever_is_active(tmp_path: Path) -> None:
    project = make_project(tmp_path, "images:\n  dev: {variant: builds/cpu-dbg}\n")
    make_variant(project)
    make_variant(project, "builds/cpu-dbg", active=False)
    data = yaml.safe_load(render_compose(plan_images(load_manifest(project))))
    assert "./libtorch/builds/cpu-dbg:/opt/libtorch:ro" in data["services"]["dev"]["volumes"]


SETUP = """\
images:
  dev:
    setup: ["curl -sSf -o /tmp/x.sh https://example.org/x.sh\\nsh /tmp/x.sh -y"]
  train:
    setup: [echo build-stage]
    kind: train
"""


def test_setup_commands_run_after_the_packages_of_dev_and_build_stages(tmp_path: Path) -> None:
    project = make_project(tmp_path, SETUP)
    make_variant(project)
    specs = {spec.profile: spec for spec in plan_images(load_manifest(project), fdl_version="1")}
    dev = render_dockerfile(specs["dev"])
    assert "RUN curl -sSf -o /tmp/x.sh https://example.org/x.sh \\\n    && sh /tmp/x.sh -y\n" in dev
    assert dev.index("apt-get install") < dev.index("RUN curl") < dev.index("useradd")
    train = render_dockerfile(specs["train"])
    build_stage, runtime = train.split("FROM runtime-base AS runtime")
    assert "RUN echo build-stage" in build_stage and "echo build-stage" not in runtime
    assert build_stage.index("apt-get install") < build_stage.index("RUN echo build-stage")


def test_setup_does_not_apply_to_builder_images(tmp_path: Path) -> None:
    from fdl.errors import ManifestError

    project = make_project(tmp_path, "images:\n  builder:\n    setup: [echo no]\n")
    with pytest.raises(ManifestError, match="`setup:` does not apply to a builder image"):
        load_manifest(project)
