#!/usr/bin/python
"""Ansible module: merge rackforge's settings into containerd's config.toml, never clobbering it."""

from __future__ import annotations

DOCUMENTATION = r"""
module: containerd_config
short_description: Merge the systemd cgroup driver and OCI runtimes into containerd's config
description:
  - Reads /etc/containerd/config.toml as data (module_utils/rackforge/tomlr, a TOML 1.0 reader
    that runs on the node's Python 3.8+, where tomllib needs 3.11). A missing or comment-only
    file starts from C(containerd config default), as the deployment guides do by hand; so does
    the file Docker's containerd.io ships, which sets nothing but C(disabled_plugins = ["cri"]).
    A config that lists the CRI plugin in C(disabled_plugins) gets it back (Kubernetes needs it).
  - Sets C(SystemdCgroup = true) on the runc runtime and adds or updates the runtimes given
    (the NVIDIA runtime, as C(nvidia-ctk runtime configure) would), keeping every other key:
    runtimes and settings added by hand or by the GPU operator survive (a templated config, as
    Kubespray writes, wipes them on every run).
  - Writes only when the parsed content changes (so comments survive an unchanged run), and
    only after C(containerd --config NEW config dump) accepted the new file.
  - Config version 2 (containerd 1.x) and 3 (containerd 2.x) are understood; version 1 is refused.
  - "CNI plugins: with I(cni_bin_dir), containerd looks for them there. containerd up to 2.0 reads one
    directory (C(cni.bin_dir); Debian's package sets /usr/lib/cni, while Calico and kubernetes-cni
    install into /opt/cni/bin): it is replaced. containerd 2.1+ reads a list (C(cni.bin_dirs), used
    when the config has it): the directory is put first and the others are kept."
  - "So that the distro's plugins are not lost with the single directory, every executable in the
    I(cni_link_from) directories gets a symlink in I(cni_bin_dir) where that name is not taken (a
    plugin installed there, by Calico for one, wins). Done on every run, so plugins installed later
    are linked too."
options:
  path: {description: The config file., type: path, default: /etc/containerd/config.toml}
  systemd_cgroup: {description: SystemdCgroup of the runc runtime (must match the kubelet's cgroupDriver)., type: bool, default: true}
  runtimes:
    description:
      - "name -> {binary_name, runtime_type (io.containerd.runc.v2), missing}: extra runtimes; they get the same SystemdCgroup."
      - "missing: where given, the binary must exist (outside check mode) before anything is written, else the call
        fails with this text (what installs it, which variable to change)."
    type: dict
    default: {}
  default_runtime_name: {description: "Make this runtime containerd's default (empty: leave as is).", type: str, default: ""}
  containerd: {description: The containerd binary (for the defaults and the validation)., type: path, default: containerd}
  backup: {description: Keep a timestamped copy of the file replaced., type: bool, default: true}
  cni_bin_dir: {description: "Where containerd looks for CNI plugins (empty: leave as is).", type: path, default: ""}
  cdi:
    description:
      - "CDI (Container Device Interface) in the CRI plugin: C(enable_cdi) and C(cdi_spec_dirs). auto: on where this
        containerd has it (its C(config default) carries C(enable_cdi): 1.7 and later), left alone where it does not
        (Debian 12's 1.6.20); true: on, and a containerd without it is an error; false: left as it is."
    type: str
    choices: [auto, "true", "false"]
    default: auto
  cdi_spec_dirs:
    description: The directories containerd reads CDI specs from.
    type: list
    elements: path
    default: [/etc/cdi, /var/run/cdi]
  cni_link_from:
    description: Directories whose executables are linked into I(cni_bin_dir) where the name is free (needs cni_bin_dir).
    type: list
    elements: path
    default: []
"""

