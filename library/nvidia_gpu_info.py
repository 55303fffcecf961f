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

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge.gpu_info import ARGS, gpu_info


def main():
    module = AnsibleModule(argument_spec=ARGS, supports_check_mode=True)
    module.exit_json(**gpu_info(module, module.params))


if __name__ == "__main__":
    main()
