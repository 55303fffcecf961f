#!/usr/bin/python
from __future__ import annotations

DOCUMENTATION = r"""
module: nvidia_gpu_info
short_description: Read NVIDIA driver, GPU and NVSwitch fabric facts from nvidia-smi
description:
  - Read-only. Runs C(nvidia-smi -q -x) (XML, robust to layout changes) and C(nvidia-smi -q) for the
    fabric section (which older XML schemas lack) and the GPU hardware health, and parses both with
    module_utils/rackforge.
  - Works on a host without a driver (C(present=false)) and reports a loaded-but-mismatched driver
    (C(reboot_required=true)) instead of failing.
  - With O(kmsg_path), also reads the kernel's log (C(/dev/kmsg)) and reports every Xid in
    O(drain_xids) logged after O(xid_baseline) (findings C(gpu_xid); a log that cannot be read is
    C(gpu_xid_not_run)), and returns the marker to keep as the next baseline.
options:
  nvidia_smi:
    description: Path or name of nvidia-smi.
    type: str
    default: nvidia-smi
  kmsg_path:
    description: The kernel log device (/dev/kmsg); omit to not read the kernel log.
    type: path
  drain_xids:
    description: Xid numbers that are findings (the rest, such as application faults 13, 31, 43, are not).
    type: list
    elements: int
    default: [48, 63, 64, 74, 79, 92, 94, 95, 119]
  xid_baseline:
    description: The C(kernel_log) marker an earlier check returned, C({boot_id, seq}); Xids up to it are not reported.
    type: dict
    default: {}
  cdi_spec:
    description:
      - The NVIDIA CDI spec (JSON, nvidia-ctk cdi generate) to check against the running driver; omit to not check it.
      - "Findings: C(cdi_spec) when it is missing or a GPU is not in it (by index and UUID), C(cdi_spec_stale) when a
        host path it names is gone (written for another driver), C(cdi_spec_not_run) when it does not parse."
    type: path
author: rackforge
"""

EXAMPLES = r"""
- name: Read GPU facts
  nvidia_gpu_info:
  register: gpu_info
"""

RETURN = r"""
kernel_log:
  description:
    - The marker of this read, C({boot_id, seq}); null without O(kmsg_path) or when the log could not be read.
    - As the baseline it acknowledges every Xid read.
  returned: always
  type: dict
kernel_log_unacknowledged:
  description: The marker just before the first reported Xid (C(kernel_log) when none); as the baseline it keeps that Xid a finding.
  returned: always
  type: dict
present:
  description: nvidia-smi is installed.
  returned: always
  type: bool
driver_loaded:
  description: nvidia-smi could talk to a loaded driver.
  returned: always
  type: bool
reboot_required:
  description: The installed user-space library and the loaded kernel module differ (driver/library version mismatch).
  returned: always
  type: bool
error:
  description: nvidia-smi's own message when it failed, else null.
  returned: always
  type: str
driver_version:
  description: Loaded driver version.
  returned: when driver_loaded
  type: str
gpus:
  description:
    - Per GPU facts (index, minor_number, name, uuid, bus_id, persistence_mode, clocks, power, supported_clocks, fabric).
    - index is the GPU's position in nvidia-smi's enumeration (PCI bus order), the number C(nvidia-smi -i) takes;
      minor_number (/dev/nvidia<N>) can differ from it.
  returned: always
  type: list
  elements: dict
mig:
  description:
    - Per GPU {index, enabled, devices}, enabled from C(<mig_mode><current_mig>), devices the profiles of its MIG devices
      as C(nvidia-smi -L) lists them (e.g. C(3g.40gb)); the NVIDIA device plugin's resources follow from them
      (kubernetes_gpu_gate). C(nvidia-smi -L) runs only where a GPU has MIG enabled.
  returned: always
  type: list
  elements: dict
fabric:
  description: >-
    Fabric state per GPU as printed by nvidia-smi -q (state, status, clique_id, cluster_uuid, health_summary) and completed
    (Completed/Success, decided by module_utils/rackforge/health.py).
  returned: always
  type: list
  elements: dict
findings:
  description:
    - The driver finding (check driver) when nvidia-smi cannot talk to a loaded driver or is not installed.
    - Else the GPU hardware findings of C(nvidia-smi -q) (module_utils/rackforge/gpu_health.py): volatile uncorrectable
      ECC errors, a row remap pending or failed, a page retirement pending, a PCIe link below its maximum width or
      generation (judged only while the GPU is busy: an idle GPU may lower both), an active hardware slowdown; []
      when there is none.
  returned: always
  type: list
  elements: dict
fabric_completed:
  description: Every GPU's NVSwitch fabric is Completed/Success (false when nvidia-smi printed no Fabric section).
  returned: when driver_loaded
  type: bool
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV, run_concurrently
from ansible.module_utils.rackforge.cdi import findings as cdi_findings
from ansible.module_utils.rackforge.cdi import read as read_spec
from ansible.module_utils.rackforge.gpu_health import DRAIN_XIDS, gpu_hw_findings, new_records, xid_findings
from ansible.module_utils.rackforge.health import driver_finding, fabric_summary, not_run
from ansible.module_utils.rackforge.kernel_log import ParseError as KernelLogError
from ansible.module_utils.rackforge.kernel_log import parse_kmsg, parse_xid
from ansible.module_utils.rackforge.nvidia_smi import ParseError, fabric_of, parse_gpu_list, parse_query_text, parse_query_xml

MAX_READS = 200000  # records (one per read on /dev/kmsg); a default ring buffer holds a few thousand


def read_kmsg(path):
    """The kernel's whole record buffer. /dev/kmsg gives one record per read() and EAGAIN at its end
    (O_NONBLOCK), EPIPE when a record was overwritten while reading (go on); a regular file gives
    chunks and b"" at its end."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    chunks = []
    try:
        while len(chunks) < MAX_READS:  # a log storm never keeps the check reading
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                break
            except BrokenPipeError:
                continue
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")


