#!/usr/bin/python
"""Ansible module: an apt repository, its packages at pinned versions and their holds, in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
module: rackforge_packages
short_description: Repository (checksummed key), pinned versions and holds of apt packages in one call
description:
  - Reads, decides and acts for a package concern in one call. One read (C(dpkg-query) for every
    package, the key file's sha256, the source file's text) decides; when every package is at its
    version and held where asked and the key and source are in place, the module runs nothing else
    (a no-op re-run costs one dpkg-query).
  - Otherwise it changes only the difference, in this order. The key is fetched from C(key_url)
    (http, https or file URL) and written to C(/etc/apt/keyrings/<name>.asc) only when its sha256 is
    C(key_checksum) and it is ASCII-armored. The source C(/etc/apt/sources.list.d/<name>.list)
    holds the one line C(deb [signed-by=/etc/apt/keyrings/<name>.asc] <url> <suite> <components...>)
    (for a flat repository such as pkgs.k8s.io, C(suite=/), it is C(deb [signed-by=...] <url> /)). Then
    C(apt-get update) runs when the key or source changed, when the package lists are older than
    C(cache_valid_time), or when a wanted version is not in them. Each versioned package is installed
    at the exact version C(apt-cache madison) offers for it (the highest one equal to the version or
    starting with C(<version>-)) by one C(apt-get install) with C(DEBIAN_FRONTEND=noninteractive),
    a C locale, C(--force-confdef --force-confold) and C(--allow-change-held-packages); then
    C(apt-mark hold) holds what must be held (apt drops a hold when it installs another version).
  - A downgrade without C(allow_downgrade) fails before any change, naming the package and both
    versions. A version the repository does not offer (after an update) fails naming the package,
    the version wanted and the versions offered.
  - Check mode changes nothing and returns the same C(actions). On a node where the repository is
    not added yet, apt cannot resolve the versions; the action is then
    C(would install <pkg> <version> from <url>) instead of a failure.
  - The key is fetched in check mode too (a read), so a wrong checksum fails there already.
  - Debian family only (apt-get and dpkg-query); on other systems it fails saying so.
options:
  repository:
    description:
      - The apt repository the packages come from; omit it for packages from the node's existing sources.
    type: dict
    suboptions:
      name: {description: "File stem: /etc/apt/keyrings/<name>.asc and /etc/apt/sources.list.d/<name>.list.", type: str, required: true}
      url: {description: The repository's URL (vendor or internal mirror)., type: str, required: true}
      suite:
        description: "The suite (bookworm, stable ...), or one ending in / for a flat repository (pkgs.k8s.io: /)."
        type: str
        required: true
      components: {description: "Components (main, non-free ...); none for a flat repository.", type: list, elements: str, default: []}
      key_url: {description: "Where the repository's ASCII-armored signing key is (http, https or file URL).", type: str, required: true}
      key_checksum: {description: "The sha256 of the key file (hex; a sha256: prefix is accepted).", type: str, required: true}
  packages:
    description:
      - "The packages: name; version: an upstream version the installed version must equal or extend
        with a Debian revision (1.31.4 matches 1.31.4-1.1), '' for any installed version; hold: put the
        package on hold (false never holds nor releases a hold)."
    type: list
    elements: dict
    default: []
    suboptions:
      name: {description: The package., type: str, required: true}
      version: {description: "Upstream version ('' = any).", type: str, default: ""}
      hold: {description: Hold the package., type: bool, default: false}
  allow_downgrade: {description: Allow installing an older version than the installed one., type: bool, default: false}
  install_recommends: {description: Install recommended packages too; false passes --no-install-recommends., type: bool, default: false}
  snapshot:
    description:
      - "This run's id, given by the rackforge_packages action plugin (not by a task): the module then
        reads every package dpkg knows (one dpkg-query, as for the named ones), the sha256 of each key
        under /etc/apt/keyrings and the text of each source under /etc/apt/sources.list.d, after any
        change, and returns them as the fact C(rackforge_packages_snapshot). A later call of the same
        run that the snapshot shows nothing to do for is answered on the controller
        (module_utils/rackforge/packages_snapshot.py)."
    type: str
  cache_valid_time:
    description:
      - "Seconds the package lists stay fresh when something must be installed (age: apt's periodic
        update stamp or the last apt-get update's /var/lib/apt/lists/partial, whichever is newer); 0 updates every time."
    type: int
    default: 3600
"""

