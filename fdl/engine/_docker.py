"""The docker engine: the docker CLI through the runner, the Engine API through the SDK.

Builds go through the CLI because BuildKit's features (cache and secret
mounts, ``--target``, cache export) are only reachable there; docker-py has
only the classic builder. Runs, pushes, tags and compose stay on the CLI too.
What the Engine API serves (:mod:`._api`, the docker SDK imported on first use)
is asked of the daemon the CLI's context names: an image's exact sizes (not in
any CLI output), its inspection (configuration, labels, layers) and its export
(``save``, streamed). A client that is not docker's (podman) or a context
without a unix:// or tcp:// endpoint keeps the CLI for those too.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fdl.engine._argv import build_command, buildkit_reasons, run_command
from fdl.engine._client import needs_buildkit_error, select_client
from fdl.engine._compose import find_compose
from fdl.engine._credentials import registry_credentials
from fdl.engine._facts import translate_failure
from fdl.engine._progress import BuildProgress
from fdl.engine._types import (
    Builder,
    BuildResult,
    BuildSpec,
    ClientSelection,
    ComposeCommand,
    DiskUsage,
    DockerClient,
    ImageInfo,
    Layer,
    LineCallback,
    RunResult,
    RunSpec,
)
from fdl.errors import CommandFailed, EnvironmentProblem
from fdl.runner import Completed, Runner, SubprocessRunner, default_runner

__all__ = ["DockerEngine"]

_NO_SUCH = ("no such image", "no such object")
_MISSING_PATH = ("could not find the file", "no such container:path")  # daemon, client words
DOCKER_ERROR = 125  # `docker run`'s own failure, as opposed to the container's exit code


class DockerEngine:
    """The container engine on the docker CLI.

    Args:
        runner: Runs docker (default: the process-wide runner).
        environ: The environment docker runs in and FDL_DOCKER/PATH are read
            from (default: this process's).
        selection: A client choice made already (default: chosen on first use).
    """

    def __init__(
        self,
        runner: Runner | None = None,
        environ: Mapping[str, str] | None = None,
        selection: ClientSelection | None = None,
        *,
        remember: bool | None = None,
    ) -> None:
        self._runner = runner or default_runner()
        self._environ = dict(os.environ if environ is None else environ)
        self._selection = selection
        self._compose: ComposeCommand | None = None
        self._address: list[str | None] = []
        # What the probes learned is kept between runs (fdl.engine._memory) when this engine
        # asks through the real runner (a test's fake answers are never kept, nor used)
        if remember is None:
            remember = selection is None and isinstance(self._runner, SubprocessRunner)
        self._remember = remember
        #: Whether the client and compose choice came from an earlier run's probes.
        self.remembered = False

    # -- the client ---------------------------------------------------------

    def describe(self) -> ClientSelection:
        """The chosen docker client and why (chosen on first use).

        Raises:
            EnvironmentProblem: No docker client, or no daemon answers.
        """
        if self._selection is None and self._remember:
            from fdl.engine._memory import recall

            kept = recall(self._environ)
            if kept is not None:
                self._selection, self._compose = kept
                self.remembered = True
        if self._selection is None:
            self._selection = select_client(self._runner, self._environ)
            self._keep()
        return self._selection

    def _keep(self) -> None:
        if self._remember and self._selection is not None:
            from fdl.engine._memory import remember

            remember(self._environ, self._selection, self._compose)

    @property
    def client(self) -> DockerClient:
        return self.describe().client

    def _env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return {**self._environ, **(extra or {})}

    def _docker(self, *args: str) -> list[str]:
        return [self.client.path, *args]

    def _call(self, args: list[str], action: str, *, hint: str | None = None) -> Completed:
        try:
            return self._runner.run(self._docker(*args), env=self._env())
        except CommandFailed as exc:
            raise translate_failure(exc, action, hint=hint) from None

    # -- builds -------------------------------------------------------------

    def build(
        self, spec: BuildSpec, *, on_line: LineCallback | None = None, log_file: Path | None = None
    ) -> BuildResult:
        """Build an image; progress lines go to ``on_line`` (and ``log_file``).

        Raises:
            EnvironmentProblem: The build needs BuildKit and no client has it, or
                the context/Dockerfile is missing.
            CommandFailed: A step failed (the error carries docker's last lines).
        """
        if not spec.context.is_dir():
            raise EnvironmentProblem(
                f"build context {spec.context} is not a directory",
                hint="pass the directory the Dockerfile's COPY instructions read from",
            )
        client = self.client
        name = spec.tags[0] if spec.tags else str(spec.context)
        with tempfile.TemporaryDirectory(prefix="fdl-build-") as scratch:
            dockerfile = self._dockerfile(spec, Path(scratch))
            reasons = buildkit_reasons(spec, dockerfile.read_text(encoding="utf-8"))
            if reasons and not client.builder.has_buildkit:
                raise needs_buildkit_error(self.describe(), ", ".join(reasons))
            iidfile = Path(scratch) / "iid"
            argv, extra = build_command(client, spec, dockerfile, iidfile)
            progress = BuildProgress()

            def feed(line: str) -> None:
                progress.feed(line)
                if on_line is not None:
                    on_line(line)

            try:
                self._runner.stream(argv, env=self._env(extra), log_file=log_file, on_line=feed)
            except CommandFailed as exc:
                raise translate_failure(
                    exc,
                    f"building {name}",
                    hint="fix the failing step shown above; a re-run reuses the cached steps",
                ) from None
            image_id = iidfile.read_text(encoding="utf-8").strip()
        if client.builder is Builder.BUILDX and spec.tags:
            # Builders other than buildx's "docker" driver write a manifest digest to
            # --iidfile; the loaded image's id is what inspect/run/remove understand.
            args = ["image", "inspect", "--format", "{{.Id}}", spec.tags[0]]
            image_id = self._call(args, f"inspecting image {name}").stdout.strip()
        return BuildResult(image_id, spec.tags, client.builder, tuple(progress.steps))

    @staticmethod
    def _dockerfile(spec: BuildSpec, scratch: Path) -> Path:
        if spec.dockerfile_text is not None:
            path = scratch / "Dockerfile"
            path.write_text(spec.dockerfile_text, encoding="utf-8")
            return path
        path = spec.dockerfile or spec.context / "Dockerfile"
        if not path.is_file():
            raise EnvironmentProblem(
                f"Dockerfile {path} does not exist", hint="pass the path of an existing Dockerfile"
            )
        return path

    # -- images -------------------------------------------------------------

    def image_exists(self, ref: str) -> bool:
        """Whether ``ref`` is in the local image store."""
        argv = self._docker("image", "inspect", "--format", "{{.Id}}", ref)
        return self._found(argv, f"looking up image {ref}")

    def _found(self, argv: list[str], action: str, hint: str | None = None) -> bool:
        """Run ``argv``: True when it succeeds, False when docker says the image is not
        there; another failure is raised as the error a user should see."""
        done = self._runner.run(argv, check=False, env=self._env())
        if done.ok:
            return True
        if any(word in done.stderr.lower() for word in _NO_SUCH):
            return False
        failed = CommandFailed(argv, done.returncode, output_tail=done.stderr)
        raise translate_failure(failed, action, hint=hint)

    def _api_address(self) -> str | None:
        """The daemon the Engine API calls go to: the CLI's, when it is docker's and
        has a unix:// or tcp:// endpoint (None: stay on the CLI)."""
        if not self._address:
            address = None
            if "podman" not in Path(self.client.path).name:
                address = self._environ.get("DOCKER_HOST") or self._daemon_address()
                if address and not address.startswith(("unix://", "tcp://")):
                    address = None
            self._address.append(address)
        return self._address[0]

    def _inspect_raw(self, ref: str, action: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        address = self._api_address()
        if address is None:
            raw = json.loads(self._call(["image", "inspect", ref], action).stdout)[0]
            args = ["history", "--no-trunc", "--human=false", "--format", "{{json .}}"]
            lines = self._call([*args, str(raw["Id"])], action).stdout.splitlines()
            return raw, [json.loads(line) for line in lines if line.strip()]
        from fdl.engine import _api

        try:
            raw = _api.inspect(address, ref)
            return raw, _api.history(address, str(raw["Id"]))
        except _api.NoSuchImage:
            raise EnvironmentProblem(
                f"{action} failed: no such image {ref}",
                hint="build it first, or check the name (`docker image ls`)",
            ) from None

    def inspect_image(self, ref: str) -> ImageInfo:
        """The image's configuration, labels, size and layers (oldest first)."""
        action = f"inspecting image {ref}"
        raw, entries = self._inspect_raw(ref, action)
        config: dict[str, Any] = raw.get("Config") or {}
        env = dict(
            item.split("=", 1) if "=" in item else (item, "") for item in config.get("Env") or []
        )
        return ImageInfo(
            id=str(raw["Id"]),
            tags=tuple(raw.get("RepoTags") or ()),
            size=int(raw.get("Size") or 0),
            labels=dict(config.get("Labels") or {}),
            user=str(config.get("User") or ""),
            env=env,
            entrypoint=tuple(config.get("Entrypoint") or ()),
            cmd=tuple(config.get("Cmd") or ()),
            workdir=str(config.get("WorkingDir") or ""),
            architecture=str(raw.get("Architecture") or ""),
            os=str(raw.get("Os") or ""),
            created=str(raw.get("Created") or ""),
            layers=_layers(entries),
            repo_digests=tuple(raw.get("RepoDigests") or ()),
        )

    def list_images(self, reference: str) -> list[str]:
        """Names (``repo:tag``) of the local images matching ``reference``."""
        args = ["image", "ls", "--filter", f"reference={reference}", "--format"]
        done = self._call([*args, "{{.Repository}}:{{.Tag}}"], f"listing images {reference}")
        return sorted({line.strip() for line in done.stdout.splitlines() if line.strip()})

    def remove_image(self, ref: str, *, force: bool = False) -> bool:
        """Remove ``ref`` (its tag, and the image when no tag is left); False if absent."""
        argv = self._docker("image", "rm", *(["--force"] if force else []), ref)
        return self._found(
            argv, f"removing image {ref}", hint="stop the containers using it, or use force"
        )

    def tag(self, source: str, target: str) -> None:
        """Give ``source`` the name ``target``."""
        self._call(["tag", source, target], f"tagging {source} as {target}")

    def push(self, ref: str, *, on_line: LineCallback | None = None) -> None:
        """Push ``ref`` to its registry."""
        try:
            self._runner.stream(self._docker("push", ref), env=self._env(), on_line=on_line)
        except CommandFailed as exc:
            raise translate_failure(
                exc, f"pushing {ref}", hint="log in first (`docker login <registry>`)"
            ) from None

    def save(self, ref: str, dest: Path) -> Path:
        """``docker save -o dest ref`` (streamed from the Engine API where it serves)."""
        address = self._api_address()
        if address is None:
            self._call(["save", "-o", str(dest), ref], f"saving {ref}")
            return dest
        from fdl.engine import _api

        try:
            return _api.save(address, ref, dest)
        except _api.NoSuchImage:
            dest.unlink(missing_ok=True)
            raise EnvironmentProblem(
                f"saving {ref} failed: no such image {ref}",
                hint="build it first, or check the name (`docker image ls`)",
            ) from None

    def registry_credentials(self, host: str) -> tuple[str, str] | None:
        """What ``docker login host`` stored (the docker config or its credential helper)."""
        return registry_credentials(host, self._environ, self._runner)

    def disk_usage(self, image: str) -> DiskUsage:
        """Size, shared size (layers other images use too) and unique size of ``image``."""
        info = self.inspect_image(image)
        from fdl.engine._api import image_sizes

        size, shared = image_sizes(info.id, self._api_address(), self._environ)
        return DiskUsage(info.id, size, shared, max(size - shared, 0), info.layers)

    def _daemon_address(self) -> str | None:
        """The daemon address the CLI uses (its context), for the Engine API call."""
        if self._environ.get("DOCKER_HOST"):
            return None  # image_sizes reads DOCKER_HOST itself
        argv = self._docker("context", "inspect", "--format", "{{.Endpoints.docker.Host}}")
        done = self._runner.run(argv, check=False, env=self._env())
        host = done.stdout.strip()
        return host if done.ok and host.startswith(("unix://", "tcp://")) else None

    # -- containers ---------------------------------------------------------

    def run(self, spec: RunSpec, *, on_line: LineCallback | None = None) -> RunResult:
        """Run a container. With ``on_line`` the output (both streams) is streamed
        and kept in ``stdout``; without it stdout and stderr are captured apart;
        with ``interactive``/``tty`` the terminal is attached and nothing is captured.

        Raises:
            EnvironmentProblem, CommandFailed: docker itself failed (exit 125:
                no such image, GPUs requested but unavailable, ...).
        """
        argv = run_command(self.client, spec)
        env = self._env()
        if spec.interactive or spec.tty:
            code = self._runner.interactive(argv, env=env)
            result = RunResult(code)
        elif on_line is not None:
            lines: list[str] = []

            def keep(line: str) -> None:
                lines.append(line)
                on_line(line)

            done = self._runner.stream(argv, env=env, on_line=keep, check=False)
            result = RunResult(done.returncode, "\n".join(lines))
        else:
            done = self._runner.run(argv, env=env, check=False)
            result = RunResult(done.returncode, done.stdout, done.stderr)
        if result.exit_code == DOCKER_ERROR:
            tail = "\n".join((result.stderr or result.stdout).splitlines()[-40:])
            failed = CommandFailed(argv, result.exit_code, output_tail=tail)
            raise translate_failure(failed, f"running {spec.image}")
        return result

    def copy_out(self, image: str, path_in_image: str, host_dir: Path) -> Path:
        """Copy ``path_in_image`` out of ``image`` into ``host_dir`` (created).

        A directory's contents land in ``host_dir``; a file lands as
        ``host_dir/<name>``. The temporary container is removed even on failure.
        """
        host_dir.mkdir(parents=True, exist_ok=True)
        action = f"copying {path_in_image} out of {image}"
        # A command is given because images without CMD cannot be created otherwise;
        # the container never starts.
        container = self._call(["create", image, "fdl-copy-out"], action).stdout.strip()
        try:
            source = path_in_image.rstrip("/") or ""
            argv = self._docker("cp", f"{container}:{source}/.", str(host_dir))
            done = self._runner.run(argv, check=False, env=self._env())
            if not done.ok and "not a directory" in done.stderr:
                argv = self._docker("cp", f"{container}:{path_in_image}", str(host_dir))
                done = self._runner.run(argv, check=False, env=self._env())
            if not done.ok:
                if any(word in done.stderr.lower() for word in _MISSING_PATH):
                    raise EnvironmentProblem(
                        f"{action} failed: {path_in_image} does not exist in the image",
                        hint=f"look inside: docker run --rm {image} ls -la {Path(path_in_image).parent}",
                    )
                failed = CommandFailed(argv, done.returncode, output_tail=done.stderr)
                raise translate_failure(failed, action)
        finally:
            self._runner.run(self._docker("rm", "--force", container), check=False, env=self._env())
        return host_dir

    # -- compose ------------------------------------------------------------

    def compose(self) -> ComposeCommand:
        """How to run docker compose with the chosen client (see :func:`find_compose`);
        asked once per engine (``docker-compose version`` alone takes about 0.4 s)."""
        selection = self.describe()
        if self._compose is None:
            self._compose = find_compose(selection, self._runner, self._environ)
            self._keep()
        return self._compose

    def forget(self) -> None:
        """Drop what this engine learned, here and in fdl's cache: the next use asks anew."""
        if self._remember:
            from fdl.engine._memory import forget

            forget(self._environ)
        self._selection, self._compose, self.remembered = None, None, False


def _layers(entries: list[dict[str, Any]]) -> tuple[Layer, ...]:
    """History entries (newest first, as docker lists them) -> layers, oldest first."""
    layers = [
        Layer(
            created_by=str(entry.get("CreatedBy") or ""),
            size=_int(entry.get("Size")),
            created=str(entry.get("CreatedAt") or ""),
            comment=str(entry.get("Comment") or ""),
        )
        for entry in entries
    ]
    return tuple(reversed(layers))


def _int(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0
