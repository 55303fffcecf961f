"""rackforge_packages for real: Ansible runs the module (podman connection) in a scratch container
from the lab image, against a small signed apt repository built here with lab/mirror/build.py's
build_deb/write_repo/write_flat_repo (real dpkg-deb, gpg, apt-get, apt-cache, apt-mark, dpkg). The
container has no network (--network none) and the repository mounted read-only (file:// URLs); it
is this module's own container, never the shared lab. Every call the module makes to apt-get,
apt-cache, apt-mark or dpkg-query goes through a logging shim in /usr/local/bin that runs the real
tool, so "a no-op re-run makes no apt-get call" is read off the log."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOLS = {
    "apt-get": "/usr/bin/apt-get",
    "apt-cache": "/usr/bin/apt-cache",
    "apt-mark": "/usr/bin/apt-mark",
    "dpkg-query": "/usr/bin/dpkg-query",
}
CALLS = "/var/log/rackforge-test-calls.log"
NAME = "rackforge-test"
KEY = "/etc/apt/keyrings/%s.asc" % NAME
SOURCE = "/etc/apt/sources.list.d/%s.list" % NAME
# logs one line per call: the tool and its arguments (tabs and newlines in them as ~), then runs the real tool
SHIM = """#!/bin/sh
{ printf %%s %(tool)s; for a in "$@"; do printf ' %%s' "$a"; done; } | tr '\\t\\n' '~~' >> %(log)s
echo >> %(log)s
exec %(real)s "$@"
"""
STATE = "find /etc/apt /var/lib/dpkg/status /var/lib/apt/lists -type f -exec sha256sum {} + | sort | sha256sum"

pytestmark = pytest.mark.skipif(not shutil.which("podman"), reason="needs podman (make test has it)")


def mirror_build():
    """lab/mirror/build.py, loaded by path (its module name, build, is too common to import)."""
    spec = importlib.util.spec_from_file_location("rackforge_lab_mirror_build", ROOT / "lab" / "mirror" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tiny(name, version):
    return {
        "Package": name,
        "Version": version,
        "Description": "rackforge test package %s\n A version file, nothing else." % version,
        "files": {"usr/share/%s/version" % name: version + "\n"},
        "postinst": None,
    }


def build_repository(base):
    """base/repo: deb/ (suite bookworm, main: rftool 1.0.0-1 and 1.2.0-1, rfextra 2.0-1), flat/
    (pkgs.k8s.io's layout: rfflat 1.0.0-1.1 and 1.2.0-1.1), key.asc (their signing key) and
    other.asc (a key that signed nothing). The gpg homes stay outside the mounted tree."""
    build = mirror_build()
    repo = base / "repo"
    flat = repo / "flat"
    flat.mkdir(parents=True)
    homes = []
    for label in ("signer", "other"):
        home = base / ("gnupg-" + label)
        home.mkdir(mode=0o700)
        build.gpg(
            str(home),
            "--passphrase",
            "",
            "--quick-generate-key",
            "rackforge %s <%s@rackforge.invalid>" % (label, label),
            "ed25519",
            "sign",
            "never",
        )
        homes.append(str(home))
    try:
        debs = [("rftool", "1.0.0-1"), ("rftool", "1.2.0-1"), ("rfextra", "2.0-1")]
        build.write_repo(str(repo / "deb"), "rackforge test", lambda pool: [build.build_deb(tiny(n, v), pool) for n, v in debs], homes[0])
        for version in ("1.0.0-1.1", "1.2.0-1.1"):
            build.build_deb(tiny("rfflat", version), str(flat))
        build.write_flat_repo(str(flat), homes[0])
        for home, key in zip(homes, ("key.asc", "other.asc")):
            with open(repo / key, "w") as fh:
                build.gpg(home, "--armor", "--export", stdout=fh)
    finally:
        for home in homes:
            subprocess.run(["gpgconf", "--homedir", home, "--kill", "gpg-agent"], check=False)
    return repo


class Node:
    def __init__(self, container, repo):
        self.container = container
        self.key_sha = hashlib.sha256((repo / "key.asc").read_bytes()).hexdigest()
        self.other_sha = hashlib.sha256((repo / "other.asc").read_bytes()).hexdigest()
        self.timings = []

    def sh(self, script, check=True, stdin=None):
        argv = ["podman", "exec", *(["-i"] if stdin is not None else []), self.container, "sh", "-c", script]
        return subprocess.run(argv, capture_output=True, text=True, check=check, input=stdin)

    def repository(self, **kw):
        base = {"name": NAME, "url": "file:///srv/repo/deb", "suite": "bookworm", "components": ["main"]}
        base.update({"key_url": "file:///srv/repo/key.asc", "key_checksum": self.key_sha}, **kw)
        return base

    def module(self, args, check=False, diff=False):
        """Run rackforge_packages in the container through Ansible; its result, and the shim's log
        of the apt/dpkg calls it made (each 'tool args...')."""
        self.sh(": > %s" % CALLS)
        env = dict(
            os.environ,
            ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
            ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
            ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        )
        argv = [
            "ansible",
            "all",
            "-i",
            self.container + ",",
            "-c",
            "containers.podman.podman",
            "-m",
            "rackforge_packages",
            "-a",
            json.dumps(args),
        ]
        argv += ["--check"] * check + ["--diff"] * diff
        start = time.monotonic()
        res = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
        self.timings.append((args.get("packages"), check, time.monotonic() - start))
        try:
            result = json.loads(res.stdout)["plays"][0]["tasks"][0]["hosts"][self.container]
        except (ValueError, KeyError, IndexError) as exc:
            raise AssertionError(
                "no result from ansible (rc %s): %s\n%s" % (res.returncode, res.stdout[-3000:], res.stderr[-3000:])
            ) from exc
        return result, self.sh("cat %s" % CALLS).stdout.splitlines()

    def rows(self):
        """dpkg's rows of the test packages it has installed or on hold ("un": purged, forgotten)."""
        fmt = "${Package} ${Version} ${db:Status-Abbrev}\\n"
        out = self.sh("/usr/bin/dpkg-query -W -f '%s' rftool rfextra rfflat 2>/dev/null" % fmt, check=False).stdout
        return sorted(line for line in out.split("\n") if line and not line.endswith(" un "))

    def state(self):
        return self.sh(STATE).stdout

    def reset(self):
        """A node that never had the repository or the packages."""
        packages = "rftool rfextra rfflat"
        self.sh("/usr/bin/apt-mark unhold %s >/dev/null; /usr/bin/dpkg --purge %s >/dev/null" % (packages, packages))
        self.sh("rm -f %s %s; find /var/lib/apt/lists -maxdepth 1 ! -type d ! -name lock -delete" % (KEY, SOURCE))


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    image = subprocess.run(["bash", str(ROOT / "lab" / "build-image.sh")], capture_output=True, text=True, check=True).stdout.split()[-1]
    repo = build_repository(tmp_path_factory.mktemp("packages"))
    name = "rackforge-scratch-packages-%d" % os.getpid()
    podman = ["podman", "run", "-d", "--name", name, "--runtime", "runc", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]
    subprocess.run(
        [*podman, "--systemd=always", "--network", "none", "-v", "%s:/srv/repo:ro" % repo, image], check=True, capture_output=True
    )
    try:
        n = Node(name, repo)
        for _ in range(60):
            if n.sh("systemctl is-system-running", check=False).stdout.strip() in ("running", "degraded"):
                break
            time.sleep(0.5)
        # the image's Debian sources cannot be reached without a network: only the test repository stays
        n.sh("mv /etc/apt/sources.list /etc/apt/sources.list.rackforge-test")
        for tool, real in TOOLS.items():
            n.sh(
                "cat > /usr/local/bin/%s && chmod 755 /usr/local/bin/%s" % (tool, tool),
                stdin=SHIM % {"tool": tool, "log": CALLS, "real": real},
            )
        yield n
        print("\nrackforge_packages timings (s): " + "; ".join("%s%s %.1f" % (p, " check" if c else "", t) for p, c, t in n.timings))
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "0", name], check=False, capture_output=True)


