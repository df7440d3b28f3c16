"""The GitHub Actions workflow of the matrix.

Jobs: ``generated`` (``fdl ci check``: the checked-in files match the manifest), one
cached ``libtorch-<recipe>`` job per source-built variant, and one ``images-<variant>``
job per variant that installs the variant, builds its bake group (the libtorch image,
then its cells), runs each image once, and pushes on the push branch only.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from fdl._grammar import quoted
from fdl.ci._data import ci_data
from fdl.ci._matrix import Matrix, MatrixVariant, bake_path
from fdl.ci._text import comment_lines, header, render_template, yaml_scalar

__all__ = ["render_workflow"]

_SAME_REPO = (
    "github.event_name != 'pull_request' || "
    "github.event.pull_request.head.repo.full_name == github.repository"
)
_MISSED = "steps.cache.outputs.cache-hit != 'true'"


@dataclass
class _Step:
    name: str
    uses: str | None = None
    run: list[str] = field(default_factory=list)
    id: str | None = None
    if_: str | None = None
    with_: list[tuple[str, str]] = field(default_factory=list)
    env: list[tuple[str, str]] = field(default_factory=list)

    def quoted(self) -> _Step:
        """The step with every scalar ready for the template."""
        run = [yaml_scalar(self.run[0])] if len(self.run) == 1 else list(self.run)
        return _Step(
            name=yaml_scalar(self.name),
            uses=self.uses,
            run=run,
            id=self.id,
            if_=yaml_scalar(self.if_) if self.if_ else None,
            with_=[(key, yaml_scalar(value)) for key, value in self.with_],
            env=[(key, yaml_scalar(value)) for key, value in self.env],
        )


@dataclass
class _Job:
    id: str
    name: str
    runs_on: str | tuple[str, ...]
    steps: list[_Step]
    needs: list[str] = field(default_factory=list)
    timeout: int | None = None


def render_workflow(matrix: Matrix) -> str:
    """The workflow file of the matrix."""
    config = matrix.config
    jobs = [_generated_job(matrix)]
    jobs += [_source_job(matrix, v) for v in matrix.variants if v.source_build]
    jobs += [_images_job(matrix, v) for v in matrix.variants if matrix.cells_of(v)]
    branch = config.branch
    after = (
        ", after the cached source builds" if any(v.source_build for v in matrix.variants) else ""
    )
    intro = (
        f"fdl {matrix.fdl_version}: builds the image matrix of {config.project} with BuildKit "
        f"({bake_path(matrix)}), one job per libtorch variant{after}. Every image is tested "
        f"after its build; images and caches are pushed by pushes to {branch} only."
    )
    if config.registry is None:
        intro = (
            intro.split("; images and caches", maxsplit=1)[0]
            + "; nothing is pushed (no ci.registry)."
        )
    return render_template(
        "workflow.yml.j2",
        header=header(config),
        intro=comment_lines(intro),
        branch_quoted=yaml_scalar(branch),
        name=yaml_scalar(f"{config.project} images"),
        push=config.registry is not None,
        push_expression=yaml_scalar(
            # a GitHub expression's string literal: a quote in it is doubled
            f"${{{{ github.event_name == 'push' && github.ref == 'refs/heads/"
            f"{branch.replace(chr(39), chr(39) * 2)}' }}}}"
        ),
        concurrency=yaml_scalar("fdl-images-${{ github.ref }}"),
        working_directory=(
            yaml_scalar(config.working_directory) if config.working_directory != "." else None
        ),
        jobs=[
            {
                "id": job.id,
                "name": yaml_scalar(job.name),
                "needs": job.needs,
                "runs_on": _runs_on(job.runs_on),
                "timeout": job.timeout,
                "steps": [step.quoted() for step in job.steps],
            }
            for job in jobs
        ],
    )


def _runs_on(runner: str | tuple[str, ...]) -> str:
    if isinstance(runner, tuple):
        return "[" + ", ".join(yaml_scalar(label) for label in runner) + "]"
    return yaml_scalar(runner)


def _hosted(runner: str | tuple[str, ...]) -> bool:
    return isinstance(runner, str) and runner in ci_data().hosted_runners


def _setup_fdl(matrix: Matrix, condition: str | None = None) -> list[_Step]:
    actions = ci_data().actions
    return [
        _Step(
            "Set up Python",
            uses=actions["setup_python"],
            if_=condition,
            with_=[("python-version", matrix.config.python)],
        ),
        _Step(
            "Install fdl",
            if_=condition,
            run=matrix.config.fdl.run(),
        ),
    ]


def _checkout() -> _Step:
    return _Step("Check out", uses=ci_data().actions["checkout"])


def _free_disk(condition: str | None = None) -> _Step:
    paths = " ".join(ci_data().hosted_cleanup)
    return _Step(
        "Free disk space (hosted runner)",
        if_=condition,
        run=["df -h /", f"sudo rm -rf {paths}", "docker image prune --all --force", "df -h /"],
    )


def _generated_job(matrix: Matrix) -> _Job:
    check = matrix.config.command.replace(" generate", " check")
    steps = [_checkout(), *_setup_fdl(matrix), _Step("Generated files match fdl.yml", run=[check])]
    return _Job("generated", "generated files are current", matrix.config.runner, steps)


def _cached_path(matrix: Matrix, variant: MatrixVariant) -> str:
    """The variant's directory for actions/cache (relative to the workspace)."""
    return posixpath.normpath(posixpath.join(matrix.config.working_directory, variant.context))


