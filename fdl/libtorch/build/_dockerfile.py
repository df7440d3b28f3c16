"""The builder Dockerfile: rendered by the planner into the plan (so ``--dry-run`` shows it),
built by the Docker backend (:mod:`._docker`). Pure: deterministic text from values."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from fdl._assets import asset_dir, template_environment
from fdl._grammar import quoted
from fdl.compat import ArchList, cudnn_limit, host_compilers, load_table

__all__ = ["CONTAINER", "SCRIPTS", "TEMPLATE", "TOOLS", "render_dockerfile"]

TEMPLATE = "libtorch-builder.Dockerfile"
SCRIPTS = "libtorch-builder"
# What the builder image must have; the apt step installs whichever is missing.
TOOLS = ("git", "cmake", "g++", "python3", "make")

# Paths inside the builder image.
CONTAINER = {
    "source": "/opt/pytorch/src",
    "work": "/opt/work",
    "compiler_cache": "/opt/compiler-cache",
    "venv": "/opt/fdl-venv",
    "context_source": "/opt/context-src",
    "output": "/opt/libtorch",
}


def build_tools(env: Mapping[str, str]) -> list[str]:
    """The programs the Docker build runs: the fixed ones, and the compiler launchers the
    plan sets (``ccache``) when they are names, not paths into the venv."""
    tools = list(TOOLS)
    for key, value in sorted(env.items()):
        if key.endswith("_COMPILER_LAUNCHER") and "/" not in value and value not in tools:
            tools.append(value)
    return tools


def render_dockerfile(
    *,
    base_image: str,
    env: Mapping[str, str],
    secret_keys: tuple[str, ...],
    deps: tuple[str, ...],
    cache_ids: Mapping[str, str],
    clone: tuple[str, ...] | None,
    source_in_context: bool,
    tag: str = "",
    cuda: str | None,
    archs: ArchList,
    use_cudnn: bool,
    fresh: bool,
    torch: str,
    offline: bool = False,
) -> str:
    """The builder Dockerfile (deterministic: sorted values, no host paths, no times)."""
    preflight: list[tuple[str, str]] = []
    if cuda is not None:
        preflight += [("FDL_EXPECT_CUDA", cuda), ("FDL_MAX_GCC", str(host_compilers(cuda).gcc))]
        limit = cudnn_limit(archs)
        if limit is not None and use_cudnn:
            preflight += [
                ("FDL_MAX_CUDNN", limit.max_cudnn),
                ("FDL_OLDEST_ARCH", min(archs.capabilities).sm),
            ]
    paths = dict(CONTAINER)
    paths["source_cache"] = str(Path(CONTAINER["source"]).parent)
    environment = template_environment(asset_dir("dockerfiles"))
    table = load_table("build")["source_build"]
    return environment.get_template(TEMPLATE).render(
        torch=torch,
        arch_text=archs.torch_cuda_arch_list() if archs else "CPU",
        base_image=base_image,
        tools=[f"{tool}={table['image_tools'][tool]}" for tool in build_tools(env)],
        venv_package=table["venv_package"],
        preflight=preflight,
        deps=[_shell_word(d) for d in deps],
        env=[(k, _env_value(v)) for k, v in sorted(env.items()) if k not in secret_keys],
        clone=_clone(clone) if clone else None,
        tag=_env_value(tag) if clone else tag,
        cache_ids=dict(cache_ids),
        paths=paths,
        source_in_context=source_in_context,
        secrets=bool(secret_keys),
        fresh=fresh,
        offline=offline,
    )


def _env_value(value: str) -> str:
    """An ENV value: bare when it is a plain word, else by the Dockerfile writer of
    :func:`fdl._grammar.quoted` (double-quoted, ``$`` kept literal, one line)."""
    text = quoted("dockerfile", value, what="a build setting", source="the builder Dockerfile")
    plain = value and all(c.isascii() and (c.isalnum() or c in "._-/:=+,@%") for c in value)
    return value if plain else text


def _clone(clone: tuple[str, ...]) -> str:
    return quoted("dockerfile", " ".join(clone), what="--clone", source="the builder Dockerfile")


def _shell_word(word: str) -> str:
    return quoted("run", word, what="a build dependency", source="the builder Dockerfile")