def tools(calls):
    return [c.split()[0] + (" " + c.split()[1] if c.split()[0] != "dpkg-query" else "") for c in calls]


RFTOOL_1 = [{"name": "rftool", "version": "1.0.0", "hold": True}, {"name": "rfextra"}]


def test_check_mode_on_a_fresh_node_changes_nothing(node):
    node.reset()
    before = node.state()
    res, calls = node.module({"repository": node.repository(), "packages": RFTOOL_1}, check=True, diff=True)
    assert res["changed"] is True and not res.get("failed"), res
    assert res["actions"] == [
        "key " + KEY,
        "source " + SOURCE,
        "apt-get update",
        "would install rftool 1.0.0 from file:///srv/repo/deb",
        "would install rfextra (any version) from file:///srv/repo/deb",
        "hold rftool",
    ]
    assert tools(calls) == ["dpkg-query"]  # one read; no apt call at all
    assert node.state() == before and node.rows() == []
    source = next(d for d in res["diff"] if d["before_header"] == SOURCE)
    assert source == {
        "before_header": SOURCE,
        "after_header": SOURCE,
        "before": "",
        "after": "deb [signed-by=%s] file:///srv/repo/deb bookworm main\n" % KEY,
    }


def test_first_run_installs_pins_and_holds_and_a_rerun_calls_no_apt(node):
    node.reset()
    res, calls = node.module({"repository": node.repository(), "packages": RFTOOL_1})
    assert res["changed"] is True and not res.get("failed"), res
    assert res["actions"] == [
        "key " + KEY,
        "source " + SOURCE,
        "apt-get update",
        "install rftool=1.0.0-1",
        "install rfextra",
        "hold rftool",
    ]
    assert tools(calls) == ["dpkg-query", "apt-get update", "apt-cache madison", "apt-get install", "apt-mark hold", "dpkg-query"]
    install = next(c for c in calls if c.startswith("apt-get install"))
    assert "--allow-change-held-packages" in install and "--no-install-recommends" in install and "--allow-downgrades" not in install
    assert node.rows() == ["rfextra 2.0-1 ii ", "rftool 1.0.0-1 hi "]
    assert res["packages"]["rftool"] == {"before": {"version": None, "held": False}, "after": {"version": "1.0.0-1", "held": True}}
    assert node.sh("sha256sum %s" % KEY).stdout.split()[0] == node.key_sha
    assert node.sh("stat -c %%a %s %s" % (KEY, SOURCE)).stdout.split() == ["644", "644"]
    assert node.sh("cat " + SOURCE).stdout == "deb [signed-by=%s] file:///srv/repo/deb bookworm main\n" % KEY

    state = node.state()
    again, calls = node.module({"repository": node.repository(), "packages": RFTOOL_1})
    assert again["changed"] is False and again["actions"] == [] and again["diff"] == [], again
    # the one read, nothing else: of every package, since through its action plugin the first call of
    # a run (each `ansible` run here) also takes the run's package snapshot
    assert calls == ["dpkg-query -W -f ${Package}~${Version}~${db:Status-Abbrev}~"]
    checked, calls = node.module({"repository": node.repository(), "packages": RFTOOL_1}, check=True, diff=True)
    assert checked["changed"] is False and checked["actions"] == [] and tools(calls) == ["dpkg-query"]
    assert node.state() == state


