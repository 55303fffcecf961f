"""Simulated kernel modules: modinfo, modprobe, lsmod (a container cannot load real ones)."""

from __future__ import annotations

import os
import shutil
import stat
import sys

from hwsimlib.state import DRIVER_FILE, RUN, SYSFS, installed, kmsg_append, load_json, profile, save_json
from hwsimlib.sysfs import write_file

# (captured into tests/fixtures/captured/modinfo-p-debian12-6.1.0-57.txt). Inbox ib_uverbs has
# no parameters: `disable_raw_qp_enforcement` exists only in MLNX_OFED's ib_uverbs, and
# `disable_raw_qp` exists nowhere.
KERNEL_VERSION = "6.1.0-57-amd64"
# which kernel module the installed driver carries (open, or proprietary), written by the installer
DRIVER_FLAVOR_FILE = os.environ.get("HWSIM_DRIVER_FLAVOR_FILE", "/usr/lib/hwsim/driver-flavor")
KERNEL_MODULES = {
    "mlx5_core": {
        "depends": [],
        "params": [
            ("debug_mask", "debug mask: 1 = dump cmd data, 2 = dump cmd exec time, 3 = both. Default=0", "uint", "0"),
            ("prof_sel", "profile selector. Valid range 0 - 2", "uint", "2"),
        ],
    },
    "ib_core": {
        "depends": [],
        "params": [
            ("send_queue_size", "Size of send queue in number of work requests", "int", "128"),
            ("recv_queue_size", "Size of receive queue in number of work requests", "int", "512"),
            ("netns_mode", "Share device among net namespaces; default=1 (shared)", "bool", "Y"),
            ("force_mr", "Force usage of MRs for RDMA READ/WRITE operations", "bool", "N"),
        ],
    },
    "mlx5_ib": {"depends": ["mlx5_core", "ib_core", "ib_uverbs"], "params": []},
    "ib_uverbs": {"depends": ["ib_core"], "params": []},
    "rdma_cm": {"depends": ["ib_core"], "params": []},
    "rdma_ucm": {"depends": ["rdma_cm", "ib_uverbs", "ib_core"], "params": []},
    "ib_umad": {"depends": ["ib_core"], "params": []},
    "tcp_bbr": {"depends": [], "params": []},
    # the NVIDIA driver's GPUDirect RDMA peer-memory client (kernel-open/nvidia-peermem); present
    # once a driver is installed. Built without MLNX_OFED's peer-memory symbols (Debian's inbox
    # ib_core has none) its init returns -EINVAL, so modprobe fails: see load_module
    "nvidia_peermem": {
        "depends": ["ib_core"],
        "params": [
            (
                "peerdirect_support",
                "Set level of support for Peer-direct, 0 [default] or 1 [legacy, for example MLNX_OFED 4.9 LTS]",
                "int",
                "0",
            ),
            ("persistent_api_support", "Set level of support for persistent APIs, 0 [legacy] or 1 [default]", "int", "1"),
        ],
        "driver": True,
    },
    # the container runtime's modules (container_runtime role)
    "overlay": {
        "depends": [],
        "params": [
            ("check_copy_up", "Obsolete; does nothing", "", ""),
            ("redirect_max", "Maximum length of absolute redirect xattr value", "ushort", "256"),
            ("redirect_dir", "Default to on or off for the redirect_dir feature", "bool", "N"),
            ("redirect_always_follow", "Follow redirects even if redirect_dir feature is turned off", "bool", "Y"),
            ("index", "Default to on or off for the inodes index feature", "bool", "N"),
            ("nfs_export", "Default to on or off for the NFS export feature", "bool", "N"),
            ("xino_auto", "Auto enable xino feature", "bool", "N"),
            ("metacopy", "Default to on or off for the metadata only copy up feature", "bool", "N"),
        ],
    },
    "llc": {"depends": [], "params": []},
    "stp": {"depends": ["llc"], "params": []},
    "bridge": {"depends": ["llc", "stp"], "params": []},
    "br_netfilter": {"depends": ["bridge"], "params": []},
}
# loaded by the hardware (PCI/auxiliary device probe) at every boot, before modules-load.d
BOOT_MODULES = ("mlx5_core", "ib_core", "mlx5_ib", "ib_uverbs")
# drivers/infiniband/core/uverbs_main.c: IB_USER_VERBS_ABI_VERSION, the class attribute abi_version
UVERBS_ABI = 6


