"""An HTTPS connection of a watched session reports its socket as an HTTP one does, after
HTTPSConnection's own connect (the TLS handshake) ran."""

from __future__ import annotations

from unittest import mock

import urllib3.connection

from fdl.net import _watch


def test_an_https_connection_connects_as_https_and_reports_its_socket() -> None:
    adapter = _watch._adapter_class()()
    https = adapter.poolmanager.pool_classes_by_scheme["https"].ConnectionCls
    calls: list[str] = []
    with (
        mock.patch.object(
            urllib3.connection.HTTPSConnection, "connect", lambda _c: calls.append("https")
        ),
        mock.patch.object(
            urllib3.connection.HTTPConnection, "connect", lambda _c: calls.append("http")
        ),
    ):
        connection = https("example.invalid")
        connection.sock = sock = object()
        _watch._local.sockets = watched = []
        try:
            connection.connect()
        finally:
            _watch._local.sockets = None
    assert calls == ["https"] and watched == [sock]
