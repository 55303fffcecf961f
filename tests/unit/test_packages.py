"""rackforge_packages' planner (module_utils/rackforge/packages.py, pure) on real dpkg-query and
apt-cache madison output. The module itself: on this Debian host in check mode in
test_packages_host.py; its installs, upgrades, downgrades and holds for real in a scratch container
in tests/integration/test_packages_module.py."""

from __future__ import annotations

import hashlib
import pathlib
import random
import shutil
import subprocess

import pytest
from ansible.module_utils.rackforge import packages as P

CAPTURED = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "captured"
MADISON_DEBIAN = (CAPTURED / "apt-cache-madison-debian12.txt").read_text()
MADISON_FILE = (CAPTURED / "apt-cache-madison-file-repos.txt").read_text()

# dpkg-query -W -f '${Package}\t${Version}\t${db:Status-Abbrev}\n' rftool rfflat rfextra nosuch bash,
# captured in a lab-image container (apt 2.6.2) after: rftool 1.2.0-1 installed, rfextra installed and
# held, rfflat installed, held and removed again (no conffiles: not-installed, the hold kept). It
# exits 1 and says on stderr which package it does not know; rows come sorted by name.
DPKG_ROWS = "bash\t5.2.15-2+b13\tii \nrfextra\t2.0-1\thi \nrfflat\t\thn \nrftool\t1.2.0-1\tii \n"
DPKG_STDERR = "dpkg-query: no packages found matching nosuch\n"
KEY = b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmDMEZ0test\n-----END PGP PUBLIC KEY BLOCK-----\n"
KEY_SHA = hashlib.sha256(KEY).hexdigest()


def repo(**kw):
    base = {
        "name": "rackforge-test",
        "url": "file:///srv/repo/deb",
        "suite": "bookworm",
        "components": ["main"],
        "key_url": "file:///srv/repo/key.asc",
        "key_checksum": KEY_SHA,
    }
    base.update(kw)
    return base


def pkg(name, version="", hold=False):
    return {"name": name, "version": version, "hold": hold}


# ------------------------------------------------------------------------------------ parsers


def test_dpkg_rows_real_capture():
    rows = P.parse_dpkg_rows(DPKG_ROWS)
    assert rows["bash"] == {"version": "5.2.15-2+b13", "status": "ii", "installed": True, "held": False}
    assert rows["rfextra"]["held"] and rows["rfextra"]["version"] == "2.0-1"
    # removed but still on hold: dpkg knows it, it is not installed
    assert rows["rfflat"] == {"version": None, "status": "hn", "installed": False, "held": True}
    assert "nosuch" not in rows
    assert P.dpkg_missing(DPKG_STDERR) == (["nosuch"], [])
    assert P.dpkg_missing("dpkg-query: error: --show needs a valid argument\n") == (
        [],
        ["dpkg-query: error: --show needs a valid argument"],
    )


def test_madison_real_debian_mirror():
    offered = P.parse_madison(MADISON_DEBIAN)
    assert offered["bash"] == ["5.2.15-2+b13"]  # the installed 5.2.15-2+b8 is in no index: not listed
    assert offered["openssl"] == ["3.0.22-1~deb12u2", "3.0.20-1~deb12u2", "3.0.17-1~deb12u2"]
    assert offered["openssh-client"] == ["1:9.2p1-2+deb12u10", "1:9.2p1-2+deb12u9", "1:9.2p1-2+deb12u7"]


def test_madison_real_file_and_flat_repositories_skip_sources_rows():
    offered = P.parse_madison(MADISON_FILE)
    assert offered == {"rftool": ["1.2.0-1", "1.0.0-1"], "rfflat": ["1.2.0-1.1", "1.0.0-1.1"], "rfextra": ["2.0-1"]}


@pytest.mark.parametrize("text", ["rftool | 1.0", "rftool |  | file:/srv Packages", "garbage", "a | b | c | d"])
def test_madison_rejects_what_is_not_its_format(text):
    with pytest.raises(P.ParseError, match="apt-cache madison printed"):
        P.parse_madison(text)


@pytest.mark.parametrize("text", ["bash 5.2 ii", "bash\t5.2", "\t1.0\tii ", "bash\t5.2\t\n"])
def test_dpkg_rows_rejects_what_is_not_its_format(text):
    with pytest.raises(P.ParseError, match="dpkg-query printed"):
        P.parse_dpkg_rows(text)