def kernel_log_xids(p):
    """(Xid events since the baseline, {"kernel_log": marker of everything read,
    "kernel_log_unacknowledged": marker before the first reported Xid}, [not_run finding]) from
    O(kmsg_path). Kept as a first baseline, the second leaves the Xid after it, so the finding
    stays until the operator acknowledges it (a baseline reset keeps the first) or the node reboots."""
    if not p["kmsg_path"]:
        return [], {"kernel_log": None, "kernel_log_unacknowledged": None}, []
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            boot_id = fh.read().strip()
        text = read_kmsg(p["kmsg_path"])
        records, marker = new_records(parse_kmsg(text), p["xid_baseline"] or {}, boot_id)
        events, first_drain = [], None
        for record in records:
            if "NVRM: Xid" not in record["message"]:
                continue
            for event in parse_xid(record["message"]):
                events.append(event)
                if event["xid"] in p["drain_xids"] and first_drain is None:
                    first_drain = record["seq"]
        hold = dict(marker, seq=first_drain - 1) if first_drain is not None else marker
    except (OSError, KernelLogError) as exc:
        evidence = {"command": "read %s" % p["kmsg_path"], "rc": None, "stdout": "", "stderr": str(exc)}
        found = not_run("gpu_xid", "kernel log", "the kernel log %s could not be read: %s" % (p["kmsg_path"], exc), evidence)
        return [], {"kernel_log": None, "kernel_log_unacknowledged": None}, [found]
    return events, {"kernel_log": marker, "kernel_log_unacknowledged": hold}, []


def main():
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
            "kmsg_path": {"type": "path"},
            "drain_xids": {"type": "list", "elements": "int", "default": list(DRAIN_XIDS)},
            "xid_baseline": {"type": "dict", "default": {}},
            "cdi_spec": {"type": "path"},
        },
        supports_check_mode=True,
    )
    result = {
        "changed": False,
        "present": False,
        "driver_loaded": False,
        "reboot_required": False,
        "error": None,
        "gpus": [],
        "mig": [],
        "fabric": [],
    }
    events, markers, log_findings = kernel_log_xids(module.params)
    result.update(markers)
    drain = tuple(module.params["drain_xids"])
    binary = module.get_bin_path(module.params["nvidia_smi"], opt_dirs=["/usr/bin", "/usr/local/bin"])
    if not binary:
        module.exit_json(findings=[driver_finding(None), *log_findings, *xid_findings(events, None, drain)], **result)
    result["present"] = True
    # -q -x for the GPUs and -q for the fabric state (parse_fabric reads the text form), both at once
    (rc, out, err), (rc2, text, err2) = run_concurrently(module, [[binary, "-q", "-x"], [binary, "-q"]], environ_update=C_ENV)
    if rc != 0:
        message = (out + err).strip()
        result["error"] = message
        result["reboot_required"] = "version mismatch" in message.lower()
        module.exit_json(findings=[driver_finding(message), *log_findings, *xid_findings(events, None, drain)], **result)
    try:
        parsed = parse_query_xml(out)
        if rc2 != 0:
            module.fail_json(msg="nvidia-smi -q failed where -q -x succeeded", rc=rc2, stdout=text, stderr=err2)
        query_gpus = parse_query_text(text)["gpus"]  # one parse for the fabric and the hardware findings
        result["fabric"], result["fabric_completed"] = fabric_summary(fabric_of(query_gpus))
        findings = gpu_hw_findings(query_gpus)
    except ParseError as exc:
        module.fail_json(msg="could not parse nvidia-smi output: %s" % exc, rc=rc, stdout=out, stderr=err)
    for position, gpu in enumerate(parsed["gpus"]):
        gpu["index"] = position  # nvidia-smi -i's numbering: enumeration (PCI bus) order
        gpu["supported_clocks"] = {str(k): v for k, v in gpu["supported_clocks"].items()}
    mig = [{"index": g["index"], "enabled": g["mig_mode"] == "Enabled", "devices": []} for g in parsed["gpus"]]
    if any(m["enabled"] for m in mig):
        rc3, listing, err3 = module.run_command([binary, "-L"], environ_update=C_ENV)
        try:
            if rc3 != 0:
                raise ParseError("nvidia-smi -L exited %d" % rc3)
            listed = {g["index"]: g for g in parse_gpu_list(listing)}
        except ParseError as exc:
            module.fail_json(msg="cannot read the MIG devices: %s" % exc, rc=rc3, stdout=listing, stderr=err3)
        for m in mig:
            if m["enabled"]:
                m["devices"] = [d["profile"] for d in listed.get(m["index"], {}).get("mig_devices", [])]
    if module.params["cdi_spec"]:
        findings += cdi_findings(module.params["cdi_spec"], read_spec(module.params["cdi_spec"]), parsed["gpus"], os.path.exists)
    result.update(
        mig=mig,
        findings=findings + log_findings + xid_findings(events, [g["bus_id"] for g in parsed["gpus"]], drain),
        driver_loaded=True,
        driver_version=parsed["driver_version"],
        cuda_version=parsed["cuda_version"],
        gpus=parsed["gpus"],
    )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
