#!/usr/bin/python
from __future__ import annotations

DOCUMENTATION = r"""
module: rackforge_health
short_description: The node's whole health verdict in one call, with its textfile metrics and counter baseline
description:
  - Reads the GPUs, the driver, MIG, the CDI spec and the kernel log's Xids (as M(nvidia_gpu_info)), NVLink and
    the NVSwitch fabric (as M(nvlink_health), when the driver is loaded), the RDMA ports (as M(rdma_health), when
    the hardware profile has RDMA NICs), the GPUDirect RDMA prerequisites (as M(gpudirect_rdma) in its read-only
    check state, when the profile names a method), the model share (O(model_share): mounted, and answering a stat
    within O(model_share_timeout_s) in a child process, so a hung NFS server cannot hang the check), the local
    model cache (O(model_cache): its md array active with every member present, mounted, free space) and the
    node's last fabric acceptance, and returns every finding as one verdict.
  - Writes what the verdict needs kept, and only that, in one step; check mode and --diff show it without writing
    the state and textfile directories (made where missing, 0755 root), the counter baseline
    (C(<state_dir>/health-baseline.json); written the first time the driver answers, or again with
    O(reset_baseline)) and the textfile metrics (C(<textfile_dir>/rackforge.prom), replaced when they differ).
options:
  state_dir:
    description: Where the baseline is kept and the fabric acceptance left C(acceptance.json).
    type: path
    default: /var/lib/rackforge
  textfile_dir:
    description: node_exporter's textfile collector directory.
    type: path
    default: /var/lib/prometheus/node-exporter
  hardware:
    description: >-
      The hardware profile: gpu_count, nvlinks_per_gpu, nvlink_speed_gbps, nvswitch, rdma_nic_count, rdma_link_layer,
      rdma_rate_gbps, management_interfaces, gpudirect_rdma, gpu_pci_ids, rdma_nic_pci_ids (each optional).
    type: dict
    default: {}
  check_topology:
    description: On NVSwitch systems, require NVLink P2P OK between every GPU pair.
    type: bool
    default: true
  lossless_priority:
    description: The PFC priority RoCE is lossless on (checked on Ethernet ports); omit to skip the PFC check.
    type: int
  sysfs_root:
    description: Where sysfs is mounted.
    type: path
    default: /sys
  kmsg_path:
    description: The kernel log to read Xids from; omit to skip.
    type: path
  drain_xids:
    description: The Xids that make the node unhealthy.
    type: list
    elements: int
  cdi_spec:
    description: The CDI spec to check against the GPUs; omit to skip.
    type: path
  model_share:
    description: The model share's mount point (model_storage); omit to skip.
    type: path
  model_share_timeout_s:
    description: Seconds the model share has to answer before it is a finding (model_share_hung).
    type: float
    default: 10
  model_cache:
    description: The local model cache's mount point (model_storage); omit to skip.
    type: path
  model_cache_device:
    description: The cache's md array (module_utils/rackforge/cache_check.py says what is checked).
    type: str
    default: /dev/md/rackforge_cache
  model_cache_min_free_gb:
    description: Free space (GB) below which the cache is a finding (model_cache_full); 0 skips it.
    type: float
    default: 0
  reset_baseline:
    description: Keep the counters and the kernel log position now as the new baseline (acknowledges what was reported).
    type: bool
    default: false
  acceptance:
    description: Count the findings of the last fabric acceptance (C(<state_dir>/acceptance.json)) in the verdict.
    type: bool
    default: true
  verdict:
    description: >-
      A verdict changed after the checks (the GPU join gate adds its finding): run no check, keep no baseline,
      write only this verdict's textfile metrics.
    type: dict
author: rackforge
"""

EXAMPLES = r"""
- name: Check the node's health, keep its baseline and write its metrics
  rackforge_health:
    hardware: "{{ health_checks_hardware }}"
    lossless_priority: 3
  register: health
"""