@pytest.mark.parametrize("seed", range(40))
def test_parsers_raise_only_parse_error_on_damaged_captures(seed):
    rnd = random.Random(seed)
    for parser, text in ((P.parse_madison, MADISON_DEBIAN + MADISON_FILE), (P.parse_dpkg_rows, DPKG_ROWS)):
        lines = text.splitlines()
        i = rnd.randrange(len(lines))
        cut = rnd.randrange(len(lines[i]) + 1)
        choice = rnd.randrange(4)
        if choice == 0:
            lines[i] = lines[i][:cut]
        elif choice == 1:
            lines[i] = lines[i][:cut] + rnd.choice(["|", "\t", " | ", "\x00", "é", "::"]) + lines[i][cut:]
        elif choice == 2:
            lines.insert(i, "".join(rnd.choice("ab|\t -:1") for _ in range(rnd.randrange(1, 30))))
        else:
            del lines[i]
        try:
            parser("\n".join(lines))
        except P.ParseError:
            pass


# ------------------------------------------------------------------------------------ versions

VERSION_PAIRS = [
    ("535.261.03-1", "535.247.01"),
    ("535.247.01-1", "535.247.01"),
    ("1.31.4-1.1", "1.31.5-1.1"),
    ("1.31.4+dfsg-1", "1.31.4"),
    ("1.0~rc1-1", "1.0-1"),
    ("1.0", "1.0-0"),
    ("1:9.2p1-2+deb12u10", "1:9.2p1-2+deb12u9"),
    ("1:1.0", "2.0"),
    ("3.0.22-1~deb12u2", "3.0.20-1~deb12u2"),
    ("5.2.15-2+b13", "5.2.15-2+b8"),
    ("1.0a", "1.0+"),
    ("1.0-1", "1.0-1"),
    ("2.0-1ubuntu1", "2.0-1"),
    ("1.2.0-1", "1.10.0-1"),
    ("0.9", "00.9"),
    ("1.0~", "1.0"),
]


@pytest.mark.parametrize(("a", "b"), VERSION_PAIRS)
def test_compare_versions_agrees_with_dpkg(a, b):
    """dpkg itself is the oracle (the Debian host this runs on has it)."""
    if not shutil.which("dpkg"):
        pytest.skip("no dpkg on this machine to compare with")

    def dpkg(op):
        return subprocess.run(["dpkg", "--compare-versions", a, op, b], check=False).returncode == 0

    want = 0 if dpkg("eq") else (1 if dpkg("gt") else -1)
    assert P.compare_versions(a, b) == want
    assert P.compare_versions(b, a) == -want


@pytest.mark.parametrize(
    ("have", "want", "matches"),
    [
        ("535.247.01-1", "535.247.01", True),
        ("535.247.01", "535.247.01", True),
        ("535.247.011-1", "535.247.01", False),  # a prefix is not a match: the revision starts at "-"
        ("1.31.4-1.1", "1.31", False),
        ("1.31.4-1.1", "", True),
        (None, "", False),
        (None, "1.0", False),
    ],
)
def test_version_matches_the_upstream_version_or_it_with_a_revision(have, want, matches):
    assert P.version_matches(have, want) is matches


@pytest.mark.parametrize(
    ("madison", "name", "want", "exact"),
    [
        (MADISON_DEBIAN, "openssl", "3.0.20", "3.0.20-1~deb12u2"),
        (MADISON_DEBIAN, "openssh-client", "1:9.2p1", "1:9.2p1-2+deb12u10"),  # the highest revision, u10 > u9
        (MADISON_DEBIAN, "bash", "", "5.2.15-2+b13"),
        (MADISON_DEBIAN, "bash", "5.2.15-2+b8", None),  # installed, but no repository offers it
        (MADISON_DEBIAN, "openssl", "3.0", None),
        (MADISON_FILE, "rftool", "1.0.0", "1.0.0-1"),
        (MADISON_FILE, "rftool", "1.2.0", "1.2.0-1"),
        (MADISON_FILE, "rfflat", "1.2.0", "1.2.0-1.1"),  # pkgs.k8s.io's scheme
        (MADISON_FILE, "rftool", "9.9", None),
        (MADISON_FILE, "rftool", "1.3.0", None),  # only a deb-src index has it: nothing to install
        (MADISON_FILE, "nosuch", "", None),
    ],
)
def test_resolve_version_from_real_madison(madison, name, want, exact):
    assert P.resolve_version(want, P.parse_madison(madison).get(name, [])) == exact


def test_resolve_version_takes_the_highest_match_in_any_order():
    offered = P.parse_madison(MADISON_DEBIAN)["openssh-client"]
    for order in (offered, list(reversed(offered)), offered[1:] + offered[:1]):
        assert P.resolve_version("1:9.2p1", order) == "1:9.2p1-2+deb12u10"


