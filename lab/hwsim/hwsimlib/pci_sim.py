"""The simulated PCI hierarchy: sysfs device directories with binary config space (SIMULATION).

The REAL pciutils read it: `lspci -A linux-sysfs -O sysfs.path=$HWSIM_SYSFS/bus/pci -vvv` parses the
config space written here (capability lists, the PCI Express capability's link registers, the
Access Control Services extended capability) and `setpci` with the same options writes to it, as
both do to /sys/bus/pci/devices/*/config on a real host. Nothing here formats lspci's text.

Layout, as Linux's sysfs has it (drivers/pci/pci-sysfs.c):
  devices/pci0000:<bus>/0000:<root port>/[0000:<switch upstream>/0000:<switch downstream>/]0000:<dev>
  bus/pci/devices/<bdf> -> ../../../devices/pci0000:.../<bdf>   (a relative link, as the kernel's)
  per device: vendor, device, class, subsystem_vendor, subsystem_device, revision, irq, resource,
  numa_node (what libpci's sysfs method reads), config (4096 bytes: header, capabilities, extended
  capabilities), iommu_group -> ../../../kernel/iommu_groups/<n> with its `type`.

Topology: the profile's `pcie.switches` lists which GPUs (profile slots) and NICs (CA names) sit
behind one PCIe switch (a root port, the switch's upstream port, one downstream port per device),
as a GPU and its rail's NIC do on an HGX board; every other device hangs off a root port of its own.
Bus numbers: each switch uses the three bus numbers below its lowest endpoint bus (root port's bus,
upstream port's bus, the downstream ports' bus); the bridges' secondary/subordinate registers span
the buses of their endpoints. Simplification: sibling switches' bus ranges may overlap (a real BIOS
assigns disjoint ranges; the profile's endpoint bus numbers come from real captures, not from one
enumeration).

At boot every root port and switch downstream port has ACS SrcValid, ReqRedir, CmpltRedir and
UpstreamFwd enabled, as Linux sets them (pci_std_enable_acs) when an IOMMU driver asked for ACS
(pci_request_acs): a host that wants GPUDirect peer traffic through the switch clears them (setpci).
Faults: `acs_enabled gpu=<slot>` sets them again on the ports above that GPU (what a hot reset or a
firmware update leaves), `iommu_dma` puts the IOMMU groups in translated mode ("DMA-FQ", the
kernel's default for intel_iommu=on without iommu=pt; the lab's default is passthrough, "identity").
"""

from __future__ import annotations

import os
import struct

from hwsimlib.state import SYSFS, faults, present_gpus, profile

# PCI_EXP_LNKCAP_SLS / LNKSTA_CLS codes: 1 = 2.5 GT/s (gen 1) ... 5 = 32 GT/s (gen 5)
CAP_EXP, EXT_ACS = 0x10, 0x000D
PORT_ENDPOINT, PORT_ROOT, PORT_UPSTREAM, PORT_DOWNSTREAM = 0, 4, 5, 6
# ACS capability / control bits (PCI_ACS_SV .. PCI_ACS_DT in include/uapi/linux/pci_regs.h)
ACS_SV, ACS_TB, ACS_RR, ACS_CR, ACS_UF, ACS_EC, ACS_DT = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40
ACS_CAPS = ACS_SV | ACS_TB | ACS_RR | ACS_CR | ACS_UF | ACS_DT  # a switch port without egress control
ACS_BOOT = ACS_SV | ACS_RR | ACS_CR | ACS_UF  # what pci_std_enable_acs sets
BRIDGE = {"vendor": "0x8086", "device": "0x352a", "revision": 0x04}  # the Intel root port of the captures
SWITCH = {"vendor": "0x1000", "device": "0xc030", "revision": 0xB0}  # Broadcom PEX890xx Gen 5 switch port


def _config(vendor, device, revision, klass, port=None, lnk=(5, 16), sta=None, bus=None, acs=None, subsystem=(0, 0)):
    """4096 bytes of config space: type 0 (endpoint) or type 1 (bridge: bus = (pri, sec, sub))."""
    cfg = bytearray(4096)
    struct.pack_into("<HHHH", cfg, 0, int(vendor, 16), int(device, 16), 0x0006, 0x0010)  # Mem+ BusMaster+, Cap+
    struct.pack_into("<I", cfg, 0x08, (klass << 8) | revision)
    cfg[0x0E] = 0x01 if bus else 0x00
    if bus:
        cfg[0x18], cfg[0x19], cfg[0x1A] = bus
    else:
        struct.pack_into("<HH", cfg, 0x2C, *subsystem)
    cfg[0x34] = 0x40
    # PCI Express capability (v2) at 0x40: link capabilities at +0x0c, link status at +0x12
    kind = PORT_ENDPOINT if port is None else port
    struct.pack_into("<BBH", cfg, 0x40, CAP_EXP, 0, 0x0002 | (kind << 4))
    speed, width = lnk
    sta_speed, sta_width = sta or lnk
    port_number = 0 if port is None else 1
    struct.pack_into("<I", cfg, 0x4C, speed | (width << 4) | (port_number << 24))
    struct.pack_into("<H", cfg, 0x52, sta_speed | (sta_width << 4))
    struct.pack_into("<I", cfg, 0x6C, ((1 << speed) - 1) << 1)  # LnkCap2: every speed up to the maximum
    if acs is not None:
        struct.pack_into("<IHH", cfg, 0x100, EXT_ACS | (1 << 16), ACS_CAPS, acs)
    return bytes(cfg)


