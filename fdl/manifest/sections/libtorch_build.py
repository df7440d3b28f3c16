"""``libtorch.build``: defaults of ``fdl libtorch build`` (an extension of ``libtorch:``).

Only schema here (no build machinery is imported), so loading a manifest stays fast;
:mod:`fdl.libtorch.build._request` turns the validated values into a request.
"""

from __future__ import annotations

from fdl.manifest._nodes import is_set
from fdl.manifest.schema import (
    ENV_NAME,
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
    "CacheSpec",
    "build_fields",
    "build_settings",
    "build_spec",
]

BACKENDS = ("auto", "docker", "native")
CACHES = ("ccache", "sccache", "none")
SWITCH_NAME = r"(USE|BUILD)_[A-Z0-9_]+|CMAKE_BUILD_TYPE|CMAKE_[A-Z0-9_]+"
CACHE_SETTING = r"(SCCACHE|CCACHE)_[A-Z0-9_]+"
SCHEDULER_URL = r"https?://[^\s/?#]+(/[^\s?#]*)?"


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


def _dist_spec() -> Obj:
    """``cache.dist``: the sccache-dist scheduler and how the client authenticates."""
    auth = Obj(
        {
            "token_env": Str(
                "The environment variable that holds the client token (never printed).",
                pattern=ENV_NAME,
                example="SCCACHE_DIST_TOKEN",
            ),
            "token_file": Str(
                "A file whose first line is the client token (relative to fdl.yml; never printed)."
            ),
        },
        "The token the scheduler's client_auth (type token) expects: from the environment "
        "or a file, never in fdl.yml.",
        validators=(_one_token_source,),
    )
    return Obj(
        {
            "scheduler": Str(
                "The scheduler's URL (sccache-dist scheduler public_addr, or the HTTPS "
                "proxy in front of it).",
                pattern=SCHEDULER_URL,
                example="http://10.0.0.5:10600",
            ),
            "auth": auth,
        },
        "Distributed compilation with sccache-dist: fdl writes the sccache client config, "
        "checks the scheduler before the build and reports distributed vs local compiles.",
        required=("scheduler", "auth"),
    )


def _one_token_source(node: Any, path: tuple[str, ...], checker: Checker) -> None:
    given = [k for k in ("token_env", "token_file") if is_set(node, k)]
    if len(given) != 1:
        found = " and ".join(given) if given else "neither"
        checker.fail(
            node,
            path,
            f"give exactly one of token_env and token_file (found {found})",
            "e.g. auth: {token_env: SCCACHE_DIST_TOKEN}",
        )


class CacheSpec(Enum):
    """``cache``: a name (``sccache``) or ``{kind: sccache, dist: {scheduler, auth}}``.

    An :class:`Enum` for the command line (``--cache sccache``); in fdl.yml also a mapping.
    The mapping normalises to ``{"kind": ..., "dist": {...}}``.
    """

    def __init__(self, description: str = "") -> None:
        super().__init__(CACHES, description)
        self.mapping = Obj(
            {
                "kind": Enum(CACHES, "The compiler cache (default: sccache in this form)."),
                "dist": _dist_spec(),
            },
            description,
        )

    def check(self, node: Any, path: tuple[str, ...], checker: Checker) -> Any:
        from fdl.manifest._nodes import MapNode

        if not isinstance(node, MapNode):
            return super().check(node, path, checker)
        value = self.mapping.check(node, path, checker)
        if value is None:
            return None
        kind = value.get("kind") or "sccache"
        if value.get("dist") is not None and kind != "sccache":
            checker.fail(
                node.entries["kind"],
                (*path, "kind"),
                f"dist needs kind sccache, not {kind!r} (sccache-dist distributes sccache's "
                "compiles)",
                "set kind: sccache, or drop dist",
            )
        return {"kind": kind, "dist": value.get("dist")}

    def type_name(self) -> str:
        return super().type_name() + " or a mapping {kind, dist}"

    def json_schema(self) -> dict[str, Any]:
        return self._doc({"anyOf": [{"enum": list(self.choices)}, self.mapping.json_schema()]})


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


def _switch(key: str, description: str, scope: str = "all") -> BuildSetting:
    """A true-or-false setting whose command-line flag, ``--KEY`` (``_`` written ``-``),
    sets it true."""
    flag = "--" + key.replace("_", "-")
    return BuildSetting(key, Bool(description), flags=((flag, True, ""),), scope=scope)


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
            Version(
                "PyTorch release to build (default: the project's libtorch.torch, else the "
                "release its framework compiles against, else the newest known)."
            ),
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
            "disk_gb",
            Int(
                "Disk the build needs, in GB, where you know it better than fdl's estimate "
                "(the release's build size: 10 GB for a CPU build, 20 + 2 per arch with CUDA); "
                "a build is refused when less is free.",
                minimum=1,
            ),
            option=("--disk-gb",),
        ),
        _switch(
            "ptx", "Add PTX of the newest arch (runs on future GPUs through the driver's JIT)."
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
            CacheSpec(
                "Compiler cache: ccache (default), sccache or none; in fdl.yml also "
                "{kind: sccache, dist: {scheduler: URL, auth: {token_env: VAR}}} for a "
                "sccache-dist build farm."
            ),
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
                key_rule="a SCCACHE_* or CCACHE_* variable",
            ),
        ),
        BuildSetting(
            "switches",
            MapOf(
                SwitchValue(),
                "PyTorch build switches (USE_*, BUILD_*, CMAKE_*), e.g. USE_DISTRIBUTED: 0.",
                key_pattern=SWITCH_NAME,
                key_example="USE_DISTRIBUTED",
                key_rule="a USE_*, BUILD_* or CMAKE_* switch of PyTorch's build",
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
        _switch("cpu", "Build without CUDA (USE_CUDA=0)."),
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
        _switch(
            "offline",
            "Compile without network: every download (the source, its submodules, the "
            "optional dependencies tools/optional_submodules.py clones: NCCL, Eigen) "
            "happens in the fetch phase, and the compile step runs with "
            "--network=none (Docker).",
        ),
        _switch(
            "fetch_only",
            "Run only the fetch phase (the source, its submodules, the optional "
            "dependencies, the build's Python packages) and stop: a later --offline build "
            "compiles from it.",
            scope="command-line",
        ),
        _switch("fresh", "Start from an empty build tree (no resume).", scope="command-line"),
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
