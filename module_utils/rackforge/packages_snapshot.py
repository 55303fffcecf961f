"""One read of a node's packages per run (pure; no I/O): the rackforge_packages action plugin decides a
later call on the controller from the state an earlier call of the same run read on the node.

Why: every role asks for its own packages (the driver, rdma-core, node_exporter, containerd, the
Kubernetes tools, the NFS client), and on a no-op re-run each call was a round trip that read a few
dpkg rows and changed nothing. The first call of a run on a node now reads every package dpkg knows,
the sha256 of each key under /etc/apt/keyrings and the text of each source under
/etc/apt/sources.list.d, and returns them as the fact `rackforge_packages_snapshot`, tagged with the
run's id. A later call of the same run whose packages, key and source that snapshot already shows as
wanted is answered on the controller (`decided_on_controller: true`), with the result the module
would have given; anything else (something to install or hold, a refusal, bad input) runs the module
on the node, which decides from its own fresh read and returns a fresh snapshot.

The run's id is made when ansible-playbook loads the action plugin (once, before it forks its
workers), so a snapshot from an earlier run (the fact cache keeps facts between runs) is never
trusted. The cost: a package changed on the node during a run by something else than
rackforge_packages is seen by the next run.

The first call of a run is rackforge_preflight_facts' (the preflight play's one read of the node) in
site.yml, or the first rackforge_packages call where preflight did not run; rackforge_reachable_info
with `needed_for` checks a repository only when the snapshot shows that something would be installed
from it (a converged node's re-run does not depend on a repository being up).

Public, stable API:
- FACT: the fact's name.
- read_node(module, environ) -> (rows of every package dpkg knows, keys, sources) as this node has
  them (the modules' I/O: one dpkg-query, the files under /etc/apt/keyrings and sources.list.d);
  a failed dpkg-query fails the module with its rc, stdout and stderr. read_files() -> (keys, sources).
- snapshot(run, rows, keys, sources) -> the fact's value. rows: packages.parse_dpkg_rows of every
  package; keys: {stem: sha256}; sources: {stem: text}.
- fact(run, rows, keys, sources) -> {FACT: snapshot(...)}: what a module returns as ansible_facts.
- decide(args, snap, run) -> the module's result for args (changed false, decided_on_controller
  true), or None when the module must run (no snapshot of this run, something to do, or args the
  module would refuse or has to check itself).
"""

from __future__ import annotations

import hashlib
import os

from ansible.module_utils.rackforge.packages import (
    DPKG_FORMAT,
    KEYRING_DIR,
    SOURCES_DIR,
    ParseError,
    key_path,
    nothing_to_do,
    package_problems,
    parse_dpkg_rows,
    plan,
    repository_problems,
    source_line,
    source_path,
    state_of,
)

FACT = "rackforge_packages_snapshot"
NOT_NEEDED = (
    "not checked: every package these URLs serve is installed at its version and held as asked, with its key and source (nothing to fetch)"
)
ARGS = frozenset(("repository", "packages", "allow_downgrade", "install_recommends", "cache_valid_time"))
REPOSITORY_KEYS = frozenset(("name", "url", "suite", "components", "key_url", "key_checksum"))
PACKAGE_KEYS = frozenset(("name", "version", "hold"))


def snapshot(run, rows, keys, sources):
    """The fact: {run, packages: {name: [version, held]} (installed or held rows only), keys, sources}."""
    packages = {name: [row["version"], bool(row["held"])] for name, row in rows.items() if row["version"] is not None or row["held"]}
    return {"run": run, "packages": packages, "keys": dict(keys), "sources": dict(sources)}


def fact(run, rows, keys, sources):
    return {FACT: snapshot(run, rows, keys, sources)}


def _files(directory, suffix):
    """{stem: bytes} of each regular file named *suffix in directory."""
    names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    paths = {name[: -len(suffix)]: os.path.join(directory, name) for name in names if name.endswith(suffix)}
    found = {}
    for stem, path in paths.items():
        if os.path.isfile(path):
            with open(path, "rb") as fh:
                found[stem] = fh.read()
    return found


def read_node(module, environ):
    dpkg_query = module.get_bin_path("dpkg-query", required=True)
    argv = [dpkg_query, "-W", "-f", DPKG_FORMAT]
    rc, out, err = module.run_command(argv, environ_update=environ)
    if rc != 0:
        module.fail_json(msg="dpkg-query -W failed (rc %s): %s" % (rc, err.strip()[-2000:]), rc=rc, stdout=out, stderr=err)
    try:
        rows = parse_dpkg_rows(out)
    except ParseError as exc:
        module.fail_json(msg=str(exc), rc=rc, stdout=out, stderr=err)
    return (rows, *read_files())


def read_files():
    keys = {stem: hashlib.sha256(data).hexdigest() for stem, data in _files(KEYRING_DIR, ".asc").items()}
    sources = {stem: data.decode("utf-8", "replace") for stem, data in _files(SOURCES_DIR, ".list").items()}
    return keys, sources


def _bool(value):
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0", ""):
        return False
    raise ValueError(value)


def _request(args):
    """(repository, packages, allow_downgrade) with the module's defaults, or None where the module
    itself must check them (an unknown option, a wrong type, a problem it reports)."""
    if not isinstance(args, dict) or set(args) - ARGS:
        return None
    try:
        repository = args.get("repository")
        if repository is not None:
            if not isinstance(repository, dict) or set(repository) - REPOSITORY_KEYS:
                return None
            repository = dict({"components": []}, **repository)
            components = repository["components"]
            if not isinstance(components, list) or not all(isinstance(c, str) for c in components):
                return None
            if not all(isinstance(repository.get(k), str) for k in REPOSITORY_KEYS - {"components"}):
                return None
            if repository_problems(repository):
                return None
        packages = []
        for pkg in args.get("packages") or []:
            if not isinstance(pkg, dict) or set(pkg) - PACKAGE_KEYS or not isinstance(pkg.get("name"), str):
                return None
            packages.append({"name": pkg["name"], "version": str(pkg.get("version") or ""), "hold": _bool(pkg.get("hold", False))})
        if not isinstance(args.get("packages", []), list) or package_problems(packages):
            return None
        return repository, packages, _bool(args.get("allow_downgrade", False))
    except (TypeError, ValueError, KeyError):
        return None


def decide(args, snap, run):
    if not isinstance(snap, dict) or not run or snap.get("run") != run:
        return None
    request = _request(args)
    if request is None:
        return None
    repository, packages, allow_downgrade = request
    rows = {}
    for pkg in packages:
        have = (snap.get("packages") or {}).get(pkg["name"])
        if have is not None:
            rows[pkg["name"]] = {"version": have[0], "held": bool(have[1])}
    key_sha256 = source_text = None
    if repository:
        key_sha256 = (snap.get("keys") or {}).get(repository["name"])
        source_text = (snap.get("sources") or {}).get(repository["name"])
    if not nothing_to_do(plan(rows, packages, repository, key_sha256, source_text, allow_downgrade)):
        return None
    state = state_of(rows, packages)
    result = {
        "changed": False,
        "actions": [],
        "diff": [],
        "packages": {name: {"before": state[name], "after": state[name]} for name in state},
        "decided_on_controller": True,
    }
    if repository:
        result["repository"] = {
            "key": key_path(repository["name"]),
            "source": source_path(repository["name"]),
            "line": source_line(repository),
        }
    return result
