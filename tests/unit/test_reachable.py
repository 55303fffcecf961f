"""rackforge_reachable_info against a server on loopback: 200 passes; a 404, a refused connection
and a server that never answers each fail the call, naming the URL, why and the variable; the
timeout bounds the wait."""

from __future__ import annotations

import http.server
import socket
import threading
import time

import pytest
import rackforge_reachable_info
from module_helper import call_module


class Handler(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self):
        self.send_response(200 if self.path == "/repo/InRelease" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d" % srv.server_address[1]
    srv.shutdown()


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_source_that_answers_200_passes_in_check_mode_too(server, capsys):
    args = {"urls": [{"url": server + "/repo/InRelease", "var": "nvidia_driver_repo_url"}], "host": "n1"}
    for check in (False, True):
        res = call_module(rackforge_reachable_info, args, capsys, check_mode=check)
        assert not res.get("failed") and not res["changed"], res
        assert res["results"] == [{"url": server + "/repo/InRelease", "var": "nvidia_driver_repo_url", "status": 200, "reason": "HTTP 200"}]


def test_every_unreachable_source_is_named_with_why_and_its_variable(server, capsys):
    refused = "http://127.0.0.1:%d/x.run" % closed_port()
    args = {
        "urls": [
            {"url": server + "/repo/InRelease", "var": "nvidia_driver_repo_url"},
            {"url": server + "/missing.run", "var": "nvidia_driver_runfile_url"},
            {"url": refused, "var": "nvidia_driver_runfile_url"},
        ],
        "host": "n1",
    }
    res = call_module(rackforge_reachable_info, args, capsys)
    assert res["failed"]
    assert res["msg"].startswith("n1: cannot reach %s/missing.run (HTTP 404): check nvidia_driver_runfile_url" % server)
    assert "cannot reach %s (" % refused in res["msg"] and "refused" in res["msg"] and res["msg"].endswith("Nothing was changed.")
    assert server + "/repo/InRelease" not in res["msg"]


def test_a_server_that_never_answers_fails_within_the_timeout(capsys):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts the connection, never answers
    try:
        url = "http://127.0.0.1:%d/InRelease" % silent.getsockname()[1]
        start = time.monotonic()
        res = call_module(rackforge_reachable_info, {"urls": [{"url": url, "var": "kubernetes_node_repo_url"}], "timeout": 1}, capsys)
        assert time.monotonic() - start < 5
    finally:
        silent.close()
    assert res["failed"] and "cannot reach %s (" % url in res["msg"] and "kubernetes_node_repo_url" in res["msg"], res["msg"]
