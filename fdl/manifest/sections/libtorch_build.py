"""``libtorch.build``: defaults of ``fdl libtorch build`` (an extension of ``libtorch:``).

Only schema here (no build machinery is imported), so loading a manifest stays fast;
:mod:`fdl.libtorch.source._request` turns the validated values into a request.
"""

from __future__ import annotations

from fdl.manifest.schema import (
    Bool,
    Checker,
    Enum,
    Int,
    ListOf,
    MapOf,
    Obj,
    OneOf,
    Spec,
    Str,
    Version,
)

TYPE_CHECKING = False  # typing and dataclasses stay out of `fdl config show` (start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "BACKENDS",
    "CACHES",
    "FIELDS",
    "BuildSetting",
    "build_fields",
    "build_settings",
    "build_spec",
]

BACKENDS = ("auto", "docker", "native")
CACHES = ("ccache", "sccache", "none")
SWITCH_NAME = r"(USE|BUILD)_[A-Z0-9_]+|CMAKE_BUILD_TYPE|CMAKE_[A-Z0-9_]+"
CACHE_SETTING = r"(SCCACHE|CCACHE)_[A-Z0-9_]+"


class ArchText(Spec):
    """An arch list: ``"6.1;12.0"``, ``[6.1, "12.0+PTX"]`` or a number (``8.6``)."""

    def __init__(self, description: str = "") -> None:
        self.description = description
        self._inner = OneOf(Version(), Str(), ListOf(OneOf(Version(), Str())))

    def check(self, node: Any, path: tuple[str, ...], checker: Checker) -> Any:
        value = self._inner.check(node, path, checker)
        if isinstance(value, list):
            return ";".join(str(v) for v in value if v is not None)
        return value

    def type_name(self) -> str:
        return 'an arch list (e.g. "6.1;12.0" or [sm_61, sm_120])'

    def json_schema(self) -> dict[str, Any]:
        item = {"type": ["string", "number"]}
        return self._doc({"anyOf": [item, {"type": "array", "items": item}]})


class SwitchValue(Spec):
    """A build switch value: ``0``/``1``, ``true``/``false``, ``ON``/``OFF`` or text."""

    def __init__(self, description: str = "") -> None:
        self.description = description

    def check(self, node: Any, path: tuple[str, ...], checker: Checker) -> Any:
        from fdl.manifest._nodes import ScalarNode

        if not isinstance(node, ScalarNode) or node.value is None:
            checker.wrong_type(node, path, self)
            return None
        if isinstance(node.value, bool):
            return "1" if node.value else "0"
        return node.text

    def type_name(self) -> str:
        return "a switch value (0, 1, ON, OFF, true, false)"

    def json_schema(self) -> dict[str, Any]:
        return self._doc({"type": ["string", "integer", "boolean"]})


class BuildSetting:
    """One setting of ``fdl libtorch build``, declared once for every place that takes it.

    Attributes:
        key: The key under ``libtorch.build`` (and in recipes), and the request's field.
        spec: Type and help text: the manifest schema's and the command-line option's.
        option: Names of the command-line option that takes a value (``--jobs``, ``-j``).
        flags: Command-line flags that set a fixed value: (flag, value, help or "" for the
            spec's help). Two flags of one setting exclude each other.
        scope: Where it may be given: ``all`` (recipe, fdl.yml, command line), ``project``
            (fdl.yml and command line) or ``command-line``.
    """

    __slots__ = ("flags", "key", "option", "scope", "spec")

    def __init__(
        self,
        key: str,
        spec: Spec,
        *,
        option: tuple[str, ...] = (),
        flags: tuple[tuple[str, object, str], ...] = (),
        scope: str = "all",
    ) -> None:
        self.key = key
        self.spec = spec
        self.option = option
        self.flags = flags
        self.scope = scope


