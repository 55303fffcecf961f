"""apt packages as one concern (pure; no I/O): what differs between a node's packages, repository
key and source and what is wanted, the exact version to install for a requested upstream version,
and every message the rackforge_packages module gives. The module reads (dpkg-query, the key's
sha256, the source file, apt-cache madison) and acts; everything it decides is decided here.

A wanted version is an upstream version ("535.247.01"): the installed version must equal it or
start with "<version>-" (any Debian revision); an empty version is any installed version."""

from __future__ import annotations

import hashlib
import re

KEYRING_DIR = "/etc/apt/keyrings"
SOURCES_DIR = "/etc/apt/sources.list.d"
# one row per package dpkg knows: name, version (empty when not installed), status abbreviation
DPKG_FORMAT = "${Package}\t${Version}\t${db:Status-Abbrev}\n"
ARMORED_KEY = b"-----BEGIN PGP PUBLIC KEY BLOCK-----"

_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]*$")  # Debian policy 5.6.1; also keeps dpkg-query's globs out
_STEM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_MISSING = re.compile(r"^dpkg-query: no packages found matching (\S+)$")


class ParseError(ValueError):
    """dpkg-query or apt-cache output that is not in the format asked for (the message quotes it)."""


# ---------------------------------------------------------------------------------- the request


def key_path(name):
    return "%s/%s.asc" % (KEYRING_DIR, name)


def source_path(name):
    return "%s/%s.list" % (SOURCES_DIR, name)


def is_flat(repository):
    """A flat repository (`deb URL /`, as pkgs.k8s.io publishes) has a suite ending in "/" and no components."""
    return str(repository.get("suite") or "").endswith("/")


def source_line(repository):
    """The one line of the source file: `deb [signed-by=KEY] URL SUITE COMPONENT...`."""
    words = ["deb", "[signed-by=%s]" % key_path(repository["name"]), repository["url"], repository["suite"]]
    return " ".join(words + list(repository.get("components") or []))


def normalize_checksum(value):
    text = str(value or "").strip().lower()
    return text[len("sha256:") :] if text.startswith("sha256:") else text


def repository_problems(repository):
    """What is wrong with a repository option, one message per problem ([] when it is usable)."""
    problems = []
    name = str(repository.get("name") or "")
    if not _STEM.match(name):
        problems.append("repository.name %r must be a file name stem (letters, digits, '.', '_', '-'), e.g. rackforge-nvidia" % name)
    for key in ("url", "suite", "key_url"):
        value = str(repository.get(key) or "")
        if not value or any(c.isspace() for c in value):
            problems.append("repository.%s %r must be one non-empty word" % (key, value))
    components = list(repository.get("components") or [])
    if any(not str(c) or any(ch.isspace() for ch in str(c)) for c in components):
        problems.append("repository.components %r must be words without spaces" % (components,))
    if is_flat(repository) and components:
        problems.append("repository.suite %r is flat (ends in /): it takes no components, got %s" % (repository["suite"], components))
    if repository.get("suite") and not is_flat(repository) and not components:
        problems.append("repository.suite %r needs at least one component (e.g. main), or '/' for a flat repository" % repository["suite"])
    if not _SHA256.match(normalize_checksum(repository.get("key_checksum"))):
        problems.append("repository.key_checksum %r must be the key file's sha256 (64 hex digits)" % (repository.get("key_checksum"),))
    return problems


def package_problems(packages):
    problems, seen = [], set()
    for pkg in packages:
        name, version = str(pkg.get("name") or ""), str(pkg.get("version") or "")
        if not _NAME.match(name):
            problems.append("packages: %r is not a Debian package name (lower case letters, digits, '+', '-', '.')" % name)
        elif name in seen:
            problems.append("packages: %s is listed twice" % name)
        seen.add(name)
        if any(c.isspace() for c in version):
            problems.append("packages: %s: version %r has spaces" % (name, version))
    return problems


# ---------------------------------------------------------------------------------- the reads


def parse_dpkg_rows(text):
    """`dpkg-query -W -f DPKG_FORMAT PKG...` -> {name: {version, status, installed, held}}. installed:
    dpkg's status is "installed" (second letter i); held: the selection is hold (first letter h).
    version is None when the package is not installed (dpkg may still know it, e.g. removed)."""
    rows = {}
    for line in str(text or "").splitlines():
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 3 or not parts[0] or len(parts[2].strip()) < 2:
            raise ParseError("dpkg-query printed %r, expected package<TAB>version<TAB>status (e.g. 'bash\\t5.2.15-2+b8\\tii ')" % line)
        name, version, status = parts[0], parts[1], parts[2].strip()
        row = {"version": version if status[1] == "i" else None, "status": status, "installed": status[1] == "i", "held": status[0] == "h"}
        if name not in rows or (row["installed"] and not rows[name]["installed"]):  # multi-arch: the installed row wins
            rows[name] = row
    return rows


