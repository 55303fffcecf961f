#!/usr/bin/python
"""Ansible module: lossless RoCE v2 QoS on mlx5 ports (mlnx_qos + sysfs + configfs)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: roce_qos
short_description: Lossless RoCE v2 on mlx5 Ethernet ports, changing only what differs
description:
  - Per port trust DSCP, PFC on the lossless priority only, the PFC cable length and (manual
    mode) receive buffers sized for the link speed and cable, ECN for the notification and
    reaction points on that priority, CNP DSCP and priority, RDMA-CM default RoCE mode and ToS
    (configfs), the traffic class of non-CM traffic (MLNX_OFED sysfs) and the MTU.
  - Reads the port back with C(mlnx_qos -i) and sysfs first, plans every port, fails before
    any change when a request is impossible, then changes only the differences. Check mode and
    diff are supported. A port that rejects a setting is reported in C(rejected), not fatal.
  - Calls to mlnx_qos follow what the tool and the mlx5 kernel do with them (Mellanox/mlnx-tools
    python/mlnx_qos, the mlx5 driver's en/port_buffer.c and en_dcbnl.c). C(--cable_len) always
    travels with C(--pfc) (older mlnx_qos sent PFC off with a cable length alone); buffer sizes
    and the priority-to-buffer map go in calls of their own, sizes first, ordered so that every
    lossless buffer holds the kernel minimum after each call.
  - Manual buffers are at least what the mlx5 kernel accepts, xoff + max(netdev max_mtu, 9216) + 128
    bytes in 384-byte units; the netdev's max_mtu is read with C(ip -d -j link show).
  - Returns the full command list for a boot-time unit in C(boot_commands) (QoS is lost on reboot).
options:
  interfaces:
    description: Netdevs to configure; empty = every mlx5 port whose link layer is Ethernet.
    type: list
    elements: str
    default: []
  exclude_interfaces:
    description: Netdevs never touched (the management interface).
    type: list
    elements: str
    default: []
  lossless_priority: {description: The lossless priority (0..7)., type: int, default: 3}
  trust: {description: Priority trust state., type: str, default: dscp, choices: [dscp, pcp]}
  pfc: {description: Enable PFC on the lossless priority (and no other)., type: bool, default: true}
  ecn: {description: Enable ECN (roce_np and roce_rp) on the lossless priority., type: bool, default: true}
  cnp_dscp: {description: DSCP of congestion notification packets (0..63)., type: int, default: 48}
  cnp_priority: {description: 802.1p priority of CNPs (0..7)., type: int, default: 6}
  cable_len_m: {description: Cable length for the PFC headroom (1..999 m; the mlx5 kernel ignores 1000 and more)., type: int, default: 7}
  buffer_mode:
    description: auto lets the firmware size buffers from the cable length; manual sets them.
    type: str
    default: auto
    choices: [auto, manual]
  lossless_buffer_bytes:
    description: >-
      Manual mode lossless buffer, rounded up to 384-byte units; at least the mlx5 minimum
      (xoff + max(max_mtu, 9216) + 128 bytes), which is also the default.
    type: int
  speed_gbps: {description: Link speed when sysfs does not report one., type: int}
  mtu: {description: Netdev MTU (1500..9978); null leaves it to the OS network config., type: int}
  traffic_class: {description: ToS of non-RDMA-CM traffic (MLNX_OFED tc/1/traffic_class); null leaves it., type: int}
  rdma_cm_tos: {description: RDMA-CM default ToS (0..255); null leaves it., type: int}
  roce_mode: {description: RDMA-CM default RoCE mode; null leaves it., type: str, default: RoCE v2}
  sysfs_root: {description: sysfs root., type: path, default: /sys}
  configfs_root: {description: configfs root (rdma_cm lives below it)., type: path, default: /sys/kernel/config}
"""

