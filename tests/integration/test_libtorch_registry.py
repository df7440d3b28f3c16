"""Variants shared through a real registry on 127.0.0.1 (Debian's docker-registry, started
by scripts/setup-registry.sh): one machine pushes, "another machine" (its own FDL_HOME,
cache and project directory, no docker on PATH) pulls the same tree byte for byte; an
interrupted pull resumes; a tampered blob or a lying annotation is refused."""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
import tempfile
import urllib.request
import uuid
from pathlib import Path

import pytest

from fdl.libtorch import VariantInfo, finish_info, variants
from fdl.paths import Context
from tests.support.libtorch_trees import make_tree
from tests.support.registry_proxy import registry_proxy

REGISTRY = os.environ.get("FDL_TEST_REGISTRY", "127.0.0.1:5000")
OCI = "application/vnd.oci.image.manifest.v1+json"


@pytest.fixture(scope="module")
def registry() -> str:
    try:
        urllib.request.urlopen(f"http://{REGISTRY}/v2/", timeout=5).close()
    except OSError as exc:
        pytest.skip(f"no registry answers on {REGISTRY} ({exc}); run scripts/setup-registry.sh")
    return REGISTRY


@pytest.fixture
def repo(registry: str) -> str:
    """A repository of its own for each test (tags never collide between runs)."""
    return f"{registry}/fdl-test/libtorch-{uuid.uuid4().hex[:10]}"


