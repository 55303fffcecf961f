"""Simulated kernel NFS client: `mount.nfs` (SIMULATION; the lab's containers have no kernel NFS).

mount(8) and systemd are real: a .mount unit of Type=nfs runs mount(8), which runs the helper
/sbin/mount.nfs (the lab diverts nfs-common's to /sbin/mount.nfs.distrib). This helper answers as
nfs-utils' mount.nfs does (utils/mount/mount.c, error.c mount_error, stropts.c nfsmount_fg):
`mount.nfs SERVER:EXPORT DIR [-rvVwfnsh] [-o OPTIONS]`, errors on stderr as "mount.nfs: <why>",
exit status 32 (EX_FAIL) on a failed mount, a foreground mount retrying a refused connection for
`retry=` minutes (2 by default) before it gives up. The server's name is resolved for real
(getaddrinfo); the server is not contacted. The share is a tmpfs at DIR filled from the node's
directory /var/lib/hwsim/nfs/<server>/<export> (read-only with ro), so systemd sees a real mount.
Faults (hwsim fault add ...): nfs_server_down (the connection is refused), nfs_server_hung (the
mount never returns: systemd's TimeoutSec= ends it), nfs_export_missing (the server answers
ENOENT for the export).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from hwsimlib.state import VARLIB, faults

EX_FAIL = 32
SHARES = os.path.join(VARLIB, "nfs")


def _fail(text):
    sys.stderr.write("mount.nfs: %s\n" % text)
    return EX_FAIL


def _options(argv):
    opts, i = [], 0
    while i < len(argv):
        if argv[i] == "-o" and i + 1 < len(argv):
            opts += [o for o in argv[i + 1].split(",") if o]
            i += 2
            continue
        if argv[i].startswith("-") and "r" in argv[i][1:]:
            opts.append("ro")
        i += 1
    return opts


def mount_nfs(argv):
    args = [a for a in argv if not a.startswith("-")]
    if "-o" in argv:  # the option string is not a positional argument
        args.remove(argv[argv.index("-o") + 1])
    if len(args) < 2:
        sys.stderr.write("usage: mount.nfs remotetarget dir [-rvVwfnsh] [-o nfsoptions]\n")
        return 2
    spec, where = args[0], args[1]
    server, sep, export = spec.rpartition(":")
    if not sep or not server or not export.startswith("/"):
        return _fail("remote share not in 'host:dir' format")
    server = server.strip("[]")
    opts = _options(argv)
    try:
        socket.getaddrinfo(server, 2049, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        return _fail("Failed to resolve server %s: %s" % (server, exc.strerror))
    if not os.path.isdir(where):
        return _fail("mount point %s does not exist" % where)
    if faults("nfs_server_hung"):
        while True:  # a hard mount on a server that accepts and never answers
            time.sleep(3600)
    if faults("nfs_server_down"):
        retry = next((o.split("=", 1)[1] for o in opts if o.startswith("retry=")), "2")
        time.sleep(60 * int(retry) if retry.isdigit() else 120)
        return _fail("Connection refused")
    if faults("nfs_export_missing"):
        return _fail("mounting %s failed, reason given by server: No such file or directory" % spec)
    share = os.path.join(SHARES, server, export.strip("/"))
    os.makedirs(share, exist_ok=True)
    note = os.path.join(share, "SIMULATED-NFS-SHARE")
    if not os.path.exists(note):
        with open(note, "w") as fh:
            fh.write("rackforge lab: hwsim's mount.nfs serves this directory as %s (no kernel NFS here)\n" % spec)
    # a tmpfs named after the share, filled from the node's share directory. Its root is "/", so
    # libmount matches the /run/mount/utab entry (_netdev, written by this mount(8) right after
    # its mount call) and systemd orders the unit as the network mount it is. A bind mount's root
    # would not match: systemd would read it as a local mount, ordered before local-fs.target,
    # and a boot would deadlock on it.
    steps = [
        ["/usr/bin/mount", "-t", "tmpfs", "-o", "size=64m,mode=0755,_netdev", spec, where],
        ["/usr/bin/cp", "-a", share + "/.", where],
    ]
    if "ro" in opts:
        steps.append(["/usr/bin/mount", "-o", "remount,ro", where])
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            if step[1] != "-t":
                subprocess.run(["/usr/bin/umount", where], capture_output=True, check=False)
            return _fail(done.stderr.strip() or "mount system call failed")
    return 0