RETURN = r"""
interfaces:
  description: Per port, ca, netdev, speed_gbps, headroom and lossless_buffer bytes, what changed, unsupported keys.
  type: list
  returned: always
rejected:
  description: >-
    Ports that refused a setting: {netdev, ca, problems, command, rc, stdout, stderr}, command and
    its rc/stdout/stderr being the mlnx_qos call that failed (null when only the read-back differs).
  type: list
  returned: always
notes:
  description: >-
    One line per port that refused a setting or lacks one this driver or mlnx_qos does not offer
    (left as is), each also a warning: not fatal (the health gate checks PFC).
  type: list
  returned: always
boot_commands:
  description: >-
    Lines of a POSIX sh script that re-apply the whole state at boot; the script defines
    C(run) (run a command, remember a failure) and C(put VALUE PATH) (write a sysfs value).
  type: list
  returned: always
"""

import os
import shlex

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV, read_file, run_concurrently
from ansible.module_utils.rackforge.netmath import NetMathError
from ansible.module_utils.rackforge.rdma import ParseError, parse_mlnx_qos
from ansible.module_utils.rackforge.roce import PlanError, link_max_mtu, plan_port, read_value, sysfs_paths
from ansible.module_utils.rackforge.settings import RANGES


def discover(root, wanted, exclude):
    """[(ca, netdev)] of mlx5 Ethernet ports, or of the named netdevs."""
    ports = []
    ib = os.path.join(root, "class", "infiniband")
    for ca in sorted(os.listdir(ib)) if os.path.isdir(ib) else []:
        layer = read_file(os.path.join(ib, ca, "ports", "1", "link_layer"), "")
        netdir = os.path.join(ib, ca, "device", "net")
        for netdev in sorted(os.listdir(netdir)) if os.path.isdir(netdir) else []:
            if netdev in exclude:
                continue
            if (wanted and netdev in wanted) or (not wanted and ca.startswith("mlx5") and layer == "Ethernet"):
                ports.append((ca, netdev))
    return ports


