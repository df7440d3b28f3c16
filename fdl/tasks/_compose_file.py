"""Reading the bits of a compose file that fdl needs: services and their bind mounts.

fdl runs ``docker compose run`` from the directory holding the compose file,
so it must know where the host directories it runs in appear inside the
service's container (``.:/workspace`` or the long syntax), and which host
path a ``${LIBTORCH_HOST_PATH}`` mount resolves to.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from fdl._files import NotARegularFile, read_small_text, read_text_file, reason_of
from fdl._upward import only_one
from fdl.errors import ManifestError

__all__ = [
    "COMPOSE_NAMES",
    "ComposeProject",
    "Mount",
    "container_path",
    "find_compose_file",
    "interpolate",
    "load_compose",
]

# compose v2's order of preference.
COMPOSE_NAMES = ("compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml")
OVERRIDE_NAMES = (
    "compose.override.yaml",
    "compose.override.yml",
    "docker-compose.override.yaml",
    "docker-compose.override.yml",
)

_VARIABLE = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
    r"|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)


@dataclass(frozen=True)
class Mount:
    """A bind mount: host directory -> container path."""

    source: Path
    target: str


@dataclass
class ComposeProject:
    """A compose file as far as fdl needs it.

    Attributes:
        file: The compose file.
        directory: Its directory (where ``docker compose`` runs).
        mounts: Bind mounts per service.
        images: The ``image:`` of each service that names one (interpolated).
        working_dirs: The ``working_dir:`` of each service that sets one (interpolated).
        gpus: The GPU vendor each service is given devices of (``nvidia``, ``amd``);
            a service not listed has no GPU (:func:`service_gpu`).
    """

    file: Path
    directory: Path
    mounts: dict[str, list[Mount]] = field(default_factory=dict)
    images: dict[str, str] = field(default_factory=dict)
    working_dirs: dict[str, str] = field(default_factory=dict)
    gpus: dict[str, str] = field(default_factory=dict)

    @property
    def services(self) -> list[str]:
        return list(self.mounts)


def find_compose_file(start: Path) -> Path | None:
    """The nearest compose file walking up from ``start``.

    Raises:
        ManifestError: two compose files compete in one directory.
    """
    current = start.resolve()
    while True:
        found = only_one(
            [current / name for name in COMPOSE_NAMES if (current / name).is_file()],
            str(current),
            "; fdl will not guess which one compose uses",
            hint="keep one compose file in that directory",
        )
        if found is not None:
            return found
        if current.parent == current:
            return None
        current = current.parent


def interpolate(text: str, variables: Mapping[str, str]) -> str:
    """Compose-style ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, ``$VAR``, ``$$``."""

    def substitute(match: re.Match[str]) -> str:
        if match.group("escaped"):
            return "$"
        name = match.group("braced") or match.group("bare")
        value = variables.get(name)
        op, arg = match.group("op"), match.group("arg") or ""
        if op in (":-", ":?") and not value:
            return arg if op == ":-" else ""
        if op in ("-", "?") and value is None:
            return arg if op == "-" else ""
        if op in (":+", "+"):
            present = bool(value) if op == ":+" else value is not None
            return arg if present else ""
        return value or ""

    return _VARIABLE.sub(substitute, text)


def _dotenv(directory: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    path = directory / ".env"
    try:
        text = read_small_text(path)
    except NotARegularFile as exc:
        raise ManifestError(
            f"cannot read {path}, the compose file's variables: {exc.reason}",
            hint="make it a UTF-8 text file of NAME=value lines (docker compose reads it too)",
        ) from None
    except OSError:
        return values
    if text is None:
        return values
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        values[key.strip()] = value.strip().strip("'\"")
    return values


def _host_path(text: str, directory: Path) -> Path | None:
    if not text.startswith((".", "/", "~")):
        return None  # a named volume
    path = Path(os.path.expanduser(text))
    return Path(os.path.normpath(directory / path))


def _mount(volume: Any, directory: Path, variables: Mapping[str, str]) -> Mount | None:
    if isinstance(volume, str):
        parts = interpolate(volume, variables).split(":")
        if len(parts) < 2:
            return None
        source, target = parts[0], parts[1]
    elif isinstance(volume, dict):
        if volume.get("type", "bind") != "bind":
            return None
        source = interpolate(str(volume.get("source", "")), variables)
        target = interpolate(str(volume.get("target", "")), variables)
    else:
        return None
    host = _host_path(source, directory)
    if host is None or not target.startswith("/"):
        return None
    return Mount(host, str(PurePosixPath(target)))


# What fdl reads of a compose file (each service's image, working directory and volumes,
# as written, before interpolation) is kept between runs (fdl._kept, <cache>/compose/),
# under the file's path and the digest of its exact text: a `docker:` command then reads
# an unchanged file without the YAML parser. Nothing else of the file is kept (its
# `environment:` may hold secrets), nor its text.
_COMPOSE_FORMAT = 2
_MAX_KEPT_BYTES = 1 << 22
_MAX_KEPT_FILES = 64


def _services(path: Path) -> object:
    """The ``services`` of the compose file at ``path`` as far as fdl reads them.

    Raises:
        ManifestError: the file cannot be read or parsed, or is not a mapping.
    """
    try:
        text = read_text_file(path, limit=1 << 24)
    except OSError as exc:
        raise ManifestError(
            f"cannot read the compose file {path}: {reason_of(exc)}",
            hint="fix the compose file",
        ) from None
    import hashlib
    import zlib

    from fdl import __version__
    from fdl._kept import keep, kept
    from fdl.paths import cache_dir

    digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
    key = (_COMPOSE_FORMAT, __version__, str(path), digest)
    entry = cache_dir() / "compose" / f"{zlib.crc32(os.fsencode(str(path))):08x}.marshal"
    found = kept(entry, key, limit=_MAX_KEPT_BYTES)
    if isinstance(found, tuple) and len(found) == 1:
        return found[0]
    services = _read_services(path, text)
    keep(entry, key, (services,), limit=_MAX_KEPT_BYTES, max_entries=_MAX_KEPT_FILES)
    return services


def _read_services(path: Path, text: str) -> object:
    import yaml

    try:
        data = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError) as exc:
        raise ManifestError(
            f"cannot read the compose file {path}: {reason_of(exc)}",
            hint="fix the compose file",
        ) from None
    if data is None:
        return None
    if not isinstance(data, dict):
        raise ManifestError(
            f"{path}: a compose file must be a mapping", hint="fix the compose file"
        )
    services = data.get("services")
    if not isinstance(services, dict):
        return {}  # what load_compose skips
    return {name: _read_keys(service) for name, service in services.items()}


def _read_keys(service: object) -> dict[str, Any]:
    """The keys of a service load_compose reads (a volume in the long syntax reduced to
    the keys of a bind mount)."""
    if not isinstance(service, dict):
        return {}
    read = {key: service[key] for key in ("image", "working_dir", "volumes") if key in service}
    gpu = service_gpu(service)
    if gpu is not None:
        read["gpu"] = gpu
    volumes = read.get("volumes")
    if isinstance(volumes, list):
        read["volumes"] = [
            {k: v for k, v in volume.items() if k in ("type", "source", "target")}
            if isinstance(volume, dict)
            else volume
            for volume in volumes
        ]
    return read


def service_gpu(service: Mapping[str, Any]) -> str | None:
    """The GPU vendor a compose service is given devices of: ``nvidia`` for a device
    reservation of the nvidia driver or with the ``gpu`` capability, ``gpus:``, ``runtime:
    nvidia`` or ``/dev/nvidia*`` devices; ``amd`` for ``/dev/kfd`` (ROCm); else None."""
    devices = service.get("devices")
    paths = [str(d).split(":", 1)[0] for d in devices] if isinstance(devices, list) else []
    if "/dev/kfd" in paths:
        return "amd"
    if (
        service.get("runtime") == "nvidia"
        or service.get("gpus")
        or any(p.startswith("/dev/nvidia") for p in paths)
    ):
        return "nvidia"
    deploy = service.get("deploy")
    resources = deploy.get("resources") if isinstance(deploy, dict) else None
    reservations = resources.get("reservations") if isinstance(resources, dict) else None
    reserved = reservations.get("devices") if isinstance(reservations, dict) else None
    for device in reserved if isinstance(reserved, list) else []:
        if not isinstance(device, dict):
            continue
        capabilities = device.get("capabilities")
        if device.get("driver") == "nvidia" or (
            isinstance(capabilities, list) and "gpu" in capabilities
        ):
            return "nvidia"
    return None


def load_compose(path: Path, environ: Mapping[str, str]) -> ComposeProject:
    """The services of the compose file at ``path`` (with its override file) and their mounts.

    Args:
        path: The compose file.
        environ: Variables for interpolation (``.env`` beside the file fills gaps).

    Raises:
        ManifestError: the file cannot be read or is not a mapping.
    """
    directory = path.parent
    variables = {**_dotenv(directory), **environ}
    project = ComposeProject(path, directory)
    files = [path, *(directory / n for n in OVERRIDE_NAMES if (directory / n).is_file())]
    for file in files:
        services = _services(file) or {}
        if not isinstance(services, dict):
            continue
        for name, service in services.items():
            mounts = project.mounts.setdefault(str(name), [])
            image = service.get("image") if isinstance(service, dict) else None
            if isinstance(image, str):
                project.images[str(name)] = interpolate(image, variables)
            workdir = service.get("working_dir") if isinstance(service, dict) else None
            if isinstance(workdir, str) and workdir.strip():
                project.working_dirs[str(name)] = interpolate(workdir, variables)
            gpu = service.get("gpu") if isinstance(service, dict) else None
            if isinstance(gpu, str):
                project.gpus[str(name)] = gpu
            volumes = service.get("volumes") if isinstance(service, dict) else None
            for volume in volumes or []:
                mount = _mount(volume, directory, variables)
                if mount is not None:
                    mounts.append(mount)
    return project


def container_path(mounts: list[Mount], host: Path) -> str | None:
    """Where the host path ``host`` appears in a container with ``mounts`` (most specific mount)."""
    best: tuple[int, str] | None = None
    for mount in mounts:
        try:
            relative = host.relative_to(mount.source)
        except ValueError:
            continue
        depth = len(mount.source.parts)
        if best is None or depth > best[0]:
            inside = PurePosixPath(mount.target) / PurePosixPath(relative.as_posix())
            best = (depth, str(inside))
    return best[1] if best else None