RETURN = r"""
health:
  description: The verdict (healthy, findings, driver_version, gpus, mig, fabric, ports), the cross-role contract rackforge_health.
  returned: always
  type: dict
acceptance:
  description: The node's last fabric acceptance (with its time), or null when none was kept.
  returned: always
  type: dict
written:
  description: The files and directories written (or that would be, in check mode).
  returned: always
  type: list
  elements: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge.cache_check import check_cache
from ansible.module_utils.rackforge.filestage import missing_dirs, read_bytes
from ansible.module_utils.rackforge.gpu_info import ARGS as GPU_ARGS
from ansible.module_utils.rackforge.gpu_info import gpu_info
from ansible.module_utils.rackforge.gpudirect_host import ARGS as GPUDIRECT_ARGS
from ansible.module_utils.rackforge.gpudirect_host import gpudirect_host
from ansible.module_utils.rackforge.health_metrics import textfile
from ansible.module_utils.rackforge.nvlink_check import ARGS as NVLINK_ARGS
from ansible.module_utils.rackforge.nvlink_check import nvlink_check
from ansible.module_utils.rackforge.rdma_check import ARGS as RDMA_ARGS
from ansible.module_utils.rackforge.rdma_check import rdma_check
from ansible.module_utils.rackforge.rootfiles import commit_or_fail, queue
from ansible.module_utils.rackforge.share_check import check_share
from ansible.module_utils.rackforge.units import PlanError

BASELINE, ACCEPTANCE, METRICS = "health-baseline.json", "acceptance.json", "rackforge.prom"


def params(spec, **given):
    """A check's parameters: its defaults, then what is given (None given leaves the default)."""
    out = {name: s.get("default") for name, s in spec.items()}
    out.update((k, v) for k, v in given.items() if v is not None)
    return out


def number(value, kind):
    return None if value is None or value == "" else kind(value)


def parse_json(module, path, data):
    """A kept JSON file's object from its bytes ({} when it is missing or empty); a file that is not
    JSON fails the task naming it, as the operator must look at it (nothing is overwritten)."""
    if not data or not data.strip():
        return {}
    try:
        value = json.loads(data.decode("utf-8"))
    except ValueError as exc:
        module.fail_json(msg="rackforge_health: %s is not JSON (%s); move it away to start a new one. Nothing was changed." % (path, exc))
    return value if isinstance(value, dict) else {}


def run_checks(module, p, baseline):
    """{gpu, nvlink, rdma, gpudirect} results (a check that does not apply is {})."""
    hw = p["hardware"]
    gpu = gpu_info(
        module,
        params(
            GPU_ARGS,
            kmsg_path=p["kmsg_path"],
            drain_xids=p["drain_xids"],
            xid_baseline=baseline.get("kernel_log") or {},
            cdi_spec=p["cdi_spec"],
        ),
    )
    nvswitch = bool(hw.get("nvswitch", False))
    nvlink = {}
    if gpu["driver_loaded"]:
        nvlink = nvlink_check(
            module,
            params(
                NVLINK_ARGS,
                expected_gpus=number(hw.get("gpu_count"), int),
                expected_links=number(hw.get("nvlinks_per_gpu"), int),
                expected_speed_gbps=number(hw.get("nvlink_speed_gbps"), float),
                nvswitch=nvswitch,
                check_topology=p["check_topology"] and nvswitch,
                baseline=baseline.get("nvlink") or {},
            ),
        )
    rdma = {}
    if int(hw.get("rdma_nic_count") or 0) > 0:
        rdma = rdma_check(
            module,
            params(
                RDMA_ARGS,
                expected_count=number(hw.get("rdma_nic_count"), int),
                link_layer=hw.get("rdma_link_layer") or "Ethernet",
                rate_gbps=number(hw.get("rdma_rate_gbps"), int),
                exclude_netdevs=list(hw.get("management_interfaces") or []),
                lossless_priority=p["lossless_priority"],
                sysfs_root=p["sysfs_root"],
                baseline=baseline.get("rdma") or {},
            ),
        )
    gpudirect = {}
    method = hw.get("gpudirect_rdma") or "none"
    if method != "none":
        if method not in GPUDIRECT_ARGS["method"]["choices"]:
            module.fail_json(msg="rackforge_health: hardware.gpudirect_rdma must be none, peermem or dmabuf, got %r" % (method,))
        gpudirect = gpudirect_host(
            module,
            params(
                GPUDIRECT_ARGS,
                method=method,
                state="check",
                acs="check",
                gpu_pci_ids=list(hw.get("gpu_pci_ids") or []),
                nic_pci_ids=list(hw.get("rdma_nic_pci_ids") or []),
                sysfs_root=p["sysfs_root"],
            ),
        )
    share = check_share(p["model_share"], p["model_share_timeout_s"]) if p["model_share"] else {}
    cache = check_cache(p["model_cache"], p["model_cache_device"], p["model_cache_min_free_gb"], 10) if p["model_cache"] else {}
    return {"gpu": gpu, "nvlink": nvlink, "rdma": rdma, "gpudirect": gpudirect, "share": share, "cache": cache}


