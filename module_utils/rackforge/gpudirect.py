"""Pure GPUDirect RDMA prerequisite rules (no I/O): topology, ACS, IOMMU, the peer-memory path.

Inputs are what library/gpudirect_rdma.py reads: the sysfs location of every GPU and RDMA NIC
(the resolved /sys/bus/pci/devices/<bdf> link, /sys/devices/pci0000:15/0000:15:01.0/.../0000:19:00.0),
`lspci -vvv` parsed by module_utils/rackforge/pci.py, each device's IOMMU group type, and the
peer-memory state. Outputs are health findings (module_utils/rackforge/health.py's shape).

Rules, from the NVIDIA GPUDirect RDMA and PCIe P2P documentation and Linux's drivers/pci/p2pdma.c:
- A GPU and a NIC "share a switch" when their paths from the root complex have a common prefix
  (the same root port, hence the switch below it). Peer traffic between them turns in the lowest
  common switch; the ports it crosses are the bridges below that common prefix on both sides.
- A port lspci cannot read (not root: "<access denied>") is a check that could not run, never a pass.
- ACS on those ports must not redirect or block peer requests: ReqRedir (P2P request redirect),
  CmpltRedir (completion redirect) and EgressCtrl (egress blocking) off. With them on, every
  GPU<->NIC transfer goes up to the root complex (and its IOMMU), which costs bandwidth or fails.
- The IOMMU translates nothing on the peer path: the devices' IOMMU group type "identity"
  (iommu=pt) or no IOMMU group at all (IOMMU off). "DMA"/"DMA-FQ" (translated) break peer DMA, and
  clearing ACS under a translating IOMMU would let peer requests bypass translation: the module
  then leaves ACS as it is.
- peermem: nvidia-peermem loaded, in the boot list, and registered with the RDMA core as the
  peer-memory client "nv_mem" (MLNX_OFED's ib_core creates /sys/kernel/mm/memory_peers/nv_mem).
  Linux's own ib_core has no peer-memory API: nvidia-peermem then fails to load (EINVAL).
- dmabuf (the inbox RDMA stack): Linux >= 5.12 (ib_umem_dmabuf) and NVIDIA's open kernel module
  (the proprietary one taints the kernel "P" and offers no dma-buf export for CUDA memory).
"""

from __future__ import annotations

import re

from ansible.module_utils.rackforge.health import finding, not_run

METHODS = ("peermem", "dmabuf")
ACS_P2P_BLOCKING = ("ReqRedir", "CmpltRedir", "EgressCtrl")
IOMMU_PASSTHROUGH = ("identity",)
DMABUF_MIN_KERNEL = (5, 12)
PEERMEM_CLIENT = "nv_mem"
_BDF = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def pci_chain(path):
    """The bdfs from the root port down to the device, from its sysfs location."""
    return [part for part in path.split("/") if _BDF.match(part)]


def short_bdf(bdf):
    """'0000:17:00.0' -> '17:00.0' (lspci's form without -D, in domain 0)."""
    return bdf[5:] if bdf.startswith("0000:") else bdf


def pairs(gpus, nics):
    """[{"gpu", "nic", "ports"}] for every GPU and NIC behind one switch (gpus/nics: {bdf: sysfs path}).

    ports: the bridges peer traffic between the two crosses (below their common prefix)."""
    out = []
    for gpu, gpu_path in sorted(gpus.items()):
        g = pci_chain(gpu_path)
        for nic, nic_path in sorted(nics.items()):
            n = pci_chain(nic_path)
            common = 0
            while common < min(len(g), len(n)) - 1 and g[common] == n[common]:
                common += 1
            if common == 0:
                continue
            ports = sorted(set(g[common:-1] + n[common:-1]))
            out.append({"gpu": gpu, "nic": nic, "ports": ports})
    return out


def acs_blocking(acs_ctl):
    """The ACS control flags that redirect or block peer traffic, [] when none (or no ACS)."""
    return [flag for flag in ACS_P2P_BLOCKING if (acs_ctl or {}).get(flag)]


def lookup(lspci, bdf):
    """lspci's record of a device, printed with or without the domain."""
    return lspci.get(bdf) or lspci.get(short_bdf(bdf))


def translating(gpus, nics, iommu):
    """The GPUs/NICs whose IOMMU group translates DMA (not identity, not off, not unknown)."""
    return sorted(bdf for bdf in set(gpus) | set(nics) if iommu.get(bdf) not in (*IOMMU_PASSTHROUGH, None, "unknown"))


def acs_ports(found_pairs, lspci):
    """{port: [blocking flags]} for every port on a GPU<->NIC path with ACS that redirects."""
    out = {}
    for pair in found_pairs:
        for port in pair["ports"]:
            flags = acs_blocking((lookup(lspci, port) or {}).get("acs_ctl"))
            if flags:
                out[port] = flags
    return out


def unreadable_ports(found_pairs, lspci):
    """Ports on a GPU<->NIC path lspci did not show, or showed without their PCI Express
    capability (every bridge has one): not root ("Capabilities: <access denied>"), or gone."""
    out = set()
    for pair in found_pairs:
        for port in pair["ports"]:
            record = lookup(lspci, port)
            if record is None or record.get("lnk_cap") is None:
                out.add(port)
    return sorted(out)


