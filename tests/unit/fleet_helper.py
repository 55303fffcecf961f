"""Killing a run while it writes the fleet report: shared by tests/unit/test_fleet_plugin.py and
tests/integration/test_fleet_report.py. The test hears of the writer's temporary file from the
kernel the moment it is created (inotify) and SIGKILLs the run at once, between that write and
its rename; the plugin has no test-only code path for it."""

from __future__ import annotations

import ctypes
import os
import select
import signal
import struct
import time
from pathlib import Path

TMP_PREFIX = ".fleet-tmp-"  # action_plugins/rackforge_fleet_report.py


class Created:
    """Names created in a directory, as the kernel reports them (inotify IN_CREATE): the test
    hears of a temporary file the moment the writer creates it, not at its next poll."""

    IN_CREATE = 0x100

    def __init__(self, directory):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_CLOEXEC)
        assert self.fd >= 0, os.strerror(ctypes.get_errno())
        assert self.libc.inotify_add_watch(self.fd, str(directory).encode(), self.IN_CREATE) >= 0, os.strerror(ctypes.get_errno())

    def wait_for(self, prefix, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if not select.select([self.fd], [], [], max(0.0, deadline - time.time()))[0]:
                break
            data, pos = os.read(self.fd, 65536), 0
            while pos < len(data):
                _, _, _, length = struct.unpack_from("iIII", data, pos)
                name = data[pos + 16 : pos + 16 + length].rstrip(b"\0").decode()
                pos += 16 + length
                if name.startswith(prefix):
                    return name
        return None

    def close(self):
        os.close(self.fd)


def descendants(pid):
    """Every process below pid. Ansible's workers call setsid(), so the run's process group does
    not hold them: killing a run means killing them by pid."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path("/proc/%s/stat" % entry).read_text()
            except OSError:
                continue
            parents.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def kill_run(proc):
    """SIGKILL a run: its workers (the one writing first), then ansible-playbook."""
    for pid in [*descendants(proc.pid), proc.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def leftovers(reports):
    """Temporary files killed writers left behind (the next run removes them under the lock)."""
    return sorted(p.name for p in reports.iterdir() if p.name.startswith(TMP_PREFIX))
