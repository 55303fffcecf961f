"""rackforge filters for the model share (roles/model_storage): the NFS options checked against
what the kernel's client accepts, the mount point's rules, and the systemd .mount unit with the
name systemd gives it, the PersistentVolume and claim of the share, and the local cache's disk
patterns and mount unit. The decisions live in module_utils/rackforge/model_storage.py (unit
tested); these pass data in and out."""

from __future__ import annotations

import importlib.util
import os

from ansible.errors import AnsibleFilterError

_SPEC = importlib.util.spec_from_file_location(
    "rackforge_controller", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "module_utils", "rackforge", "controller.py")
)
controller = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(controller)
MS = controller.load(("model_storage",))
MC = controller.load(("model_cache",))


def nfs_option_problems(options):
    """[why] for each option the kernel's NFS client, mount(8) or systemd would refuse."""
    if not isinstance(options, (list, tuple)):
        return ["must be a list of mount options (got %s)" % type(options).__name__]
    return MS.nfs_option_problems(controller.plain(list(options)))


def mount_point_problems(path, other=None):
    """[why] the path cannot be a mount point (nor be, hold or sit under `other`); [] when it can."""
    why = MS.mount_point_problem(controller.plain(path), controller.plain(other) if other else None)
    return [why] if why else []


def cache_pattern_problems(patterns):
    """[why] the cache's disk patterns are malformed; [] when they are sound."""
    return MC.pattern_problems(controller.plain(patterns))


def model_cache_unit(where, name="rackforge_cache"):
    """{"name": <escaped>.mount, "content": the unit's text} of the cache's xfs at `where`."""
    try:
        unit = MS.systemd_escape_path(controller.plain(where)) + ".mount"
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc
    return {"name": unit, "content": MC.cache_mount_unit("/dev/md/%s" % name, str(where), ["noatime"])}


def model_share_unit(where, server, export, options, timeout_s):
    """{"name": <escaped>.mount, "content": the unit's text} for the share at `where`."""
    try:
        name = MS.systemd_escape_path(controller.plain(where)) + ".mount"
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc
    plain = controller.plain(list(options))
    problems = MS.nfs_option_problems(plain)
    if problems:  # the settings checks refuse these first; never write a unit the kernel refuses
        raise AnsibleFilterError("model_storage_nfs_options: " + "; ".join(problems))
    return {"name": name, "content": MS.nfs_mount_unit(str(server), str(export), str(where), plain, int(timeout_s))}


def model_share_volumes(name, namespace, server, export, capacity_gi, options):
    """The share's PersistentVolume (NFS, ReadOnlyMany, pre-bound) and its claim, with the
    namespace they live in first."""
    objects = MS.volume_objects(str(name), str(namespace), str(server), str(export), int(capacity_gi), controller.plain(list(options)))
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": str(namespace)}}, *objects]


class FilterModule:
    def filters(self):
        return {
            "nfs_option_problems": nfs_option_problems,
            "mount_point_problems": mount_point_problems,
            "cache_pattern_problems": cache_pattern_problems,
            "model_cache_unit": model_cache_unit,
            "model_share_unit": model_share_unit,
            "model_share_volumes": model_share_volumes,
        }
