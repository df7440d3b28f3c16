"""What the generated README and workflow say, and the next steps `fdl init` prints."""

from __future__ import annotations

from typing import Any

from fdl.scaffold._project_files import Answers
from fdl.scaffold._templates import Template, scaffold_data

__all__ = ["layout", "next_steps", "workflow_jobs"]


def next_steps(answers: Answers, *, directory: str | None = None) -> list[tuple[str, str]]:
    """The commands that take the new project to a trained model: (command, comment).

    Args:
        answers: The answers.
        directory: The project directory as the user would ``cd`` into it (None: omit).
    """
    where = "in the dev container (fdl builds its image first)" if answers.containers else ""
    steps: list[tuple[str, str]] = []
    if directory is not None:
        steps.append((f"cd {directory}", "the new project"))
    # PyPI's Linux torch wheels are CUDA builds: the CPU one comes from PyTorch's CPU index.
    index = scaffold_data()["ci"]["cpu_wheel_index"]
    steps.append(
        (
            f"fdl libtorch install --from-wheel --index-url {index}",
            f"the CPU libtorch of torch {answers.torch}, from its wheel (or: fdl setup)",
        )
    )
    if answers.template == "cpp":
        steps.append(("fdl build", " ".join(filter(None, ["configure and build", where]))))
        steps.append(("fdl test", "run the tests (ctest)"))
        steps.append(("fdl train -- --steps 100", "train, printing the loss"))
    else:
        steps.append(("fdl build", " ".join(filter(None, ["cargo build", where]))))
        steps.append(("fdl test", "cargo test"))
        steps.append(("fdl train -- --epochs 20", "train (release build)"))
    if answers.containers:
        steps.append(("fdl shell", "a shell in the dev container"))
    steps.append(("fdl image build train", "the slim training image"))
    steps.append(("fdl image run train", "train in it, runs/ mounted"))
    return steps


def layout(answers: Answers, chosen: Template, dockerfile_dir: str) -> list[tuple[str, str]]:
    """The project's files and directories, for the README."""
    rows: list[tuple[str, str]] = []
    if answers.template == "cpp":
        rows += [
            ("CMakeLists.txt", "the build: `train` and the `model_test` test"),
            ("src/model.h", "the model and its (synthetic) data"),
            ("src/train.cpp", "the training program"),
            ("tests/model_test.cpp", "a test: training lowers the loss"),
        ]
    else:
        rows += [
            ("Cargo.toml", "the package: the flodl dependency, profiles, the `cuda` feature"),
            ("src/main.rs", "the model, its data and the training loop"),
            ("rust-toolchain.toml", "the pinned Rust toolchain (the images install the same)"),
        ]
    rows += [
        (answers.manifest_file, "the manifest: libtorch, commands, images"),
        ("fdl.ci.yml", "the CI overlay (`fdl --env ci ...`)"),
        (f"{dockerfile_dir}/", "Dockerfiles generated from `images:`"),
    ]
    if answers.containers:
        rows.append(("docker-compose.yml", "the services the commands run in (generated)"))
    rows += [
        (".github/workflows/ci.yml", "CI: build, test, a short training run, the image"),
        ("libtorch/", "installed libtorch variants (ignored by git)"),
        (f"{chosen.build_dir}/", "the build (ignored by git)"),
        ("runs/", "what training writes (ignored by git)"),
    ]
    return rows


def workflow_jobs(chosen: Template) -> list[dict[str, Any]]:
    """The workflow's jobs after the common setup steps."""
    args = " ".join(chosen.data["ci_train_args"])
    return [
        {
            "id": "build-and-test",
            "name": "Build, test and train (CPU)",
            "env": [],
            "steps": [
                {"name": "Build", "run": "fdl --env ci build"},
                {"name": "Test", "run": "fdl --env ci test"},
                {"name": "Train (short run)", "run": "fdl --env ci train"},
            ],
        },
        {
            "id": "train-image",
            "name": "Training image (BuildKit)",
            "env": [("DOCKER_BUILDKIT", "1")],
            "steps": [
                {"name": "Build the training image", "run": "fdl --env ci image build train"},
                {
                    "name": "Train in it (short run)",
                    "run": f"fdl --env ci image run train -- {args}",
                },
            ],
        },
    ]
