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
options:
  nvidia_smi:
    description: Path or name of nvidia-smi.
    type: str
    default: nvidia-smi
author: rackforge
"""

EXAMPLES = r"""
- name: Read GPU facts
  nvidia_gpu_info:
  register: gpu_info
"""

RETURN = r"""
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
      ECC errors, a row remap pending or failed, a page retirement pending, a PCIe link below its width (or, while
      busy, its generation), an active hardware slowdown; [] when there is none.
  returned: always
  type: list
  elements: dict
fabric_completed:
  description: Every GPU's NVSwitch fabric is Completed/Success (false when nvidia-smi printed no Fabric section).
  returned: when driver_loaded
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV, run_concurrently
from ansible.module_utils.rackforge.gpu_health import gpu_hw_findings
from ansible.module_utils.rackforge.health import driver_finding, fabric_summary
from ansible.module_utils.rackforge.nvidia_smi import ParseError, fabric_of, parse_query_text, parse_query_xml


def main():
    module = AnsibleModule(argument_spec={"nvidia_smi": {"type": "str", "default": "nvidia-smi"}}, supports_check_mode=True)
    result = {"changed": False, "present": False, "driver_loaded": False, "reboot_required": False, "error": None, "gpus": [], "fabric": []}
    binary = module.get_bin_path(module.params["nvidia_smi"], opt_dirs=["/usr/bin", "/usr/local/bin"])
    if not binary:
        module.exit_json(findings=[driver_finding(None)], **result)
    result["present"] = True
    # -q -x for the GPUs and -q for the fabric state (parse_fabric reads the text form), both at once
    (rc, out, err), (rc2, text, err2) = run_concurrently(module, [[binary, "-q", "-x"], [binary, "-q"]], environ_update=C_ENV)
    if rc != 0:
        message = (out + err).strip()
        result["error"] = message
        result["reboot_required"] = "version mismatch" in message.lower()
        module.exit_json(findings=[driver_finding(message)], **result)
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
    result.update(
        findings=findings,
        driver_loaded=True,
        driver_version=parsed["driver_version"],
        cuda_version=parsed["cuda_version"],
        gpus=parsed["gpus"],
    )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
