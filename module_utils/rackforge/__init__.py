"""rackforge module_utils: pure parsers and evaluators shared by the modules and the tests,
plus the sysfs/procfs file reader, the concurrent command runner and the container test
(in_container) the modules share."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

# Environment for every command the modules run: tool output is parsed, so it must not be localised.
C_ENV = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}
# at most this many commands at once (an HGX node has 8 GPUs and 8 or more RDMA ports)
MAX_CONCURRENT = 8


def run_concurrently(module, argvs, environ_update=None):
    """Run independent read-only commands at the same time; [(rc, stdout, stderr)] in argvs' order.
    A node's per-port reads (mlnx_qos -i, ethtool -S) and separate tool queries then take about the
    slowest one's time instead of the sum. Only the commands run in threads: one that cannot start
    reads as (None, "", reason), and the caller decides what a failure means (fail_json stays on
    the module's main thread)."""

    def one(argv):
        try:
            return module.run_command(argv, environ_update=environ_update, handle_exceptions=False)
        except Exception as exc:  # reported to the caller as a failed command
            return None, "", "%s: %s" % (argv[0], exc)

    if len(argvs) < 2:
        return [one(argv) for argv in argvs]
    with ThreadPoolExecutor(max_workers=min(len(argvs), MAX_CONCURRENT)) as pool:
        return list(pool.map(one, argvs))


def read_file(path, default=None):
    """A sysfs/procfs file's text, stripped; default when it cannot be read."""
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return default


def in_container(module):
    """Whether this runs in a container (podman's /run/.containerenv, docker's /.dockerenv, or
    systemd-detect-virt --container): what a container may apply is the host's to decide."""
    if os.path.exists("/run/.containerenv") or os.path.exists("/.dockerenv"):
        return True
    tool = module.get_bin_path("systemd-detect-virt")
    if tool:
        rc, _, _ = module.run_command([tool, "--container", "--quiet"])
        return rc == 0
    return False