def build_settings() -> tuple[BuildSetting, ...]:
    """Every setting of a source build, in the order ``--help`` lists them."""
    return (
        BuildSetting(
            "archs",
            ArchText(
                "GPU archs: 6.1;12.0, sm_61,sm_120, 61 120, 12.0a, 12.0+PTX, Pascal, Blackwell "
                "(default: the GPUs detected on this machine)."
            ),
            option=("--archs",),
        ),
        BuildSetting(
            "cuda",
            Version("CUDA toolkit (default: the newest that compiles every arch)."),
            option=("--cuda",),
        ),
        BuildSetting(
            "torch",
            Version("PyTorch release to build (default: the newest known)."),
            option=("--torch",),
        ),
        BuildSetting(
            "backend",
            Enum(BACKENDS, "Where to build: docker, native or auto."),
            flags=(
                ("--docker", "docker", "Build in a Docker builder image (BuildKit)."),
                ("--native", "native", "Build on this machine with its nvcc and compilers."),
            ),
        ),
        BuildSetting(
            "jobs",
            Int("Parallel compile jobs (default: what cores and RAM allow).", minimum=1),
            option=("--jobs", "-j"),
        ),
        BuildSetting(
            "ptx",
            Bool("Add PTX of the newest arch (runs on future GPUs through the driver's JIT)."),
            flags=(("--ptx", True, ""),),
        ),
        BuildSetting(
            "flash_attention",
            Bool("Build the flash-attention kernels (~5 GB RAM per job)."),
            flags=(
                (
                    "--no-flash-attention",
                    False,
                    "Skip the flash-attention kernels (hours of compile, ~5 GB RAM per job).",
                ),
            ),
        ),
        BuildSetting(
            "cache",
            Enum(CACHES, "Compiler cache: ccache (default), sccache or none."),
            option=("--cache",),
        ),
        BuildSetting(
            "cache_settings",
            MapOf(
                Str(),
                "Compiler cache settings passed to the build (SCCACHE_REDIS_ENDPOINT, "
                "SCCACHE_BUCKET, SCCACHE_GCS_BUCKET, CCACHE_DIR ...).",
                key_pattern=CACHE_SETTING,
                key_example="SCCACHE_REDIS_ENDPOINT",
            ),
        ),
        BuildSetting(
            "switches",
            MapOf(
                SwitchValue(),
                "PyTorch build switches (USE_*, BUILD_*, CMAKE_*), e.g. USE_DISTRIBUTED: 0.",
                key_pattern=SWITCH_NAME,
                key_example="USE_DISTRIBUTED",
            ),
        ),
        BuildSetting(
            "recipe",
            Str("A recipe name (see --list-recipes; recipes/<name>.yml) or a .yml file."),
            option=("--recipe",),
            scope="project",
        ),
        BuildSetting(
            "source",
            Str(
                "An existing PyTorch checkout to build instead of cloning one (relative to fdl.yml)."
            ),
            option=("--source",),
            scope="project",
        ),
        BuildSetting("cpu", Bool("Build without CUDA (USE_CUDA=0)."), flags=(("--cpu", True, ""),)),
        BuildSetting(
            "base_image",
            Str("Docker base image (default: nvidia/cuda:<X.Y.Z>-cudnn-devel-ubuntu<V>)."),
            option=("--base-image",),
        ),
        BuildSetting(
            "name",
            Str(
                "Variant name under builds/ (default: from the archs, e.g. sm61-sm120).",
                pattern=r"[A-Za-z0-9][A-Za-z0-9._+-]*",
                example="sm61-sm120",
            ),
            option=("--name",),
            scope="project",
        ),
        BuildSetting(
            "activate",
            Bool("Make the result the active variant (default: true)."),
            flags=(("--no-activate", False, "Do not make the result the active variant."),),
            scope="project",
        ),
        BuildSetting(
            "offline",
            Bool(
                "Compile without network: every download (the source, its submodules, the "
                "optional dependencies tools/optional_submodules.py clones: NCCL, Eigen) "
                "happens in the fetch phase, and the compile step runs with "
                "--network=none (Docker)."
            ),
            flags=(("--offline", True, ""),),
        ),
        BuildSetting(
            "fetch_only",
            Bool(
                "Run only the fetch phase (the source, its submodules, the optional "
                "dependencies, the build's Python packages) and stop: a later --offline build "
                "compiles from it."
            ),
            flags=(("--fetch-only", True, ""),),
            scope="command-line",
        ),
        BuildSetting(
            "fresh",
            Bool("Start from an empty build tree (no resume)."),
            flags=(("--fresh", True, ""),),
            scope="command-line",
        ),
    )


def build_fields(*, recipe: bool = False) -> dict[str, Spec]:
    """The keys of ``libtorch.build`` (``recipe=True``: the keys a recipe file may set)."""
    scopes = ("all",) if recipe else ("all", "project")
    specs = {s.key: s.spec for s in build_settings() if s.scope in scopes}
    if recipe:
        specs["description"] = Str("What the recipe builds, one line.")
    return specs


def build_spec() -> Obj:
    """The ``libtorch.build`` section of fdl.yml."""
    return Obj(build_fields(), description="Source builds: `fdl libtorch build` defaults.")


FIELDS: dict[str, Spec] = {"build": build_spec()}
