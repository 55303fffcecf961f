"""Pure decisions of model storage on GPU nodes (no I/O): the NFS mount's options and unit, and
the Kubernetes volumes of the share and the node cache.

roles/model_storage uses it (filter_plugins/storage.py); held to the real tools and sources named below.

Public API:

- systemd_escape_path(path) -> str: the unit name stem of a mount point, as `systemd-escape
  --path` prints it (/models -> "models", /srv/model-cache -> "srv-model\\x2dcache").
- mount_point_problem(path, other=None) -> str | None: why `path` cannot be a mount point (not
  absolute, ".."/"." parts, whitespace, "/" itself, at or under a directory the system owns, or
  at, above or under `other`).
- nfs_option_problems(options) -> [str]: why the kernel's NFS client (fs/nfs/fs_context.c,
  nfs_fs_parameters) or mount(8)/systemd would refuse or mis-read these options; [] when none.
- nfs_mount_unit(server, export, where, options, timeout_s) -> str: the systemd .mount unit.
- volume_objects(...) -> [dict]: the Kubernetes objects the inference pods mount: a static NFS
  PersistentVolume (ReadOnlyMany, Retain, pre-bound to its claim) and its PersistentVolumeClaim,
  and, for a node cache, a no-provisioner StorageClass and one local PersistentVolume per node
  (required node affinity on kubernetes.io/hostname).
- The local NVMe cache's disks and array: model_cache.py.
"""

from __future__ import annotations

# fs/nfs/fs_context.c nfs_fs_parameters (Linux 6.1, Debian 12's kernel): name -> kind.
# "flag": no value; "flag_no": no value, "no" prefix allowed; "u32"; "string"; "enum" (values below).
_NFS = {
    "ac": "flag_no",
    "acdirmax": "u32",
    "acdirmin": "u32",
    "acl": "flag_no",
    "acregmax": "u32",
    "acregmin": "u32",
    "actimeo": "u32",
    "addr": "string",
    "bg": "flag",
    "bsize": "u32",
    "clientaddr": "string",
    "cto": "flag_no",
    "fg": "flag",
    "fsc": "flag_no_or_string",
    "hard": "flag",
    "local_lock": "enum",
    "lock": "flag_no",
    "lookupcache": "enum",
    "migration": "flag_no",
    "minorversion": "u32",
    "mountaddr": "string",
    "mounthost": "string",
    "mountport": "u32",
    "mountproto": "enum",
    "mountvers": "u32",
    "namlen": "u32",
    "nconnect": "u32",
    "nfsvers": "enum",
    "port": "u32",
    "posix": "flag_no",
    "proto": "enum",
    "rdirplus": "flag_no",
    "rdma": "flag",
    "resvport": "flag_no",
    "retrans": "u32",
    "retry": "string",
    "rsize": "u32",
    "sec": "string",
    "sharecache": "flag_no",
    "sloppy": "flag",
    "soft": "flag",
    "softerr": "flag",
    "softreval": "flag",
    "tcp": "flag",
    "timeo": "u32",
    "udp": "flag",
    "v2": "flag",
    "v3": "flag",
    "v4": "flag",
    "v4.0": "flag",
    "v4.1": "flag",
    "v4.2": "flag",
    "vers": "enum",
    "write": "enum",
    "wsize": "u32",
}
_VERS = ("2", "3", "4", "4.0", "4.1", "4.2")
_XPRT = ("rdma", "rdma6", "tcp", "tcp6", "udp", "udp6")
_ENUMS = {
    "local_lock": ("all", "flock", "posix", "none"),
    "lookupcache": ("all", "none", "pos", "positive"),
    "write": ("lazy", "eager", "wait"),
    "vers": _VERS,
    "nfsvers": _VERS,
    "proto": _XPRT,
    "mountproto": ("tcp", "tcp6", "udp", "udp6"),  # rdma is not used for side protocols
}
_SEC = ("krb5", "krb5i", "krb5p", "lkey", "lkeyi", "lkeyp", "none", "null", "spkm3", "spkm3i", "spkm3p", "sys")
# bounds the kernel checks (out_of_bounds): NFS_MAX_CONNECTIONS is 16
_BOUNDS = {"nconnect": (1, 16), "port": (0, 65535), "mountport": (0, 65535), "timeo": (1, 2**31 - 1), "retrans": (0, 2**31 - 1)}
# options mount(8) and the VFS take before the NFS client sees the rest, and systemd's own
_GENERIC_FLAGS = {"ro", "rw", "noatime", "relatime", "nodiratime", "strictatime", "nodev", "nosuid", "noexec", "sync", "async"}
_GENERIC_FLAGS |= {"defaults", "auto", "noauto", "nofail", "_netdev", "user", "nouser"}
_SYSTEMD_VALUED = {"x-systemd.mount-timeout", "x-systemd.idle-timeout", "x-systemd.device-timeout", "x-systemd.requires"}
_SYSTEMD_VALUED |= {"x-systemd.after", "x-systemd.before", "x-systemd.wanted-by", "x-systemd.required-by"}
_SYSTEMD_FLAGS = {"x-systemd.automount", "x-systemd.growfs", "x-systemd.makefs"}