def loaded_modules():
    return load_json(os.path.join(RUN, "modules.json"), [])


def _module_options(name):
    """{param: value} from `options NAME k=v ...` lines in /etc/modprobe.d/*.conf."""
    opts = {}
    conf_dir = os.environ.get("HWSIM_MODPROBE_D", "/etc/modprobe.d")
    if not os.path.isdir(conf_dir):
        return opts
    for fname in sorted(os.listdir(conf_dir)):
        if not fname.endswith(".conf"):
            continue
        with open(os.path.join(conf_dir, fname)) as fh:
            for line in fh:
                words = line.split("#", 1)[0].split()
                if len(words) >= 3 and words[0] == "options" and words[1] == name:
                    opts.update(w.split("=", 1) for w in words[2:] if "=" in w)
    return opts


def load_module(name, cli_opts=None):
    """modprobe: load dependencies first; parameters from modprobe.d, then the command line.
    An unknown parameter is ignored with a warning, as the real kernel does."""
    mods = loaded_modules()
    if name in mods:
        return 0
    if name == "nvidia_peermem" and profile().get("rdma_stack", "inbox") != "mlnx_ofed":
        # nv_mem_client_init without NV_MLNX_IB_PEER_MEM_SYMBOLS_PRESENT: return -EINVAL (no printk)
        for dep in KERNEL_MODULES[name]["depends"]:
            load_module(dep)
        sys.stderr.write("modprobe: ERROR: could not insert '%s': Invalid argument\n" % name)
        return 1
    for dep in KERNEL_MODULES[name]["depends"]:
        load_module(dep)
        mods = loaded_modules()
    opts = dict(_module_options(name), **(cli_opts or {}))
    known = {p[0]: p[3] for p in KERNEL_MODULES[name]["params"]}
    base = os.path.join(SYSFS, "module", name)
    os.makedirs(base, exist_ok=True)
    write_file(os.path.join(base, "initstate"), "live")
    for param, default in known.items():
        write_file(os.path.join(base, "parameters", param), opts.get(param, default))
    for param in sorted(set(opts) - set(known)):
        sys.stderr.write("%s: unknown parameter '%s' ignored\n" % (name, param))
    if name == "rdma_cm":
        # configfs rdma_cm: the real directory per device appears on mkdir; the simulator
        # shows it ready-made, with the kernel's defaults
        for nic in profile()["nics"]:
            port = os.path.join(SYSFS, "kernel/config/rdma_cm", nic["ca"], "ports/1")
            write_file(os.path.join(port, "default_roce_mode"), "RoCE v2")
            write_file(os.path.join(port, "default_roce_tos"), 0)
    if name == "nvidia_peermem":
        # MLNX_OFED's ib_core registers the peer-memory client: /sys/kernel/mm/memory_peers/<name>
        # (peer_mem.c: version, num_alloc_mrs, ... ; the client is nvidia-peermem's DRV_NAME "nv_mem")
        peers = os.path.join(SYSFS, "kernel/mm/memory_peers/nv_mem")
        write_file(os.path.join(peers, "version"), installed(DRIVER_FILE))
        for counter in ("num_alloc_mrs", "num_dealloc_mrs", "num_reg_pages", "num_dereg_pages"):
            write_file(os.path.join(peers, counter), 0)
    if name == "ib_uverbs":
        # the uverbs class libibverbs looks for first (rdma-core libibverbs/init.c check_abi_version:
        # without class/infiniband_verbs/abi_version every verbs tool fails with ENOSYS)
        verbs = os.path.join(SYSFS, "class/infiniband_verbs")
        write_file(os.path.join(verbs, "abi_version"), UVERBS_ABI)
        for i, nic in enumerate(sorted(profile()["nics"], key=lambda n: n["ca"])):
            write_file(os.path.join(verbs, "uverbs%d" % i, "ibdev"), nic["ca"])
            write_file(os.path.join(verbs, "uverbs%d" % i, "abi_version"), 1)
    mods.append(name)
    save_json(os.path.join(RUN, "modules.json"), mods)
    return 0