def test_upgrade_to_the_second_version(node):
    node.reset()
    node.module({"repository": node.repository(), "packages": RFTOOL_1})
    wanted = [{"name": "rftool", "version": "1.2.0", "hold": True}, {"name": "rfextra"}]
    state = node.state()
    preview, calls = node.module({"repository": node.repository(), "packages": wanted}, check=True, diff=True)
    assert preview["actions"] == ["install rftool=1.2.0-1", "hold rftool"], preview  # lists fresh, version in them: no update
    assert tools(calls) == ["dpkg-query", "apt-cache madison"] and node.state() == state
    table = next(d for d in preview["diff"] if d["before_header"] == "packages")
    assert table["before"] == "rfextra 2.0-1\nrftool 1.0.0-1 (held)\n" and table["after"] == "rfextra 2.0-1\nrftool 1.2.0-1 (held)\n"
    stale, _ = node.module({"repository": node.repository(), "packages": wanted, "cache_valid_time": 0}, check=True)
    assert stale["actions"] == ["apt-get update", "install rftool=1.2.0-1", "hold rftool"]

    res, calls = node.module({"repository": node.repository(), "packages": wanted})
    assert res["actions"] == preview["actions"] and res["packages"]["rftool"]["after"] == preview["packages"]["rftool"]["after"]
    assert tools(calls) == ["dpkg-query", "apt-cache madison", "apt-get install", "apt-mark hold", "dpkg-query"]
    assert node.rows() == ["rfextra 2.0-1 ii ", "rftool 1.2.0-1 hi "]