def systemd_escape_path(path):
    """`systemd-escape --path`: the path simplified (repeated and trailing "/" dropped), "/" ->
    "-", the root "/" -> "-"; ASCII letters, digits, ":", "_" and "." (not leading) kept, every
    other byte as \\xNN. ValueError on a relative path or one with "." / ".." components."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError("not an absolute path: %r" % (path,))
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ValueError("path has . or .. components: %r" % (path,))
    if not parts:
        return "-"
    out = []
    for i, byte in enumerate("/".join(parts).encode("utf-8")):
        ch = chr(byte)
        if ch == "/":
            out.append("-")
        elif (ch.isascii() and ch.isalnum()) or ch in ":_" or (ch == "." and i > 0):
            out.append(ch)
        else:
            out.append("\\x%02x" % byte)
    return "".join(out)


# the system's own trees: a share mounted at or under one of them hides the OS (/var itself too)
_SYSTEM_DIRS = tuple("/bin /boot /dev /etc /lib /lib32 /lib64 /libx32 /proc /root /run /sbin /sys /tmp /usr".split())
_SYSTEM_DIRS += ("/var/lib", "/var/log", "/var/tmp", "/var/cache/apt")


def mount_point_problem(path, other=None):
    """None when `path` may be a mount point (the share's, the cache's), else why not; other: a
    mount point it must neither be nor nest with."""
    why = _mount_point_problem(path)
    if why or not other or _mount_point_problem(other):
        return why
    a, b = ["/" + "/".join(p for p in x.split("/") if p) for x in (path, other)]
    if a == b or a.startswith(b + "/") or b.startswith(a + "/"):
        return "must not be %s, nor above or under it (the other mount point)" % b
    return None


def _mount_point_problem(path):
    if not isinstance(path, str) or not path.startswith("/"):
        return "must be an absolute path"
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        return "must not have . or .. components"
    if not parts or any(c.isspace() for c in path):
        return "must not be / nor contain whitespace"
    clean = "/" + "/".join(parts)
    if clean == "/var":
        return "must not be /var (the system owns it)"
    top = next((t for t in _SYSTEM_DIRS if clean == t or clean.startswith(t + "/")), None)
    return "must not be %s or under it (the system owns it)" % top if top else None


def nfs_option_problems(options):
    """[why] for every option the kernel's NFS client, mount(8) or systemd would refuse, and for
    contradictions (hard with soft, ro with rw, two versions); [] when the options are sound."""
    problems, seen = [], {}
    for raw in options:
        if not isinstance(raw, str) or not raw or "," in raw or any(c.isspace() for c in raw):
            problems.append("%r is not one mount option (no commas, spaces or empty entries)" % (raw,))
            continue
        name, eq, value = raw.partition("=")
        if name in _GENERIC_FLAGS or name in _SYSTEMD_FLAGS:
            if eq:
                problems.append("%s takes no value (got %r)" % (name, raw))
            seen[name] = raw
            continue
        if name in _SYSTEMD_VALUED:
            if not value:
                problems.append("%s needs a value" % name)
            seen[name] = raw
            continue
        kind = _NFS.get(name)
        base = name[2:] if name.startswith("no") else None
        if kind is None and base and _NFS.get(base) in ("flag_no", "flag_no_or_string"):
            if eq:
                problems.append("%s takes no value (got %r)" % (name, raw))
            seen[base] = "no"
            continue
        if kind is None:
            problems.append("%s is not an option the kernel's NFS client knows (fs/nfs/fs_context.c)" % name)
            continue
        seen[name] = value
        if kind in ("flag", "flag_no"):
            if eq:
                problems.append("%s takes no value (got %r)" % (name, raw))
        elif kind == "u32":
            if not value.isdigit() or int(value) > 2**32 - 1:
                problems.append("%s needs a whole number (got %r)" % (name, raw))
            elif name in _BOUNDS and not _BOUNDS[name][0] <= int(value) <= _BOUNDS[name][1]:
                problems.append("%s=%s is out of range (%d..%d)" % (name, value, _BOUNDS[name][0], _BOUNDS[name][1]))
        elif kind == "enum":
            if value not in _ENUMS[name]:
                problems.append("%s must be one of %s (got %r)" % (name, ", ".join(_ENUMS[name]), raw))
        elif kind == "string" and not value:
            problems.append("%s needs a value" % name)
        if name == "sec" and value:
            bad = [f for f in value.split(":") if f and f not in _SEC]
            if bad:
                problems.append("sec=%s: %s not a security flavor the kernel knows (%s)" % (value, ", ".join(bad), ", ".join(_SEC)))
    for a, b in (("hard", "soft"), ("hard", "softerr"), ("ro", "rw"), ("tcp", "udp")):
        if a in seen and b in seen:
            problems.append("%s and %s contradict each other" % (a, b))
    versions = [n for n in ("v2", "v3", "v4", "v4.0", "v4.1", "v4.2", "vers", "nfsvers") if n in seen]
    if len(versions) > 1:
        problems.append("more than one NFS version is given (%s)" % ", ".join(versions))
    return problems


def nfs_mount_unit(server, export, where, options, timeout_s):
    """The systemd .mount unit (its name: systemd_escape_path(where) + ".mount") of an NFS export,
    ordered after the network is online and pulled in by remote-fs.target."""
    host = "[%s]" % server if ":" in server else server  # an IPv6 address in brackets (nfs_parse_source)
    return (
        "# rackforge: the model share (model_storage)\n"
        "[Unit]\n"
        "Description=Model weights from %s:%s\n"
        "Wants=network-online.target\n"
        "After=network-online.target\n"
        "\n"
        "[Mount]\n"
        "What=%s:%s\n"
        "Where=%s\n"
        "Type=nfs\n"
        "Options=%s\n"
        "TimeoutSec=%d\n"
        "\n"
        "[Install]\n"
        "WantedBy=remote-fs.target\n"
    ) % (server, export, host, export, where, ",".join(options), int(timeout_s))


# fstab/systemd-only options: mount(8) and systemd read them, the kubelet's mount of a PV must not get them
_FSTAB_ONLY = {"_netdev", "nofail", "auto", "noauto", "defaults", "user", "nouser"}


def pv_mount_options(options):
    """The options of `options` a PersistentVolume's mountOptions may carry (the kubelet runs
    mount -t nfs with them): fstab/systemd-only ones (x-*, _netdev, nofail, ...) dropped."""
    return [o for o in options if o.partition("=")[0] not in _FSTAB_ONLY and not o.startswith("x-")]


def _dns_label(text):
    out = "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")
    return out[:63].strip("-")


def volume_objects(name, namespace, server, export, capacity_gi, options, cache_path=None, cache_gi=0, cache_nodes=()):
    """The share's PV and PVC, and the node cache's StorageClass and local PVs (see the module
    docstring). name: the PVC's name (the PV is "<name>-<namespace>", cluster-scoped)."""
    labels = {"app.kubernetes.io/managed-by": "rackforge", "app.kubernetes.io/part-of": "model-storage"}
    pv_name = "%s-%s" % (name, namespace)
    size = "%dGi" % int(capacity_gi)
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": pv_name, "labels": dict(labels)},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadOnlyMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "volumeMode": "Filesystem",
            "mountOptions": pv_mount_options(options),
            "nfs": {"server": server, "path": export, "readOnly": True},
            # pre-bound: no other claim can take the share, and the claim gets no other volume
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": namespace, "name": name},
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "accessModes": ["ReadOnlyMany"],
            "storageClassName": "",
            "volumeName": pv_name,
            "resources": {"requests": {"storage": size}},
        },
    }
    out = [pv, pvc]
    if cache_path and cache_nodes:
        klass = "%s-cache" % name
        out.append(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": klass, "labels": dict(labels)},
                "provisioner": "kubernetes.io/no-provisioner",
                "volumeBindingMode": "WaitForFirstConsumer",
                "reclaimPolicy": "Retain",
            }
        )
        for node in cache_nodes:
            # the kubelet's kubernetes.io/hostname label is the hostname lowercased (GetHostname)
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {"name": "%s-%s" % (klass, _dns_label(node)), "labels": dict(labels)},
                    "spec": {
                        "capacity": {"storage": "%dGi" % int(cache_gi)},
                        "accessModes": ["ReadWriteOnce"],
                        "persistentVolumeReclaimPolicy": "Retain",
                        "storageClassName": klass,
                        "volumeMode": "Filesystem",
                        "local": {"path": cache_path},
                        "nodeAffinity": {
                            "required": {
                                "nodeSelectorTerms": [
                                    {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node.lower()]}]}
                                ]
                            }
                        },
                    },
                }
            )
    return out
