"""floDl CLI 0.8.0's run-time contract, its pure parts: a vendor's feature, ``--gpus``, the
logical ``docker: gpu`` service, a compose service's GPUs, and a cluster command's envelope."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fdl.errors import ManifestError, UsageError
from fdl.libtorch.vendor import feature_of, service_of
from fdl.tasks._cluster import cluster_run, hex_encode, local_cluster
from fdl.tasks._compose_file import service_gpu
from fdl.tasks._contract import gpu_feature, gpu_service, parse_gpus, take_gpus
from fdl.tasks._libtorch_env import Variant


def test_the_feature_and_service_of_a_vendor() -> None:
    assert [feature_of(v) for v in ("amd", "nvidia", "cpu", None)] == [
        "rocm",
        "cuda",
        "cuda",
        "cuda",
    ]
    assert service_of("amd") == "rocm" and service_of(None) == "cuda"
    rocm = Variant("precompiled/rocm70", Path("/x"), vendor="amd")
    assert gpu_feature(rocm).value == "rocm" and gpu_feature(None).value == "cuda"


def test_gpus_specs_as_floDl_reads_them() -> None:
    assert parse_gpus("all") == "all" and parse_gpus(" ALL ") == "all"
    assert parse_gpus("3,1") == (3, 1)
    assert parse_gpus(" 0 , 1 ") == (0, 1)
    for bad, says in [
        ("", "needs a value"),
        ("0,,1", "empty entry"),
        (",0", "empty entry"),
        ("0,abc", "'abc' is not a device index"),
        ("256", "'256' is not a device index"),
        ("-1", "'-1' is not a device index"),
        ("0,1,0", "device 0 is given twice"),
    ]:
        with pytest.raises(UsageError, match=says):
            parse_gpus(bad)


def test_gpus_is_taken_anywhere_before_the_separator() -> None:
    assert take_gpus(["--epochs", "3", "--gpus", "0,1", "x"]) == (["--epochs", "3", "x"], "0,1")
    assert take_gpus(["--gpus=all", "--", "--gpus", "2"]) == (["--", "--gpus", "2"], "all")
    assert take_gpus(["a"]) == (["a"], None)
    with pytest.raises(UsageError, match="needs a value"):
        take_gpus(["--gpus"])
    with pytest.raises(UsageError, match="needs a value"):
        take_gpus(["--gpus", "--x"])
    with pytest.raises(UsageError, match="given twice"):
        take_gpus(["--gpus", "0", "--gpus=1"])


def test_the_logical_gpu_service_follows_the_active_variant() -> None:
    rocm = Variant("precompiled/rocm70", Path("/x"), vendor="amd")
    cuda = Variant("precompiled/cu128", Path("/x"), vendor="nvidia")
    cpu = Variant("precompiled/cpu", Path("/x"), vendor="cpu")
    assert gpu_service(rocm, ["dev", "cuda", "rocm"]) == ("rocm", None)
    assert gpu_service(cuda, ["dev", "cuda", "rocm"]) == ("cuda", None)
    assert gpu_service(cpu, ["dev", "cuda"]) == ("cuda", None)
    assert gpu_service(None, []) == ("cuda", None)
    service, note = gpu_service(rocm, ["dev", "cuda"])
    assert service == "cuda"
    assert note is not None and "defines no 'rocm' service" in note


def test_the_gpus_of_a_compose_service() -> None:
    reserved = {"deploy": {"resources": {"reservations": {"devices": [{"driver": "nvidia"}]}}}}
    capability = {
        "deploy": {"resources": {"reservations": {"devices": [{"capabilities": ["gpu"]}]}}}
    }
    assert service_gpu(reserved) == "nvidia"
    assert service_gpu(capability) == "nvidia"
    assert service_gpu({"runtime": "nvidia"}) == "nvidia"
    assert service_gpu({"gpus": "all"}) == "nvidia"
    assert service_gpu({"devices": ["/dev/nvidia0:/dev/nvidia0"]}) == "nvidia"
    assert service_gpu({"devices": ["/dev/kfd", "/dev/dri"]}) == "amd"
    assert service_gpu({"image": "x", "volumes": [".:/workspace"]}) is None
    assert service_gpu({"deploy": "bogus", "devices": "bogus"}) is None


def _run(**overrides: object):  # type: ignore[no-untyped-def]
    arguments: dict[str, object] = {
        "marked": True,
        "block": None,
        "block_at": None,
        "gpus": None,
        "command": "train",
        "directory": Path("/srv/proj"),
        "environ": {"USER": "ada"},
        "count_gpus": lambda: 4,
        "hostname": "box",
    }
    arguments.update(overrides)
    return cluster_run(**arguments)  # type: ignore[arg-type]


def _exports(run) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {change.name: change.value for change in run.exports}


def _envelope(run) -> str:  # type: ignore[no-untyped-def]
    return bytes.fromhex(_exports(run)["FLODL_INTERNAL_FULL_CLUSTER_JSON"]).decode("utf-8")


# serde_json::to_string_pretty of gpus::synthesize_local_cluster(&[0, 1]) (gpus.rs:120-170)
LOCAL_TWO = """\
{
  "controller": {
    "host": "127.0.0.1",
    "port": 1337,
    "path": "/srv/proj"
  },
  "workers": [
    {
      "host": "box",
      "ranks": [
        0,
        1
      ],
      "local_devices": [
        0,
        1
      ],
      "nccl_socket_ifname": "lo",
      "path": "/srv/proj"
    }
  ]
}"""


def test_two_gpus_on_a_cluster_command_make_floDls_one_host_envelope() -> None:
    run = _run(gpus=(0, 1))
    assert _envelope(run) == LOCAL_TWO
    exports = _exports(run)
    assert exports["FLODL_INTERNAL_FDL_CMD"] == "train"
    assert exports["FLODL_INTERNAL_HOST_USER"] == "ada"
    assert "CUDA_VISIBLE_DEVICES" not in exports  # the launcher pins each rank
    assert any("does not ssh" in note for note in run.notes)
    # `all` counts this machine's GPUs; FLODL_CONTROLLER_PORT moves the port
    everything = json.loads(_envelope(_run(gpus="all", environ={"FLODL_CONTROLLER_PORT": "4242"})))
    assert everything["workers"][0]["local_devices"] == [0, 1, 2, 3]
    assert everything["controller"]["port"] == 4242


def test_one_gpu_or_a_plain_command_gets_the_masks_only() -> None:
    for run in (_run(gpus=(2,)), _run(marked=False, gpus=(2, 3))):
        exports = _exports(run)
        assert "FLODL_INTERNAL_FULL_CLUSTER_JSON" not in exports
        assert {exports["CUDA_VISIBLE_DEVICES"], exports["HIP_VISIBLE_DEVICES"]} <= {"2", "2,3"}
    # a rank the launcher started (FLODL_INTERNAL_CLUSTER_JSON set) runs as it is
    inner = _run(gpus=(0, 1), environ={"FLODL_INTERNAL_CLUSTER_JSON": "00"})
    assert _exports(inner) == {"CUDA_VISIBLE_DEVICES": "0,1", "HIP_VISIBLE_DEVICES": "0,1"}
    assert _run().exports == []
    with pytest.raises(UsageError, match="no GPU is visible"):
        _run(gpus="all", count_gpus=lambda: 0)


BLOCK = {
    "controller": {"host": "10.0.0.1", "path": "/srv/proj", "join": {"start": "manual"}},
    "workers": [
        {
            "host": "10.0.0.1",
            "local_devices": [0],
            "nccl_socket_ifname": "eth0",
            "path": "/srv/proj",
        },
        {
            "host": "10.0.0.2",
            "local_devices": [1, 0],
            "nccl_socket_ifname": "eth0",
            "path": "/p",
            "ssh": {"user": "u", "port": 2222},
            "env": {"NCCL_DEBUG": "INFO", "A": "1"},
            "gpu_ram_share": 1,
        },
    ],
}


def test_a_cluster_block_becomes_floDls_envelope_with_ranks_in_order() -> None:
    run = _run(block=BLOCK)
    text = _envelope(run)
    data = json.loads(text)
    assert list(data) == ["controller", "workers"]
    assert data["controller"] == {
        "host": "10.0.0.1",
        "port": 1337,
        "path": "/srv/proj",
        "join": {"start": "manual"},
    }
    assert [w["ranks"] for w in data["workers"]] == [[0], [1, 2]]
    second = data["workers"][1]
    assert list(second) == [
        "host",
        "ranks",
        "local_devices",
        "nccl_socket_ifname",
        "path",
        "ssh",
        "gpu_ram_share",
        "env",
    ]
    assert list(second["ssh"]) == ["port", "user"] and list(second["env"]) == ["A", "NCCL_DEBUG"]
    assert '"gpu_ram_share": 1.0' in text
    extra = _exports(run)["FLODL_INTERNAL_CLUSTER_EXTRA_HOSTS"]
    assert extra == "10.0.0.1:10.0.0.1 10.0.0.2:10.0.0.2"
    assert hex_encode("hé") == "68c3a9"


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"workers": [{**BLOCK["workers"][0], "local_devices": "all"}]}, "fdl does not ssh"),
        ({"workers": [{**BLOCK["workers"][0], "ranks": [0]}]}, "workers[0].ranks"),
        ({"workers": []}, "must be a non-empty list"),
        ({"master_addr": "x"}, "unknown key 'master_addr'"),
        ({"env": {"CUDA_VISIBLE_DEVICES": "0"}}, "is reserved"),
        ({"env": {"FLODL_INTERNAL_X": "0"}}, "is reserved"),
        ({"controller": {"host": "", "path": "/p"}}, "controller.host"),
        ({"controller": {"host": "h", "path": "/p", "join": {"start": "now"}}}, "join.start"),
    ],
)
def test_a_cluster_block_floDls_launcher_would_not_take_is_refused(
    change: dict[str, object], says: str
) -> None:
    with pytest.raises(ManifestError, match=says.replace("[", r"\[").replace("]", r"\]")):
        _run(block={**BLOCK, **change})


def test_gpus_and_a_cluster_block_together_are_refused_and_the_scale_is_checked() -> None:
    with pytest.raises(UsageError, match="cannot be combined"):
        _run(block=BLOCK, gpus=(0, 1))
    with pytest.raises(UsageError, match="FLODL_NET_TIMEOUT_SCALE"):
        _run(gpus=(0, 1), environ={"FLODL_NET_TIMEOUT_SCALE": "0.01"})
    assert _run(gpus=(0, 1), environ={"FLODL_NET_TIMEOUT_SCALE": "3"}).exports


def test_local_cluster_is_one_worker_with_a_rank_per_device() -> None:
    envelope = local_cluster([3, 1], "h", "/p", 1337)
    assert envelope["workers"][0]["ranks"] == [0, 1]
    assert envelope["workers"][0]["local_devices"] == [3, 1]


def test_the_testing_envelope_counts_all_here() -> None:
    from fdl.tasks._cluster import testing_envelope

    block = {**BLOCK, "workers": [{**BLOCK["workers"][0], "local_devices": "all"}]}
    data = json.loads(bytes.fromhex(testing_envelope(block, None, lambda: 3)))
    assert data["workers"][0]["local_devices"] == "all"
    assert data["workers"][0]["ranks"] == [0, 1, 2]
    with pytest.raises(ManifestError, match="no GPU is visible here"):
        testing_envelope(block, None, lambda: 0)