EXAMPLES = r"""
- name: The driver repository, the driver and fabric manager at the pinned version, held
  rackforge_packages:
    repository:
      name: rackforge-nvidia
      url: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64
      suite: /
      key_url: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/3bf863cc.pub
      key_checksum: "{{ nvidia_driver_repo_key_checksum }}"
    packages:
      - {name: nvidia-driver-535, version: 535.247.01, hold: true}
      - {name: nvidia-fabricmanager-535, version: 535.247.01, hold: true}
  notify: Reboot for the new driver
"""

RETURN = r"""
changed: {description: Something changed (or would in check mode)., type: bool, returned: always}
actions:
  description: >-
    What was done (or would be, in check mode), in order: "key <path>", "source <path>", "apt-get update",
    "install <pkg>=<version>" ("install <pkg>" for an unversioned one), "would install <pkg> <version> from <url>"
    (check mode, repository not added yet), "hold <pkg>". [] when nothing was to do.
  type: list
  returned: always
packages:
  description: "name -> {before: {version, held}, after: {version, held}}; version null: not installed (check mode: after is predicted)."
  type: dict
  returned: always
repository:
  description: "{key, source, line}: the key and source file paths and the source line."
  type: dict
  returned: when repository is given
decided_on_controller:
  description: "True when the action plugin answered from this run's snapshot without running the module (nothing to do)."
  type: bool
  returned: when so
ansible_facts:
  description: "rackforge_packages_snapshot: {run, packages: {name: [version, held]}, keys: {stem: sha256}, sources: {stem: text}}."
  type: dict
  returned: when the action plugin gave snapshot
diff: {description: "before/after of the package table, the key's sha256 and the source line (what differs).", type: list, returned: always}
rc: {description: The failed command's exit status., type: int, returned: failure of a command}
stdout: {description: The failed command's output., type: str, returned: failure of a command}
stderr: {description: The failed command's error output., type: str, returned: failure of a command}
"""

import hashlib
import os
import platform
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV
from ansible.module_utils.rackforge import packages as P
from ansible.module_utils.rackforge import packages_snapshot as S
from ansible.module_utils.rackforge.filestage import read_bytes as read
from ansible.module_utils.urls import fetch_url

APT_ENV = dict(C_ENV, DEBIAN_FRONTEND="noninteractive")
UPDATE_STAMPS = ("/var/lib/apt/periodic/update-success-stamp", "/var/lib/apt/lists/partial")
TOOLS = ("apt-get", "apt-cache", "apt-mark", "dpkg-query")


