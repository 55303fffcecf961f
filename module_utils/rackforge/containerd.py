"""containerd's config.toml as data: the CRI plugin's tables per config version, the merge of
rackforge's settings into a parsed config, CDI support, and the CNI plugin links. Pure functions
(no I/O but listing the CNI directories); the module `containerd_config` reads, writes and runs
containerd."""

from __future__ import annotations

import os
import re

CRI_PLUGIN = {2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}


def runtimes_table(cfg, version):
    return cfg.setdefault("plugins", {}).setdefault(CRI_PLUGIN[version], {}).setdefault("containerd", {}).setdefault("runtimes", {})


# the first containerd whose CRI reads the CDIDevices a device plugin allocates
CRI_CDI_DEVICES = (1, 7, 2)


def version_of(text):
    """(major, minor, patch) from `containerd --version` ("containerd github.com/containerd/containerd
    1.7.24~ds1 1.7.24~ds1-6+deb13u1", "containerd containerd.io 1.7.27 05044ec...", "... v2.0.0 ..."),
    or None."""
    parts = text.split()
    m = re.match(r"^v?(\d+)\.(\d+)\.(\d+)", parts[2]) if len(parts) >= 3 else None
    return tuple(int(g) for g in m.groups()) if m else None


# what a disabled_plugins list may call the CRI plugin (version 1's short name, 1.x's, 2.x's two)
CRI_NAMES = ("cri", "io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images")


def shipped_without_cri(cfg):
    """The file containerd.io (Docker's package) ships: no version (so version 1) and nothing set but
    disabled_plugins = ["cri"], i.e. containerd for Docker without the CRI plugin Kubernetes needs."""
    return bool(cfg) and "version" not in cfg and set(cfg) == {"disabled_plugins"} and "cri" in (cfg["disabled_plugins"] or [])


def cdi_supported(default_cfg):
    """Whether a containerd whose `config default` parsed to default_cfg has CDI (1.7+ print
    enable_cdi in the CRI table; containerd 2.x in io.containerd.cri.v1.runtime)."""
    version = default_cfg.get("version")
    return "enable_cdi" in (default_cfg.get("plugins", {}).get(CRI_PLUGIN.get(version, ""), {}) or {})


def merge(cfg, systemd_cgroup, runtimes, default_runtime, cni_bin_dir="", cdi_spec_dirs=None):
    """Apply the wanted settings to a parsed config in place; returns the dotted keys changed.
    cdi_spec_dirs: turn CDI on with these spec directories (None: leave CDI as it is)."""
    version = cfg.get("version")
    if version not in CRI_PLUGIN:
        raise ValueError("containerd config version %r is not supported (2 or 3); migrate it first: containerd config migrate" % version)
    changes = []
    # Kubernetes needs the CRI plugin: a config that disables it (containerd.io's, for Docker) gets it back
    disabled = cfg.get("disabled_plugins")
    if isinstance(disabled, list) and any(name in CRI_NAMES for name in disabled):
        cfg["disabled_plugins"] = [name for name in disabled if name not in CRI_NAMES]
        changes.append("disabled_plugins")
    table = runtimes_table(cfg, version)
    base = "plugins.%s.containerd.runtimes" % CRI_PLUGIN[version]

    def put(d, key, value, dotted):
        if d.get(key) != value:
            d[key] = value
            changes.append(dotted)

    runc = table.setdefault("runc", {})
    put(runc, "runtime_type", runc.get("runtime_type") or "io.containerd.runc.v2", base + ".runc.runtime_type")
    put(runc.setdefault("options", {}), "SystemdCgroup", systemd_cgroup, base + ".runc.options.SystemdCgroup")
    for name, spec in sorted(runtimes.items()):
        rt = table.setdefault(name, {})
        put(rt, "runtime_type", spec.get("runtime_type") or "io.containerd.runc.v2", "%s.%s.runtime_type" % (base, name))
        opts = rt.setdefault("options", {})
        put(opts, "BinaryName", spec["binary_name"], "%s.%s.options.BinaryName" % (base, name))
        put(opts, "SystemdCgroup", systemd_cgroup, "%s.%s.options.SystemdCgroup" % (base, name))
    if default_runtime:
        ctr = cfg["plugins"][CRI_PLUGIN[version]]["containerd"]
        put(ctr, "default_runtime_name", default_runtime, "plugins.%s.containerd.default_runtime_name" % CRI_PLUGIN[version])
    if cni_bin_dir:
        cni = cfg["plugins"][CRI_PLUGIN[version]].setdefault("cni", {})
        dotted = "plugins.%s.cni." % CRI_PLUGIN[version]
        if isinstance(cni.get("bin_dirs"), list):  # containerd 2.1+: a search list
            put(cni, "bin_dirs", [cni_bin_dir] + [d for d in cni["bin_dirs"] if d != cni_bin_dir], dotted + "bin_dirs")
        else:  # one directory
            put(cni, "bin_dir", cni_bin_dir, dotted + "bin_dir")
    if cdi_spec_dirs is not None:
        cri = cfg["plugins"][CRI_PLUGIN[version]]
        put(cri, "enable_cdi", True, "plugins.%s.enable_cdi" % CRI_PLUGIN[version])
        put(cri, "cdi_spec_dirs", list(cdi_spec_dirs), "plugins.%s.cdi_spec_dirs" % CRI_PLUGIN[version])
    return changes


def plan_links(bin_dir, link_from):
    """[(dest, target)]: a symlink in bin_dir for each executable file in the link_from directories
    whose name is free there (the first directory listed wins a name)."""
    links, taken = [], set()
    for source in link_from:
        if os.path.realpath(source) == os.path.realpath(bin_dir) or not os.path.isdir(source):
            continue
        for name in sorted(os.listdir(source)):
            target = os.path.join(source, name)
            dest = os.path.join(bin_dir, name)
            if name in taken or not os.path.isfile(target) or not os.access(target, os.X_OK) or os.path.lexists(dest):
                continue
            taken.add(name)
            links.append((dest, target))
    return links
