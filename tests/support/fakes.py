"""Test doubles of fdl's seams: a runner and a container engine that record what they are
asked and answer from tables. They live with the tests, not in the product;
tests/unit/test_fakes.py keeps their method signatures equal to the real ones."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from fdl.engine._argv import buildkit_reasons
from fdl.engine._client import needs_buildkit_error
from fdl.engine._types import (
    Builder,
    BuildResult,
    BuildSpec,
    BuildStep,
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
from fdl.errors import CommandFailed, FdlError
from fdl.runner import TAIL_LINES, Completed, Measured, missing_program
from fdl.runner import LineCallback as RunnerLineCallback


def _image(ref: str, **fields: object) -> ImageInfo:
    digest = hashlib.sha256(ref.encode()).hexdigest()
    base = ImageInfo(
        id=f"sha256:{digest}",
        tags=(ref,),
        size=0,
        labels={},
        user="",
        env={},
        entrypoint=(),
        cmd=(),
        workdir="",
        architecture="amd64",
        os="linux",
        created="",
    )
    return replace(base, **fields)  # type: ignore[arg-type]


@dataclass
class FakeEngine:
    """A stand-in for :class:`DockerEngine`.

    Example::

        engine = FakeEngine(builder=Builder.CLASSIC)
        engine.add_image("fdl-test/debian:bookworm", size=199_000_000)
        result = engine.build(BuildSpec(tmp_path, dockerfile_text="FROM x\\n", tags=("a:1",)))
        assert engine.builds[0].tags == ("a:1",)
        assert engine.inspect_image("a:1").id == result.image_id

    Attributes:
        builder: What the pretend client builds with; CLASSIC refuses BuildKit
            builds with the same error as the real engine.
        build_lines: Progress lines each build passes to ``on_line``.
        build_error: Raised by the next builds instead of building.
        run_result: The result of every run, or a function of the run spec.
        files: What ``copy_out`` writes: ``{(image, path): {relative name: text}}``.
    """

    builder: Builder = Builder.BUILDKIT
    images: dict[str, ImageInfo] = field(default_factory=dict)
    build_lines: list[str] = field(default_factory=list)
    build_error: FdlError | None = None
    run_result: RunResult | Callable[[RunSpec], RunResult] = field(
        default_factory=lambda: RunResult(0)
    )
    files: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    compose_command: ComposeCommand = field(
        default_factory=lambda: ComposeCommand(("docker", "compose"), "2.0.0", "plugin")
    )
    builds: list[BuildSpec] = field(default_factory=list)
    runs: list[RunSpec] = field(default_factory=list)
    pushed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    copies: list[tuple[str, str, Path]] = field(default_factory=list)
    credentials: dict[str, tuple[str, str]] = field(default_factory=dict)

    def add_image(self, ref: str, **fields: object) -> ImageInfo:
        """Put an image into the pretend store (fields as in :class:`ImageInfo`)."""
        info = _image(ref, **fields)
        self.images[ref] = info
        return info

    def describe(self) -> ClientSelection:
        client = DockerClient("/usr/bin/docker", "20.10.24", self.builder, None, "20.10.24")
        return ClientSelection(client, (client,), "PATH")

    def build(
        self, spec: BuildSpec, *, on_line: LineCallback | None = None, log_file: Path | None = None
    ) -> BuildResult:
        self.builds.append(spec)
        if self.build_error is not None:
            raise self.build_error
        text = spec.dockerfile_text
        if text is None:
            path = spec.dockerfile or spec.context / "Dockerfile"
            text = path.read_text(encoding="utf-8") if path.is_file() else ""
        reasons = buildkit_reasons(spec, text)
        if reasons and not self.builder.has_buildkit:
            raise needs_buildkit_error(self.describe(), ", ".join(reasons))
        for line in self.build_lines:
            if on_line is not None:
                on_line(line)
        key = f"{len(self.builds)}:{spec!r}"
        image_id = "sha256:" + hashlib.sha256(key.encode()).hexdigest()
        layers = tuple(Layer(line.strip(), 0) for line in text.splitlines() if line.strip())
        labels = {**_dockerfile_labels(text), **dict(spec.labels)}
        for tag in spec.tags:
            self.images[tag] = _image(
                tag, id=image_id, tags=spec.tags, labels=labels, layers=layers
            )
        steps = tuple(BuildStep(layer.created_by, False) for layer in layers)
        return BuildResult(image_id, spec.tags, self.builder, steps)

    def _find(self, ref: str) -> ImageInfo | None:
        if ref in self.images:
            return self.images[ref]
        return next((info for info in self.images.values() if info.id == ref), None)

    def image_exists(self, ref: str) -> bool:
        return self._find(ref) is not None

    def inspect_image(self, ref: str) -> ImageInfo:
        info = self._find(ref)
        if info is None:
            raise CommandFailed(
                ["docker", "image", "inspect", ref],
                1,
                message=f"inspecting image {ref} failed: no such image",
                hint="build it first, or check the name (`docker image ls`)",
            )
        return info

    def list_images(self, reference: str) -> list[str]:
        import fnmatch

        return sorted(ref for ref in self.images if fnmatch.fnmatch(ref, reference))

    def remove_image(self, ref: str, *, force: bool = False) -> bool:
        self.removed.append(ref)
        return self.images.pop(ref, None) is not None

    def tag(self, source: str, target: str) -> None:
        info = self.inspect_image(source)
        self.images[target] = replace(info, tags=(*info.tags, target))

    def push(self, ref: str, *, on_line: LineCallback | None = None) -> None:
        info = self.inspect_image(ref)
        self.pushed.append(ref)
        # A registry names the pushed content by digest, as docker then reports it.
        repository = ref.rsplit(":", 1)[0] if ":" in ref.rsplit("/", 1)[-1] else ref
        digest = "sha256:" + hashlib.sha256(info.id.encode()).hexdigest()
        self.images[ref] = replace(
            info, repo_digests=(*info.repo_digests, f"{repository}@{digest}")
        )

    def save(self, ref: str, dest: Path) -> Path:
        """A ``docker save`` archive of the pretend image: one layer holding ``/image``
        (its reference), and a config whose diff_ids name that layer."""
        import io
        import json
        import tarfile

        self.inspect_image(ref)
        layer = io.BytesIO()
        with tarfile.open(fileobj=layer, mode="w", format=tarfile.PAX_FORMAT) as tar:
            data = ref.encode()
            member = tarfile.TarInfo("image")
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
        layer_bytes = layer.getvalue()
        diff_id = "sha256:" + hashlib.sha256(layer_bytes).hexdigest()
        config = json.dumps(
            {"architecture": "amd64", "os": "linux", "config": {},
             "rootfs": {"type": "layers", "diff_ids": [diff_id]}}
        ).encode()  # fmt: skip
        config_name = hashlib.sha256(config).hexdigest() + ".json"
        manifest = json.dumps(
            [{"Config": config_name, "RepoTags": [ref], "Layers": ["l1/layer.tar"]}]
        ).encode()
        with tarfile.open(dest, "w") as archive:
            for name, body in (
                (config_name, config), ("l1/layer.tar", layer_bytes), ("manifest.json", manifest)
            ):  # fmt: skip
                member = tarfile.TarInfo(name)
                member.size = len(body)
                archive.addfile(member, io.BytesIO(body))
        return dest

    def registry_credentials(self, host: str) -> tuple[str, str] | None:
        return self.credentials.get(host)

    def run(self, spec: RunSpec, *, on_line: LineCallback | None = None) -> RunResult:
        self.runs.append(spec)
        result = self.run_result(spec) if callable(self.run_result) else self.run_result
        if on_line is not None:
            for line in (result.stdout + result.stderr).splitlines():
                on_line(line)
        return result

    def copy_out(self, image: str, path_in_image: str, host_dir: Path) -> Path:
        self.copies.append((image, path_in_image, host_dir))
        host_dir.mkdir(parents=True, exist_ok=True)
        for name, text in self.files.get((image, path_in_image), {}).items():
            target = host_dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        return host_dir

    def disk_usage(self, image: str) -> DiskUsage:
        info = self.inspect_image(image)
        return DiskUsage(info.id, info.size, 0, info.size, info.layers)

    def compose(self) -> ComposeCommand:
        return self.compose_command


def _dockerfile_labels(text: str) -> dict[str, str]:
    """The ``LABEL`` pairs of the last stage, as docker would give the image."""
    import shlex

    joined = text.replace("\\\n", " ")
    last = joined.rsplit("\nFROM ", 1)[-1]
    labels: dict[str, str] = {}
    for line in last.splitlines():
        if line.strip().startswith("LABEL "):
            for word in shlex.split(line.strip()[len("LABEL ") :]):
                name, _, value = word.partition("=")
                labels[name] = value
    return labels


Responder = Callable[[list[str]], Completed]


@dataclass
class FakeRunner:
    """A runner for tests: answers from ``responses`` by argv prefix, records calls.

    Example::

        runner = FakeRunner({("nvcc", "--version"): Completed([], 0, "release 13.0")})
    """

    responses: dict[tuple[str, ...], Completed | Responder] = field(default_factory=dict)
    programs: dict[str, str] = field(default_factory=dict)
    calls: list[list[str]] = field(default_factory=list)
    default: Completed | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _answer(self, args: list[str]) -> Completed:
        with self._lock:
            self.calls.append(args)
        best: tuple[str, ...] | None = None
        for prefix in self.responses:
            if tuple(args[: len(prefix)]) == prefix and (best is None or len(prefix) > len(best)):
                best = prefix
        if best is None:
            if self.default is not None:
                return Completed(
                    args, self.default.returncode, self.default.stdout, self.default.stderr
                )
            raise (
                missing_program(args[0])
                if args and args[0] not in self.programs
                else AssertionError(f"FakeRunner: no response for {args}")
            )
        answer = self.responses[best]
        result = answer(args) if callable(answer) else answer
        return Completed(args, result.returncode, result.stdout, result.stderr)

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
        timeout: float | None = None,
        input: str | None = None,
        max_output: int | None = None,
    ) -> Completed:
        args = [str(a) for a in argv]
        result = self._answer(args)
        if max_output is not None and len(result.stdout) + len(result.stderr) > max_output:
            raise CommandFailed(
                args, -1, message=f"`{' '.join(args)}` printed more than {max_output} bytes"
            )
        if check and result.returncode != 0:
            tail = "\n".join((result.stderr or result.stdout).splitlines()[-TAIL_LINES:])
            raise CommandFailed(args, result.returncode, output_tail=tail)
        return result

    def stream(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        log_file: Path | None = None,
        on_line: RunnerLineCallback | None = None,
        check: bool = True,
    ) -> Completed:
        # As the real runner: stderr merged into stdout (a program that prints its stdout
        # first), each line given as it comes and appended to the log, the tail returned.
        answered = self.run(argv, cwd=cwd, env=env, check=False)
        lines = (answered.stdout + answered.stderr).splitlines()
        if log_file is not None:
            log_file.parent.mkdir(parents=True, exist_ok=True)
            with log_file.open("a", encoding="utf-8") as log:
                log.writelines(line + "\n" for line in lines)
        for line in lines:
            if on_line is not None:
                on_line(line)
        result = Completed(answered.argv, answered.returncode, "\n".join(lines[-TAIL_LINES:]))
        if check and result.returncode != 0:
            raise CommandFailed(
                result.argv, result.returncode, output_tail=result.stdout, log_file=log_file
            )
        return result

    def measure(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Measured:
        args = [str(a) for a in argv]
        result = self._answer(args)
        return Measured(args, result.returncode, result.stdout, result.stderr)

    def interactive(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> int:
        return self.run(argv, cwd=cwd, env=env, check=False).returncode

    def which(self, program: str) -> str | None:
        return self.programs.get(program)