def test_downgrade_refused_without_allow_downgrade_and_done_with_it(node):
    node.reset()
    node.module({"repository": node.repository(), "packages": [{"name": "rftool", "version": "1.2.0", "hold": True}]})
    wanted = [{"name": "rftool", "version": "1.0.0", "hold": True}]
    state = node.state()
    refused, calls = node.module({"repository": node.repository(), "packages": wanted})
    assert refused.get("failed"), refused
    assert "rftool is installed at 1.2.0-1, newer than the wanted 1.0.0: refusing to downgrade" in refused["msg"]
    assert tools(calls) == ["dpkg-query"] and node.state() == state

    res, calls = node.module({"repository": node.repository(), "packages": wanted, "allow_downgrade": True})
    assert res["actions"] == ["install rftool=1.0.0-1", "hold rftool"], res
    assert "--allow-downgrades" in next(c for c in calls if c.startswith("apt-get install"))
    assert node.rows() == ["rftool 1.0.0-1 hi "]


def test_wrong_key_checksum_fails_and_writes_nothing(node):
    node.reset()
    res, calls = node.module({"repository": node.repository(key_checksum=node.other_sha), "packages": RFTOOL_1})
    assert res.get("failed") and "file:///srv/repo/key.asc" in res["msg"], res
    assert "sha256 %s" % node.key_sha in res["msg"] and node.other_sha in res["msg"]
    assert tools(calls) == ["dpkg-query"]
    assert node.sh("ls %s %s" % (KEY, SOURCE), check=False).returncode != 0  # neither written


def test_flat_repository_and_a_version_it_does_not_offer(node):
    node.reset()
    flat = node.repository(url="file:///srv/repo/flat", suite="/", components=[])
    res, _ = node.module({"repository": flat, "packages": [{"name": "rfflat", "version": "1.2.0", "hold": True}]})
    assert res["actions"] == ["key " + KEY, "source " + SOURCE, "apt-get update", "install rfflat=1.2.0-1.1", "hold rfflat"], res
    assert node.sh("cat " + SOURCE).stdout == "deb [signed-by=%s] file:///srv/repo/flat /\n" % KEY
    assert node.rows() == ["rfflat 1.2.0-1.1 hi "]

    missing, calls = node.module({"repository": flat, "packages": [{"name": "rfflat", "version": "9.9"}]})
    assert missing.get("failed"), missing
    assert (
        missing["msg"]
        == "rackforge_packages: rfflat 9.9 is not available from file:///srv/repo/flat / after apt-get update: it offers 1.2.0-1.1, 1.0.0-1.1"
    )
    # not in the lists: they were updated once before giving up, and nothing was installed
    assert tools(calls) == ["dpkg-query", "apt-cache madison", "apt-get update", "apt-cache madison"]
    assert node.rows() == ["rfflat 1.2.0-1.1 hi "]


def test_a_key_that_did_not_sign_the_repository_fails_with_apt_evidence(node):
    node.reset()
    repository = node.repository(key_url="file:///srv/repo/other.asc", key_checksum=node.other_sha)
    res, calls = node.module({"repository": repository, "packages": RFTOOL_1})
    assert res.get("failed") and res["msg"].startswith("rackforge_packages: apt-get update failed (rc 100)"), res
    assert res["rc"] == 100 and "NO_PUBKEY" in res["stdout"] + res["stderr"] and "is not signed" in res["stderr"]
    assert res["actions"] == ["key " + KEY, "source " + SOURCE]  # what was done before apt refused
    assert tools(calls) == ["dpkg-query", "apt-get update"] and node.rows() == []
