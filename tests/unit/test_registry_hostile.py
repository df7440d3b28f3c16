"""The registry client against hostile input (issue 35, round 3, points 3, 4 and 13):
credentials go only to the registry's own host (a tags ``Link``, an upload ``Location`` or
a Bearer realm elsewhere gets none, unless the user logged in to the realm's host); a
token in a reference is refused and never shown, nor a credential helper's; a helper that
never answers is ended; tags, digests and loopback are read by their grammar; a trickling
registry ends within the deadline, an endless body and a Link loop at their bounds.
Cost: about 10 s (loopback servers, a helper that sleeps 1 s, two 1 s deadlines)."""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path

import pytest

from fdl.engine._credentials import registry_credentials
from fdl.errors import EnvironmentProblem, NetworkError, UsageError
from fdl.libtorch import VariantInfo, finish_info, variants
from fdl.libtorch.sources._push import push_variant
from fdl.libtorch.sources._registry import parse_reference
from fdl.net import RegistryClient, RegistryError, is_loopback, registry_url
from fdl.paths import Context
from fdl.runner import default_runner
from tests.conftest import run_fdl_process
from tests.support.hostile_registry import Reply, answer, hostile_registry
from tests.support.libtorch_trees import make_tree

TOKEN = "ghp_" + "Zx9Yw8Vu" * 5
BASIC = "Basic " + base64.b64encode(b"me:s3cret").decode()


def _basic_only(registry_log: list, reply_401: Reply):
    """A fault asking for Basic credentials on every request without them."""

    def fault(handler):
        if handler.headers.get("Authorization"):
            return None
        return reply_401

    return fault


def _other(address: str) -> str:
    """The same server under another host name (another host, as far as credentials go)."""
    return address.replace("127.0.0.1", "localhost")


def test_a_tags_link_to_another_host_gets_no_credentials() -> None:
    with hostile_registry() as ours, hostile_registry() as theirs:
        ours.faults.append(
            _basic_only(ours.log, Reply(401, b"{}", {"WWW-Authenticate": 'Basic realm="r"'}))
        )
        link = f'<http://{_other(theirs.address)}/v2/team/libtorch/tags/list>; rel="next"'
        ours.faults.append(answer("/tags/list", Reply(200, b'{"tags":["a"]}', {"Link": link})))
        theirs.faults.append(answer("/tags/list", Reply(200, b'{"tags":["b"]}')))
        client = RegistryClient(ours.address, "team/libtorch", credentials=("me", "s3cret"))
        assert client.tags() == ["a", "b"]
    assert [auth for method, _path, auth in ours.log if method == "GET"][-1] == BASIC
    assert [auth for _method, _path, auth in theirs.log] == [""]


def test_an_upload_location_on_another_host_gets_no_credentials(tmp_path: Path) -> None:
    blob = tmp_path / "blob"
    blob.write_bytes(b"layer")
    digest = "sha256:" + __import__("hashlib").sha256(b"layer").hexdigest()
    with hostile_registry() as ours, hostile_registry() as theirs:
        ours.faults.append(
            _basic_only(ours.log, Reply(401, b"{}", {"WWW-Authenticate": 'Basic realm="r"'}))
        )
        location = f"http://{_other(theirs.address)}/v2/team/libtorch/blobs/uploads/x"
        ours.faults.append(
            answer("/blobs/uploads/", Reply(202, b"", {"Location": location}), method="POST")
        )
        client = RegistryClient(ours.address, "team/libtorch", credentials=("me", "s3cret"))
        client.upload_blob(blob, digest)
        assert theirs.blobs[digest] == b"layer"
    assert [auth for method, _path, auth in theirs.log if method == "PUT"] == [""]


@pytest.mark.parametrize("logged_in_there", [False, True])
def test_a_bearer_realm_on_another_host_gets_them_only_where_the_user_logged_in(
    logged_in_there: bool,
) -> None:
    with hostile_registry() as ours, hostile_registry() as auth:
        realm_host = _other(auth.address)
        challenge = f'Bearer realm="http://{realm_host}/token",service="reg"'

        def bearer(handler):
            if handler.headers.get("Authorization") == "Bearer tok":
                return None
            return Reply(401, b"{}", {"WWW-Authenticate": challenge})

        ours.faults.append(bearer)
        auth.faults.append(answer("/token", Reply(200, b'{"token":"tok"}')))
        client = RegistryClient(
            ours.address,
            "team/libtorch",
            credentials=("me", "s3cret"),
            trusts=lambda host: logged_in_there and host == realm_host,
        )
        assert client.tags() == []
    sent = [header for _method, _path, header in auth.log]
    assert sent == ([BASIC] if logged_in_there else [""])


