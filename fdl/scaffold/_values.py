"""The values templates render with: Python decides, templates only loop and branch."""

from __future__ import annotations

import json
from typing import Any

from fdl.scaffold._project_files import Answers
from fdl.scaffold._templates import Template, scaffold_data, template

__all__ = ["cuda_service", "flodl_commands", "template_values"]


def cuda_service(answers: Answers) -> Any:
    """The CUDA libtorch of the project's CUDA commands: what ``fdl setup`` would pick for
    the answers' GPUs and driver (none: PyPI's default CUDA build of the torch).

    Returns:
        A :class:`fdl.libtorch.CudaTarget`.
    """
    from fdl.compat import parse_capability
    from fdl.errors import UsageError
    from fdl.libtorch import cuda_target

    gpus = [parse_capability(c) for c in answers.gpus.split(",") if c]
    try:
        return cuda_target(gpus, answers.torch, answers.driver or None)
    except UsageError as exc:
        pin = template(answers.template).framework
        if not pin:
            raise
        from fdl.compat import framework

        # Another torch release would serve these GPUs, but the framework cannot compile
        # against it.
        raise UsageError(
            f"{exc.message}; {framework(pin[0]).title} {pin[1]} (the release the "
            f"{answers.template} template writes) compiles against torch {answers.torch} only",
            hint="name other --gpus (or --gpus none)",
        ) from None


def _command(
    name: str, description: str, run: str, *, append: str | None = None, docker: str | None = None
) -> dict[str, Any]:
    """A manifest command as the templates see it."""
    return dict(
        name=name,
        description=description,
        run=run,
        append=append,
        docker=docker,
        gpu=name.startswith("gpu-"),
    )


# floDl 0.8's spelling of the GPU feature: fdl exports FDL_GPU_FEATURE (`cuda` or `rocm`,
# from the active libtorch variant) to the commands and into their containers.
GPU_FEATURE = '--features "$FDL_GPU_FEATURE"'
# fdl's logical service: `cuda` or `rocm`, from the active variant (floDl 0.8 run.rs:678-745).
GPU_SERVICE = "gpu"


def flodl_commands(containers: bool) -> list[dict[str, Any]]:
    """The floDl project's commands: CPU ones, then GPU ones under floDl 0.8's names
    (``gpu-build``, ``gpu-test``, ``gpu-run``, ``gpu-shell``, and ``gpu-train``).

    ``-- --nocapture`` goes in ``append:`` (after the user's arguments), so that
    ``fdl test -p foo`` runs ``cargo test -p foo -- --nocapture``.
    """
    cpu = "dev" if containers else None
    gpu = GPU_SERVICE if containers else None
    commands = [
        _command("build", "Build (debug)", "cargo build", docker=cpu),
        _command("test", "Run the tests", "cargo test", append="-- --nocapture", docker=cpu),
        _command(
            "train",
            "Train (release build), e.g. fdl train -- --epochs 20",
            "cargo run --release --",
            docker=cpu,
        ),
        # Neither `run` (fdl's built-in that reaches shadowed commands) nor `start`
        # (floDl 0.8's built-in cluster start, matched before project commands).
        _command(
            "train-debug",
            "Train with the debug build (quicker to compile; arguments go to the program)",
            "cargo run --",
            docker=cpu,
        ),
        _command("check", "Type-check without building", "cargo check", docker=cpu),
        _command("clippy", "Lint", "cargo clippy", append="-- -W clippy::all", docker=cpu),
    ]
    if containers:
        commands.append(
            _command("shell", "An interactive shell in the dev container", "bash", docker=cpu)
        )
    commands += [
        _command("gpu-build", "Build with GPU support", f"cargo build {GPU_FEATURE}", docker=gpu),
        _command(
            "gpu-test",
            "Run the tests with GPU support",
            f"cargo test {GPU_FEATURE}",
            append="-- --nocapture",
            docker=gpu,
        ),
        _command(
            "gpu-run",
            "Run the program with GPU support (debug build; arguments go to it)",
            f"cargo run {GPU_FEATURE} --",
            docker=gpu,
        ),
        _command(
            "gpu-train",
            "Train on the GPU (release build)",
            f"cargo run --release {GPU_FEATURE} --",
            docker=gpu,
        ),
    ]
    if containers:
        commands.append(
            _command("gpu-shell", "An interactive shell in the GPU container", "bash", docker=gpu)
        )
    return commands