def test_resolve_pins_versioned_packages_and_leaves_unversioned_to_apt():
    install = [pkg("rftool", "1.0.0"), pkg("rfextra"), pkg("rfflat", "9.9"), pkg("nosuch")]
    targets, unresolved = P.resolve(install, P.parse_madison(MADISON_FILE))
    assert targets == [
        {"name": "rftool", "arg": "rftool=1.0.0-1", "version": "1.0.0-1"},
        {"name": "rfextra", "arg": "rfextra", "version": "2.0-1"},
    ]
    assert unresolved == [("rfflat", "9.9", ["1.2.0-1.1", "1.0.0-1.1"]), ("nosuch", "", [])]
    msg = P.unresolved_message("rfflat", "9.9", ["1.2.0-1.1", "1.0.0-1.1"], repo(url="file:///srv/repo/flat", suite="/", components=[]))
    assert msg == "rfflat 9.9 is not available from file:///srv/repo/flat / after apt-get update: it offers 1.2.0-1.1, 1.0.0-1.1"
    assert "offers no version of nosuch" in P.unresolved_message("nosuch", "", [], None)


# ------------------------------------------------------------------------------------ the plan

ROWS = P.parse_dpkg_rows(DPKG_ROWS)
LINE = "deb [signed-by=/etc/apt/keyrings/rackforge-test.asc] file:///srv/repo/deb bookworm main\n"


@pytest.mark.parametrize(
    ("packages", "key_sha", "source", "allow", "want"),
    [
        # everything in place: nothing to do
        ([pkg("rftool", "1.2.0"), pkg("rfextra", "2.0", hold=True)], KEY_SHA, LINE, False, {}),
        ([pkg("bash")], KEY_SHA, LINE, False, {}),
        # installed at another version: an upgrade, held again after it (apt drops the hold)
        ([pkg("rfextra", "2.1", hold=True)], KEY_SHA, LINE, False, {"install": [("rfextra", "2.1")], "hold": ["rfextra"]}),
        # not installed (never, or removed while held)
        ([pkg("nosuch", "1.0")], KEY_SHA, LINE, False, {"install": [("nosuch", "1.0")]}),
        ([pkg("rfflat", "1.0.0", hold=True)], KEY_SHA, LINE, False, {"install": [("rfflat", "1.0.0")], "hold": ["rfflat"]}),
        # at its version, not held
        ([pkg("rftool", "1.2.0", hold=True)], KEY_SHA, LINE, False, {"hold": ["rftool"]}),
        # hold false never releases a hold
        ([pkg("rfextra", "2.0", hold=False)], KEY_SHA, LINE, False, {}),
        # key missing or another one; source missing, another line, or an extra line
        ([pkg("rftool", "1.2.0")], None, LINE, False, {"key": True}),
        ([pkg("rftool", "1.2.0")], "0" * 64, LINE, False, {"key": True}),
        ([pkg("rftool", "1.2.0")], KEY_SHA, None, False, {"source": True}),
        ([pkg("rftool", "1.2.0")], KEY_SHA, LINE.replace("bookworm", "trixie"), False, {"source": True}),
        ([pkg("rftool", "1.2.0")], KEY_SHA, LINE + "deb http://elsewhere.invalid x main\n", False, {"source": True}),
        # a downgrade: refused unless allowed
        ([pkg("rftool", "1.0.0", hold=True)], KEY_SHA, LINE, False, {"install": [("rftool", "1.0.0")], "hold": ["rftool"], "refused": 1}),
        ([pkg("rftool", "1.0.0", hold=True)], KEY_SHA, LINE, True, {"install": [("rftool", "1.0.0")], "hold": ["rftool"]}),
    ],
)
def test_plan(packages, key_sha, source, allow, want):
    result = P.plan(ROWS, packages, repo(), key_sha, source, allow)
    assert result["key"] is want.get("key", False)
    assert result["source"] is want.get("source", False)
    assert [(p["name"], p["version"]) for p in result["install"]] == want.get("install", [])
    assert result["hold"] == want.get("hold", [])
    assert len(result["refused"]) == want.get("refused", 0)
    assert P.nothing_to_do(result) is (not want)


def test_downgrade_message_names_package_and_both_versions():
    result = P.plan(ROWS, [pkg("rftool", "1.0.0")], None)
    assert result["refused"] == [
        "rftool is installed at 1.2.0-1, newer than the wanted 1.0.0: refusing to downgrade (allow_downgrade: true allows it)"
    ]
    # an upgrade, or a revision of the same upstream version, is no downgrade
    assert not P.plan(ROWS, [pkg("rftool", "1.10.0")], None)["refused"]
    assert not P.is_downgrade("1.2.0-1", "1.2.0")


def test_plan_without_repository_never_touches_key_or_source():
    result = P.plan(ROWS, [pkg("bash")], None, None, None)
    assert P.nothing_to_do(result) and not result["key"] and not result["source"]


