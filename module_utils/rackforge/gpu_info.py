"""What nvidia_gpu_info reads (the driver, the GPUs, the NVSwitch fabric, MIG, the CDI spec and the
kernel log's Xids), as a function both that module and rackforge_health call: gpu_info(module, params)
-> the result dict (changed False). module runs the commands (run_command, get_bin_path) and fails
the task (fail_json) where nvidia-smi's output cannot be read. ARGS: the parameters and defaults."""

from __future__ import annotations

import os

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


ARGS = {
    "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
    "kmsg_path": {"type": "path"},
    "drain_xids": {"type": "list", "elements": "int", "default": list(DRAIN_XIDS)},
    "xid_baseline": {"type": "dict", "default": {}},
    "cdi_spec": {"type": "path"},
}


def gpu_info(module, p):
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
    events, markers, log_findings = kernel_log_xids(p)
    result.update(markers)
    drain = tuple(p["drain_xids"])
    binary = module.get_bin_path(p["nvidia_smi"], opt_dirs=["/usr/bin", "/usr/local/bin"])
    if not binary:
        return dict(findings=[driver_finding(None), *log_findings, *xid_findings(events, None, drain)], **result)
    result["present"] = True
    # -q -x for the GPUs and -q for the fabric state (parse_fabric reads the text form), both at once
    (rc, out, err), (rc2, text, err2) = run_concurrently(module, [[binary, "-q", "-x"], [binary, "-q"]], environ_update=C_ENV)
    if rc != 0:
        message = (out + err).strip()
        result["error"] = message
        result["reboot_required"] = "version mismatch" in message.lower()
        return dict(findings=[driver_finding(message), *log_findings, *xid_findings(events, None, drain)], **result)
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
    if p["cdi_spec"]:
        findings += cdi_findings(p["cdi_spec"], read_spec(p["cdi_spec"]), parsed["gpus"], os.path.exists)
    result.update(
        mig=mig,
        findings=findings + log_findings + xid_findings(events, [g["bus_id"] for g in parsed["gpus"]], drain),
        driver_loaded=True,
        driver_version=parsed["driver_version"],
        cuda_version=parsed["cuda_version"],
        gpus=parsed["gpus"],
    )
    return result