class Node:
    """The module's I/O: every read and change goes through here; every decision is P's."""

    def __init__(self, module):
        self.module = module
        self.done = []  # actions done so far (a failure reports them)
        self.bin = {tool: module.get_bin_path(tool) for tool in TOOLS}
        missing = [tool for tool in TOOLS if not self.bin[tool]]
        if missing:
            module.fail_json(
                msg="rackforge_packages manages apt only; %s has no %s: use ansible.builtin.package (dnf on the RHEL family) for this host"
                % (os_name(), ", ".join(missing))
            )

    def fail(self, msg, **extra):
        """A failure that is no command's (a command's passes its rc, stdout and stderr)."""
        self.module.fail_json(msg="rackforge_packages: " + msg, actions=self.done, **extra)

    def run(self, argv, what):
        rc, out, err = self.module.run_command(argv, environ_update=APT_ENV)
        if rc != 0:
            msg = "rackforge_packages: %s failed (rc %s): %s" % (what, rc, (err or out).strip()[-2000:])
            self.module.fail_json(msg=msg, rc=rc, stdout=out, stderr=err, actions=self.done)
        return out

    def dpkg_rows(self, names, every=False):
        """The rows of names (every: of every package dpkg knows)."""
        if not names and not every:
            return {}
        argv = [self.bin["dpkg-query"], "-W", "-f", P.DPKG_FORMAT, *([] if every else names)]
        rc, out, err = self.module.run_command(argv, environ_update=C_ENV)
        missing, other = P.dpkg_missing(err)
        if rc not in (0, 1) or other or (rc == 1 and not missing):  # rc 1 alone means: some package unknown
            msg = "rackforge_packages: dpkg-query -W %s failed (rc %s): %s" % (" ".join(names), rc, err.strip())
            self.module.fail_json(msg=msg, rc=rc, stdout=out, stderr=err, actions=self.done)
        try:
            return P.parse_dpkg_rows(out)
        except P.ParseError as exc:
            self.module.fail_json(msg="rackforge_packages: " + str(exc), rc=rc, stdout=out, stderr=err, actions=self.done)

    def read(self, names, run, report):
        """The rows of names; with a run id (the `snapshot` option), from one read of every package,
        which also becomes the run's snapshot in report's ansible_facts."""
        if not run:
            return self.dpkg_rows(names)
        every = self.dpkg_rows(names, every=True)
        report["ansible_facts"] = snapshot_fact(run, every)
        return {n: every[n] for n in names if n in every}

    def madison(self, names):
        out = self.run([self.bin["apt-cache"], "madison", *names], "apt-cache madison")
        try:
            return P.parse_madison(out)
        except P.ParseError as exc:
            self.module.fail_json(msg="rackforge_packages: " + str(exc), rc=0, stdout=out, stderr="", actions=self.done)

    def lists_age(self):
        times = [os.stat(path).st_mtime for path in UPDATE_STAMPS if os.path.exists(path)]
        return time.time() - max(times) if times else float("inf")

    def fetch_key(self, repository):
        url = repository["key_url"]
        resp, info = fetch_url(self.module, url, timeout=30)
        status = info.get("status")
        if resp is None or (status != 200 and not (url.startswith("file:") and status in (None, 200))):
            self.fail("cannot fetch the repository key from %s: %s (status %s)" % (url, info.get("msg"), status))
        data = resp.read()
        problem = P.key_problem(data, repository)
        if problem:
            self.fail(problem)
        return data


def snapshot_fact(run, every):
    """The fact a call with snapshot returns: every package's row (read with the module's own dpkg-query), the apt files."""
    keys, sources = S.read_files()
    return S.fact(run, every, keys, sources)


def os_name():
    try:
        with open("/etc/os-release") as fh:
            for line in fh:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.system() or "this system"


