"""Reading which build steps came from the cache, from real progress output."""

from __future__ import annotations

from fdl.engine import BuildStep
from fdl.engine._progress import BuildProgress

# docker 20.10, DOCKER_BUILDKIT=1 --progress=plain (trimmed)
BUILDKIT_20 = """\
#1 [internal] load build definition from Dockerfile
#1 sha256:1b0e
#1 transferring dockerfile: 32B done
#1 DONE 0.0s

#3 [internal] load metadata for docker.io/fdl-test/debian:bookworm
#3 DONE 0.0s

#4 [stage-0 1/4] FROM docker.io/fdl-test/debian:bookworm
#4 DONE 0.0s

#5 [stage-0 2/4] RUN --mount=type=cache,target=/c echo hi > /x
#5 sha256:672f
#5 CACHED

#6 [internal] load build context
#6 transferring context: 61B done
#6 DONE 0.0s

#7 [stage-0 3/4] COPY f.txt /app/f.txt
#7 DONE 0.1s

#8 [stage-0 4/4] RUN --mount=type=secret,id=s wc -c /run/secrets/s
#8 0.341 10 /run/secrets/s
#8 DONE 0.4s

#9 exporting to image
#9 writing image sha256:2bf9 done
#9 DONE 0.0s
"""

# docker buildx 0.12 (docker driver), --progress=plain (trimmed)
BUILDX = """\
#0 building with "default" instance using docker driver

#1 [internal] load build definition from Dockerfile
#1 DONE 0.0s

#4 [builder 1/2] FROM docker.io/library/debian:bookworm
#4 DONE 0.0s

#5 [builder 2/2] RUN make -j2
#5 CACHED

#6 [runtime 2/2] COPY --from=builder /out /opt/out
#6 DONE 0.2s
"""

# the classic builder
CLASSIC = """\
Sending build context to Docker daemon  3.072kB
Step 1/4 : FROM fdl-test/debian:bookworm
 ---> c72961ddc501
Step 2/4 : RUN echo hi > /x
 ---> Using cache
 ---> 1234abcd
Step 3/4 : COPY f.txt /f
 ---> 5678ef01
Step 4/4 : LABEL a=b
 ---> Running in 8231aa2d361e
Removing intermediate container 8231aa2d361e
 ---> 09715282113b
Successfully built 09715282113b
"""


def steps(output: str) -> list[BuildStep]:
    progress = BuildProgress()
    for line in output.splitlines():
        progress.feed(line)
    return progress.steps


def test_builtin_buildkit_output() -> None:
    assert steps(BUILDKIT_20) == [
        BuildStep("RUN --mount=type=cache,target=/c echo hi > /x", True, "stage-0 2/4"),
        BuildStep("COPY f.txt /app/f.txt", False, "stage-0 3/4"),
        BuildStep("RUN --mount=type=secret,id=s wc -c /run/secrets/s", False, "stage-0 4/4"),
    ]


def test_buildx_output_with_stages() -> None:
    assert steps(BUILDX) == [
        BuildStep("RUN make -j2", True, "builder 2/2"),
        BuildStep("COPY --from=builder /out /opt/out", False, "runtime 2/2"),
    ]


def test_classic_output() -> None:
    assert steps(CLASSIC) == [
        BuildStep("RUN echo hi > /x", True),
        BuildStep("COPY f.txt /f", False),
        BuildStep("LABEL a=b", False),
    ]


def test_output_of_a_step_that_looks_like_a_header_does_not_add_a_step() -> None:
    output = "#5 [stage-0 2/2] RUN echo '#5 [x] y'\n#5 0.2 #5 [x] y\n#5 DONE 0.2s\n"
    assert [s.name for s in steps(output)] == ["RUN echo '#5 [x] y'"]