def _write(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(value, bytes) else "w") as fh:
        fh.write(value if isinstance(value, bytes) else "%s\n" % value)


def _hex(bus):
    return int(str(bus), 16)


def _gen(value, default):
    return {1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6}[int(value or default)]


def _endpoints(prof):
    """[(bdf bus, attrs)] of every endpoint the profile has, in bus order."""
    g = prof["gpu"]
    gen, width = _gen(g.get("pcie", {}).get("gen"), 5), int(g.get("pcie", {}).get("width", 16))
    down = {int(f.get("gpu", 0)): int(f.get("width", 8)) for f in faults("gpu_pcie_downtrained")}
    out = []
    for i in present_gpus():
        sta = (gen, down[i]) if i in down else None
        out.append(
            (
                _hex(g["bus_ids"][i]),
                {
                    "key": ("gpu", i),
                    "ids": (g["pci_vendor"], g["pci_device"]),
                    "rev": 0xA1,
                    "class": 0x030200,
                    "lnk": (gen, width),
                    "sta": sta,
                    "numa": g["numa"][i],
                    "subsystem": (0x10DE, int(g["subsystem"], 16)),
                },
            )
        )
    nvs = prof.get("nvswitch", {})
    for bus in nvs.get("bus_ids", []):
        out.append(
            (
                _hex(bus),
                {
                    "key": ("nvswitch", bus),
                    "ids": (nvs["pci_vendor"], nvs["pci_device"]),
                    "rev": 0xA1,
                    "class": 0x068000,
                    "lnk": (3, 2),
                    "numa": 0,
                    "subsystem": (0x10DE, 0x1796),
                },
            )
        )
    for nic in prof["nics"]:
        pcie = nic.get("pcie", {})
        out.append(
            (
                _hex(nic["bus_id"]),
                {
                    "key": ("nic", nic["ca"]),
                    "ids": (nic["pci_vendor"], nic["pci_device"]),
                    "rev": int(nic.get("pci_revision", 0)),
                    "class": 0x020000,
                    "lnk": (_gen(pcie.get("gen"), 5), int(pcie.get("width", 16))),
                    "numa": nic["numa"],
                    "subsystem": (0x15B3, 0x0021),
                },
            )
        )
    return sorted(out, key=lambda e: e[0])


def _bdf(bus, dev=0, fn=0):
    return "0000:%02x:%02x.%d" % (bus, dev, fn)


def _acs_on_ports():
    return {int(f.get("gpu", 0)) for f in faults("acs_enabled")}


def _bridge(path, bdf, ids, port, bus, numa, lnk=(5, 16), sta=None, acs=None):
    """One bridge's (path, bdf, config, numa): a root, upstream or downstream port (bus = (pri, sec, sub))."""
    return (path, bdf, _config(ids["vendor"], ids["device"], ids["revision"], 0x060400, port, lnk=lnk, sta=sta, bus=bus, acs=acs), numa)


