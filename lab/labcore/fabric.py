"""The simulated RoCE fabric's address map (SIMULATION of address resolution between the lab's
nodes: which node answers ARP for which rail address). The simulated perftest -R resolves a
partner's RoCE address with it and reaches that node over the lab network only
(hwsim/hwsimlib/perftest_exchange.py)."""

from __future__ import annotations

import json
import os

from labcore.containers import HERE, podman


def fabric_map(members):
    """{RoCE address: node address} over the lab's GPU nodes: which node answers for which rail
    address (SIMULATION of the RoCE fabric's address resolution; the simulated perftest -R
    resolves a partner's RoCE address with it and reaches that node over the lab network only).
    members: [(index, node address, profile name or None)], index as `hwsim init --index`."""
    fabric = {}
    for index, ip, profile_name in members:
        if not profile_name:
            continue
        with open(os.path.join(HERE, "hwsim", "profiles", profile_name + ".json")) as fh:
            prof = json.load(fh)
        for nic in prof["nics"]:
            if nic.get("ipv4"):
                fabric[nic["ipv4"] % index] = ip
    return fabric


def install_fabric(cname, fabric):
    """Write the fabric map into a node (/etc/hwsim/fabric.json), replacing it in one rename."""
    body = json.dumps(fabric, indent=1, sort_keys=True)
    script = "set -e\ncat > /etc/hwsim/fabric.json.new <<'JSON'\n%s\nJSON\nmv -f /etc/hwsim/fabric.json.new /etc/hwsim/fabric.json\n" % body
    podman("exec", "-i", cname, "sh", "-s", inp=script)
