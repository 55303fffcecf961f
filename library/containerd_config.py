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
  - "With O(nvidia_toolkit_settings), also sets top-level keys of the NVIDIA Container Toolkit's config.toml in
    place, as C(nvidia-ctk config --set KEY=VALUE --in-place) would (the line, or its commented default, replaced;
    every other line kept). Only keys the toolkit reads at the top level are taken (module_utils/rackforge/ctkconfig.py
    lists them; the toolkit ignores a misplaced key without a word, which would leave GPUs open), checked before
    anything is written. The runtime reads that file at each container start: no restart."
  - "With O(service), the same call keeps containerd's unit enabled and running: started where it is not running,
    restarted where its config changed (not for CNI links alone: containerd finds a plugin when it runs it). The
    restart is remembered before the config is written and forgotten once containerd has restarted, so a run
    that failed between the two leaves it to the next run."
  - Check mode and C(--diff) show both files and the unit actions that would run.
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
  nvidia_toolkit_config: {description: The toolkit's config file., type: path, default: /etc/nvidia-container-runtime/config.toml}
  nvidia_toolkit_settings: {description: "Its top-level key -> value ({} = the file is not touched).", type: dict, default: {}}
  service: {description: "containerd's unit, kept enabled and running ('' = left alone).", type: str, default: ""}
"""

RETURN = r"""
version: {description: The config's version (2 or 3)., type: int, returned: success}
runtimes: {description: Names of the CRI runtimes in the resulting config., type: list, returned: success}
changes: {description: "Dotted keys that were set ([] when nothing changed).", type: list, returned: always}
backup_file: {description: The copy of the replaced file., type: str, returned: when a backup was made}
cdi: {description: "Whether CDI is on in the merged config (false: no CDI in this containerd, or cdi false).", type: bool, returned: always}
cni_links: {description: "Symlinks made (would be, in check mode): 'dest -> target'.", type: list, returned: always}
toolkit_changes: {description: "The toolkit's keys set ([] when its file was already right).", type: list, returned: success}
service_actions: {description: "What was done to O(service) (enable, start, restart; or would be).", type: list, returned: success}
"""

import copy
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV, filestage
from ansible.module_utils.rackforge.containerd import (
    CRI_CDI_DEVICES,
    CRI_PLUGIN,
    cdi_supported,
    merge,
    plan_links,
    runtimes_table,
    shipped_without_cri,
    version_of,
)
from ansible.module_utils.rackforge.ctkconfig import problems as ctk_problems
from ansible.module_utils.rackforge.ctkconfig import set_top_level
from ansible.module_utils.rackforge.service import keep_running, remember_restart
from ansible.module_utils.rackforge.tomlr import TOMLDecodeError, loads
from ansible.module_utils.rackforge.tomlw import dumps


def make_links(module, bin_dir, links):
    try:
        os.makedirs(bin_dir, mode=0o755, exist_ok=True)
        for dest, target in links:
            os.symlink(target, dest)
    except OSError as exc:
        module.fail_json(msg="cni_link_from: cannot link into %s: %s" % (bin_dir, exc))


def check_request(module, p):
    """Refuse, before anything is read or written, what cannot be right."""
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
    bad = ctk_problems(p["nvidia_toolkit_settings"])
    if bad:
        module.fail_json(msg="nvidia_toolkit_settings: %s. Nothing was changed." % "; ".join(bad), changes=[])


def plan_toolkit(module, p):
    """The toolkit's config.toml with its top-level keys set in place, as `nvidia-ctk config --set
    KEY=VALUE --in-place` would (module_utils/rackforge/ctkconfig): (write or None, diff or None, keys)."""
    if not p["nvidia_toolkit_settings"]:
        return None, None, []
    path = p["nvidia_toolkit_config"]
    have = filestage.read_state(path)
    before = (have["data"] or b"").decode()
    try:
        after, keys = set_top_level(before, p["nvidia_toolkit_settings"])
    except TOMLDecodeError as exc:
        module.fail_json(msg="%s is not valid TOML (%s): fix or remove it; rackforge does not rewrite a file it cannot read" % (path, exc))
    except ValueError as exc:
        module.fail_json(msg="%s: %s (nothing written)" % (path, exc))
    if not keys:
        return None, None, []
    # staged beside the file and renamed over it; a file already there keeps its owner
    write = {"dest": path, "data": after.encode(), "mode": 0o644, "uid": have.get("uid", 0), "gid": have.get("gid", 0)}
    write["missing_dirs"] = have["missing_dirs"]
    return write, {"before": before, "after": after, "before_header": path, "after_header": path}, keys


def read_config(module, p, binary):
    """(text before, parsed config to merge into, where its base came from, containerd's defaults or None)."""
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
    base_from, note = "file", ""
    if shipped_without_cri(current):
        current = {}  # replaced by the defaults below, as an empty file is
        note = " (the file only disabled the CRI plugin, as containerd.io ships it)"
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
        base_from = "containerd config default" + note
    return before_text, current, base_from, defaults


def check_cdi(module, p, binary, defaults):
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
    return cdi


def write_config(module, p, binary, new_text, before_text, result):
    """Stage the merged config beside the file, have containerd parse it, then rename it into place."""
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
            "nvidia_toolkit_config": {"type": "path", "default": "/etc/nvidia-container-runtime/config.toml"},
            "nvidia_toolkit_settings": {"type": "dict", "default": {}},
            "service": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    p = module.params
    check_request(module, p)
    binary = module.get_bin_path(p["containerd"]) if not os.path.isabs(p["containerd"]) else p["containerd"]
    toolkit_write, toolkit_diff, toolkit_keys = plan_toolkit(module, p)
    before_text, current, base_from, defaults = read_config(module, p, binary)
    cdi = check_cdi(module, p, binary, defaults)
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
        "toolkit_changes": toolkit_keys,
    }
    diff = []
    new_text = None
    if changes:
        new_text = "# Managed by rackforge (container_runtime): merged, not templated. Keys added by hand or by\n"
        new_text += "# other tools are kept; rackforge's keys are set on every run.\n" + dumps(wanted)
        assert loads(new_text) == wanted  # the writer round-trips, or nothing is written
        diff.append({"before": before_text, "after": new_text, "before_header": p["path"], "after_header": p["path"]})
    if toolkit_diff:
        diff.append(toolkit_diff)
    if not module.check_mode:
        if toolkit_write:
            # the runtime reads this file at every container start: no restart
            filestage.commit([toolkit_write], toolkit_write.pop("missing_dirs"), None)
        if new_text is not None:
            if p["service"]:  # until it has restarted: a failure below leaves it to the next run
                remember_restart(module, [p["service"]], "containerd_config")
            write_config(module, p, binary, new_text, before_text, result)
        if links:
            make_links(module, p["cni_bin_dir"], links)
    # not for CNI plugin links alone: containerd finds a plugin when it runs it
    result["service_actions"] = keep_running(module, p["service"], bool(changes), "containerd_config", True) if p["service"] else []
    module.exit_json(changed=bool(changes or toolkit_keys or links or result["service_actions"]), diff=diff, **result)


if __name__ == "__main__":
    main()