def main():
    module = AnsibleModule(
        argument_spec={
            "interfaces": {"type": "list", "elements": "str", "default": []},
            "exclude_interfaces": {"type": "list", "elements": "str", "default": []},
            "lossless_priority": {"type": "int", "default": 3},
            "trust": {"type": "str", "default": "dscp", "choices": ["dscp", "pcp"]},
            "pfc": {"type": "bool", "default": True},
            "ecn": {"type": "bool", "default": True},
            "cnp_dscp": {"type": "int", "default": 48},
            "cnp_priority": {"type": "int", "default": 6},
            "cable_len_m": {"type": "int", "default": 7},
            "buffer_mode": {"type": "str", "default": "auto", "choices": ["auto", "manual"]},
            "lossless_buffer_bytes": {"type": "int"},
            "speed_gbps": {"type": "int"},
            "mtu": {"type": "int"},
            "traffic_class": {"type": "int"},
            "rdma_cm_tos": {"type": "int"},
            "roce_mode": {"type": "str", "default": "RoCE v2"},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "configfs_root": {"type": "path", "default": "/sys/kernel/config"},
        },
        supports_check_mode=True,
    )
    p = module.params
    ranges = {
        "lossless_priority": RANGES["priority"],
        "cnp_priority": RANGES["priority"],
        "cnp_dscp": RANGES["dscp"],
        "cable_len_m": (1, 999),
        "mtu": (1500, 9978),
        "traffic_class": (0, 255),
        "rdma_cm_tos": (0, 255),
    }
    for name, (low, high) in ranges.items():
        if p[name] is not None and not low <= p[name] <= high:
            module.fail_json(msg="%s must be in %d..%d, got %d" % (name, low, high, p[name]))
    mlnx_qos = module.get_bin_path("mlnx_qos")
    if not mlnx_qos:
        module.fail_json(msg="mlnx_qos not found: install MLNX_OFED / DOCA-OFED or mlnx-tools (it configures trust, PFC and buffers)")
    ports = discover(p["sysfs_root"], set(p["interfaces"]), set(p["exclude_interfaces"]))
    missing = sorted(set(p["interfaces"]) - {netdev for _, netdev in ports})
    if missing:
        module.fail_json(msg="interfaces not found as RDMA netdevs: %s" % ", ".join(missing))
    if not ports:
        module.fail_json(msg="no mlx5 Ethernet (RoCE) port found under %s/class/infiniband" % p["sysfs_root"])

    manual = p["buffer_mode"] == "manual"
    ip = module.get_bin_path("ip") if manual else None
    if manual and not ip:
        module.fail_json(msg="ip (iproute2) not found: buffer_mode manual needs each netdev's max_mtu (ip -d -j link show)")

    # plan every port before changing any; the ports' reads run at the same time
    argvs = [[mlnx_qos, "-i", netdev] for _, netdev in ports]
    if manual:
        argvs += [[ip, "-d", "-j", "link", "show", "dev", netdev] for _, netdev in ports]
    reads = run_concurrently(module, argvs, environ_update=C_ENV)
    plans = []
    for i, (ca, netdev) in enumerate(ports):
        rc, out, err = reads[i]
        if rc != 0:
            module.fail_json(msg="mlnx_qos -i %s failed (rc %s): %s" % (netdev, rc, (out + err).strip()), rc=rc, stdout=out, stderr=err)
        try:
            qos = parse_mlnx_qos(out)
        except ParseError as exc:
            module.fail_json(msg="could not parse mlnx_qos -i %s: %s" % (netdev, exc), rc=rc, stdout=out, stderr=err)
        max_mtu = None
        if manual:
            rc, out, err = reads[len(ports) + i]
            if rc != 0:
                msg = "ip -d -j link show dev %s failed (rc %s): %s" % (netdev, rc, (out + err).strip())
                module.fail_json(msg=msg, rc=rc, stdout=out, stderr=err)
            try:
                max_mtu = link_max_mtu(out, netdev)
            except PlanError as exc:
                module.fail_json(msg=str(exc), rc=rc, stdout=out, stderr=err)
        paths = sysfs_paths(p["sysfs_root"], p["configfs_root"], ca, netdev, p["lossless_priority"])
        current = {key: read_value(key, read_file(path)) for key, path in paths.items()}
        cm_dir = os.path.join(p["configfs_root"], "rdma_cm", ca)
        needs_mkdir = os.path.isdir(os.path.dirname(cm_dir)) and not os.path.isdir(cm_dir)
        if needs_mkdir:  # configfs fills the directory in on mkdir
            current.update(roce_mode="", roce_tos=-1)
        speed = read_value("speed", read_file(os.path.join(p["sysfs_root"], "class", "net", netdev, "speed")))
        speed = speed // 1000 if speed and speed > 0 else p["speed_gbps"]
        if not speed:
            module.fail_json(msg="%s: link speed unknown (link down?) and speed_gbps not given" % netdev)
        try:
            plan = plan_port(qos, current, p, speed, max_mtu)
        except (PlanError, NetMathError) as exc:
            module.fail_json(msg="%s (%s): %s; nothing was changed" % (netdev, ca, exc))
        plans.append((ca, netdev, speed, paths, cm_dir, needs_mkdir, plan, qos, max_mtu))

    changed, rejected, results, boot, diff_before, diff_after = False, [], [], [], {}, {}
    for ca, netdev, speed, paths, cm_dir, needs_mkdir, plan, qos, max_mtu in plans:
        port_changed = bool(plan["calls"] or plan["writes"])
        changed = changed or port_changed
        diff_before[netdev] = plan["before"]
        diff_after[netdev] = plan["after"]
        boot.append("# %s (%s), %d Gb/s" % (netdev, ca, speed))
        for call in plan["boot_calls"]:
            boot.append("run " + " ".join(shlex.quote(a) for a in [mlnx_qos, "-i", netdev, *call]))
        if "roce_mode" in plan["full_writes"] or "roce_tos" in plan["full_writes"]:
            boot.append("run mkdir -p %s" % shlex.quote(cm_dir))
        for key, value in plan["full_writes"].items():
            boot.append("put %s %s" % (shlex.quote(str(value)), shlex.quote(paths[key])))
        problems, failed = [], None
        if port_changed and not module.check_mode:
            for call in plan["calls"]:  # in order: each one relies on the ones before it
                argv = [mlnx_qos, "-i", netdev, *call]
                rc, out, err = module.run_command(argv, environ_update=C_ENV)
                if rc != 0:
                    failed = {"command": argv, "rc": rc, "stdout": out, "stderr": err}
                    problems.append("mlnx_qos %s: rc %s: %s" % (" ".join(call), rc, ((out + err).strip().splitlines() or [""])[-1]))
                    break
            if needs_mkdir and ("roce_mode" in plan["writes"] or "roce_tos" in plan["writes"]):
                os.makedirs(cm_dir, exist_ok=True)
            for key, value in plan["writes"].items():
                try:
                    with open(paths[key], "w") as fh:
                        fh.write("%s\n" % value)
                except OSError as exc:
                    problems.append("%s: %s" % (paths[key], exc.strerror))
            # read back: a port that silently refuses (firmware, DCBX owned by the switch) shows here
            rc, out, err = module.run_command([mlnx_qos, "-i", netdev], environ_update=C_ENV)
            now = {}
            try:
                now = parse_mlnx_qos(out) if rc == 0 else {}
            except ParseError as exc:
                problems.append("mlnx_qos -i %s reads back unparsable text: %s" % (netdev, exc))
            if rc != 0:
                problems.append("mlnx_qos -i %s read-back failed: rc %s: %s" % (netdev, rc, (out + err).strip()))
                failed = failed or {"command": [mlnx_qos, "-i", netdev], "rc": rc, "stdout": out, "stderr": err}
            for key in ("trust", "pfc", "cable_len", "buffer_size", "prio2buffer"):
                if now and key in plan["after"] and now.get(key) != plan["after"][key]:
                    problems.append("%s reads back %s, set %s" % (key, now.get(key), plan["after"][key]))
            for key, value in plan["writes"].items():
                if read_value(key, read_file(paths[key])) != value:
                    problems.append("%s reads back %s, set %s" % (key, read_file(paths[key]), value))
        if problems:
            entry = {"netdev": netdev, "ca": ca, "problems": problems, "command": None, "rc": None, "stdout": "", "stderr": ""}
            entry.update(failed or {})
            rejected.append(entry)
        results.append(
            {
                "ca": ca,
                "netdev": netdev,
                "speed_gbps": speed,
                "headroom_bytes": plan["headroom"],
                "lossless_buffer_bytes": plan["lossless_buffer"],
                "changed": port_changed,
                "mlnx_qos_args": plan["mlnx_args"],
                "mlnx_qos_calls": plan["calls"],
                "max_mtu": max_mtu,
                "buffer_total": qos.get("buffer_total"),
                "sysfs_changes": plan["writes"],
                "unsupported": plan["unsupported"],
            }
        )
    notes = ["%s (%s) refused: %s" % (r["netdev"], r["ca"], "; ".join(r["problems"])) for r in rejected]
    unsupported = [r for r in results if r["unsupported"]]
    notes += ["%s: not offered by the driver or mlnx_qos, left as is: %s" % (u["netdev"], ", ".join(u["unsupported"])) for u in unsupported]
    for note in notes:  # not fatal (the health gate checks PFC): said as warnings
        module.warn(note)
    module.exit_json(
        changed=changed,
        interfaces=results,
        rejected=rejected,
        notes=notes,
        boot_commands=boot,
        diff={"before": diff_before, "after": diff_after},
    )


if __name__ == "__main__":
    main()
