"""What nvlink_health checks (NVLink links, speeds, error counters, P2P topology and the NVSwitch
fabric), as a function both that module and rackforge_health call: nvlink_check(module, params) ->
the result dict. ARGS: the parameters and defaults."""

from __future__ import annotations

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


ARGS = {
    "expected_links": {"type": "int"},
    "expected_speed_gbps": {"type": "float"},
    "expected_gpus": {"type": "int"},
    "nvswitch": {"type": "bool", "default": False},
    "check_topology": {"type": "bool", "default": False},
    "baseline": {"type": "dict", "default": {}},
}


def nvlink_check(module, p):
    binary = module.get_bin_path("nvidia-smi")
    if not binary:
        findings = [health_not_run("nvlink", "nvidia-smi", "nvidia-smi is not installed")]
        return dict(changed=False, healthy=False, findings=findings, gpus=[], counters={}, fabric=[])
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
    return dict(
        changed=False,
        healthy=not findings,
        findings=findings,
        gpus=gpus,
        counters=counters,
        fabric=fabric_summary(parsed.get("fabric", []))[0],
    )