def _rust_setup(rust: dict[str, Any]) -> list[str]:
    """rustup into fixed directories, its programs linked onto the PATH (no curl | sh:
    the script is saved first, so a failed download fails the step, saying why), with the
    toolchain pinned in the project's rust-toolchain.toml. Skipped when the build stage
    already has cargo: a train image with `toolchain: host` mounts the host's."""
    components = ",".join(rust["components"])
    home = f"RUSTUP_HOME={rust['rustup_home']} CARGO_HOME={rust['cargo_home']}"
    url = rust["rustup_url"]
    fail = (
        f"{{ echo 'error: cannot fetch rustup from {url}: the image build needs network "
        f"access to install Rust {rust['toolchain']} (rust-toolchain.toml); behind a proxy, "
        "pass HTTPS_PROXY as a build argument; or build the train image with the Rust of "
        "this machine: fdl --set images.train.toolchain=host image build train' >&2; exit 1; }"
    )
    return [
        "if command -v cargo >/dev/null; then cargo --version; exit 0; fi",
        f"curl --proto =https --tlsv1.2 -sSf -o /tmp/rustup-init.sh {url} || {fail}",
        f"{home} sh /tmp/rustup-init.sh -y --no-modify-path --profile minimal "
        f"--default-toolchain {rust['toolchain']} --component {components}",
        f"ln -s {rust['cargo_home']}/bin/* /usr/local/bin/",
        "rm /tmp/rustup-init.sh",
    ]


def template_values(answers: Answers, chosen: Template, fdl_version: str) -> dict[str, Any]:
    """Everything the templates of ``chosen`` read."""
    from fdl.compat.pytorch import release
    from fdl.images import images_data

    shared = scaffold_data()
    torch_release = release(answers.torch)
    values: dict[str, Any] = {
        **answers.to_json(),
        "gpus": answers.gpus,  # "" when none were named or detected
        "crate": answers.name.replace("-", "_"),
        "cmake_project": answers.name,
        "template_version": chosen.version,
        "containers": answers.containers,
        "hf": answers.hf,
        "baked": answers.mode == "baked",
        "manifest_file": answers.manifest_file,
        "torch_minor": torch_release.version,
        "cxx_standard": torch_release.source.cxx_standard,
        "fdl_version": fdl_version,
        "build_dir": chosen.build_dir,
        "dockerfile_dir": shared["dockerfile_dir"],
        "ci": shared["ci"],
        "ci_train_args": " ".join(chosen.data["ci_train_args"]),
        # JSON is YAML: the flow list of `ci.tests.train` in the manifest
        "ci_tests": json.dumps(chosen.data["ci_train_args"]),
        "image_libtorch": images_data().paths["libtorch"],
    }
    if chosen.data.get("language") == "rust":
        rust = chosen.data["rust"]
        values.update(
            rust=rust,
            rust_setup=_rust_setup(rust),
            rust_packages=[*rust["packages"], *chosen.data.get("packages", [])],
            rust_version=chosen.data.get("rust_version"),
            framework_version=chosen.framework[1] if chosen.framework else None,
        )
    if chosen.name == "tch":
        values["train_run"] = "cargo run --release --"
    if chosen.name == "flodl":
        commands = flodl_commands(answers.containers)
        values.update(
            flodl_version=values["framework_version"],
            # the playground's pin: the project's own floDl release (fdl add flodl-hf)
            hf_flodl_version=answers.flodl or values["framework_version"],
            commands=commands,
            train_run=next(c["run"] for c in commands if c["name"] == "train"),
            hf_data=chosen.data["hf"],
            rocm=chosen.data["rocm"],
            pass_env=list(chosen.data["pass_env"]),
        )
    if chosen.framework is not None:
        target = cuda_service(answers)
        values.update(
            cuda_variant=target.variant,
            cuda_why=target.why,
            cuda_command=" ".join(target.command),
        )
    return values
