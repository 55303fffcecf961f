"""hwsim administration: init, boot, faults, fabric manager, state."""

from __future__ import annotations

import json
import os
import shutil
import sys

from hwsimlib import block_sim
from hwsimlib.kernel import boot_modules, driver_loaded, kmsg_boot, kmsg_xid
from hwsimlib.nvml import nvml_set, nvml_state
from hwsimlib.state import (
    DRIVER_FILE,
    ETC,
    FAULTS,
    FM_FILE,
    RUN,
    VARLIB,
    fabric_state,
    gpu_state,
    installed,
    loaded_driver,
    nic_state,
    node,
    profile,
    save_json,
)
from hwsimlib.sysfs import render_sysfs, render_sysfs_keep_runtime


def admin(args):
    usage = (
        "usage: hwsim init PROFILE.json [--seed S] [--index N]\n"
        "       hwsim boot            (what a reboot does: reset volatile state, load driver)\n"
        "       hwsim block-boot      (assemble the md arrays whose disks are present: udev at boot)\n"
        "       hwsim fault add KIND key=value ... | fault clear | fault list\n"
        "       hwsim fabricmanager start|stop   (called by the simulated fabric manager unit)\n"
        "       hwsim state\n"
        "       hwsim nvml-state | nvml-set SLOT|all OP ARGS   (called by the lab NVML library, lab/nvml)\n"
        "faults: " + ", ".join(sorted(FAULTS)) + "\n"
    )
    if not args:
        sys.stderr.write(usage)
        return 2
    cmd = args[0]
    if cmd == "nvml-state":
        return nvml_state(args[1:])
    if cmd == "nvml-set":
        return nvml_set(args[1:])
    if cmd == "init":
        with open(args[1]) as fh:
            prof = json.load(fh)
        save_json(os.path.join(ETC, "profile.json"), prof)
        data = node()
        if "--seed" in args:
            data["seed"] = args[args.index("--seed") + 1]
        if "--index" in args:
            data["index"] = int(args[args.index("--index") + 1])
        save_json(os.path.join(VARLIB, "node.json"), data)
        return admin(["boot"])
    if cmd == "boot":
        if os.path.isdir(RUN):
            shutil.rmtree(RUN)
        os.makedirs(RUN)
        version = installed(DRIVER_FILE)
        if version:
            save_json(os.path.join(RUN, "driver.json"), {"version": version})
        render_sysfs()
        block_sim.boot()
        boot_modules()
        kmsg_boot(version)
        return 0
    if cmd == "block-boot":  # the md arrays only, before the local filesystems (the lab's block unit)
        block_sim.boot()
        return 0
    if cmd == "load-driver":
        # the driver package's postinst: modprobe succeeds when no other version is loaded
        version = installed(DRIVER_FILE)
        if version and not loaded_driver():
            save_json(os.path.join(RUN, "driver.json"), {"version": version})
            driver_loaded(version)
        return 0
    if cmd == "fabricmanager":
        fm_version = installed(FM_FILE)
        if args[1] == "start":
            if not fm_version:
                sys.stderr.write("nv-fabricmanager: not installed\n")
                return 1
            if fm_version != loaded_driver():
                sys.stderr.write(
                    "fabric manager version %s does not match the loaded driver %s; "
                    "fabric manager and driver versions must be identical\n" % (fm_version, loaded_driver())
                )
                return 1
            save_json(os.path.join(RUN, "fabricmanager.json"), {"running": True, "version": fm_version})
        else:
            save_json(os.path.join(RUN, "fabricmanager.json"), {"running": False})
        return 0
    if cmd == "fault":
        data = node()
        if args[1:2] == ["add"]:
            kind = args[2]
            if kind not in FAULTS:
                sys.stderr.write("unknown fault %r; known: %s\n" % (kind, ", ".join(sorted(FAULTS))))
                return 2
            fault = {"kind": kind}
            for kv in args[3:]:
                key, _, value = kv.partition("=")
                fault[key] = value
            data["faults"].append(fault)
            if kind == "gpu_xid":  # an event, not a state: logged once, gone at the next (simulated) reboot
                kmsg_xid(
                    profile()["gpu"]["bus_ids"][int(fault.get("gpu", 0))],
                    fault.get("xid", 79),
                    fault.get("detail", "GPU has fallen off the bus."),
                )
        elif args[1:2] == ["clear"]:
            data["faults"] = []
        elif args[1:2] == ["list"]:
            sys.stdout.write(json.dumps(data["faults"]) + "\n")
            return 0
        save_json(os.path.join(VARLIB, "node.json"), data)
        render_sysfs_keep_runtime()
        block_sim.render()
        return 0
    if cmd == "state":
        sys.stdout.write(
            json.dumps(
                {"node": node(), "gpu": gpu_state(), "nic": nic_state(), "driver_loaded": loaded_driver(), "fabric": fabric_state()},
                indent=1,
            )
            + "\n"
        )
        return 0
    sys.stderr.write(usage)
    return 2