def test_source_lines_are_what_the_roles_write_today():
    """The roles' apt_repository tasks wrote exactly these lines (plus a newline): a converted node is a no-op."""
    assert P.source_line(repo()) == LINE.strip()
    flat = repo(name="rackforge-kubernetes", url="https://pkgs.k8s.io/core:/stable:/v1.31/deb/", suite="/", components=[])
    assert (
        P.source_line(flat) == "deb [signed-by=/etc/apt/keyrings/rackforge-kubernetes.asc] https://pkgs.k8s.io/core:/stable:/v1.31/deb/ /"
    )
    assert P.key_path("rackforge-nvidia") == "/etc/apt/keyrings/rackforge-nvidia.asc"
    assert P.source_path("rackforge-nvidia") == "/etc/apt/sources.list.d/rackforge-nvidia.list"


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"name": "../etc/x"}, "repository.name"),
        ({"url": "file:///a b"}, "repository.url"),
        ({"suite": "/", "components": ["main"]}, "takes no components"),
        ({"components": []}, "needs at least one component"),
        ({"key_checksum": "abc"}, "64 hex digits"),
        ({"key_url": ""}, "repository.key_url"),
    ],
)
def test_repository_problems(change, fragment):
    assert not P.repository_problems(repo())
    assert not P.repository_problems(repo(suite="/", components=[]))
    assert not P.repository_problems(repo(key_checksum="sha256:" + KEY_SHA.upper()))
    problems = P.repository_problems(repo(**change))
    assert len(problems) == 1 and fragment in problems[0]


def test_package_problems():
    assert not P.package_problems([pkg("nvidia-driver-535", "535.247.01"), pkg("libstdc++6")])
    assert P.package_problems([pkg("Bash")]) == [
        "packages: 'Bash' is not a Debian package name (lower case letters, digits, '+', '-', '.')"
    ]
    assert P.package_problems([pkg("kube*")])  # dpkg-query would read it as a pattern
    assert P.package_problems([pkg("a1"), pkg("a1")]) == ["packages: a1 is listed twice"]
    assert P.package_problems([pkg("a1", "1.0 2.0")]) == ["packages: a1: version '1.0 2.0' has spaces"]


def test_key_problem_checksum_and_armor():
    assert P.key_problem(KEY, repo()) is None
    wrong = P.key_problem(KEY, repo(key_checksum="f" * 64))
    assert "file:///srv/repo/key.asc" in wrong and KEY_SHA in wrong and "f" * 64 in wrong and "nothing written" in wrong
    binary = b"\x99\x01\x0d\x04binary-key"
    problem = P.key_problem(binary, repo(key_checksum=hashlib.sha256(binary).hexdigest()))
    assert "not an ASCII-armored" in problem and "/etc/apt/keyrings/rackforge-test.asc" in problem


def test_install_argv():
    targets = [{"name": "rftool", "arg": "rftool=1.0.0-1", "version": "1.0.0-1"}, {"name": "rfextra", "arg": "rfextra", "version": "2.0-1"}]
    argv = "/usr/bin/apt-get install -y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold"
    want = argv + " --allow-change-held-packages --no-install-recommends rftool=1.0.0-1 rfextra"
    assert P.install_argv("/usr/bin/apt-get", targets) == want.split()
    argv = P.install_argv("apt-get", targets, allow_downgrade=True, install_recommends=True)
    assert "--allow-downgrades" in argv and "--no-install-recommends" not in argv


def test_after_state_predicts_check_mode():
    packages = [pkg("rftool", "1.0.0", hold=True), pkg("rfextra", "2.0", hold=True), pkg("nosuch", "3.0", hold=True)]
    result = P.plan(ROWS, packages, None, allow_downgrade=True)
    targets, unresolved = P.resolve(result["install"], P.parse_madison(MADISON_FILE))
    after = P.after_state(ROWS, packages, result, targets, unresolved)
    assert after == {
        "rftool": {"version": "1.0.0-1", "held": True},
        "rfextra": {"version": "2.0-1", "held": True},  # in place: unchanged
        "nosuch": {"version": "3.0", "held": True},  # not resolvable yet: the wanted version
    }
    assert P.package_table(after) == "nosuch 3.0 (held)\nrfextra 2.0-1 (held)\nrftool 1.0.0-1 (held)\n"
    assert P.package_table(P.state_of(ROWS, [pkg("nosuch")])) == "nosuch (not installed)\n"


def test_verify_problems_after_the_change():
    assert not P.verify_problems(ROWS, [pkg("rftool", "1.2.0"), pkg("rfextra", "2.0", hold=True)])
    assert P.verify_problems(ROWS, [pkg("rftool", "1.2.0", hold=True)]) == ["rftool is not held after apt-mark hold"]
    assert P.verify_problems(ROWS, [pkg("rfflat", "1.0.0")]) == ["rfflat is at (not installed) after the install, wanted 1.0.0"]