def test_a_refused_anonymous_token_says_where_to_log_in() -> None:
    with hostile_registry() as ours, hostile_registry() as auth:
        realm_host = _other(auth.address)
        challenge = f'Bearer realm="http://{realm_host}/token"'
        ours.faults.append(answer("/", Reply(401, b"{}", {"WWW-Authenticate": challenge})))
        auth.faults.append(answer("/token", Reply(401, b"{}")))
        client = RegistryClient(ours.address, "team/libtorch", credentials=("me", "s3cret"))
        with pytest.raises(RegistryError) as caught:
            client.tags()
    assert f"docker login {realm_host}" in (caught.value.hint or "")


@pytest.mark.parametrize(
    "text",
    [
        f"me:{TOKEN}@ghcr.io/team/libtorch",
        f"https://me:{TOKEN}@ghcr.io/team/libtorch:2.10.0",
        f"{TOKEN}@127.0.0.1:5000/team/libtorch",
    ],
)
def test_a_token_in_a_reference_is_refused_and_never_shown(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_reference(text)
    shown = f"{caught.value.message} {caught.value.hint}"
    assert TOKEN not in shown and "docker login" in shown


def test_a_token_in_the_registry_variable_or_to_is_not_echoed(tmp_path: Path) -> None:
    context = Context(tmp_path / "home", project=False)
    tree = make_tree(context.libtorch_dir / "precompiled/cpu", "2.13.0+cpu")
    info = VariantInfo(name="precompiled/cpu", torch="2.13.0", source={"kind": "download"})
    variants.write_info(tree, finish_info(tree, info))
    env = {"FDL_HOME": str(tmp_path / "home"), "FDL_LIBTORCH_REGISTRY": f"me:{TOKEN}@ghcr.io/t/l"}
    installed = run_fdl_process(
        ["libtorch", "install", "--from-registry", "--torch", "2.13.0"], cwd=tmp_path, env=env
    )
    pushed = run_fdl_process(
        ["libtorch", "push", "precompiled/cpu", "--to", f"me:{TOKEN}@ghcr.io/t/l"],
        cwd=tmp_path,
        env=env,
    )
    for result in (installed, pushed):
        assert result.exit_code == 2, result.output
        assert TOKEN not in result.output and "docker login ghcr.io" in result.output


@pytest.mark.parametrize(
    "text",
    [
        "127.0.0.1:5000/team/libtorch:a\nb",
        "127.0.0.1:5000/team/libtorch:2.10.0:2.10.0",
        "127.0.0.1:5000/team/libtorch@sha256:" + "g" * 64,
        "127.0.0.1:5000/team/libtorch:.hidden",
        "127.0.0.1:5000/team/../libtorch",
        "127.0.0.1:5000\n/team/libtorch",
    ],
)
def test_tags_digests_and_names_follow_the_oci_grammar(text: str) -> None:
    with pytest.raises(UsageError):
        parse_reference(text)


def test_a_push_tag_outside_the_grammar_is_refused_before_anything(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is not a tag"):
        push_variant(
            Context(tmp_path, project=False),
            "cpu",
            "127.0.0.1:5000/team/libtorch",
            credentials=lambda _host: None,
            tag="../../../../v2/s/ok/other/manifests/latest",
        )
    client = RegistryClient("127.0.0.1:9", "team/libtorch")
    with pytest.raises(UsageError):
        client.put_manifest("../../x", b"{}", "application/json")


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1:5000", True),
        ("127.8.9.10", True),
        ("localhost:5000", True),
        ("[::1]:5000", True),
        ("127.evil.example:5000", False),
        ("127.0.0.1.nip.io", False),
        ("registry.example.com", False),
    ],
)
def test_only_loopback_addresses_are_spoken_to_over_http(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
    assert registry_url(host).startswith("http://" if loopback else "https://")


def _helper(tmp_path: Path, body: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "docker-credential-hostile"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    config = tmp_path / "docker"
    config.mkdir()
    (config / "config.json").write_text(json.dumps({"credsStore": "hostile"}))
    return {
        "DOCKER_CONFIG": str(config),
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FDL_CREDENTIAL_HELPER_TIMEOUT": "1",
    }


def test_a_credential_helpers_error_is_relayed_without_its_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _helper(tmp_path, f"echo 'denied for {TOKEN} \033]0;x\007' >&2; exit 1")
    monkeypatch.setenv("PATH", env["PATH"])
    with pytest.raises(EnvironmentProblem) as caught:
        registry_credentials("ghcr.io", env, default_runner())
    details = caught.value.details or ""
    assert "denied for ***" in details and TOKEN not in details and "\x1b" not in details


def test_a_credential_helper_that_never_answers_is_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_file = tmp_path / "pid"
    env = _helper(tmp_path, f"echo $$ > {pid_file}; exec sleep 300")
    monkeypatch.setenv("PATH", env["PATH"])
    started = time.monotonic()
    with pytest.raises(EnvironmentProblem) as caught:
        registry_credentials("ghcr.io", env, default_runner())
    # the helper would sleep 300 s and fdl gives it 1 s: 60 s is far from both (a busy
    # machine does not make it fail, a helper waited for does)
    assert time.monotonic() - started < 60
    assert "FDL_CREDENTIAL_HELPER_TIMEOUT" in (caught.value.hint or "")
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


def test_an_endless_credential_helper_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _helper(tmp_path, "exec yes credentials")
    monkeypatch.setenv("PATH", env["PATH"])
    with pytest.raises(EnvironmentProblem, match="printed more than"):
        registry_credentials("ghcr.io", env, default_runner())


def test_an_unreachable_registry_is_a_network_error() -> None:
    with pytest.raises(NetworkError):
        RegistryClient("127.0.0.1:9", "team/libtorch").tags()


def test_the_registrys_text_is_printable_wherever_it_is_shown() -> None:
    """describe() is where pull, install, setup and `ci pushed` read annotations."""
    from fdl.libtorch.sources._oci import describe

    escape = "\x1b]0;pwned\x07\x1b[2J\u202e"
    found = {
        "dev.fdl.libtorch.torch": "2.13.0" + escape,
        "dev.fdl.libtorch.built-by": escape,
        "dev.fdl.libtorch.tag": "x\ny",
        "dev.fdl.libtorch.variant": json.dumps({"source": {"kind": "download"}}),
    }
    described = describe(found, "127.0.0.1:5000/team/libtorch:x")
    shown = f"{described.torch} {described.built_by} {described.covers_text} {described.tag}"
    assert "\x1b" not in shown and "\u202e" not in shown and "\n" not in shown
    assert described.built_by == "\\x1b]0;pwned\\x07\\x1b[2J\\u202e"
    assert described.tag == ""


@pytest.mark.parametrize(
    "reply",
    [
        Reply(raw_head=b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * 6000 + b"\r\n\r\n", trickle=True),
        Reply(200, b"{}" * 3000, trickle=True),
    ],
    ids=["headers", "body"],
)
def test_a_trickling_registry_ends_within_the_deadline(
    reply: Reply, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FDL_NET_DEADLINE", "1")
    with hostile_registry() as registry:
        registry.faults.append(answer("/tags/list", reply))
        started = time.monotonic()
        with pytest.raises(NetworkError, match="within 1 s"):
            RegistryClient(registry.address, "team/libtorch").tags()
    # each reply trickles for 2 minutes (20 ms a byte) and the deadline is 1 s: 30 s is far
    # from both, so only a client that waits for the whole reply fails here
    assert time.monotonic() - started < 30


def test_bodies_and_pages_are_bounded_and_say_how_to_raise_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FDL_REGISTRY_MAX_BODY", "64K")
    with hostile_registry() as registry:
        registry.faults.append(answer("/tags/list", Reply(200, b"[" * 4096, endless=True)))
        with pytest.raises(RegistryError) as endless:
            RegistryClient(registry.address, "team/libtorch").tags()
        registry.faults[:] = [
            answer(
                "/tags/list",
                Reply(
                    200, b'{"tags":[]}', {"Link": "</v2/team/libtorch/tags/list?n=1000>; rel=next"}
                ),
            )
        ]
        with pytest.raises(RegistryError, match="a page already read"):
            RegistryClient(registry.address, "team/libtorch").tags()
    assert "more than 65536 bytes" in endless.value.message
    assert "FDL_REGISTRY_MAX_BODY=256K (now 64K bytes)" in (endless.value.hint or "")


def test_a_silent_credential_helper_is_given_15_seconds_by_default() -> None:
    """Issue 42, 10: docker waits for a helper forever, fdl 60 s before; a helper that has
    not answered in 15 s is waiting for a person, and the refusal names the setting."""
    from fdl.engine._credentials import _helper_timeout

    assert _helper_timeout({}) == 15
    assert _helper_timeout({"FDL_CREDENTIAL_HELPER_TIMEOUT": "120"}) == 120