def modprobe(args):
    flags = [a for a in args if a.startswith("-")]
    words = [a for a in args if not a.startswith("-")]
    if not words:
        sys.stderr.write("modprobe: ERROR: missing parameters. See -h.\n")
        return 1
    if "-r" in flags or "--remove" in flags:
        mods = loaded_modules()
        for name in (w.replace("-", "_") for w in words):
            if name in mods:
                mods.remove(name)
                shutil.rmtree(os.path.join(SYSFS, "module", name), ignore_errors=True)
                if name == "ib_uverbs":
                    shutil.rmtree(os.path.join(SYSFS, "class/infiniband_verbs"), ignore_errors=True)
                if name == "nvidia_peermem":
                    shutil.rmtree(os.path.join(SYSFS, "kernel/mm/memory_peers"), ignore_errors=True)
        save_json(os.path.join(RUN, "modules.json"), mods)
        return 0
    name = words[0].replace("-", "_")
    if name not in KERNEL_MODULES or (KERNEL_MODULES[name].get("driver") and not installed(DRIVER_FILE)):
        sys.stderr.write("modprobe: FATAL: Module %s not found in directory /lib/modules/%s\n" % (words[0], KERNEL_VERSION))
        return 1
    if "-n" in flags or "--dry-run" in flags:
        return 0
    return load_module(name, dict(w.split("=", 1) for w in words[1:] if "=" in w))


def modinfo(args):
    field = None
    if "-F" in args or "--field" in args:  # modinfo -F FIELD: that field's value only
        i = args.index("-F") if "-F" in args else args.index("--field")
        field, args = args[i + 1], args[:i] + args[i + 2 :]
    words = [a for a in args if not a.startswith("-")]
    if not words:
        sys.stderr.write("modinfo: ERROR: missing module or filename.\n")
        return 1
    rc = 0
    for word in words:
        name = word.replace("-", "_")
        mod = KERNEL_MODULES.get(name)
        if mod is None or (mod.get("driver") and not installed(DRIVER_FILE)):
            sys.stderr.write("modinfo: ERROR: Module %s not found.\n" % word)
            rc = 1
            continue
        params = [("%s:%s (%s)" % (p, desc, kind)) if kind else "%s:%s" % (p, desc) for p, desc, kind, _ in mod["params"]]
        if field is not None:
            values = {
                "name": [name],
                "filename": ["/lib/modules/%s/kernel/simulated/%s.ko" % (KERNEL_VERSION, name)],
                "depends": [",".join(mod["depends"])],
                "parm": params,
            }.get(field, [])
            sys.stdout.write("".join(v + "\n" for v in values))
            continue
        if "-p" in args or "--parameters" in args:
            sys.stdout.write("".join(line + "\n" for line in params))
            continue
        sys.stdout.write("filename:       /lib/modules/%s/kernel/simulated/%s.ko\n" % (KERNEL_VERSION, name))
        sys.stdout.write("depends:        %s\n" % ",".join(mod["depends"]))
        sys.stdout.write("vermagic:       %s SMP preempt mod_unload modversions\n" % KERNEL_VERSION)
        for line in params:
            sys.stdout.write("parm:           %s\n" % line)
    return rc


