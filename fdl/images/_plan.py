"""From the manifest's ``images:`` section to resolved :class:`ImageSpec` values.

Pure apart from reading the variant's ``variant.json`` (through the resolver)
and the project's ``CMakeLists.txt`` (for the default program name).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from fdl.errors import ManifestError, UsageError
from fdl.images._data import User, cuda_base, cuda_runtime, images_data
from fdl.images._spec import ImageSpec, MountSpec, SecretSpec, VariantRef
from fdl.images._variant import VariantResolver, project_libtorch_image, project_resolver
from fdl.manifest import LayerKind, Manifest

if TYPE_CHECKING:
    from fdl.libtorch import TorchDecision

__all__ = [
    "DEFAULT_PROFILES",
    "ImageDefault",
    "image_default",
    "manifest_hash",
    "plan_images",
    "project_name",
    "slug",
]

# Profiles used when the manifest has no `images:` section.
DEFAULT_PROFILES: dict[str, dict[str, Any]] = {"dev": {}, "train": {}}
_EXECUTABLE = re.compile(r"add_executable\s*\(\s*([A-Za-z0-9_.+-]+)")


def slug(text: str) -> str:
    """A name usable in image names and cache ids (``My Project`` -> ``my-project``)."""
    cleaned = re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-._")
    return re.sub(r"-{2,}", "-", cleaned) or "project"


def project_name(manifest: Manifest) -> str:
    """The project's name, made fit for image names: the manifest's ``name:`` (what
    ``fdl init`` recorded), else its directory's name.

    The one source of the name: images, CI files, deploy jobs and the libtorch
    image all ask here, so a clone under another directory name builds the same.
    """
    recorded = manifest.get("name")
    return slug(str(recorded) if recorded else manifest.directory.name)


# The sections that decide what goes into an image: the label changes when they do,
# not when an unrelated command is added (which would also make every generated CI
# file drift).
IMAGE_SECTIONS = ("images", "libtorch")


def manifest_hash(manifest: Manifest) -> str:
    """``sha256:<hex>`` of the manifest sections an image is made from, secrets
    masked (a label must not let anyone test guesses of a secret against it)."""
    data = manifest.masked_data()
    relevant = {key: data[key] for key in IMAGE_SECTIONS if key in data}
    text = json.dumps(relevant, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def profiles_of(manifest: Manifest) -> dict[str, dict[str, Any]]:
    """The declared profiles, or the defaults when there is no ``images:`` section."""
    declared = manifest.get("images")
    if declared is None:
        return {name: dict(value) for name, value in DEFAULT_PROFILES.items()}
    return {name: dict(value or {}) for name, value in declared.items()}


def plan_images(
    manifest: Manifest,
    names: Sequence[str] = (),
    *,
    resolver: VariantResolver | None = None,
    fdl_version: str | None = None,
) -> list[ImageSpec]:
    """Resolve the named profiles (default: all, in manifest order).

    Args:
        manifest: The loaded manifest (overlays applied).
        names: Profiles to plan.
        resolver: Finds variants (default: the project's libtorch directory).
        fdl_version: Recorded in labels (default: this fdl's version).

    Raises:
        UsageError: an unknown profile, or the variant is not installed.
        ManifestError: a profile cannot be resolved (located at its value).
    """
    from fdl import __version__
    from fdl.paths import resolve_context

    profiles = profiles_of(manifest)
    unknown = [name for name in names if name not in profiles]
    if unknown:
        from fdl._text import did_you_mean

        close = did_you_mean(unknown[0], list(profiles))
        known = ", ".join(profiles)
        raise UsageError(
            f"no image profile {unknown[0]!r} in {manifest.source}",
            hint=f"did you mean {close!r}?" if close else f"profiles: {known}",
        )
    resolve = resolver or project_resolver(resolve_context(manifest.directory))
    planner = _Planner(manifest, resolve, fdl_version or __version__)
    return [planner.plan(name, profiles[name]) for name in (names or list(profiles))]


@dataclass(frozen=True)
class ImageDefault:
    """The value fdl gives an ``images.<profile>.<field>`` that no layer sets."""

    key: str
    value: str
    source: str


_DATA_FILE = "fdl/data/images/images.yml"


def image_default(manifest: Manifest, key: str) -> ImageDefault | None:
    """What ``key`` (``images.train.base``) is when no manifest layer sets it, and where
    that default comes from; None for a key that is not an image field fdl defaults (or a
    profile that does not plan)."""
    parts = key.split(".")
    if len(parts) != 3 or parts[0] != "images" or parts[2] not in _DEFAULTED:
        return None
    note = ""
    try:
        spec = plan_images(manifest, [parts[1]])[0]
    except UsageError:  # no variant here: the defaults of a CPU one, said so
        try:
            spec = plan_images(manifest, [parts[1]], resolver=_cpu_variant)[0]
        except (ManifestError, UsageError):
            return None
        note = (
            " (no libtorch variant is active: a CPU one's default; a CUDA one takes nvidia/cuda's)"
        )
    except ManifestError:
        return None
    value, why = _DEFAULTED[parts[2]](spec)
    if value is None:
        return None
    return ImageDefault(key, str(value), why + (note if parts[2] in ("base", "build-base") else ""))


def _cpu_variant(name: str | None) -> VariantRef:
    return VariantRef(str(name or "cpu"), None, None, None, False, (), "")


def _base_source(spec: ImageSpec, role: str) -> str:
    if spec.variant is None or spec.variant.cuda is None:
        return f"{_DATA_FILE}: bases.cpu.{role}"
    return (
        f"the nvidia/cuda image of CUDA {spec.variant.cuda} (variant {spec.variant.name}; "
        f"{_DATA_FILE}: bases.cuda_flavours.{role}, fdl/data/compat/cuda.yaml)"
    )


_ROLE = {"dev": "dev", "train": "runtime", "builder": "builder"}
_DEFAULTED: dict[str, Callable[[ImageSpec], tuple[object, str]]] = {
    "base": lambda s: (s.base, _base_source(s, _ROLE.get(s.kind, "runtime"))),
    "build-base": lambda s: (
        s.build_base,
        _base_source(s, "build") + ("" if s.variant and s.variant.cuda else " (the base)"),
    ),
    "tag": lambda s: (s.tag, "fdl: <name>-<profile>:latest (:<env> under an overlay)"),
    "user": lambda s: (s.user.name, f"{_DATA_FILE}: users.{s.kind}"),
    "uid": lambda s: (s.user.uid, f"{_DATA_FILE}: users.{s.kind}"),
    "workdir": lambda s: (s.workdir, f"{_DATA_FILE}: paths.workdir"),
    "gpus": lambda s: (s.gpus, "fdl: auto (GPUs when the host has them and the variant is CUDA)"),
}


class _Planner:
    """Resolves one profile at a time; shares what all profiles need."""

    def __init__(self, manifest: Manifest, resolve: VariantResolver, fdl_version: str) -> None:
        self.manifest = manifest
        self.resolve = resolve
        self.fdl_version = fdl_version
        self.data = images_data()
        self.project = project_name(manifest)
        self.hash = manifest_hash(manifest)
        # A training image built under an overlay gets the overlay's tag: `fdl @prod
        # image build train` must not replace (or be replaced by) the base's image.
        overlaid = any(layer.kind == LayerKind.OVERLAY for layer in manifest.layers)
        self.overlay = slug(manifest.env) if overlaid and manifest.env else None
        self.source = (
            " + ".join(layer.source for layer in manifest.layers if layer.path is not None)
            or manifest.source
        )

    def error(self, key: str, message: str, hint: str | None = None) -> ManifestError:
        if self.manifest.origin(key) is not None:
            return self.manifest.error(key, message, hint)
        return ManifestError(f"{key}: {message}", hint=hint)

    def _tag(self, name: str, kind: str) -> str:
        """``<project>-<profile>:latest``; a training image under an overlay is tagged
        with the overlay's name (dev images keep theirs: compose files name them)."""
        version = self.overlay if kind == "train" and self.overlay else "latest"
        return f"{self.project}-{slug(name)}:{version}"

    def plan(self, name: str, raw: Mapping[str, Any]) -> ImageSpec:
        kind = str(raw.get("kind") or name)
        key = f"images.{name}"
        variant = self.resolve(raw.get("variant")) if kind in ("dev", "train") else None
        if variant is not None:
            variant = replace(variant, image=project_libtorch_image(variant.name, self.project))
            self._check_framework(key, raw, variant)
        cuda = variant.cuda if variant is not None else _text(raw.get("cuda"))
        base, build_base = self._bases(key, kind, raw, variant, cuda)
        libtorch = {"dev": str(raw.get("libtorch") or "mounted"), "train": "closure"}
        return ImageSpec(
            profile=name,
            kind=kind,
            project=self.project,
            tag=str(raw.get("tag") or self._tag(name, kind)),
            base=base,
            build_base=build_base,
            variant=variant,
            libtorch=libtorch.get(kind, "none"),
            packages=self._packages(kind, raw),
            build_packages=_sorted(
                [*self.data.packages["build"], *(raw.get("build-packages") or ())]
                if kind == "train"
                else ()
            ),
            env=self._env(key, kind, raw, variant),
            user=User(
                str(raw.get("user") or self.data.users[kind].name),
                int(raw.get("uid") or self.data.users[kind].uid),
            ),
            workdir=str(raw.get("workdir") or self.data.paths["workdir"]),
            labels=self._labels(name, kind, base, variant, cuda, libtorch.get(kind, "none"), raw),
            mounts=self._mounts(raw.get("mounts") or ()),
            pass_env=_sorted(raw.get("pass-env") or ()),
            gpus=str(raw.get("gpus") or "auto"),
            shm_size=raw.get("shm-size"),
            paths=tuple(
                sorted((k, v) for k, v in self.data.paths.items() if k in ("libtorch", "app"))
            ),
            source=self.source,
            fdl_version=self.fdl_version,
            context=_context(raw),
            setup=tuple(str(command) for command in raw.get("setup") or ()),
            follow_active=bool(raw.get("follow-active")),
            toolchain=self._toolchain(key, raw),
            **self._program(key, kind, raw, variant),
        )

    def _toolchain(self, key: str, raw: Mapping[str, Any]) -> str:
        """``host`` mounts this machine's Rust and crates into a cargo build: refused for
        a build command that runs no cargo (it would mount them for nothing)."""
        chosen = str(raw.get("toolchain") or "setup")
        if chosen != "host":
            return chosen
        from fdl.images._render import build_tool

        command = str(raw.get("build") or "")
        if build_tool(command) != "cargo":
            raise self.error(
                f"{key}.toolchain",
                "`toolchain: host` gives a cargo build this machine's Rust, but "
                f"{key}.build runs no cargo" + ("" if command else " (it is not set)"),
                hint=f"set {key}.build to the cargo command (e.g. cargo build --release), "
                "or remove `toolchain: host`",
            )
        return chosen

    @functools.cached_property
    def framework(self) -> TorchDecision:
        """What the project's framework needs of libtorch (read once, on first use)."""
        from fdl.libtorch import framework_torch

        return framework_torch(self.manifest)

    def _check_framework(self, key: str, raw: Mapping[str, Any], variant: VariantRef) -> None:
        """An image of a variant the project's framework cannot compile against would fail
        in its build step (or build a program that cannot load): refuse it now."""
        reason = self.framework.refusal(variant.torch) if variant.torch else None
        if reason is None:
            return
        where = f"{key}.variant" if raw.get("variant") else key
        torch = self.framework.torch
        raise self.error(
            where,
            f"libtorch {variant.name} is torch {variant.torch}: {reason}",
            f"fdl setup (installs torch {torch}), then point the image at that variant"
            if torch
            else "install a libtorch the framework can compile against (fdl setup)",
        )

    def _bases(
        self,
        key: str,
        kind: str,
        raw: Mapping[str, Any],
        variant: VariantRef | None,
        cuda: str | None,
    ) -> tuple[str, str | None]:
        """The final stage's base and (train) the build stage's base."""
        cudnn = variant.cudnn if variant is not None else False
        role = {"dev": "dev", "train": "runtime", "builder": "builder"}[kind]
        base = str(raw.get("base") or self._default_base(key, cuda, role, cudnn))
        if kind != "train":
            return base, None
        # A CPU program builds on its runtime base (plus the toolchain), so an
        # explicit base serves both stages; CUDA needs the devel flavour.
        build_base = raw.get("build-base") or (
            self._default_base(key, cuda, "build", cudnn) if cuda else base
        )
        return base, str(build_base)

    def _packages(self, kind: str, raw: Mapping[str, Any]) -> tuple[str, ...]:
        extra = list(raw.get("packages") or ())
        if kind == "train":
            return _sorted(extra)  # the runtime stage gets no toolchain
        return _sorted([*self.data.packages.get(kind, ()), *extra])

    def _program(
        self, key: str, kind: str, raw: Mapping[str, Any], variant: VariantRef | None
    ) -> dict[str, Any]:
        """The fields only training images have."""
        if kind != "train":
            return {
                "build_env": (),
                "build_command": None,
                "build_dir": None,
                "program": None,
                "args": (),
                "files": (),
                "dlopen": (),
                "never_ship": (),
                "reuse_from_base": (),
                "strip": False,
                "secrets": (),
            }
        build_dir = str(raw.get("build-dir") or "build").rstrip("/")
        cuda = variant.cuda if variant is not None else None
        try:
            runtime = cuda_runtime(cuda)
        except UsageError as exc:
            raise self.error(key, exc.message, hint=exc.hint) from None
        return {
            "build_env": _build_env(variant),
            "build_command": str(raw.get("build") or _default_build(build_dir)),
            "build_dir": build_dir,
            "program": str(
                raw.get("program") or self._default_program(key, build_dir, _context(raw))
            ),
            "args": tuple(str(a) for a in raw.get("args") or ()),
            "files": _sorted(raw.get("files") or ()),
            "dlopen": _sorted([*runtime.dlopen, *(raw.get("dlopen") or ())]),
            "never_ship": runtime.never_ship,
            "reuse_from_base": runtime.shared,
            "strip": raw.get("strip") is not False,
            "secrets": tuple(
                SecretSpec(ident, value.get("env"), value.get("file"))
                for ident, value in sorted((raw.get("secrets") or {}).items())
            ),
        }

    def _default_base(self, key: str, cuda: str | None, role: str, cudnn: bool) -> str:
        if cuda is None:
            return self.data.cpu_bases[role]
        found = cuda_base(cuda, role, cudnn=cudnn)
        if found is None:
            raise self.error(
                key,
                f"fdl has no default base image for CUDA {cuda}",
                hint=f"set {key}.base (and build-base) to an image with CUDA {cuda}",
            )
        return found

    def _default_program(self, key: str, build_dir: str, context: str) -> str:
        cmake = self.manifest.directory / context / "CMakeLists.txt"
        text = cmake.read_text(encoding="utf-8", errors="replace") if cmake.is_file() else ""
        found = _EXECUTABLE.search(text)
        if found is None:
            raise self.error(
                key,
                "no `program:` set, and CMakeLists.txt declares no add_executable()",
                hint=f"set {key}.program to the built program, e.g. {build_dir}/train",
            )
        return f"{build_dir}/{found.group(1)}"

    def _env(
        self, key: str, kind: str, raw: Mapping[str, Any], variant: VariantRef | None
    ) -> tuple[tuple[str, str], ...]:
        from fdl.manifest import is_secret_key, is_secret_node, token_kind

        libtorch = self.data.paths["libtorch"]
        env: dict[str, str] = {}
        if kind == "dev":
            env.update(
                LIBTORCH=libtorch,
                CMAKE_PREFIX_PATH=libtorch,
                LD_LIBRARY_PATH=f"{libtorch}/lib",
            )
        if kind == "train":
            env["LD_LIBRARY_PATH"] = f"{libtorch}/lib"
        if variant is not None and variant.cuda:
            env.update(NVIDIA_DRIVER_CAPABILITIES="compute,utility", NVIDIA_VISIBLE_DEVICES="all")
        for name, value in (raw.get("env") or {}).items():
            if value is None:
                env.pop(name, None)
                continue
            if is_secret_key(name) or is_secret_node(self.manifest.node(f"{key}.env.{name}")):
                raise self.error(
                    f"{key}.env.{name}",
                    "looks like a secret, and an image's environment is readable by anyone "
                    "who has the image",
                    hint=f"list {name} under {key}.pass-env to pass it at run time "
                    "(or use secrets: for build-time secrets)",
                )
            text = _text(value) or ""
            kind_of_token = token_kind(text)
            if kind_of_token is not None:
                raise self.error(
                    f"{key}.env.{name}",
                    f"the value looks like {kind_of_token}, and an image's environment is "
                    "readable by anyone who has the image",
                    hint=f"take it out of fdl.yml (revoke it if it was committed); pass it at "
                    f"run time by listing {name} under {key}.pass-env, or at build time as a "
                    f"build secret under {key}.secrets",
                )
            env[name] = text
        return tuple(sorted(env.items()))

    def _labels(
        self,
        name: str,
        kind: str,
        base: str,
        variant: VariantRef | None,
        cuda: str | None,
        libtorch: str,
        raw: Mapping[str, Any],
    ) -> tuple[tuple[str, str], ...]:
        description = str(self.manifest.get("description") or f"{self.project} {kind} image")
        labels = {
            "org.opencontainers.image.title": f"{self.project}-{name}",
            "org.opencontainers.image.description": description,
            "org.opencontainers.image.base.name": base,
            "dev.fdl.profile": name,
            "dev.fdl.kind": kind,
            "dev.fdl.manifest-hash": self.hash,
            "dev.fdl.version": self.fdl_version,
            "dev.fdl.libtorch": libtorch,
            "dev.fdl.cuda": cuda or "none",
        }
        if variant is not None:
            labels.update(
                {
                    "dev.fdl.variant": variant.name,
                    "dev.fdl.torch": variant.torch or "unknown",
                    # a ROCm build: its gfx targets (floDl's `rocm` when unrecorded)
                    "dev.fdl.archs": " ".join(variant.archs)
                    or ("rocm" if variant.vendor == "amd" else "cpu" if not cuda else ""),
                }
            )
        labels.update({str(k): str(v) for k, v in (raw.get("labels") or {}).items()})
        return tuple(sorted(labels.items()))

    def _mounts(self, entries: Sequence[str]) -> tuple[MountSpec, ...]:
        mounts = []
        for entry in entries:
            source, target, *mode = str(entry).split(":")
            mounts.append(MountSpec(source, target, bool(mode) and mode[0] == "ro"))
        return tuple(sorted(mounts, key=lambda m: m.target))


def _context(raw: Mapping[str, Any]) -> str:
    """The profile's build context relative to the project (``.``: the project itself)."""
    from pathlib import PurePosixPath

    return PurePosixPath(str(raw.get("context") or ".")).as_posix()


def _build_env(variant: VariantRef | None) -> tuple[tuple[str, str], ...]:
    """TORCH_CUDA_ARCH_LIST for the build stage: Caffe2's CMake config otherwise runs a
    GPU detection program, and there is no GPU while an image builds."""
    if variant is None or not variant.cuda or not variant.archs:
        return ()
    from fdl.compat.archs import parse_archs

    try:
        arch_list = parse_archs(variant.archs).torch_cuda_arch_list()
    except UsageError:
        return ()  # archs fdl does not know: leave it to CMake
    return (("TORCH_CUDA_ARCH_LIST", arch_list),)


def _default_build(build_dir: str) -> str:
    return (
        f"cmake -S . -B {build_dir} -DCMAKE_BUILD_TYPE=Release "
        f"&& cmake --build {build_dir} --parallel"
    )


def _sorted(values: Sequence[Any]) -> tuple[str, ...]:
    return tuple(sorted({str(value) for value in values}))


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