RETURN = r"""
version: {description: The config's version (2 or 3)., type: int, returned: success}
runtimes: {description: Names of the CRI runtimes in the resulting config., type: list, returned: success}
changes: {description: "Dotted keys that were set ([] when nothing changed).", type: list, returned: always}
backup_file: {description: The copy of the replaced file., type: str, returned: when a backup was made}
cdi: {description: "Whether CDI is on in the merged config (false: no CDI in this containerd, or cdi false).", type: bool, returned: always}
cni_links: {description: "Symlinks made (would be, in check mode): 'dest -> target'.", type: list, returned: always}
"""

import copy
import os
import re
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV
from ansible.module_utils.rackforge.tomlr import TOMLDecodeError, loads
from ansible.module_utils.rackforge.tomlw import dumps

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


def make_links(module, bin_dir, links):
    try:
        os.makedirs(bin_dir, mode=0o755, exist_ok=True)
        for dest, target in links:
            os.symlink(target, dest)
    except OSError as exc:
        module.fail_json(msg="cni_link_from: cannot link into %s: %s" % (bin_dir, exc))


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "default": "/etc/containerd/config.toml"},
            "systemd_cgroup": {"type": "bool", "default": True},
            "runtimes": {"type": "dict", "default": {}},
            "default_runtime_name": {"type": "str", "default": ""},
            "containerd": {"type": "path", "default": "containerd"},
            "backup": {"type": "bool", "default": True},
            "cni_bin_dir": {"type": "path", "default": ""},
            "cni_link_from": {"type": "list", "elements": "path", "default": []},
            "cdi": {"type": "str", "choices": ["auto", "true", "false"], "default": "auto"},
            "cdi_spec_dirs": {"type": "list", "elements": "path", "default": ["/etc/cdi", "/var/run/cdi"]},
        },
        supports_check_mode=True,
    )
    p = module.params
    for name, spec in p["runtimes"].items():
        if not isinstance(spec, dict) or not spec.get("binary_name"):
            module.fail_json(msg="runtimes.%s: needs binary_name (the OCI runtime binary, e.g. /usr/bin/nvidia-container-runtime)" % name)
    absent = [spec["missing"] for spec in p["runtimes"].values() if spec.get("missing") and not os.path.exists(spec["binary_name"])]
    if absent and not module.check_mode:  # (installed earlier in the same run, which check mode did not do)
        module.fail_json(msg="%s. Nothing was changed." % "; ".join(absent))
    if p["default_runtime_name"] and p["default_runtime_name"] not in set(p["runtimes"]) | {"runc"}:
        module.fail_json(
            msg="default_runtime_name %r is neither runc nor one of runtimes (%s)" % (p["default_runtime_name"], ", ".join(p["runtimes"]))
        )
    if p["cni_link_from"] and not p["cni_bin_dir"]:
        module.fail_json(msg="cni_link_from needs cni_bin_dir (the directory the links go into)")
    relative = [d for d in [p["cni_bin_dir"], *p["cni_link_from"]] if d and not os.path.isabs(d)]
    if relative:
        module.fail_json(msg="cni_bin_dir and cni_link_from take absolute paths; got %s" % ", ".join(relative))
    binary = module.get_bin_path(p["containerd"]) if not os.path.isabs(p["containerd"]) else p["containerd"]
    try:
        with open(p["path"], "rb") as fh:
            before_text = fh.read().decode()
    except FileNotFoundError:
        before_text = ""
    try:
        current = loads(before_text)
    except TOMLDecodeError as exc:
        module.fail_json(
            msg="%s is not valid TOML (%s): fix or remove it; rackforge does not overwrite a file it cannot read" % (p["path"], exc)
        )
    base_from = "file"
    if shipped_without_cri(current):
        current = {}  # replaced by the defaults below, as an empty file is
        base_from_note = " (the file only disabled the CRI plugin, as containerd.io ships it)"
    else:
        base_from_note = ""
    defaults = None
    if not current or p["cdi"] != "false":  # the defaults: the base of an empty file, and whether this containerd has CDI
        if not binary or not os.path.exists(binary):
            if module.check_mode:
                module.exit_json(changed=True, changes=["(all: containerd is not installed yet; its defaults are read once it is)"])
            module.fail_json(msg="containerd (%s) is not installed: its defaults are needed (%s, cdi)" % (p["containerd"], p["path"]))
        rc, out, err = module.run_command([binary, "config", "default"], environ_update=C_ENV)
        if rc != 0:
            module.fail_json(msg="containerd config default failed: %s" % err.strip(), rc=rc, stdout=out, stderr=err)
        defaults = loads(out)
    if not current:
        current = defaults  # merged into a copy below; the defaults themselves stay as read
        base_from = "containerd config default" + base_from_note
    cdi = p["cdi"] != "false" and cdi_supported(defaults)
    if p["cdi"] == "true" and not cdi:
        module.fail_json(msg="cdi: true, but this containerd (%s) has no CDI support (containerd 1.7 or later has)" % binary)
    if p["cdi"] == "true":
        # 1.7.0 and 1.7.1 print enable_cdi but their CRI drops the CDI devices a pod is allocated
        rc, out, err = module.run_command([binary, "--version"], environ_update=C_ENV)
        have = version_of(out) if rc == 0 else None
        if have is None:
            module.fail_json(msg="cdi: true, but containerd --version does not say which version it is", rc=rc, stdout=out, stderr=err)
        if have < CRI_CDI_DEVICES:
            module.fail_json(
                msg="cdi: true, but this containerd is %s: its CRI reads a pod's CDI devices only from %s on"
                % (".".join(map(str, have)), ".".join(map(str, CRI_CDI_DEVICES)))
            )
    wanted = copy.deepcopy(current)
    try:
        changes = merge(
            wanted, p["systemd_cgroup"], p["runtimes"], p["default_runtime_name"], p["cni_bin_dir"], p["cdi_spec_dirs"] if cdi else None
        )
    except ValueError as exc:
        module.fail_json(msg="%s: %s" % (p["path"], exc))
    if base_from != "file":
        changes.insert(0, "(whole file from %s)" % base_from)
    version = wanted["version"]
    links = plan_links(p["cni_bin_dir"], p["cni_link_from"]) if p["cni_bin_dir"] else []
    result = {
        "version": version,
        "runtimes": sorted(runtimes_table(wanted, version)),
        "changes": changes,
        "cni_links": ["%s -> %s" % link for link in links],
        "cdi": cdi or bool(wanted["plugins"][CRI_PLUGIN[version]].get("enable_cdi")),
    }
    if not changes:
        if links and not module.check_mode:
            make_links(module, p["cni_bin_dir"], links)
        module.exit_json(changed=bool(links), **result)
    new_text = "# Managed by rackforge (container_runtime): merged, not templated. Keys added by hand or by\n"
    new_text += "# other tools are kept; rackforge's keys are set on every run.\n" + dumps(wanted)
    assert loads(new_text) == wanted  # the writer round-trips, or nothing is written
    diff = {"before": before_text, "after": new_text, "before_header": p["path"], "after_header": p["path"]}
    if module.check_mode:
        module.exit_json(changed=True, diff=diff, **result)
    directory = os.path.dirname(p["path"])
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".config.toml.")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(new_text)
        os.chmod(tmp, 0o644)
        if binary and os.path.exists(binary):
            rc, out, err = module.run_command([binary, "--config", tmp, "config", "dump"], environ_update=C_ENV)
            if rc != 0:
                module.fail_json(
                    msg="containerd refused the merged config (nothing written): %s" % err.strip(), rc=rc, stdout=out, stderr=err, **result
                )
        if p["backup"] and before_text:
            result["backup_file"] = module.backup_local(p["path"])
        os.replace(tmp, p["path"])
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    if links:
        make_links(module, p["cni_bin_dir"], links)
    module.exit_json(changed=True, diff=diff, **result)


if __name__ == "__main__":
    main()