def write_atomic(path, data):
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    fd, tmp = tempfile.mkstemp(prefix=".rackforge-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def diff_entries(before, after, repository, key_sha256, source_text):
    entries = []
    if P.package_table(before) != P.package_table(after):
        entries.append(
            {"before_header": "packages", "after_header": "packages", "before": P.package_table(before), "after": P.package_table(after)}
        )
    if repository:
        want_sha = P.normalize_checksum(repository["key_checksum"])
        if key_sha256 != want_sha:
            key = P.key_path(repository["name"])
            entries.append(
                {
                    "before_header": key,
                    "after_header": key,
                    "before": "sha256 %s\n" % key_sha256 if key_sha256 else "",
                    "after": "sha256 %s\n" % want_sha,
                }
            )
        line = P.source_line(repository) + "\n"
        if source_text != line:
            src = P.source_path(repository["name"])
            entries.append({"before_header": src, "after_header": src, "before": source_text or "", "after": line})
    return entries


def argument_spec():
    return {
        "repository": {
            "type": "dict",
            "options": {
                "name": {"type": "str", "required": True},
                "url": {"type": "str", "required": True},
                "suite": {"type": "str", "required": True},
                "components": {"type": "list", "elements": "str", "default": []},
                "key_url": {"type": "str", "required": True},
                "key_checksum": {"type": "str", "required": True, "no_log": False},
            },
        },
        "packages": {
            "type": "list",
            "elements": "dict",
            "default": [],
            "options": {
                "name": {"type": "str", "required": True},
                "version": {"type": "str", "default": ""},
                "hold": {"type": "bool", "default": False},
            },
        },
        "allow_downgrade": {"type": "bool", "default": False},
        "install_recommends": {"type": "bool", "default": False},
        "cache_valid_time": {"type": "int", "default": 3600},
        "snapshot": {"type": "str"},
    }


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    p = module.params
    repository, packages, check = p["repository"], p["packages"], module.check_mode
    problems = P.package_problems(packages) + (P.repository_problems(repository) if repository else [])
    if problems:
        module.fail_json(msg="rackforge_packages: " + "; ".join(problems))
    node = Node(module)
    names = [pkg["name"] for pkg in packages]

    # the one read (with snapshot: of every package, the same one dpkg-query)
    run = p["snapshot"]
    report = {"packages": {}, "diff": [], "actions": node.done}
    rows = node.read(names, run, report)
    key_sha256 = source_text = None
    if repository:
        key = read(P.key_path(repository["name"]))
        key_sha256 = hashlib.sha256(key).hexdigest() if key is not None else None
        source = read(P.source_path(repository["name"]))
        source_text = source.decode("utf-8", "replace") if source is not None else None
    before = P.state_of(rows, packages)
    result = P.plan(rows, packages, repository, key_sha256, source_text, p["allow_downgrade"])
    if repository:
        report["repository"] = {
            "key": P.key_path(repository["name"]),
            "source": P.source_path(repository["name"]),
            "line": P.source_line(repository),
        }
    if result["refused"]:
        node.fail("; ".join(result["refused"]) + ": nothing was changed", packages={n: {"before": before[n]} for n in names})
    if P.nothing_to_do(result):
        report["packages"] = {n: {"before": before[n], "after": before[n]} for n in names}
        module.exit_json(changed=False, **report)

    # the difference only
    if result["key"]:
        data = node.fetch_key(repository)  # in check mode too: a wrong checksum shows before the real run
        if not check:
            write_atomic(P.key_path(repository["name"]), data)
        node.done.append("key " + P.key_path(repository["name"]))
    if result["source"]:
        if not check:
            write_atomic(P.source_path(repository["name"]), (P.source_line(repository) + "\n").encode())
        node.done.append("source " + P.source_path(repository["name"]))

    updated = False

    def update():
        if not check:
            node.run([node.bin["apt-get"], "update", "-q"], "apt-get update")
        node.done.append("apt-get update")
        return True

    if result["key"] or result["source"] or (result["install"] and node.lists_age() > p["cache_valid_time"]):
        updated = update()
    targets, unresolved = [], []
    if result["install"]:
        if check and (result["key"] or result["source"]):
            # the repository is not really added: apt cannot know its versions yet
            unresolved = [(pkg["name"], pkg["version"], []) for pkg in result["install"]]
        else:
            targets, unresolved = P.resolve(result["install"], node.madison([pkg["name"] for pkg in result["install"]]))
            if unresolved and not updated:
                updated = update()
                if not check:
                    targets, unresolved = P.resolve(result["install"], node.madison([pkg["name"] for pkg in result["install"]]))
        if unresolved and not check:
            node.fail("; ".join(P.unresolved_message(n, w, o, repository) for n, w, o in unresolved))
        if targets and not check:
            node.run(P.install_argv(node.bin["apt-get"], targets, p["allow_downgrade"], p["install_recommends"]), "apt-get install")
        node.done.extend("install " + t["arg"] for t in targets)
        node.done.extend(P.preview_action(n, w, repository) for n, w, _ in unresolved)
    if result["hold"]:
        if not check:
            node.run([node.bin["apt-mark"], "hold", *result["hold"]], "apt-mark hold")
        node.done.extend("hold " + name for name in result["hold"])

    if check:
        after = P.after_state(rows, packages, result, targets, unresolved)
    else:
        after_rows = node.read(names, run, report)
        after = P.state_of(after_rows, packages)
        problems = P.verify_problems(after_rows, packages)
        if problems:
            node.fail("; ".join(problems), packages={n: {"before": before[n], "after": after[n]} for n in names})
    report["packages"] = {n: {"before": before[n], "after": after[n]} for n in names}
    report["diff"] = diff_entries(before, after, repository, key_sha256, source_text)
    module.exit_json(changed=True, **report)


if __name__ == "__main__":
    main()