def dpkg_missing(stderr):
    """The packages dpkg-query reported it does not know (it exits 1 then), and any other stderr
    lines (which are a real failure)."""
    missing, other = [], []
    for line in str(stderr or "").splitlines():
        match = _MISSING.match(line.strip())
        if match:
            missing.append(match.group(1))
        elif line.strip():
            other.append(line)
    return missing, other


def parse_madison(text):
    """`apt-cache madison PKG...` -> {name: [versions offered, as listed]}: the binary package
    indexes only (a deb-src index adds "... Sources" rows, which cannot be installed). A package
    no index knows has no rows at all."""
    offered = {}
    for line in str(text or "").splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(" | ")]
        if len(parts) != 3 or not all(parts):
            raise ParseError("apt-cache madison printed %r, expected 'package | version | index'" % line)
        name, version, index = parts
        if index.endswith(" Sources"):
            continue
        versions = offered.setdefault(name, [])
        if version not in versions:
            versions.append(version)
    return offered


# ---------------------------------------------------------------------------------- versions


def _digit(c):
    return "0" <= c <= "9"


def _order(c):
    if _digit(c):
        return 0
    if "a" <= c <= "z" or "A" <= c <= "Z":
        return ord(c)
    if c == "~":
        return -1
    return ord(c) + 256


def _verrevcmp(a, b):
    """dpkg's comparison of one upstream version or revision (lib/dpkg/version.c): non-digit runs
    compare by _order (letters first, '~' before anything, even the end), digit runs numerically."""
    i = j = 0
    while i < len(a) or j < len(b):
        first_diff = 0
        while (i < len(a) and not _digit(a[i])) or (j < len(b) and not _digit(b[j])):
            ac = _order(a[i]) if i < len(a) else 0
            bc = _order(b[j]) if j < len(b) else 0
            if ac != bc:
                return ac - bc
            i, j = i + 1, j + 1
        while i < len(a) and a[i] == "0":
            i += 1
        while j < len(b) and b[j] == "0":
            j += 1
        while i < len(a) and _digit(a[i]) and j < len(b) and _digit(b[j]):
            first_diff = first_diff or ord(a[i]) - ord(b[j])
            i, j = i + 1, j + 1
        if i < len(a) and _digit(a[i]):
            return 1
        if j < len(b) and _digit(b[j]):
            return -1
        if first_diff:
            return first_diff
    return 0


def _split(version):
    """(epoch, upstream, revision): the epoch before the first ':', the revision after the last '-'."""
    epoch, colon, rest = version.partition(":")
    if not colon:
        epoch, rest = "0", version
    upstream, dash, revision = rest.rpartition("-")
    if not dash:
        upstream, revision = rest, ""
    return int(epoch) if epoch.isdigit() else 0, upstream, revision


def compare_versions(a, b):
    """-1, 0 or 1 as Debian orders versions a and b (what `dpkg --compare-versions` decides)."""
    ea, ua, ra = _split(str(a))
    eb, ub, rb = _split(str(b))
    result = (ea > eb) - (ea < eb) or _verrevcmp(ua, ub) or _verrevcmp(ra, rb)
    return (result > 0) - (result < 0)


def version_matches(have, want):
    """have (an exact version) is the wanted upstream version: equal, or want plus a revision."""
    if not want:
        return bool(have)
    return bool(have) and (have == want or have.startswith(want + "-"))


def is_downgrade(have, want):
    """Installing want (an upstream version) would move an installed have backwards: every version
    that matches want is older than have."""
    return bool(have and want) and not version_matches(have, want) and compare_versions(have, want) > 0


def resolve_version(want, offered):
    """The exact version to install for want from the versions apt offers: the highest of those
    equal to want or starting with "<want>-"; for an empty want, the highest offered. None: none."""
    matching = [v for v in offered if version_matches(v, want)]
    best = None
    for version in matching:
        if best is None or compare_versions(version, best) > 0:
            best = version
    return best


# ---------------------------------------------------------------------------------- the decision


def plan(rows, packages, repository=None, key_sha256=None, source_text=None, allow_downgrade=False):
    """What must change: {key, source (bools), install ([{name, version}]), hold ([names]),
    refused ([messages]: downgrades not allowed; nothing may change then)}. rows: parse_dpkg_rows;
    key_sha256 / source_text: as read (None when missing). Nothing to do is nothing_to_do(plan)."""
    result = {"key": False, "source": False, "install": [], "hold": [], "refused": []}
    if repository:
        result["key"] = key_sha256 != normalize_checksum(repository["key_checksum"])
        result["source"] = source_text != source_line(repository) + "\n"
    for pkg in packages:
        name, want = pkg["name"], str(pkg.get("version") or "")
        row = rows.get(name) or {"version": None, "held": False}
        have = row["version"]
        if not version_matches(have, want):
            if is_downgrade(have, want) and not allow_downgrade:
                result["refused"].append(downgrade_message(name, have, want))
            result["install"].append({"name": name, "version": want})
        # apt drops a hold when it installs another version: a package installed now is held again
        if pkg.get("hold") and (not row["held"] or not version_matches(have, want)):
            result["hold"].append(name)
    return result


