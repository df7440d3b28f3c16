"""Image sizes and build times of the C++ training program (tests/fixtures/cpp-train).

Compares, on the same base image:
  (a)  a naive single-stage image the way the reference CLI builds them: the base,
       its toolchain packages (ubuntu-style list, recommends on), the whole libtorch
       variant and the program (plus (a') the same with a minimal toolchain);
  (b)  fdl's `train` image (and (b') the same without stripping symbol tables);
  (c)  the floor: the base plus the program and the libraries it loads.
Targets: (b) - base within 10% of (c) - base; (b) at most half of (a).
Also the cold build time of (b) (--no-cache: no layer reused; BuildKit's apt and ccache
cache mounts keep what earlier builds left, but the program's source is made new so
ccache cannot hit) and the rebuild time after a change to the program's source.

Run: python bench/image_size.py [--base IMAGE] [--cuda] [--no-cpu] [--keep]
(needs docker with BuildKit and the local torch wheels; about 5 minutes; --cuda about
10 more: it unpacks the 2.14.1 cu130 wheel and the nvidia-* wheels (4.2 GB) and, while
it runs, needs some 25 GB of disk for images and BuildKit's cache, which keeps about
12 GB after the images are removed until its garbage collection runs).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._common import print_table  # noqa: E402
from fdl.engine import BuildSpec, DockerEngine, Engine  # noqa: E402
from fdl.images import ImageSpec, keyed_image, plan_images  # noqa: E402
from fdl.images._build import build_images  # noqa: E402
from fdl.images._size import SizeReport, size_report  # noqa: E402
from fdl.manifest import load_manifest  # noqa: E402
from fdl.runner import SubprocessRunner  # noqa: E402
from tests.support.images import cpu_variant_from_wheel, link_variant, make_project  # noqa: E402

RUN = uuid.uuid4().hex[:8]
# The reference's scaffolded Dockerfile installs this list (plus rustup, which a C++
# project does not need; cmake added for the same reason) without --no-install-recommends.
REFERENCE_PACKAGES = "wget curl unzip ca-certificates git gcc g++ pkg-config graphviz cmake"
NAIVE = """\
ARG BASE_IMAGE
ARG LIBTORCH_IMAGE
FROM ${{LIBTORCH_IMAGE}} AS libtorch
FROM ${{BASE_IMAGE}}
ARG TORCH_CUDA_ARCH_LIST=""
RUN apt-get update && apt-get install -y {install} && rm -rf /var/lib/apt/lists/*
COPY --from=libtorch /opt/libtorch /opt/libtorch
ENV CMAKE_PREFIX_PATH=/opt/libtorch LD_LIBRARY_PATH=/opt/libtorch/lib
WORKDIR /workspace
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build --parallel
ENTRYPOINT ["/workspace/build/train"]
"""


def mib(count: float) -> str:
    return f"{count / 2**20:,.1f} MiB"


def manifest(base: str, build_base: str | None = None) -> str:
    extra = f"    build-base: {build_base}\n" if build_base else ""
    return f"""\
images:
  train:
    base: {base}
{extra}    tag: fdl-bench-{RUN}-train:latest
  train-nostrip:
    kind: train
    base: {base}
{extra}    strip: false
    tag: fdl-bench-{RUN}-nostrip:latest
"""


def touch_source(project: Path, label: str) -> None:
    """Change what main.cpp compiles to (a new string constant: ccache cannot hit)."""
    source = project / "src" / "main.cpp"
    text = source.read_text(encoding="utf-8")
    marker = "// bench-id:"
    text = text.split(marker)[0] + f'{marker}\nconst char* bench_id = "{label}-{uuid.uuid4()}";\n'
    source.write_text(text, encoding="utf-8")


def timed_build(
    engine: Engine, spec: ImageSpec, project: Path, made: list[str], *, no_cache: bool = False
) -> tuple[float, int, int]:
    started = time.monotonic()
    (built,) = build_images([spec], project, engine=engine, no_cache=no_cache)
    made.append(built.result.image_id)  # a rebuild under the same tag leaves it untagged
    steps = built.result.steps
    return time.monotonic() - started, len(steps), len(built.result.cached_steps)


def naive_image(
    engine: Engine, project: Path, base: str, spec: ImageSpec, install: str, tag: str
) -> float:
    """Build the naive image; (with CUDA) the same arch list as fdl's build stage, for
    CMake cannot detect a GPU while an image builds."""
    assert spec.variant is not None
    started = time.monotonic()
    engine.build(
        BuildSpec(
            context=project,
            dockerfile_text=NAIVE.format(install=install),
            tags=(tag,),
            build_args={
                "BASE_IMAGE": base,
                "LIBTORCH_IMAGE": spec.variant.image,
                **dict(spec.build_env),
            },
            no_cache=True,
        )
    )
    return time.monotonic() - started


def run(
    base: str, build_base: str | None, variant: Path, keep: bool, label: str, *, extras: bool
) -> None:
    """Measure one variant; ``extras`` adds (a') and (b') (skipped for CUDA: each copy
    of a CUDA closure holds about 4 GB of the build cache)."""
    engine = DockerEngine(SubprocessRunner())
    made: list[str] = []
    libtorch: list[str] = []  # the variant's images: the naive builds read them too
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="fdl-bench-") as scratch:
        project = make_project(Path(scratch), manifest(base, build_base))
        link_variant(variant, project, f"precompiled/{variant.name}")
        specs = {spec.profile: spec for spec in plan_images(load_manifest(project))}
        train, nostrip = specs["train"], specs["train-nostrip"]
        assert train.variant is not None
        try:
            libtorch += [train.variant.image, keyed_image(train.variant)]
            made += [train.tag, nostrip.tag]
            touch_source(project, "cold")
            cold = timed_build(engine, train, project, made, no_cache=True)
            touch_source(project, "rebuild")
            rebuilt = timed_build(engine, train, project, made)
            b = size_report(train, engine=engine)
            b2 = None
            if extras:
                timed_build(engine, nostrip, project, made)
                b2 = size_report(nostrip, engine=engine)
            _remove(engine, made, keep)
            naive_tag = f"fdl-bench-{RUN}-naive:latest"
            made.append(naive_tag)
            naive_seconds = naive_image(
                engine, project, build_base or base, train, REFERENCE_PACKAGES, naive_tag
            )
            sizes["a"] = engine.inspect_image(naive_tag).size
            if extras:
                minimal_tag = f"fdl-bench-{RUN}-naive-minimal:latest"
                made.append(minimal_tag)
                minimal = "--no-install-recommends cmake g++ make"
                naive_image(engine, project, build_base or base, train, minimal, minimal_tag)
                sizes["a2"] = engine.inspect_image(minimal_tag).size
            report(b, b2, sizes, label)
            print()
            print_table(
                ["build of (b)", "seconds", "steps", "from cache"],
                [
                    ["cold (--no-cache)", f"{cold[0]:.0f}", cold[1], cold[2]],
                    ["after a source change", f"{rebuilt[0]:.0f}", rebuilt[1], rebuilt[2]],
                    ["naive (a), --no-cache", f"{naive_seconds:.0f}", "", ""],
                ],
            )
            print(f"rebuild / cold: {rebuilt[0] / cold[0]:.2f}")
        finally:
            _remove(engine, made, keep)
            _remove(engine, libtorch, keep)


def _remove(engine: Engine, names: list[str], keep: bool) -> None:
    if not keep:
        for name in names:
            engine.remove_image(name, force=True)
        names.clear()


def report(b: SizeReport, b2: SizeReport | None, sizes: dict[str, int], label: str) -> None:
    base = b.base_size
    floor = b.floor or 0
    a = sizes["a"]
    rows = [["(a) naive, reference packages", mib(a), mib(a - base), ""]]
    if "a2" in sizes:
        rows.append(
            ["(a') naive, minimal toolchain", mib(sizes["a2"]), mib(sizes["a2"] - base), ""]
        )
    rows.append(["(b) fdl train image", mib(b.size), mib(b.added), f"{b.size / a:.2f} of (a)"])
    if b2 is not None:
        rows.append(
            ["(b') train, strip: false", mib(b2.size), mib(b2.added), f"{b2.size / a:.2f} of (a)"]
        )
    rows.append(["(c) floor: base + program + closure", mib(floor), mib(floor - base), ""])
    if b2 is not None:
        rows.append(
            ["(c') floor without stripping", mib(b2.floor or 0), mib((b2.floor or 0) - base), ""]
        )
    rows.append(["base image", mib(base), "", b.base])
    print(f"== {label}")
    print_table(["image", "size", "above base", "note"], rows)
    above = (b.added / (floor - base) - 1) if floor > base else float("nan")
    print(f"(b) above base vs (c) above base: {above:+.2%} (target: within +10%)")
    line = f"(b) / (a): {b.size / a:.2f} (target: at most 0.50)"
    if "a2" in sizes:
        line += f"; (b) / (a'): {b.size / sizes['a2']:.2f}"
    print(line)
    print("closure of (b):")
    for path, size in sorted(b.closure or (), key=lambda item: -item[1]):
        print(f"  {mib(size):>12}  {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="fdl-test/debian:bookworm")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "fdl-bench")
    parser.add_argument("--cuda", action="store_true", help="also measure the cu130 variant")
    parser.add_argument("--no-cpu", action="store_true", help="skip the CPU variant")
    parser.add_argument("--keep", action="store_true", help="keep the images")
    options = parser.parse_args()
    if not options.no_cpu:
        variant = cpu_variant_from_wheel(options.cache / "variants")
        label = "CPU variant (torch 2.13.0 wheel)"
        run(options.base, None, variant, options.keep, label, extras=True)
    if options.cuda:
        from bench._cuda_variant import cuda_build_base, cuda_variant

        cuda = cuda_variant(options.cache / "variants")
        engine = DockerEngine(SubprocessRunner())
        build_base = cuda_build_base(options.base, engine, cuda, options.cache)
        label = "CUDA variant (torch 2.14.1 cu130 + nvidia-* wheels)"
        try:
            run(options.base, build_base, cuda, options.keep, label, extras=False)
        finally:
            if not options.keep:
                engine.remove_image(build_base, force=True)
    if not options.keep:
        shutil.rmtree(options.cache, ignore_errors=True)  # the unpacked variants


if __name__ == "__main__":
    main()
