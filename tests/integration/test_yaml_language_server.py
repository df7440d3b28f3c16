"""Editors know fdl.yml (issue 15): a project made by `fdl init` validates in the real YAML
language server (npm `yaml-language-server`, stdio mode, as VS Code and Neovim run it),
through the modeline's schema and the tags .vscode/settings.json declares.

The server comes from scripts/setup-machine.sh (`$FDL_TEST_TOOLS`, default
/opt/fdl-test-tools); the test skips without it unless docker tests are required (CI).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

TOOLS = Path(os.environ.get("FDL_TEST_TOOLS", "/opt/fdl-test-tools"))
SERVER = TOOLS / "node_modules" / "yaml-language-server" / "bin" / "yaml-language-server"


class Client:
    """A minimal LSP client over the server's stdin/stdout (Content-Length framing)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.proc = subprocess.Popen(
            ["node", str(SERVER), "--stdio"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.buffer = b""
        self.next_id = 1
        self.diagnostics: dict[str, list[dict[str, Any]]] = {}

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        ident = self.next_id
        self.next_id += 1
        self.send({"id": ident, "method": method, "params": params})
        while True:
            message = self.receive()
            if message.get("id") == ident and "method" not in message:
                return message

    def _read(self, deadline: float) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise TimeoutError("the language server did not answer")
        chunk = os.read(fd, 65536)
        if not chunk:
            raise EOFError("the language server exited")
        self.buffer += chunk

    def receive(self, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in self.buffer:
            self._read(deadline)
        header, _, rest = self.buffer.partition(b"\r\n\r\n")
        length = int(
            next(
                line.split(b":", 1)[1]
                for line in header.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
        )
        self.buffer = rest
        while len(self.buffer) < length:
            self._read(deadline)
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        message: dict[str, Any] = json.loads(body)
        self._answer(message)
        return message

    def _answer(self, message: dict[str, Any]) -> None:
        """Answer the server's requests (configuration, registrations) as an editor does."""
        method = message.get("method")
        if method == "textDocument/publishDiagnostics":
            params = message["params"]
            self.diagnostics[params["uri"]] = params["diagnostics"]
        if "id" not in message or method is None:
            return
        if method == "workspace/configuration":
            items = message["params"]["items"]
            result = [self.settings if i.get("section") == "yaml" else None for i in items]
            self.send({"id": message["id"], "result": result})
        else:
            self.send({"id": message["id"], "result": None})

    def diagnostics_for(self, uri: str, timeout: float = 60) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while uri not in self.diagnostics:
            self.receive(timeout=max(0.1, deadline - time.monotonic()))
        return self.diagnostics.pop(uri)

    def close(self) -> None:
        try:
            self.request("shutdown", {})
            self.send({"method": "exit"})
            self.proc.wait(timeout=10)
        except (OSError, TimeoutError, EOFError, subprocess.TimeoutExpired):
            self.proc.kill()


@pytest.fixture
def project(run_fdl, tmp_path: Path) -> Path:
    if not SERVER.is_file() or shutil.which("node") is None:
        if os.environ.get("FDL_REQUIRE_DOCKER"):
            pytest.fail(f"{SERVER} is missing: scripts/setup-machine.sh installs it")
        pytest.skip("yaml-language-server is not installed (scripts/setup-machine.sh)")
    result = run_fdl(
        ["init", "model", "--template", "cpp", "--mode", "native", "--yes"], cwd=tmp_path
    )
    assert result.exit_code == 0, result.output
    return tmp_path / "model"


def test_a_typo_in_fdl_yml_is_a_diagnostic_and_fdls_tags_are_known(project: Path) -> None:
    vscode = json.loads((project / ".vscode" / "settings.json").read_text())
    settings = {
        "validate": True,
        "completion": True,
        "customTags": vscode["yaml.customTags"],
        "schemaStore": {"enable": False},
    }
    manifest = (project / "fdl.yml").read_text()
    assert manifest.startswith("# yaml-language-server: $schema=.fdl/fdl.schema.json\n")
    client = Client(settings)
    try:
        client.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": project.as_uri(),
                "capabilities": {
                    "workspace": {"configuration": True},
                    "textDocument": {"publishDiagnostics": {}},
                },
            },
        )
        client.send({"method": "initialized", "params": {}})
        client.send(
            {
                "method": "workspace/didChangeConfiguration",
                "params": {"settings": {"yaml": settings}},
            }
        )
        uri = (project / "fdl.yml").as_uri()

        def check(text: str, version: int) -> list[str]:
            method = "textDocument/didOpen" if version == 1 else "textDocument/didChange"
            if version == 1:
                params: dict[str, Any] = {
                    "textDocument": {"uri": uri, "languageId": "yaml", "version": 1, "text": text}
                }
            else:
                params = {
                    "textDocument": {"uri": uri, "version": version},
                    "contentChanges": [{"text": text}],
                }
            client.send({"method": method, "params": params})
            return [d["message"] for d in client.diagnostics_for(uri)]

        assert check(manifest, 1) == []  # the generated manifest is valid
        typo = manifest.replace("\ncommands:", "\ncomands:", 1)
        messages = check(typo, 2)
        assert any("comands" in m for m in messages), messages
        tagged = manifest.replace("\n  variants: [cpu]", "\n  variants: !append [cpu]", 1)
        assert tagged != manifest  # the manifest's ci: section
        assert check(tagged, 3) == []  # !append is a known tag, not "Unresolved tag"
        # a value its pattern refuses: the editor says what it may hold and gives one
        refused = manifest.replace(
            "\ncommands:", "\ndeploy:\n  k8s: {kind: kubernetes, namespace: ML_Team}\ncommands:", 1
        )
        messages = check(refused, 4)
        assert any(
            "a Kubernetes name: lowercase letters, digits and '-'" in m and "e.g. ml" in m
            for m in messages
        ), messages
    finally:
        client.close()
