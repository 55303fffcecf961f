#!/usr/bin/python
from __future__ import annotations

DOCUMENTATION = r"""
module: nvlink_acceptance
short_description: Measure GPU-to-GPU bandwidth inside the node with nvbandwidth and nccl-tests (read-only)
description:
  - Runs C(nvbandwidth -t device_to_device_memcpy_read_ce) and C(nvbandwidth -t
    device_to_device_memcpy_write_ce) (every GPU pair's copy bandwidth, each direction of the copy
    engine's access: a link can read at full speed and write slowly) and
    C(all_reduce_perf -b O(nccl_min_bytes) -e O(nccl_max_bytes) -f 2 -g <GPUs>) (bus bandwidth over
    all GPUs), parses both (nvbandwidth.py, nccl.py) and judges them (acceptance.py): a pair below
    O(min_pair_fraction) of the node's median pair or below O(min_pair_gbps), wrong all-reduce
    results, or a bus bandwidth of the largest message below O(min_busbw_gbps) is a finding.
  - A tool that is missing, fails or prints what does not parse is a C(<check>_not_run) finding with the
    evidence, never a pass. Changes nothing.
options:
  gpus:
    description: GPUs to run all_reduce_perf over (the node's GPU count).
    type: int
    required: true
  min_busbw_gbps:
    description: All-reduce bus bandwidth floor (GB/s) for the largest message; omit for no floor (PCIe-only nodes).
    type: float
  min_pair_gbps:
    description: Per-pair copy floor (GB/s); omit to judge pairs only against the node's median.
    type: float
  min_pair_fraction:
    description: A pair below this fraction of the node's median pair is a finding; 0 turns the relative check off
      (PCIe-only nodes, where pairs across CPU sockets are slower by design).
    type: float
    default: 0.9
  nccl_min_bytes:
    description: Smallest all-reduce message.
    type: int
    default: 134217728
  nccl_max_bytes:
    description: Largest all-reduce message (its bus bandwidth is judged).
    type: int
    default: 4294967296
  nvbandwidth_path:
    description: The nvbandwidth binary (searched on PATH when a name).
    type: str
    default: nvbandwidth
  all_reduce_perf_path:
    description: The nccl-tests all_reduce_perf binary (searched on PATH when a name).
    type: str
    default: all_reduce_perf
  timeout:
    description: Seconds each tool may run.
    type: int
    default: 600
author: rackforge
"""

RETURN = r"""
findings:
  description: What is below the thresholds, or could not be measured.
  returned: always
  type: list
pairs:
  description: The read copy matrix, C({"<row>-<col>": GB/s}), and its median.
  returned: always
  type: dict
write_pairs:
  description: The write copy matrix, C({"<row>-<col>": GB/s}), and its median.
  returned: always
  type: dict
busbw_gbps:
  description: All-reduce bus bandwidth of the largest message (out of place), or null.
  returned: always
  type: float
"""

import os
import statistics
import subprocess

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV
from ansible.module_utils.rackforge.acceptance import nccl_findings, nvlink_pair_findings
from ansible.module_utils.rackforge.health import not_run
from ansible.module_utils.rackforge.nccl import ParseError as NcclParseError
from ansible.module_utils.rackforge.nccl import parse_nccl_tests
from ansible.module_utils.rackforge.nvbandwidth import ParseError as NvbwParseError
from ansible.module_utils.rackforge.nvbandwidth import parse_nvbandwidth

READ = "device_to_device_memcpy_read_ce"
WRITE = "device_to_device_memcpy_write_ce"


def run_tool(module, name, argv, timeout, parse, errors, check):
    """(parsed or None, finding or None) of one tool run."""
    binary = name if os.path.isabs(name) else module.get_bin_path(name)
    if not binary or not os.access(binary, os.X_OK):
        return None, not_run(check, name, "%s is not installed (build it from its NVIDIA repository and set its path)" % name)
    argv = [binary, *argv]
    try:
        res = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, **C_ENV), timeout=timeout, check=False)
        rc, out, err = res.returncode, res.stdout, res.stderr
    except subprocess.TimeoutExpired as exc:
        partial = exc.stdout or b""  # bytes even with text=True
        rc, err = None, "timed out after %d s" % timeout
        out = partial.decode("utf-8", "replace") if isinstance(partial, bytes) else partial
    evidence = {"command": " ".join(argv), "rc": rc, "stdout": (out or "")[-2000:], "stderr": (err or "")[-2000:]}
    if rc != 0:
        return None, not_run(
            check, name, "%s failed (rc %s): %s" % (evidence["command"], rc, ((err or "") + (out or "")).strip()[-300:]), evidence
        )
    try:
        return parse(out), None
    except errors as exc:
        return None, not_run(check, name, "%s printed what does not parse: %s" % (evidence["command"], exc), evidence)


def matrix(cells):
    """{"gbps": cells, "median_gbps": their median or None}."""
    return {"gbps": cells, "median_gbps": statistics.median(cells.values()) if cells else None}


def main():
    module = AnsibleModule(
        argument_spec={
            "gpus": {"type": "int", "required": True},
            "min_busbw_gbps": {"type": "float"},
            "min_pair_gbps": {"type": "float"},
            "min_pair_fraction": {"type": "float", "default": 0.9},
            "nccl_min_bytes": {"type": "int", "default": 134217728},
            "nccl_max_bytes": {"type": "int", "default": 4294967296},
            "nvbandwidth_path": {"type": "str", "default": "nvbandwidth"},
            "all_reduce_perf_path": {"type": "str", "default": "all_reduce_perf"},
            "timeout": {"type": "int", "default": 600},
        },
        supports_check_mode=True,
    )
    p = module.params
    findings = []
    pairs = {READ: {}, WRITE: {}}
    # nvbandwidth waives the device-to-device tests on a single GPU; one run per test, each judged
    for test in (READ, WRITE) if p["gpus"] > 1 else ():
        nvbw, problem = run_tool(
            module, p["nvbandwidth_path"], ["-t", test], p["timeout"], parse_nvbandwidth, NvbwParseError, "nvlink_bandwidth"
        )
        if problem:
            findings.append(problem)
        elif test not in nvbw["tests"]:
            findings.append(not_run("nvlink_bandwidth", "nvbandwidth", "nvbandwidth printed no %s matrix" % test))
        else:
            result = nvbw["tests"][test]
            findings += nvlink_pair_findings(result, p["min_pair_gbps"], p["min_pair_fraction"])
            pairs[test] = {"%s-%s" % k: v for k, v in sorted(result["matrix"].items())}
    busbw = None
    if p["gpus"] > 1:
        argv = ["-b", str(p["nccl_min_bytes"]), "-e", str(p["nccl_max_bytes"]), "-f", "2", "-g", str(p["gpus"])]
        nccl, problem = run_tool(module, p["all_reduce_perf_path"], argv, p["timeout"], parse_nccl_tests, NcclParseError, "nccl_busbw")
        if problem:
            findings.append(problem)
        elif not nccl["rows"]:
            findings.append(not_run("nccl_busbw", "all_reduce_perf", "all_reduce_perf printed no result rows"))
        else:
            busbw = max(nccl["rows"], key=lambda row: row["size"])["oop_busbw"]
            findings += nccl_findings(nccl, p["min_busbw_gbps"] if p["min_busbw_gbps"] is not None else 0.0)
    module.exit_json(
        changed=False,
        findings=findings,
        pairs=matrix(pairs[READ]),
        write_pairs=matrix(pairs[WRITE]),
        busbw_gbps=busbw,
    )


if __name__ == "__main__":
    main()