def kernel_at_least(release, minimum):
    nums = [int(n) for n in re.findall(r"\d+", release.split("-")[0])[:2]]
    return tuple(nums + [0] * (2 - len(nums))) >= minimum


def evaluate(method, gpus, nics, lspci, iommu, peermem=None, dmabuf=None):
    """Findings for the GPUDirect RDMA prerequisites.

    gpus/nics: {bdf: sysfs path}; lspci: parse_lspci_vv's dict; iommu: {bdf: group type or None};
    peermem: {"loaded", "at_boot", "registered"}; dmabuf: {"kernel", "nvidia_loaded", "taint"}.
    """
    if method not in METHODS:
        raise ValueError("method %r is not one of %s" % (method, ", ".join(METHODS)))
    findings = []
    found = pairs(gpus, nics)
    paired = {p["gpu"] for p in found}
    for gpu in sorted(set(gpus) - paired) if nics else []:
        findings.append(
            finding(
                "gpudirect_topology",
                "GPU %s" % short_bdf(gpu),
                "an RDMA NIC behind the same PCIe switch",
                "none",
                "GPU %s shares no PCIe switch with an RDMA NIC: its GPUDirect RDMA crosses the root complex "
                "(the hardware profile says gpudirect_rdma; correct it or the node)" % short_bdf(gpu),
            )
        )
    for port, flags in sorted(acs_ports(found, lspci).items()):
        peers = sorted({short_bdf(p["gpu"]) + "<->" + short_bdf(p["nic"]) for p in found if port in p["ports"]})
        item = finding(
            "gpudirect_acs",
            "pcie %s" % short_bdf(port),
            "ACS ReqRedir- CmpltRedir- EgressCtrl-",
            " ".join(f + "+" for f in flags),
            "PCIe port %s redirects peer traffic (%s) between %s: GPUDirect RDMA goes through the root complex"
            % (short_bdf(port), ", ".join(f + "+" for f in flags), ", ".join(peers)),
        )
        item["evidence"] = {"port": port, "acs_ctl": lookup(lspci, port)["acs_ctl"], "pairs": peers}
        findings.append(item)
    unreadable = unreadable_ports(found, lspci) if lspci else []
    if unreadable:
        findings.append(
            not_run(
                "gpudirect_acs",
                "lspci",
                "lspci shows no PCI Express capability of %d switch port(s) (not run as root?)" % len(unreadable),
                {"ports": unreadable},
            )
        )
    unknown = sorted(bdf for bdf in set(gpus) | set(nics) if iommu.get(bdf) == "unknown")
    if unknown:
        findings.append(
            not_run("gpudirect_iommu", "iommu", "%d device(s) have an IOMMU group without a type file" % len(unknown), {"devices": unknown})
        )
    translated = translating(gpus, nics, iommu)
    if translated:
        types = sorted({iommu[b] for b in translated})
        findings.append(
            finding(
                "gpudirect_iommu",
                "iommu",
                "passthrough (identity) or off",
                "/".join(types),
                "the IOMMU translates DMA of %d GPU/NIC device(s) (group type %s): GPUDirect RDMA needs iommu=pt "
                "or the IOMMU off" % (len(translated), "/".join(types)),
            )
        )
    if method == "peermem":
        state = peermem or {}
        if not state.get("loaded"):
            findings.append(
                finding(
                    "gpudirect_peermem",
                    "nvidia_peermem",
                    "loaded",
                    "not loaded",
                    "nvidia-peermem is not loaded: the NIC cannot register GPU memory",
                )
            )
        elif not state.get("registered"):
            findings.append(
                finding(
                    "gpudirect_peermem",
                    "nvidia_peermem",
                    "registered with the RDMA core (memory_peers/%s)" % PEERMEM_CLIENT,
                    "not registered",
                    "nvidia-peermem is loaded but not registered with ib_core's peer-memory API",
                )
            )
        if not state.get("at_boot"):
            findings.append(
                finding(
                    "gpudirect_peermem_boot",
                    "nvidia_peermem",
                    "in /etc/modules-load.d",
                    "not listed",
                    "nvidia-peermem is not loaded at boot (no modules-load.d entry)",
                )
            )
    else:
        state = dmabuf or {}
        if not kernel_at_least(state.get("kernel") or "0", DMABUF_MIN_KERNEL):
            findings.append(
                finding(
                    "gpudirect_dmabuf",
                    "kernel",
                    ">= %d.%d" % DMABUF_MIN_KERNEL,
                    state.get("kernel"),
                    "kernel %s has no dma-buf memory registration (Linux 5.12+)" % state.get("kernel"),
                )
            )
        if not state.get("nvidia_loaded"):
            findings.append(
                finding(
                    "gpudirect_dmabuf",
                    "nvidia",
                    "the open kernel module loaded",
                    "not loaded",
                    "the NVIDIA kernel module is not loaded: no dma-buf export of GPU memory",
                )
            )
        elif "P" in (state.get("taint") or ""):
            findings.append(
                finding(
                    "gpudirect_dmabuf",
                    "nvidia",
                    "the open kernel module",
                    "proprietary (taint %s)" % state.get("taint"),
                    "the proprietary NVIDIA kernel module exports no dma-buf for "
                    "GPUDirect RDMA: install the open one (nvidia_driver_kernel_module_type: open)",
                )
            )
    return findings