def nothing_to_do(result):
    return not (result["key"] or result["source"] or result["install"] or result["hold"] or result["refused"])


def resolve(install, offered):
    """(targets, unresolved) for the packages to install, from parse_madison's output. targets:
    [{name, arg (what apt-get install is given), version (what it installs)}]: a versioned package
    is pinned to its exact version; an unversioned one is left to apt's candidate (its pins count),
    which is predicted as the highest offered. unresolved: [(name, want, [versions offered])]."""
    targets, unresolved = [], []
    for pkg in install:
        versions = offered.get(pkg["name"]) or []
        exact = resolve_version(pkg["version"], versions)
        if exact is None:
            unresolved.append((pkg["name"], pkg["version"], versions))
        else:
            arg = "%s=%s" % (pkg["name"], exact) if pkg["version"] else pkg["name"]
            targets.append({"name": pkg["name"], "arg": arg, "version": exact})
    return targets, unresolved


def install_argv(apt_get, targets, allow_downgrade=False, install_recommends=False):
    argv = [apt_get, "install", "-y", "-q", "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"]
    argv.append("--allow-change-held-packages")
    if allow_downgrade:
        argv.append("--allow-downgrades")
    if not install_recommends:
        argv.append("--no-install-recommends")
    return argv + [t["arg"] for t in targets]


def after_state(rows, packages, result, targets, unresolved):
    """What the packages will be after the change (check mode's answer): {name: {version, held}};
    a version not resolved yet (the repository is not added) is the wanted one (None: any)."""
    after = state_of(rows, packages)
    for t in targets:
        after[t["name"]] = {"version": t["version"], "held": False}
    for name, want, _ in unresolved:
        after[name] = {"version": want or None, "held": False}
    for name in result["hold"]:
        after[name]["held"] = True
    return after


def state_of(rows, packages):
    """{name: {version, held}} of the packages, from parse_dpkg_rows (version None: not installed)."""
    state = {}
    for pkg in packages:
        row = rows.get(pkg["name"]) or {}
        state[pkg["name"]] = {"version": row.get("version"), "held": bool(row.get("held"))}
    return state


def package_table(state):
    """The diff's text of {name: {version, held}}: one line per package."""
    lines = []
    for name in sorted(state):
        entry = state[name]
        lines.append("%s %s%s" % (name, entry["version"] or "(not installed)", " (held)" if entry["held"] else ""))
    return "".join(line + "\n" for line in lines)


# ---------------------------------------------------------------------------------- the messages


def key_problem(data, repository):
    """Why the fetched key must not be written, or None: its sha256 is not key_checksum, or it is not
    an ASCII-armored key (apt reads a .asc keyring only in that form)."""
    actual = hashlib.sha256(data).hexdigest()
    expected = normalize_checksum(repository["key_checksum"])
    if actual != expected:
        return (
            "the key from %s has sha256 %s, but repository.key_checksum is %s: nothing written "
            "(the key at the source changed, or the checksum is wrong)" % (repository["key_url"], actual, expected)
        )
    if ARMORED_KEY not in data[:4096]:
        return (
            "the key from %s is not an ASCII-armored OpenPGP public key (no %s line): apt ignores a binary key in %s; "
            "serve the armored form (gpg --armor --export) and give its sha256"
            % (repository["key_url"], ARMORED_KEY.decode(), key_path(repository["name"]))
        )
    return None


def origin(repository):
    """Where the packages come from, as the source line names it."""
    if not repository:
        return "the node's apt sources"
    return " ".join([repository["url"], repository["suite"], *(repository.get("components") or [])])


def downgrade_message(name, have, want):
    return "%s is installed at %s, newer than the wanted %s: refusing to downgrade (allow_downgrade: true allows it)" % (name, have, want)


def unresolved_message(name, want, offered, repository):
    what = "%s %s" % (name, want) if want else name
    offers = ("it offers %s" % ", ".join(offered)) if offered else "it offers no version of %s" % name
    return "%s is not available from %s after apt-get update: %s" % (what, origin(repository), offers)


def preview_action(name, want, repository):
    """Check mode on a node whose repository is not added yet: apt cannot resolve the version."""
    return "would install %s %s from %s" % (name, want or "(any version)", repository["url"] if repository else origin(None))


def verify_problems(rows, packages):
    """After the change: every package at its version and held where asked, else what is not."""
    problems = []
    for pkg in packages:
        row = rows.get(pkg["name"]) or {"version": None, "held": False}
        if not version_matches(row["version"], str(pkg.get("version") or "")):
            have, want = row["version"] or "(not installed)", pkg.get("version") or "any version"
            problems.append("%s is at %s after the install, wanted %s" % (pkg["name"], have, want))
        elif pkg.get("hold") and not row["held"]:
            problems.append("%s is not held after apt-mark hold" % pkg["name"])
    return problems
