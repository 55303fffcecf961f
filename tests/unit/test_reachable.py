"""rackforge_reachable_info against a server on loopback: 200 passes; a 404, a refused connection
and a server that never answers each fail the call, naming the URL, why and the variable; the
timeout bounds the wait."""

from __future__ import annotations

import http.server
import shutil
import socket
import threading
import time

import pytest
import rackforge_reachable_info
from ansible.module_utils.rackforge import packages_snapshot as S
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


# needed_for: the repository is checked only where something is to be installed from it (this build
# host's real dpkg: dpkg and apt are installed, never held here; nothing is changed)


def needs_dpkg():
    if not shutil.which("dpkg-query"):
        pytest.skip("not a Debian-family machine")


def test_a_repository_nothing_is_to_be_installed_from_is_not_checked(capsys):
    needs_dpkg()
    refused = "http://127.0.0.1:%d/repo/InRelease" % closed_port()
    args = {"urls": [{"url": refused, "var": "some_repo_url"}], "needed_for": {"packages": [{"name": "dpkg"}, {"name": "apt"}]}}
    res = call_module(rackforge_reachable_info, args, capsys)
    assert not res.get("failed") and res["not_needed"] is True and res["results"] == [], res
    assert res["msg"].startswith("not checked: every package these URLs serve is installed")


def test_a_repository_something_is_to_be_installed_from_is_checked(server, capsys):
    needs_dpkg()
    refused = "http://127.0.0.1:%d/repo/InRelease" % closed_port()
    for wanted in ([{"name": "rackforge-never-installed"}], [{"name": "dpkg", "hold": True}]):
        args = {"urls": [{"url": refused, "var": "some_repo_url"}], "needed_for": {"packages": wanted}, "host": "n1"}
        res = call_module(rackforge_reachable_info, args, capsys)
        assert res["failed"] and "cannot reach %s" % refused in res["msg"] and "check some_repo_url" in res["msg"], res
    ok = {"urls": [{"url": server + "/repo/InRelease", "var": "v"}], "needed_for": {"packages": [{"name": "rackforge-never-installed"}]}}
    res = call_module(rackforge_reachable_info, ok, capsys)
    assert not res.get("failed") and res["not_needed"] is False and res["results"][0]["status"] == 200


def test_the_controller_answers_from_the_runs_snapshot_as_the_node_would():
    """decide() over a snapshot: the same rule the module applies on the node (packages.plan)."""
    snap = S.snapshot("run", {"dpkg": {"version": "1.21.22", "held": False}}, {}, {})
    assert S.decide({"packages": [{"name": "dpkg"}]}, snap, "run") is not None  # not needed
    assert S.decide({"packages": [{"name": "dpkg", "hold": True}]}, snap, "run") is None  # needed: checked
    assert S.decide({"packages": [{"name": "dpkg"}]}, snap, "another run") is None