def lsmod(_args):
    rows = ["Module                  Size  Used by"]
    mods = loaded_modules()
    for name in sorted(mods):
        users = [m for m in mods if name in KERNEL_MODULES[m]["depends"]]
        rows.append("%-19s %9d  %d %s" % (name, 16384, len(users), ",".join(users)))
    sys.stdout.write("\n".join(rows) + "\n")
    return 0


def boot_modules():
    """What a boot loads: the hardware's drivers, then /etc/modules-load.d (systemd-modules-load)."""
    for name in BOOT_MODULES:
        load_module(name)
    conf_dir = os.environ.get("HWSIM_MODULES_LOAD_D", "/etc/modules-load.d")
    if os.path.isdir(conf_dir):
        for fname in sorted(os.listdir(conf_dir)):
            if fname.endswith(".conf"):
                with open(os.path.join(conf_dir, fname)) as fh:
                    for line in fh:
                        name = line.split("#", 1)[0].strip().replace("-", "_")
                        if name in KERNEL_MODULES:
                            load_module(name)


def driver_loaded(version):
    """What loading nvidia.ko leaves: its module directory (taint: the open module is out of tree
    and unsigned, "OE"; the proprietary one adds "P") and the driver's first kernel log line."""
    flavor = installed(DRIVER_FLAVOR_FILE) or "open"
    base = os.path.join(SYSFS, "module", "nvidia")
    write_file(os.path.join(base, "initstate"), "live")
    write_file(os.path.join(base, "version"), version)
    write_file(os.path.join(base, "taint"), "OE" if flavor == "open" else "POE")
    if flavor == "open":
        kmsg_append("NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  %s" % version)
    else:
        kmsg_append("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  %s" % version)
    device_nodes()


# the char devices the loaded driver (nvidia.ko, nvidia-uvm.ko, nvidia-modeset.ko) has
# nvidia-modprobe create: 195 is nvidia's major, nvidia-uvm's is dynamic (510 on the hosts seen)
NVIDIA_MAJOR, UVM_MAJOR = 195, 510
CONTROL_NODES = {
    "nvidiactl": (NVIDIA_MAJOR, 255),
    "nvidia-modeset": (NVIDIA_MAJOR, 254),
    "nvidia-uvm": (UVM_MAJOR, 0),
    "nvidia-uvm-tools": (UVM_MAJOR, 1),
}


def device_nodes():
    """mknod /dev/nvidia<minor> for every GPU of the profile and the control nodes. The lab's
    containers hold CAP_MKNOD for this (labcore/containers.py); opening a node fails, as no
    device stands behind it. Elsewhere (a unit test's scratch dir without the capability) the
    nodes are left out, as on a host whose nvidia-modprobe could not run. Only on a lab node
    (hwsim's default /etc/hwsim) or into HWSIM_DEV: a test's hwsim never touches the host's /dev."""
    dev = os.environ.get("HWSIM_DEV") or (None if "HWSIM_ETC" in os.environ else "/dev")
    if dev is None:
        return
    g = profile()["gpu"]
    nodes = {"nvidia%d" % m: (NVIDIA_MAJOR, m) for m in g.get("minor_numbers", list(range(g["count"])))}
    nodes.update(CONTROL_NODES)
    for name, (major, minor) in sorted(nodes.items()):
        path = os.path.join(dev, name)
        if not os.path.exists(path):
            try:
                os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
            except OSError as exc:
                sys.stderr.write("hwsim: cannot create %s: %s\n" % (path, exc))
                return


def kmsg_boot(driver):
    kmsg_append("Linux version 6.1.0-57-amd64 (debian-kernel@lists.debian.org) (simulated by hwsim)", prio=5)
    if driver:
        driver_loaded(driver)


def kmsg_xid(bus, xid, detail):
    """An Xid as the NVIDIA driver logs it (prio 4, KERN_WARNING)."""
    kmsg_append("NVRM: Xid (PCI:0000:%s:00): %d, pid='<unknown>', name=<unknown>, %s" % (bus.lower(), int(xid), detail), prio=4)