class Machine:
    """One machine: FDL_HOME, cache, work directory, a PATH with only a fake nvidia-smi
    (no docker), an empty docker config (anonymous registry access)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        self.cwd = root / "work"
        self.cwd.mkdir()
        (root / "docker").mkdir()
        self.env = {
            "FDL_HOME": str(root / "home"),
            "FDL_CACHE_DIR": str(root / "cache"),
            "PATH": str(self.bin),
            "DOCKER_CONFIG": str(root / "docker"),
        }

    def context(self) -> Context:
        return Context(self.root / "home", project=False)

    def gpus(self, *caps: str, driver: str = "580.65") -> None:
        lines = "".join(f"{i}, NVIDIA GPU, {c}, 8192, {driver}\\n" for i, c in enumerate(caps))
        script = self.bin / "nvidia-smi"
        script.write_text(f"#!/bin/sh\nprintf '{lines}'\n")
        script.chmod(0o755)

    def build(self, name: str = "builds/sm61-sm120", *, big: int = 0) -> Path:
        """A fake source-built variant (sm_61 + sm_120 cubins, PTX 12.0), as a build leaves it."""
        path = make_tree(
            self.context().libtorch_dir / name,
            "2.10.0+cu129",
            cubins=(61, 120),
            ptx=(120,),
            cuda_needed=(),
        )
        (path / "lib" / "libtorch_cpu.so.1").symlink_to("libtorch_cpu.so")
        if big:
            (path / "lib" / "libnoise.so").write_bytes(os.urandom(big))
        info = VariantInfo(
            name=name,
            torch="2.10.0",
            cuda="12.9",
            cudnn="9.10",
            archs_requested=["sm_61", "sm_120"],
            source={"kind": "build", "recipe": "docker", "commit": "abc123"},
        )
        variants.write_info(path, finish_info(path, info))
        return path


@pytest.fixture
def machines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Machine, Machine]:
    for key in ("FDL_LIBTORCH_MIRROR", "FDL_LIBTORCH_REGISTRY", "FLODL_HOME"):
        monkeypatch.delenv(key, raising=False)
    return Machine(tmp_path / "builder"), Machine(tmp_path / "teammate")


def _fdl(run_fdl, machine: Machine, *args: str):
    return run_fdl(list(args), cwd=machine.cwd, env=machine.env)


def _files(tree: Path) -> dict[str, str]:
    """Relative path -> sha256 (or the link target), without the install metadata."""
    found = {}
    for path in sorted(tree.rglob("*")):
        relative = str(path.relative_to(tree))
        if relative in ("variant.json", ".arch"):
            continue
        if path.is_symlink():
            found[relative] = "-> " + os.readlink(path)
        elif path.is_file():
            found[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            found[relative] = "dir"
    return found


def _push(run_fdl, machine: Machine, repo: str, *extra: str) -> dict:
    result = _fdl(
        run_fdl, machine, "libtorch", "push", "builds/sm61-sm120", "--to", repo, "--json", *extra
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_push_then_pull_on_another_machine_gives_the_same_tree(
    run_fdl, machines, repo: str
) -> None:
    builder, teammate = machines
    tree = builder.build()
    pushed = _push(run_fdl, builder, repo)
    assert pushed["tag"] == "2.10.0-cu129-sm61-sm120-ptx120"
    assert pushed["reference"] == f"{repo}@{pushed['digest']}"
    assert pushed["annotations"]["dev.fdl.libtorch.archs"] == "sm_61 sm_120"
    assert pushed["annotations"]["dev.fdl.libtorch.ptx"] == "compute_120"

    teammate.gpus("6.1", "12.0")
    pulled = _fdl(run_fdl, teammate, "libtorch", "pull", pushed["reference"], "--json")
    assert pulled.exit_code == 0, pulled.output
    data = json.loads(pulled.stdout)
    assert data["variant"] == "builds/sm61-sm120" and data["activated"]  # as it was pushed
    assert data["source"]["registry"]["digest"] == pushed["digest"]
    assert data["source"]["recipe"] == "docker"
    installed = teammate.context().libtorch_dir / data["variant"]
    assert _files(installed) == _files(tree)
    verify = _fdl(run_fdl, teammate, "libtorch", "verify", "--json")
    assert verify.exit_code == 0, verify.output

    again = _fdl(run_fdl, teammate, "libtorch", "pull", pushed["reference"], "--json")
    assert again.exit_code == 0 and json.loads(again.stdout)["installed"] is False
    repeat = _push(run_fdl, builder, repo)
    assert repeat["digest"] == pushed["digest"] and repeat["uploaded"] == 0


def test_gzip_layers_pull_the_same(run_fdl, machines, repo: str) -> None:
    builder, teammate = machines
    tree = builder.build()
    pushed = _push(run_fdl, builder, repo, "--compression", "gzip")
    assert {layer["mediaType"] for layer in pushed["layers"]} == {
        "application/vnd.oci.image.layer.v1.tar+gzip"
    }
    pulled = _fdl(run_fdl, teammate, "libtorch", "pull", f"{repo}:{pushed['tag']}", "--json")
    assert pulled.exit_code == 0, pulled.output
    assert _files(teammate.context().libtorch_dir / json.loads(pulled.stdout)["variant"]) == (
        _files(tree)
    )


def test_an_interrupted_pull_resumes_where_it_stopped(run_fdl, machines, repo: str) -> None:
    builder, teammate = machines
    tree = builder.build(big=3 << 20)  # random bytes: the library layer stays ~3 MiB
    pushed = _push(run_fdl, builder, repo, "--compression", "gzip")
    big = max(pushed["layers"], key=lambda layer: layer["size"])
    with registry_proxy(REGISTRY) as proxy:
        through = f"{proxy.address}/{pushed['reference'].split('/', 1)[1]}"
        proxy.cut_after, proxy.cut_digest = 1 << 20, big["digest"]
        stopped = _fdl(run_fdl, teammate, "libtorch", "pull", through)
        assert stopped.exit_code == 5, stopped.output
        assert "run the same command again" in stopped.stderr
        assert variants.list_variants(teammate.context()) == []
        resumed = _fdl(run_fdl, teammate, "libtorch", "pull", through, "--json")
    assert resumed.exit_code == 0, resumed.output
    data = json.loads(resumed.stdout)
    assert data["resumed_bytes"] >= 1 << 20
    assert data["received_bytes"] < sum(layer["size"] for layer in pushed["layers"])
    assert ("GET", f"/v2/{pushed['reference'].split('/', 1)[1].split('@')[0]}/blobs/"
            f"{big['digest']}", f"bytes={1 << 20}-") in proxy.log  # fmt: skip
    assert _files(teammate.context().libtorch_dir / data["variant"]) == _files(tree)


def test_a_tampered_blob_is_refused(run_fdl, machines, repo: str) -> None:
    builder, teammate = machines
    builder.build(big=4096)
    pushed = _push(run_fdl, builder, repo)
    with registry_proxy(REGISTRY) as proxy:
        proxy.flip = max(pushed["layers"], key=lambda layer: layer["size"])["digest"]
        through = f"{proxy.address}/{pushed['reference'].split('/', 1)[1]}"
        result = _fdl(run_fdl, teammate, "libtorch", "pull", through)
    assert result.exit_code == 5, result.output
    assert f"the blob {proxy.flip}" in result.stderr and "has another sha256" in result.stderr
    assert variants.list_variants(teammate.context()) == []


def _republish(
    repo: str, tag: str, new_tag: str, *, manifest_archs: str, label_archs: str, key: str = "archs"
) -> str:
    """Store the image ``tag`` again as ``new_tag`` with other archs claimed (the layers
    unchanged): in the manifest's annotations and in the config's labels."""
    from fdl.libtorch.sources._registry import ACCEPT, parse_reference
    from fdl.net import RegistryClient

    ref = parse_reference(f"{repo}:{tag}")
    client = RegistryClient(ref.host, ref.repository)
    manifest = json.loads(client.manifest(tag, ACCEPT).body)
    config = json.loads(client.blob_bytes(manifest["config"]["digest"], 1 << 20))
    config["config"]["Labels"][f"dev.fdl.libtorch.{key}"] = label_archs
    body = json.dumps(config).encode()
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    with tempfile.NamedTemporaryFile() as handle:
        handle.write(body)
        handle.flush()
        client.upload_blob(Path(handle.name), digest)
    manifest["config"].update(digest=digest, size=len(body))
    manifest["annotations"][f"dev.fdl.libtorch.{key}"] = manifest_archs
    return client.put_manifest(new_tag, json.dumps(manifest).encode(), OCI)


def test_a_lying_annotation_is_refused(run_fdl, machines, repo: str) -> None:
    builder, teammate = machines
    builder.build()
    pushed = _push(run_fdl, builder, repo)
    lie = "sm_61 sm_90 sm_120"
    _republish(repo, pushed["tag"], "lying", manifest_archs=lie, label_archs=lie)
    result = _fdl(run_fdl, teammate, "libtorch", "pull", f"{repo}:lying")
    assert result.exit_code == 4, result.output
    assert "claims sm_61 sm_90 sm_120 compute_120 but its libraries hold sm_61 sm_120" in (
        result.stderr
    )
    assert variants.list_variants(teammate.context()) == []
    _republish(repo, pushed["tag"], "split", manifest_archs=lie, label_archs="sm_61 sm_120")
    split = _fdl(run_fdl, teammate, "libtorch", "pull", f"{repo}:split")
    assert split.exit_code == 4 and "annotations and the config's labels differ" in split.stderr
    arm = "linux/arm64"
    _republish(repo, pushed["tag"], "arm", manifest_archs=arm, label_archs=arm, key="platform")
    other = _fdl(run_fdl, teammate, "libtorch", "pull", f"{repo}:arm")
    assert other.exit_code == 4 and "claims linux/arm64 but its libraries are linux/amd64" in (
        other.stderr
    )


@pytest.mark.docker
def test_a_pushed_variant_is_an_image_docker_pulls_and_copies_from(
    run_fdl, machines, repo: str, base_image: str, tmp_path: Path
) -> None:
    """gzip layers: the Docker Engine here (20.10) does not pull zstd ones."""
    from fdl.runner import SubprocessRunner

    builder, _ = machines
    tree = builder.build()
    pushed = _push(run_fdl, builder, repo, "--compression", "gzip")
    runner = SubprocessRunner()
    context = tmp_path / "context"
    context.mkdir()
    (context / "Dockerfile").write_text(
        f"FROM {pushed['reference']} AS libtorch\n"
        f"FROM {base_image}\n"
        "COPY --from=libtorch /libtorch /opt/libtorch\n"
    )
    image = f"fdl-test/libtorch-copy:{uuid.uuid4().hex[:8]}"
    try:
        runner.run(["docker", "pull", pushed["reference"]])
        labels = json.loads(
            runner.run(
                [
                    "docker",
                    "image",
                    "inspect",
                    "--format",
                    "{{json .Config.Labels}}",
                    pushed["reference"],
                ]
            ).stdout
        )
        assert labels["dev.fdl.libtorch.archs"] == "sm_61 sm_120"
        runner.run(["docker", "build", "-q", "-t", image, str(context)])
        listed = runner.run(
            ["docker", "run", "--rm", image, "sha256sum", "/opt/libtorch/lib/libtorch_cuda.so"]
        ).stdout
        expected = hashlib.sha256((tree / "lib" / "libtorch_cuda.so").read_bytes()).hexdigest()
        assert listed.split()[0] == expected
    finally:
        for name in (image, pushed["reference"]):
            runner.run(["docker", "image", "rm", "-f", name], check=False)


def test_setup_plans_the_pull_of_a_variant_that_covers_the_gpus(
    run_fdl, machines, repo: str
) -> None:
    builder, teammate = machines
    builder.build()
    pushed = _push(run_fdl, builder, repo)
    teammate.gpus("6.1", "12.0")
    teammate.env["FDL_LIBTORCH_REGISTRY"] = repo
    plan = _fdl(run_fdl, teammate, "setup", "--torch", "2.10.0", "--dry-run", "--json")
    assert plan.exit_code == 0, plan.output
    data = json.loads(plan.stdout)["plan"]
    assert data["action"] == "pull"
    assert data["reason"] == (
        f"pull {pushed['reference']} (built by build (recipe docker, commit abc123), "
        "covers sm_61 sm_120 compute_120)"
    )
    assert data["command"] == f"fdl libtorch pull {pushed['reference']}"
    choice = json.loads(plan.stdout)["choice"]
    assert choice["chosen"] == "registry" and choice["offers"][0]["why"] == data["reason"]
    assert choice["offers"][0]["bytes"] > 0  # what the pull downloads, from the manifest
    assert variants.list_variants(teammate.context()) == []

    done = _fdl(run_fdl, teammate, "setup", "--torch", "2.10.0", "--yes", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["variant"] == "builds/sm61-sm120"
    again = _fdl(run_fdl, teammate, "setup", "--torch", "2.10.0", "--dry-run", "--json")
    assert json.loads(again.stdout)["plan"]["action"] == "keep"
    wheel = _fdl(
        run_fdl, teammate, "setup", "--torch", "2.10.0", "--force", "--from-wheel", "--dry-run",
        "--json",
    )  # fmt: skip
    assert json.loads(wheel.stdout)["plan"]["action"] != "pull"
    refused = next(
        o for o in json.loads(wheel.stdout)["choice"]["offers"] if o["source"] == "registry"
    )
    assert refused == {**refused, "ok": False, "why": "--from-wheel asks for PyPI's wheel"}


@pytest.mark.parametrize(
    ("gpus", "driver", "torch"),
    [
        (("7.5",), "580.65", "2.10.0"),  # no code for Turing in the variant
        (("6.1", "12.0"), "470.82", "2.10.0"),  # CUDA 12.9 needs a newer driver
        (("6.1", "12.0"), "580.65", "2.9.0"),  # another release
    ],
)
def test_setup_passes_over_a_variant_that_does_not_fit(
    run_fdl, machines, repo: str, gpus, driver: str, torch: str
) -> None:
    builder, teammate = machines
    builder.build()
    _push(run_fdl, builder, repo)
    teammate.gpus(*gpus, driver=driver)
    teammate.env["FDL_LIBTORCH_REGISTRY"] = repo
    plan = _fdl(run_fdl, teammate, "setup", "--torch", torch, "--dry-run", "--json")
    assert plan.exit_code == 0, plan.output
    assert json.loads(plan.stdout)["plan"]["action"] != "pull"


def test_build_pulls_from_the_team_registry_instead_of_building(
    run_fdl, machines, repo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fdl.system

    # the build's preflight wants ~24 GB free; this test is about pulling instead
    plenty = fdl.system.Probe(200 << 30, path="/")
    monkeypatch.setattr(fdl.system, "disk_free", lambda _path: plenty)
    builder, teammate = machines
    builder.build()
    pushed = _push(run_fdl, builder, repo)
    teammate.gpus("6.1", "12.0")
    path = f"{teammate.bin}{os.pathsep}{os.environ['PATH']}"  # docker plans need docker
    env = {**teammate.env, "FDL_LIBTORCH_REGISTRY": repo, "PATH": path}
    args = ["libtorch", "build", "--docker", "--archs", "6.1;12.0", "--torch", "2.10.0"]
    plan = run_fdl([*args, "--dry-run", "--json"], cwd=teammate.cwd, env=env)
    assert plan.exit_code == 0, plan.output
    data = json.loads(plan.stdout)
    assert data["action"] == "pull" and data["command"].endswith(pushed["reference"])
    assert data["build"]["variant"] == "builds/sm61-sm120"
    assert [o["source"] for o in data["choice"]["offers"]] == ["registry", "build"]
    built = run_fdl([*args, "--json"], cwd=teammate.cwd, env=env)
    assert built.exit_code == 0, built.output
    assert json.loads(built.stdout)["variant"] == "builds/sm61-sm120"
    own = run_fdl([*args, "--no-registry", "--dry-run", "--json"], cwd=teammate.cwd, env=env)
    assert "action" not in json.loads(own.stdout)
    assert json.loads(own.stdout)["choice"]["chosen"] == "build"


def test_build_push_needs_a_registry(run_fdl, machines) -> None:
    builder, _ = machines
    result = _fdl(run_fdl, builder, "libtorch", "build", "--cpu", "--push", "--dry-run")
    assert result.exit_code == 2 and "--push: no team registry" in result.stderr


def test_install_takes_the_team_variant_that_fits(run_fdl, machines, repo: str) -> None:
    builder, teammate = machines
    builder.build()
    pushed = _push(run_fdl, builder, repo)
    teammate.gpus("6.1", "12.0")
    teammate.env["FDL_LIBTORCH_REGISTRY"] = repo
    done = _fdl(run_fdl, teammate, "libtorch", "install", "--torch", "2.10.0", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["digest"] == pushed["digest"]
    teammate.gpus("7.5")
    none = _fdl(run_fdl, teammate, "libtorch", "install", "--from-registry", "--torch", "2.10.0")
    assert none.exit_code == 4 and "holds no torch 2.10.0 variant" in none.stderr
    assert "fdl libtorch build --push" in none.stderr


@pytest.mark.slow
def test_a_build_pushes_itself_and_another_machine_pulls_it(run_fdl, machines, repo: str) -> None:
    """The fake PyTorch tree built natively (CPU), pushed by --push, pulled elsewhere."""
    from tests.support.build_helpers import copy_source

    builder, teammate = machines
    source = copy_source(builder.root / "pytorch")
    env = {
        **builder.env,
        "PATH": os.environ["PATH"],
        "FAKE_TORCH_UNITS": "4",
        "FDL_LIBTORCH_REGISTRY": repo,
    }
    args = ["--cpu", "--native", "--source", str(source), "--disk-gb", "1", "--no-flash-attention"]
    built = run_fdl(["libtorch", "build", *args, "--push", "--json"], cwd=builder.cwd, env=env)
    assert built.exit_code == 0, built.output
    data = json.loads(built.stdout)
    reference = data["pushed"]["reference"]
    assert data["pushed"]["tag"] == "2.13.0-cpu"
    pulled = _fdl(run_fdl, teammate, "libtorch", "pull", reference, "--json")
    assert pulled.exit_code == 0, pulled.output
    installed = teammate.context().libtorch_dir / json.loads(pulled.stdout)["variant"]
    assert _files(installed) == _files(Path(data["path"]))
    assert _fdl(run_fdl, teammate, "libtorch", "verify").exit_code == 0


def _with_layer(repo: str, tag: str, new_tag: str, members: list[tarfile.TarInfo]) -> None:
    """Store the image ``tag`` again as ``new_tag`` with one more (gzip) layer holding
    ``members`` (empty files or links), its diff_id in the config."""
    import gzip
    import io

    from fdl.libtorch.sources._registry import ACCEPT, parse_reference
    from fdl.net import RegistryClient

    ref = parse_reference(f"{repo}:{tag}")
    client = RegistryClient(ref.host, ref.repository)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        for member in members:
            archive.addfile(member, io.BytesIO(b"x" * member.size) if member.isreg() else None)
    blob = gzip.compress(raw.getvalue())
    manifest = json.loads(client.manifest(tag, ACCEPT).body)
    config = json.loads(client.blob_bytes(manifest["config"]["digest"], 1 << 20))
    config["rootfs"]["diff_ids"].append("sha256:" + hashlib.sha256(raw.getvalue()).hexdigest())
    body = json.dumps(config).encode()
    uploads = [(blob, "layer"), (body, "config")]
    digests = {}
    for data, what in uploads:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        with tempfile.NamedTemporaryFile() as handle:
            handle.write(data)
            handle.flush()
            client.upload_blob(Path(handle.name), digest)
        digests[what] = (digest, len(data))
    manifest["layers"].append(
        {
            "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
            "digest": digests["layer"][0],
            "size": digests["layer"][1],
        }
    )
    manifest["config"].update(digest=digests["config"][0], size=digests["config"][1])
    client.put_manifest(new_tag, json.dumps(manifest).encode(), OCI)


@pytest.mark.parametrize(
    ("member", "why"),
    [
        (("libtorch/../../escaped", tarfile.REGTYPE, ""), "'..' in the path"),
        (("libtorch/lib/evil", tarfile.SYMTYPE, "/etc/passwd"), "symlink to absolute"),
        (("libtorch/lib/.wh.libc10.so", tarfile.REGTYPE, ""), "whiteout"),
        (("libtorch/lib/libc10.so", tarfile.REGTYPE, ""), "two layers hold"),
    ],
)
def test_a_hostile_layer_is_refused_and_nothing_is_written(
    run_fdl, machines, repo: str, member, why: str
) -> None:
    builder, teammate = machines
    builder.build()
    pushed = _push(run_fdl, builder, repo, "--compression", "gzip")
    name, kind, link = member
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, link, 1 if kind == tarfile.REGTYPE else 0
    _with_layer(repo, pushed["tag"], "hostile", [info])
    result = _fdl(run_fdl, teammate, "libtorch", "pull", f"{repo}:hostile")
    assert result.exit_code in (1, 4), result.output
    assert why in result.stderr
    assert variants.list_variants(teammate.context()) == []
    assert not (teammate.root / "escaped").exists()
    leftovers = list((teammate.context().libtorch_dir).rglob(".*staging*"))
    assert leftovers == []


@pytest.mark.docker
@pytest.mark.slow
def test_a_ci_matrix_copies_a_pushed_variant_into_its_libtorch_image(
    run_fdl, machines, repo: str, base_image: str, tmp_path: Path
) -> None:
    """`ci.pushed`: the generated libtorch Dockerfile, built as bake builds it (its context
    the generated Dockerfiles' directory), holds the pushed tree under /opt/libtorch."""
    from fdl.ci import generated_files
    from fdl.runner import SubprocessRunner
    from tests.support.ci import PUSHED, PUSHED_MATRIX, ci_project, plan

    builder, _ = machines
    tree = builder.build()
    pushed = _push(run_fdl, builder, repo, "--compression", "gzip")
    project = ci_project(tmp_path / "ci", PUSHED_MATRIX.replace(PUSHED, pushed["reference"]))
    matrix = plan(project)
    variant = matrix.variants[2]
    assert variant.pushed == pushed["reference"] and not variant.source_build
    files = {item.path: item.text for item in generated_files(matrix)}
    context = tmp_path / variant.context
    context.mkdir(parents=True)
    dockerfile = context / "libtorch.Dockerfile"
    dockerfile.write_text(files[variant.dockerfile], encoding="utf-8")
    checker = tmp_path / "checker"
    checker.mkdir()
    suffix = uuid.uuid4().hex[:8]
    libtorch, image = f"fdl-test/ci-libtorch:{suffix}", f"fdl-test/ci-libtorch-check:{suffix}"
    (checker / "Dockerfile").write_text(
        f"FROM {libtorch} AS libtorch\nFROM {base_image}\n"
        "COPY --from=libtorch /opt/libtorch /opt/libtorch\n"
    )
    runner = SubprocessRunner()
    try:
        runner.run(["docker", "build", "-q", "-t", libtorch, "-f", str(dockerfile), str(context)])
        runner.run(["docker", "build", "-q", "-t", image, str(checker)])
        listed = runner.run(
            [
                "docker",
                "run",
                "--rm",
                image,
                "sh",
                "-c",
                "sha256sum /opt/libtorch/lib/libtorch_cuda.so; "
                "readlink /opt/libtorch/lib/libtorch_cpu.so.1",
            ]
        ).stdout.split()
        expected = hashlib.sha256((tree / "lib" / "libtorch_cuda.so").read_bytes()).hexdigest()
        assert listed[0] == expected
        assert listed[-1] == "libtorch_cpu.so"
    finally:
        for name in (image, libtorch, pushed["reference"]):
            runner.run(["docker", "image", "rm", "-f", name], check=False)


def test_ci_pushed_finds_the_variant_that_stands_in_for_a_recipe_and_generate_copies_it(
    run_fdl, machines, repo: str, tmp_path: Path
) -> None:
    """`fdl ci pushed`: the sm_61 + sm_120 build (torch 2.10, CUDA 12.9) stands in for the
    pascal-blackwell recipe; nothing fits the CPU and CUDA 13.0 variants."""
    from tests.support.ci import MATRIX, ci_project

    builder, _ = machines
    builder.build()
    pushed = _push(run_fdl, builder, repo)
    manifest = MATRIX.replace('torch: "2.13"', 'torch: "2.10"')
    project = ci_project(tmp_path / "ci", manifest)
    env = {"DOCKER_CONFIG": builder.env["DOCKER_CONFIG"]}
    found = run_fdl(["ci", "pushed", "--registry", repo, "--json"], cwd=project, env=env)
    assert found.exit_code == 0, found.output
    by_key = {item["variant"]: item for item in json.loads(found.stdout)["variants"]}
    assert by_key["build:pascal-blackwell"]["reference"] == pushed["reference"]
    assert "covers sm_61 sm_120 PTX compute_120" in by_key["build:pascal-blackwell"]["reason"]
    assert by_key["cpu"]["reference"] is None and by_key["cu130"]["reference"] is None
    assert "CUDA 13.0" in by_key["cu130"]["reason"]
    # The same archs built with another CUDA release do not stand in (the images' CUDA).
    from fdl.compat import Capability
    from fdl.libtorch import find_shared

    def look(cuda: str) -> object:
        return find_shared(
            repo,
            torch="2.10.0",
            gpus=(Capability(6, 1), Capability(12, 0)),
            driver=None,
            platform="linux-x86_64",  # the fake trees are x86-64 ELF files
            credentials=lambda _host: None,
            cuda=cuda,
        )

    assert look("12.9") is not None and look("13.0") is None

    text = run_fdl(["ci", "pushed", "--registry", repo], cwd=project, env=env)
    entry = f"  pushed:\n    build:pascal-blackwell: {pushed['reference']}\n"
    assert f"ci:\n{entry}" in text.stdout
    (project / "fdl.yml").write_text(manifest + entry, encoding="utf-8")
    generated = run_fdl(["ci", "generate"], cwd=project, env=env)
    assert generated.exit_code == 0, generated.output
    dockerfile = project / "ci/dockerfiles/libtorch-pascal-blackwell.Dockerfile"
    assert f"FROM {pushed['reference']} AS pushed\n" in dockerfile.read_text(encoding="utf-8")


# -- issue 34, point 13: what pushers and pullers met ------------------------------------


def test_a_second_push_of_the_same_tree_packs_nothing(run_fdl, machines, repo: str) -> None:
    builder, _ = machines
    tree = builder.build(big=1 << 20)
    first = _push(run_fdl, builder, repo)
    assert first["packed"] is True
    again = _fdl(run_fdl, builder, "libtorch", "push", "builds/sm61-sm120", "--to", repo)
    assert again.exit_code == 0, again.output
    assert "already holds builds/sm61-sm120" in again.stderr
    assert "nothing packed or uploaded" in again.stderr and "packing layer" not in again.output
    assert again.stdout.strip() == first["reference"]
    # A changed tree is packed again (and lands on another digest, under the same tag).
    noise = tree / "lib" / "libnoise.so"
    content, stat = noise.read_bytes(), noise.stat()
    noise.write_bytes(os.urandom(1 << 20))
    changed = _push(run_fdl, builder, repo)
    assert changed["packed"] is True and changed["digest"] != first["digest"]
    # The first tree again, to the byte and the second: its record is found, but the tag
    # names the second push now, so the registry is not taken to hold it.
    noise.write_bytes(content)
    os.utime(noise, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    back = _push(run_fdl, builder, repo)
    assert back["packed"] is True and back["digest"] == first["digest"]


def test_the_push_says_why_its_compression(run_fdl, machines, repo: str) -> None:
    builder, _ = machines
    builder.build()
    done = _fdl(
        run_fdl, builder, "libtorch", "push", "builds/sm61-sm120", "--to", repo,
        "--compression", "gzip",
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "gzip layers: --compression gzip" in done.stderr
    auto = _fdl(run_fdl, builder, "libtorch", "push", "builds/sm61-sm120", "--to", repo)
    assert "zstd layers: auto: zstd" in auto.stderr or "since the zstandard package" in auto.stderr


def _wheel_variant(machine: Machine, name: str = "precompiled/cu128") -> Path:
    """A wheel's variant installed without two of the libraries torch loads, from a wheel
    file in the pusher's home directory."""
    path = make_tree(
        machine.context().libtorch_dir / name,
        "2.10.0+cu128",
        cubins=(70, 120),
        cuda_needed=("libcublas.so.12", "libcudnn.so.9"),
    )
    info = VariantInfo(
        name=name,
        torch="2.10.0",
        cuda="12.8",
        archs_requested=["sm_70", "sm_120"],
        source={"kind": "wheel", "wheel": "/home/alice/wheels/torch-2.10.0-cp311-linux.whl"},
    )
    variants.write_info(path, finish_info(path, info))
    return path


def test_an_incomplete_variant_is_said_at_push_and_the_puller_is_told_who_can_fix_it(
    run_fdl, machines, repo: str
) -> None:
    builder, teammate = machines
    _wheel_variant(builder)
    pushed = _fdl(run_fdl, builder, "libtorch", "push", "precompiled/cu128", "--to", repo)
    assert pushed.exit_code == 0, pushed.output
    assert "warning: precompiled/cu128 lacks 2 libraries torch loads" in pushed.stderr
    assert "libcublas.so.12" in pushed.stderr
    reference = pushed.stdout.strip()
    teammate.gpus("7.0")
    pulled = _fdl(run_fdl, teammate, "libtorch", "pull", reference)
    assert "--no-nvidia" not in pulled.output  # the puller never chose it
    assert "pushed without them" in pulled.output and reference in pulled.output


def test_a_pulled_variant_keeps_its_name_its_source_and_none_of_the_pushers_paths(
    run_fdl, machines, repo: str
) -> None:
    builder, teammate = machines
    _wheel_variant(builder)
    pushed = _push_variant(run_fdl, builder, repo, "precompiled/cu128")
    record = json.loads(pushed["annotations"]["dev.fdl.libtorch.variant"])
    assert record["source"]["wheel"] == "torch-2.10.0-cp311-linux.whl"
    assert "/home/alice" not in json.dumps(pushed["annotations"])
    teammate.gpus("7.0")
    pulled = _fdl(run_fdl, teammate, "libtorch", "pull", pushed["reference"], "--json")
    assert json.loads(pulled.stdout)["variant"] == "precompiled/cu128"  # as the pusher named it
    info = _fdl(run_fdl, teammate, "libtorch", "info", "precompiled/cu128")
    assert f"Source:    registry: {pushed['reference']} (built by wheel)" in info.stdout
    assert "/home/alice" not in info.stdout
    # A variant of the teammate's own holds that name: the pulled one takes its tag's.
    other = Machine(teammate.root.parent / "third")
    _wheel_variant(other).joinpath("own").write_text("mine\n")
    beside = _fdl(run_fdl, other, "libtorch", "pull", pushed["reference"], "--json")
    assert json.loads(beside.stdout)["variant"] == f"precompiled/{pushed['tag']}"


def _push_variant(run_fdl, machine: Machine, repo: str, name: str) -> dict:
    result = _fdl(run_fdl, machine, "libtorch", "push", name, "--to", repo, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_mistyped_repository_is_not_found_rather_than_fitting_nothing(
    run_fdl, machines, repo: str
) -> None:
    builder, teammate = machines
    builder.build()
    _push(run_fdl, builder, repo)
    teammate.gpus("6.1", "12.0")
    teammate.env["FDL_LIBTORCH_REGISTRY"] = repo + "-typo"
    done = _fdl(run_fdl, teammate, "libtorch", "install", "--from-registry", "--torch", "2.10.0")
    assert done.exit_code == 2, done.output
    assert f"the repository {repo}-typo is not found" in done.stderr
    assert "holds no torch" not in done.stderr


def test_a_cpu_view_is_pushed_and_pulled_like_any_variant(run_fdl, machines, repo: str) -> None:
    """The CPU view's lib/libtorch.so is a GNU ld script: the platform is read from the
    libraries beside it (the push said "cannot tell the platform of lib/libtorch.so")."""
    from fdl.libtorch.sources._cpu_view import LINK_SCRIPT_MARK

    builder, teammate = machines
    tree = make_tree(
        builder.context().libtorch_dir / "precompiled/cpu", "2.13.0+cu130", cuda_needed=()
    )
    script = LINK_SCRIPT_MARK + b" of the torch 2.13.0+cu130 wheel. */\nINPUT(-ltorch_cpu -lc10)\n"
    (tree / "lib" / "libtorch.so").write_bytes(script)
    info = VariantInfo(
        name="precompiled/cpu",
        torch="2.13.0",
        cuda=None,
        source={"kind": "wheel", "view": "cpu", "variant": "cpu", "wheel_version": "2.13.0"},
    )
    variants.write_info(tree, finish_info(tree, info))

    pushed = _fdl(run_fdl, builder, "libtorch", "push", "precompiled/cpu", "--to", repo, "--json")
    assert pushed.exit_code == 0, pushed.output
    data = json.loads(pushed.stdout)
    assert data["tag"] == "2.13.0-cpu"

    pulled = _fdl(run_fdl, teammate, "libtorch", "pull", data["reference"], "--json")
    assert pulled.exit_code == 0, pulled.output
    installed = teammate.context().libtorch_dir / json.loads(pulled.stdout)["variant"]
    assert _files(installed) == _files(tree)
    assert (installed / "lib" / "libtorch.so").read_bytes() == script
