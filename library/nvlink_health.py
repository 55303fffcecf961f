#!/usr/bin/python
from __future__ import annotations

DOCUMENTATION = r"""
module: nvlink_health
short_description: Check NVLink links, speeds, error counters, topology and the NVSwitch fabric (read-only)
description:
  - Runs C(nvidia-smi nvlink -s), C(nvlink -e), C(topo -p2p n) and C(-q) and compares them with the
    expected links per GPU, link speed and fabric state. Safe in check mode; changes nothing.
options:
  expected_links:
    description: Active NVLinks each GPU must have; 0 means no NVLink is expected. Omit to use the model table.
    type: int
  expected_speed_gbps:
    description: Per-link speed in GB/s as nvidia-smi prints it; omit to use the model table.
    type: float
  expected_gpus:
    description: Number of GPUs nvidia-smi must list.
    type: int
  nvswitch:
    description: The system has NVSwitches; the fabric must be Completed/Success and fabric manager active.
    type: bool
    default: false
  check_topology:
    description: Require NVLink P2P status OK between every GPU pair (C(topo -p2p n); NVSwitch systems).
    type: bool
    default: false
  baseline:
    description: NVLink error counters from an earlier healthy run, {uuid -> {link -> {replay, recovery, crc}}}.
    type: dict
    default: {}
author: rackforge
"""

EXAMPLES = r"""
- name: Check NVLink on an HGX H100
  nvlink_health:
    expected_links: 18
    expected_speed_gbps: 26.562
    nvswitch: true
"""

RETURN = r"""
healthy:
  description: No findings.
  returned: always
  type: bool
findings:
  description: Findings naming GPU and link (check, component, expected, observed, message).
  returned: always
  type: list
  elements: dict
gpus:
  description: Per GPU index, name, uuid, active and expected link counts.
  returned: always
  type: list
  elements: dict
counters:
  description: NVLink error counters now (use as the next baseline).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV, run_concurrently
from ansible.module_utils.rackforge.health import evaluate_fabric, evaluate_nvlink, fabric_summary, finding, model_expectation
from ansible.module_utils.rackforge.health import not_run as health_not_run
from ansible.module_utils.rackforge.nvidia_smi import ParseError, parse_fabric, parse_nvlink_errors, parse_nvlink_status, parse_topo_p2p

# what each nvidia-smi query checks: a query that fails or prints what does not parse is that
# check's <check>_not_run finding, with the evidence
QUERY_CHECKS = {"status": "nvlink", "errors": "nvlink_errors", "p2p": "nvlink_p2p", "fabric": "fabric"}
PARSERS = {"status": parse_nvlink_status, "errors": parse_nvlink_errors, "p2p": parse_topo_p2p, "fabric": parse_fabric}


def run_all(module, binary, queries):
    """Run nvidia-smi once per query, all at the same time, and parse each: ({name: parsed},
    [not_run findings of the queries that failed or did not parse])."""
    names = list(queries)
    results = run_concurrently(module, [[binary, *queries[name]] for name in names], environ_update=C_ENV)
    parsed, not_run = {}, []
    for name, (rc, out, err) in zip(names, results):
        argv = " ".join(["nvidia-smi", *queries[name]])
        evidence = {"command": argv, "rc": rc, "stdout": out[-2000:], "stderr": err[-2000:]}
        if rc != 0:
            not_run.append(
                health_not_run(QUERY_CHECKS[name], "nvidia-smi", "%s failed (rc %s): %s" % (argv, rc, (out + err).strip()[:300]), evidence)
            )
            continue
        try:
            parsed[name] = PARSERS[name](out)
        except ParseError as exc:
            not_run.append(health_not_run(QUERY_CHECKS[name], "nvidia-smi", "%s printed what does not parse: %s" % (argv, exc), evidence))
    return parsed, not_run


def main():
    module = AnsibleModule(
        argument_spec={
            "expected_links": {"type": "int"},
            "expected_speed_gbps": {"type": "float"},
            "expected_gpus": {"type": "int"},
            "nvswitch": {"type": "bool", "default": False},
            "check_topology": {"type": "bool", "default": False},
            "baseline": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    p = module.params
    binary = module.get_bin_path("nvidia-smi")
    if not binary:
        findings = [health_not_run("nvlink", "nvidia-smi", "nvidia-smi is not installed")]
        module.exit_json(changed=False, healthy=False, findings=findings, gpus=[], counters={}, fabric=[])
    queries = {"status": ["nvlink", "-s"], "errors": ["nvlink", "-e"]}
    if p["check_topology"]:
        queries["p2p"] = ["topo", "-p2p", "n"]
    if p["nvswitch"]:
        queries["fabric"] = ["-q"]
    parsed, findings = run_all(module, binary, queries)
    status, errors = parsed.get("status", []), parsed.get("errors", [])
    links, speed = p["expected_links"], p["expected_speed_gbps"]
    if (links is None or speed is None) and status:
        model = model_expectation(status[0]["name"]) or (0, 0.0)
        links = model[0] if links is None else links
        speed = model[1] if speed is None else speed
    if "status" in parsed and p["expected_gpus"] is not None and len(status) != p["expected_gpus"]:
        findings.append(
            finding(
                "gpu_count",
                "GPUs",
                p["expected_gpus"],
                len(status),
                "nvidia-smi lists %d GPUs, expected %d" % (len(status), p["expected_gpus"]),
            )
        )
    findings += evaluate_nvlink(status, links or 0, speed, errors=errors, baseline=p["baseline"], p2p=parsed.get("p2p"))
    if p["nvswitch"] and "fabric" in parsed:
        systemctl = module.get_bin_path("systemctl")
        rc = module.run_command([systemctl, "is-active", "--quiet", "nvidia-fabricmanager"])[0] if systemctl else 1
        findings += evaluate_fabric(parsed["fabric"], rc == 0)
    gpus = [
        {
            "index": g["index"],
            "name": g["name"],
            "uuid": g["uuid"],
            "expected_links": links or 0,
            "active_links": len([s for s in g["links"].values() if s is not None]),
            "inactive_links": sorted(k for k, s in g["links"].items() if s is None),
            "all_inactive": g["all_inactive"],
        }
        for g in status
    ]
    counters = {g["uuid"]: {str(k): v for k, v in g["links"].items()} for g in errors}
    module.exit_json(
        changed=False,
        healthy=not findings,
        findings=findings,
        gpus=gpus,
        counters=counters,
        fabric=fabric_summary(parsed.get("fabric", []))[0],
    )


if __name__ == "__main__":
    main()