def layout(prof=None):
    """[(path below devices/, bdf, config bytes, numa)] of the whole hierarchy, parents first."""
    prof = prof or profile()
    endpoints = _endpoints(prof)
    by_key = {e[1]["key"]: e for e in endpoints}
    switches = []
    for sw in prof.get("pcie", {}).get("switches", []):
        members = [by_key[k] for k in [("gpu", i) for i in sw.get("gpus", [])] + [("nic", c) for c in sw.get("nics", [])] if k in by_key]
        if members:
            switches.append(members)
    switched = {m[1]["key"] for members in switches for m in members}
    nodes = []
    root_dev = 1
    for members in switches:
        low = min(m[0] for m in members)
        high = max(m[0] for m in members)
        numa = members[0][1]["numa"]
        rp_bus, up_bus, down_bus = low - 3, low - 2, low - 1
        rp = _bdf(rp_bus, root_dev)
        root_dev += 1
        rp_path = "pci0000:%02x/%s" % (rp_bus, rp)
        nodes.append(_bridge(rp_path, rp, BRIDGE, PORT_ROOT, (rp_bus, up_bus, high), numa, acs=ACS_BOOT))
        up = _bdf(up_bus)
        up_path = "%s/%s" % (rp_path, up)
        nodes.append(_bridge(up_path, up, SWITCH, PORT_UPSTREAM, (up_bus, down_bus, high), numa))
        for n, (bus, attrs) in enumerate(members):
            dp = _bdf(down_bus, n)
            dp_path = "%s/%s" % (up_path, dp)
            nodes.append(
                _bridge(dp_path, dp, SWITCH, PORT_DOWNSTREAM, (down_bus, bus, bus), attrs["numa"], attrs["lnk"], attrs.get("sta"), ACS_BOOT)
            )
            nodes.append(_endpoint_node(dp_path, bus, attrs))
    for bus, attrs in endpoints:
        if attrs["key"] in switched:
            continue
        rp_bus = 0 if attrs["numa"] == 0 else 0x80
        rp = _bdf(rp_bus, root_dev)
        root_dev += 1
        rp_path = "pci0000:%02x/%s" % (rp_bus, rp)
        nodes.append(_bridge(rp_path, rp, BRIDGE, PORT_ROOT, (rp_bus, bus, bus), attrs["numa"], attrs["lnk"], attrs.get("sta"), ACS_BOOT))
        nodes.append(_endpoint_node(rp_path, bus, attrs))
    return nodes


def _endpoint_node(parent, bus, attrs):
    bdf = _bdf(bus)
    vendor, device = attrs["ids"]
    cfg = _config(vendor, device, attrs["rev"], attrs["class"], lnk=attrs["lnk"], sta=attrs.get("sta"), subsystem=attrs["subsystem"])
    return ("%s/%s" % (parent, bdf), bdf, cfg, attrs["numa"])


def render_pci(prof=None, keep_config=None):
    """Write the hierarchy under SYSFS/devices and its links in SYSFS/bus/pci/devices.

    keep_config: {bdf: config bytes} written at runtime (setpci) to keep, except on the ports a
    fault resets."""
    prof = prof or profile()
    keep_config = keep_config or {}
    reset = _acs_on_ports()
    reset_ports = set()
    nodes = layout(prof)
    parents = {}
    for path, bdf, _cfg, _numa in nodes:
        parents[bdf] = os.path.dirname(path).rsplit("/", 1)[-1]
    gpu_bus = {"0000:%02x:00.0" % _hex(prof["gpu"]["bus_ids"][i]) for i in reset}
    for bdf in gpu_bus:
        port = parents.get(bdf)
        while port and not port.startswith("pci"):
            reset_ports.add(port)
            port = parents.get(port)
    iommu_type = "DMA-FQ" if faults("iommu_dma") else "identity"
    links = os.path.join(SYSFS, "bus/pci/devices")
    os.makedirs(links, exist_ok=True)
    for group, (path, bdf, cfg, numa) in enumerate(nodes):
        base = os.path.join(SYSFS, "devices", path)
        if bdf in keep_config and bdf not in reset_ports:
            cfg = keep_config[bdf]
        _write(os.path.join(base, "config"), cfg)
        vendor, device, klass = (*struct.unpack_from("<HH", cfg, 0), struct.unpack_from("<I", cfg, 8)[0] >> 8)
        _write(os.path.join(base, "vendor"), "0x%04x" % vendor)
        _write(os.path.join(base, "device"), "0x%04x" % device)
        _write(os.path.join(base, "class"), "0x%06x" % klass)
        _write(os.path.join(base, "revision"), "0x%02x" % cfg[0x08])
        sub_vendor, sub_device = struct.unpack_from("<HH", cfg, 0x2C) if cfg[0x0E] == 0 else (0, 0)
        _write(os.path.join(base, "subsystem_vendor"), "0x%04x" % sub_vendor)
        _write(os.path.join(base, "subsystem_device"), "0x%04x" % sub_device)
        _write(os.path.join(base, "irq"), 0)
        _write(os.path.join(base, "resource"), "".join("0x%016x 0x%016x 0x%016x\n" % (0, 0, 0) for _ in range(13)).rstrip("\n"))
        _write(os.path.join(base, "numa_node"), numa)
        groups = os.path.join(SYSFS, "kernel/iommu_groups", str(group))
        _write(os.path.join(groups, "type"), iommu_type)
        depth = path.count("/") + 2  # devices/<path> back to the tree's top
        os.symlink("../" * depth + "kernel/iommu_groups/%d" % group, os.path.join(base, "iommu_group"))
        os.symlink("../../../devices/" + path, os.path.join(links, bdf))
