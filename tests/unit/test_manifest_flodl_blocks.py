"""floDl 0.8.0's `cluster:`, `join:` and `publish:` blocks: loaded and typed as floDl's CLI
types them (flodl-cli-0.8.0/src/config/cluster.rs, schema.rs:30-49, loading.rs:242-298)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdl.errors import ManifestError, ManifestErrors
from fdl.manifest import load_manifest

CLUSTER = """\
cluster:
  controller:
    host: 10.0.0.1
    path: /srv/flodl
    join: {start: hybrid, min_rank_start: 2, token: 0123456789abcdef0123456789abcdef}
  env: {NCCL_P2P_DISABLE: "1"}
  gpu_ram_share: 0.5
  workers:
    - host: a
      local_devices: all
      nccl_socket_ifname: eth0
      path: /srv/flodl
      ssh: {target: gpu-a, port: 2222, options: [StrictHostKeyChecking=no]}
    - host: b
      local_devices: [0, 1]
      nccl_socket_ifname: eth0
      path: /mnt/flodl
      arch: precompiled/rocm70
      env: {HSA_OVERRIDE_GFX_VERSION: "11.0.0"}
"""
JOIN = """\
join:
  controller: 10.0.0.1:1337
  source: {from: "git+https://example.org/acme/model#v1", bin: target/release/train}
  libtorch: auto
  devices: [0]
  persist: true
  sig_probe: false
  args: [--epochs, "3"]
publish:
  bin: target/release/train
  to: ~/.flodl/run
  args: [--epochs, "3"]
"""


def _errors(tmp_path: Path, text: str) -> dict[str, str]:
    (tmp_path / "fdl.yml").write_text(text)
    with pytest.raises((ManifestError, ManifestErrors)) as caught:
        load_manifest(tmp_path)
    found = caught.value
    errors = found.errors if isinstance(found, ManifestErrors) else [found]
    return {
        str(error).split(": ", 1)[1].split(":", 1)[0]: f"{error}\n{error.hint or ''}"
        for error in errors
    }


def test_a_floDl_080_topology_and_its_walk_in_blocks_load_as_written(tmp_path: Path) -> None:
    (tmp_path / "fdl.yml").write_text(CLUSTER + JOIN)
    data = load_manifest(tmp_path).data
    assert data["cluster"]["controller"]["join"]["start"] == "hybrid"
    assert data["cluster"]["workers"][0]["local_devices"] == "all"
    assert data["cluster"]["workers"][1]["local_devices"] == [0, 1]
    assert data["cluster"]["workers"][0]["ssh"]["port"] == 2222
    assert data["join"]["source"]["from"] == "git+https://example.org/acme/model#v1"
    assert data["join"]["persist"] is True
    assert data["publish"]["args"] == ["--epochs", "3"]


def test_a_user_written_ranks_is_refused_where_it_is_written(tmp_path: Path) -> None:
    text = CLUSTER.replace(
        "      local_devices: all\n", "      ranks: [0]\n      local_devices: all\n"
    )
    errors = _errors(tmp_path, text)
    assert list(errors) == ["cluster.workers.0.ranks"]
    message = errors["cluster.workers.0.ranks"]
    assert "fdl.yml:10:7:" in message and "probed device count" in message


@pytest.mark.parametrize(
    ("edit", "key", "says"),
    [
        (
            ("start: hybrid", "start: manul"),
            "cluster.controller.join.start",
            "did you mean 'manual'",
        ),
        (("port: 2222", "port: 70000"), "cluster.workers.0.ssh.port", "at most 65535"),
        (("[0, 1]", "[0, 256]"), "cluster.workers.1.local_devices.1", "at most 255"),
        (("[0, 1]", "some"), "cluster.workers.1.local_devices", "one of all or a list"),
        (("gpu_ram_share: 0.5", "gpu_ram_share: -0.5"), "cluster.gpu_ram_share", "non-negative"),
        (
            ("NCCL_P2P_DISABLE", "HIP_VISIBLE_DEVICES"),
            "cluster.env.HIP_VISIBLE_DEVICES",
            "launcher",
        ),
        (
            ("HSA_OVERRIDE", "FLODL_INTERNAL_X"),
            "cluster.workers.1.env.FLODL_INTERNAL_X_GFX_VERSION",
            "launcher",
        ),
        (("      path: /mnt/flodl\n", ""), "cluster.workers.1", "missing required key 'path'"),
        (("    host: 10.0.0.1\n", ""), "cluster.controller", "missing required key 'host'"),
    ],
)
def test_cluster_values_floDl_refuses_are_refused_with_the_fix(
    tmp_path: Path, edit: tuple[str, str], key: str, says: str
) -> None:
    errors = _errors(tmp_path, CLUSTER.replace(*edit, 1))
    assert key in errors, errors
    assert says in errors[key]
    assert len(errors) == 1, errors


def test_an_empty_roster_needs_a_discovery_window(tmp_path: Path) -> None:
    head = CLUSTER.split("  workers:", maxsplit=1)[0]
    errors = _errors(tmp_path, head + "  workers: []\n")
    assert "discovery: true" in errors["cluster.workers"]
    (tmp_path / "fdl.yml").write_text(
        head.replace("start: hybrid", "start: manual, discovery: true") + "  workers: []\n"
    )
    assert load_manifest(tmp_path).data["cluster"]["workers"] == []


def test_join_and_publish_keys_are_checked_like_every_section(tmp_path: Path) -> None:
    errors = _errors(
        tmp_path,
        JOIN.replace("persist: true", "persist: yes-please").replace("to: ~", "too: ~")
        + "  # end\n",
    )
    assert "true or false" in errors["join.persist"]
    assert "did you mean 'to'" in errors["publish.too"]
    refused = _errors(tmp_path, "join:\n  source: {cwd: x}\n  gpu_ram_share: .nan\n")
    assert "missing required key 'from'" in refused["join.source"]
    assert "non-negative" in refused["join.gpu_ram_share"]
