"""Bad input generated from the argument specs: for every option of every role a value of the
wrong type (and one outside the choices where there are choices, and wrong list elements), a
misspelled name per role, and a hardware profile that does not exist. Each case is one host of
a throwaway inventory; one site.yml run shows every case refused by the validation play with
the variable named, before any role runs: the hosts point at a closed port on 127.0.0.1, so a
host that got past validation would show as unreachable (the valid control host does).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
VALIDATION_TASK = "Check this host's settings against every role's argument spec and rules"
CP_VALIDATION_TASK = "Check this host's settings against the Kubernetes roles' argument specs and rules"
# the monitoring hosts' own settings are checked in their own play (preflight.yml)
MON_VALIDATION_PLAY = "Validate the monitoring hosts' settings (receivers, routing, scrape configs, alert durations)"
MON_ROLES = {"monitoring_server"}
WRONG = {
    "str": ["not", "a", "string"],
    "path": {"not": "a path"},
    "int": "not-a-number",
    "float": "not-a-number",
    "bool": "yes please",
    "list": {"not": "a list"},
    "dict": ["not", "a", "mapping"],
}
WRONG_ELEMENT = {"str": {"not": "a string"}, "int": "not-a-number", "dict": "not-a-mapping"}


def spec_options():
    for path in sorted(ROOT.glob("roles/*/meta/argument_specs.yml")):
        role = path.parent.parent.name
        for name, option in yaml.safe_load(path.read_text())["argument_specs"]["main"]["options"].items():
            yield role, name, option


def cases(group=None):
    """[(host, {variable: bad value}, the variable the message must name)] of the hosts of one
    inventory group (gpu_nodes, monitoring_hosts), or of all when group is None"""
    out = []
    seen_roles = set()
    for role, name, option in spec_options():
        kind = option.get("type", "str")
        where = "monitoring_hosts" if role in MON_ROLES else "gpu_nodes"
        if kind in WRONG:
            out.append((name + "-type", {name: WRONG[kind]}, name, where))
        if option.get("choices"):
            out.append((name + "-choice", {name: 99 if kind == "int" else "not-one-of-the-choices"}, name, where))
        if kind == "list" and option.get("elements") in WRONG_ELEMENT:
            out.append((name + "-element", {name: [WRONG_ELEMENT[option["elements"]]]}, name + "[0]", where))
        if role not in seen_roles:  # one typo per role: the option's name with its last letter doubled
            seen_roles.add(role)
            out.append((name + "-typo", {name + name[-1]: 1}, "did you mean %s?" % name, "gpu_nodes"))
    out.append(("profile-missing", {"rackforge_hw_profile": "hgx-h100-8gpuX"}, "rackforge_hw_profile", "gpu_nodes"))
    return [(host.replace("_", "-"), bad, needle) for host, bad, needle, where in out if group in (None, where)]


def inventory(tmp):
    """The example inventory's settings (a production-like HGX rack) made valid, every host on
    a closed loopback port."""
    group_vars = tmp / "group_vars" / "all"
    shutil.copytree(ROOT / "inventories" / "example" / "group_vars" / "all", group_vars)
    (group_vars / "zz-test.yml").write_text(
        json.dumps(
            {
                "ansible_host": "127.0.0.1",
                "ansible_port": 1,
                "ansible_ssh_common_args": "-o ConnectTimeout=3 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
                "nvidia_driver_repo_key_checksum": "a" * 64,
                "kubernetes_node_repo_key_checksum": "b" * 64,
                "calico_operator_manifest_checksum": "c" * 64,
                "nvidia_device_plugin_image_digest": "d" * 64,
            }
        )
    )
    base = {"rackforge_hw_profile": "hgx-h100-8gpu"}
    hosts = {"valid-node": dict(base)}
    for host, bad, _ in cases("gpu_nodes"):
        hosts[host] = dict(base, **bad)
    mons = {"valid-mon": {}}
    for host, bad, _ in cases("monitoring_hosts"):
        mons[host] = bad
    inv = {
        "all": {
            "children": {
                "gpu_nodes": {"hosts": hosts},
                "kube_control_plane": {"hosts": {"cp-r01-01": {}}},
                "monitoring_hosts": {"hosts": mons},
            }
        }
    }
    (tmp / "hosts.yml").write_text(json.dumps(inv))
    return tmp / "hosts.yml"


def test_every_generated_bad_setting_is_refused_before_any_role_runs(tmp_path):
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        ANSIBLE_FORKS="25",
        ANSIBLE_HOST_KEY_CHECKING="False",
    )
    res = subprocess.run(
        ["ansible-playbook", "-i", str(inventory(tmp_path)), "site.yml"], capture_output=True, text=True, env=env, cwd=ROOT, check=False
    )
    report = json.loads(res.stdout[res.stdout.index("{") :])
    first = report["plays"][0]
    task = next(t for t in first["tasks"] if t["task"]["name"] == VALIDATION_TASK)
    results = task["hosts"]
    mon_play = next(p for p in report["plays"] if p["play"]["name"] == MON_VALIDATION_PLAY)
    mon_results = {}
    for t in mon_play["tasks"]:
        for host, result in t["hosts"].items():
            if result.get("failed") or host not in mon_results:
                mon_results[host] = result
    missed = []
    for group, found in (("gpu_nodes", results), ("monitoring_hosts", mon_results)):
        for host, bad, needle in cases(group):
            result = found[host]
            if not result.get("failed") or needle not in result.get("msg", ""):
                missed.append((host, bad, result.get("msg")))
    assert not missed, missed[:5]
    assert len(cases("monitoring_hosts")) >= 20
    assert not mon_results["valid-mon"].get("failed")
    assert len(cases()) >= 150
    # the controls pass validation; the valid node then meets its first remote task and cannot
    # be reached: nothing but the validation ran for the refused hosts
    assert not results["valid-node"].get("failed")
    cp_task = next(t for play in report["plays"] for t in play["tasks"] if t["task"]["name"] == CP_VALIDATION_TASK)
    assert not cp_task["hosts"]["cp-r01-01"].get("failed") and "cp-r01-01" not in results
    stats = report["stats"]
    assert stats["valid-node"]["unreachable"] == 1
    assert stats["valid-mon"]["unreachable"] == 1
    assert all(stats[host]["unreachable"] == 0 and stats[host]["failures"] == 1 for host, _, _ in cases())