def _source_job(matrix: Matrix, variant: MatrixVariant) -> _Job:
    assert variant.cache_key is not None
    runner = matrix.config.build_runner
    steps = [
        _checkout(),
        _Step(
            "Look up the cached build",
            id="cache",
            uses=ci_data().actions["cache"],
            with_=[
                ("path", _cached_path(matrix, variant)),
                ("key", variant.cache_key),
                ("lookup-only", "true"),
            ],
        ),
    ]
    if _hosted(runner):
        steps.append(_free_disk(_MISSED))
    steps += _setup_fdl(matrix, _MISSED)
    steps.append(
        _Step(
            f"Build libtorch {variant.slug} from source", if_=_MISSED, run=[_join(variant.install)]
        )
    )
    return _Job(
        f"libtorch-{variant.slug}",
        f"libtorch {variant.slug} (source build, cached)",
        runner,
        steps,
        needs=["generated"],
        timeout=ci_data().timeouts[
            "source_build" if _hosted(runner) else "source_build_self_hosted"
        ],
    )


def _join(argv: tuple[str, ...]) -> str:
    return " ".join(_word(word) for word in argv)


def _install_variant(matrix: Matrix, variant: MatrixVariant) -> list[_Step]:
    if not variant.source_build:
        return [_Step(f"Install libtorch {variant.slug}", run=[_join(variant.install)])]
    assert variant.cache_key is not None
    return [
        _Step(
            f"Restore libtorch {variant.slug}",
            uses=ci_data().actions["cache_restore"],
            with_=[
                ("path", _cached_path(matrix, variant)),
                ("key", variant.cache_key),
                ("fail-on-cache-miss", "true"),
            ],
        )
    ]


def _host(reference: str) -> str:
    """The registry host of an image reference or ``host/namespace``."""
    host = reference.split("/", 1)[0]
    return host if "." in host or ":" in host or host == "localhost" else "docker.io"


def _registry_steps(matrix: Matrix, variant: MatrixVariant) -> list[_Step]:
    config = matrix.config
    actions = ci_data().actions
    steps = []
    # Where images go, and where a pushed variant is pulled from (a private team registry).
    hosts = [_host(config.registry)] if config.registry is not None else []
    if variant.pushed is not None:
        hosts.append(_host(variant.pushed))
    for host in dict.fromkeys(hosts):
        username, password = ci_data().login(host)
        steps.append(
            _Step(
                f"Log in to {host}",
                uses=actions["login"],
                if_=_SAME_REPO,
                with_=[("registry", host), ("username", username), ("password", password)],
            )
        )
    if config.cache_gha:
        steps.append(_Step("Expose the GitHub cache to BuildKit", uses=actions["runtime"]))
    return steps


def _images_job(matrix: Matrix, variant: MatrixVariant) -> _Job:
    config = matrix.config
    cells = matrix.cells_of(variant)
    runner = config.runner
    steps = [_checkout()]
    if variant.cuda and _hosted(runner):
        steps.append(_free_disk())
    # A source build comes from the cache, a pushed variant from its registry (copied by
    # the libtorch image's Dockerfile): neither needs fdl on the runner.
    if variant.pushed is None:
        if not variant.source_build:
            steps += _setup_fdl(matrix)
        steps += _install_variant(matrix, variant)
    steps.append(_Step("Set up buildx", uses=ci_data().actions["setup_buildx"]))
    steps += _registry_steps(matrix, variant)
    first = "the libtorch image, then " if any(cell.needs for cell in cells) else ""
    if first and variant.pushed is not None:
        first = "the libtorch image (copied from the pushed variant), then "
    build = _Step(
        f"Build {first}{', '.join(cell.id for cell in cells)}",
        run=[f"docker buildx bake --file {bake_path(matrix)} --progress plain {variant.slug}"],
    )
    if config.registry is not None and any(cell.cache_to for cell in cells):
        build.env.append(("CACHE_EXPORT", "${{ env.FDL_PUSH == 'true' && '1' || '' }}"))
    # Build secrets read from the environment come from repository secrets of that name.
    for name in sorted({name for cell in cells for name in cell.secret_env}):
        build.env.append((name, f"${{{{ secrets.{name} }}}}"))
    steps.append(build)
    for cell in cells:
        if cell.test is not None:
            run = _join(("docker", "run", "--rm", cell.tag, *cell.test))
            steps.append(_Step(f"Test {cell.id}", run=[run]))
    if config.registry is not None:
        steps.append(
            _Step(
                "Push",
                if_="env.FDL_PUSH == 'true'",
                run=[f"docker push {_word(cell.tag)}" for cell in cells],
            )
        )
    needs = ["generated"] + ([f"libtorch-{variant.slug}"] if variant.source_build else [])
    return _Job(
        f"images-{variant.slug}",
        f"images {variant.slug} ({', '.join(cell.profile for cell in cells)})",
        runner,
        steps,
        needs=needs,
        timeout=ci_data().timeouts["images"],
    )


def _word(word: str) -> str:
    return quoted("shell", word, what="a word", source="the workflow")