def write(module, dest, text, writes, diff):
    """Queue dest (0644 root) when it differs (rootfiles.queue: units.file_changes decides)."""
    try:
        queue(dest, text, writes, diff)
    except PlanError as exc:
        module.fail_json(msg="rackforge_health: %s; nothing was changed" % exc)


def finish(module, dirs, writes, diff, **result):
    """Make the missing dirs and write the queued files in one commit (nothing in check mode), then exit."""
    mkdirs = []
    for d in dirs:
        if not os.path.isdir(d):
            mkdirs += [m for m in missing_dirs(os.path.join(d, "x")) if m not in mkdirs]
    commit_or_fail(module, "rackforge_health", writes, mkdirs)
    module.exit_json(changed=bool(mkdirs or writes), written=mkdirs + [w["dest"] for w in writes], diff=diff, **result)


def publish(module, textfile_dir, verdict):
    """Write a given verdict's textfile metrics (and the directory), nothing else."""
    if not isinstance(verdict.get("findings"), list) or "healthy" not in verdict:
        module.fail_json(msg="rackforge_health: verdict needs healthy and findings (the rackforge_health fact)")
    writes, diff = [], []
    write(module, os.path.join(textfile_dir, METRICS), textfile(verdict), writes, diff)
    finish(module, [textfile_dir], writes, diff, health=verdict, acceptance=None)


def main():
    module = AnsibleModule(
        argument_spec={
            "state_dir": {"type": "path", "default": "/var/lib/rackforge"},
            "textfile_dir": {"type": "path", "default": "/var/lib/prometheus/node-exporter"},
            "hardware": {"type": "dict", "default": {}},
            "check_topology": {"type": "bool", "default": True},
            "lossless_priority": {"type": "int"},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "kmsg_path": {"type": "path"},
            "drain_xids": {"type": "list", "elements": "int"},
            "cdi_spec": {"type": "path"},
            "model_share": {"type": "path"},
            "model_share_timeout_s": {"type": "float", "default": 10},
            "model_cache": {"type": "path"},
            "model_cache_device": {"type": "str", "default": "/dev/md/rackforge_cache"},
            "model_cache_min_free_gb": {"type": "float", "default": 0},
            "reset_baseline": {"type": "bool", "default": False},
            "acceptance": {"type": "bool", "default": True},
            "verdict": {"type": "dict"},
        },
        supports_check_mode=True,
    )
    p = module.params
    if p["verdict"] is not None:
        publish(module, p["textfile_dir"], p["verdict"])
    baseline_path, acceptance_path = os.path.join(p["state_dir"], BASELINE), os.path.join(p["state_dir"], ACCEPTANCE)
    kept = read_bytes(baseline_path)
    baseline = parse_json(module, baseline_path, kept)
    acceptance = parse_json(module, acceptance_path, read_bytes(acceptance_path))
    r = run_checks(module, p, baseline)
    gpu, nvlink, rdma, gpudirect = r["gpu"], r["nvlink"], r["rdma"], r["gpudirect"]
    findings = gpu["findings"] + nvlink.get("findings", []) + rdma.get("findings", []) + gpudirect.get("findings", [])
    findings += r["share"].get("findings", []) + r["cache"].get("findings", [])
    if p["acceptance"]:
        findings += acceptance.get("findings") or []
    health = {
        "healthy": not findings,
        "findings": findings,
        "driver_version": gpu.get("driver_version"),
        "gpus": nvlink.get("gpus", []),
        "mig": gpu.get("mig", []),
        "fabric": nvlink.get("fabric", []),
        "ports": rdma.get("ports", []),
        "share": r["share"].get("share"),
        "cache": r["cache"].get("cache"),
    }
    writes, diff = [], []
    # the counters of the first run the driver answers are the baseline later runs compare with
    if gpu["driver_loaded"] and (p["reset_baseline"] or kept is None):
        marker = gpu["kernel_log"] if p["reset_baseline"] else gpu["kernel_log_unacknowledged"]
        keep = {"nvlink": nvlink.get("counters", {}), "rdma": rdma.get("counters", {}), "kernel_log": marker}
        write(module, baseline_path, json.dumps(keep, indent=4, sort_keys=True) + "\n", writes, diff)
    write(module, os.path.join(p["textfile_dir"], METRICS), textfile(health), writes, diff)
    finish(
        module,
        [p["state_dir"], p["textfile_dir"]],
        writes,
        diff,
        health=health,
        acceptance=acceptance if "time" in acceptance else None,
    )


if __name__ == "__main__":
    main()
