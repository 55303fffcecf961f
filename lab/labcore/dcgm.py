"""The lab's SIMULATED dcgm-exporter (lab/hwsim/dcgm_exporter_sim.py) on each GPU node: a unit
serving /metrics on the node's management address, port 9400, as a GPU operator's dcgm-exporter
on the host network would (the lab sets monitoring_dcgm_exporter_mode: external)."""

from __future__ import annotations

import os

from labcore.containers import HERE, podman

UNIT = """[Unit]
Description=rackforge lab: SIMULATED dcgm-exporter 3.3.9-3.6.1 (values from nvidia-smi over the lab NVML)
After=network-online.target

[Service]
Environment=NODE_NAME={name}
ExecStart=/usr/bin/python3 /usr/lib/hwsim/dcgm_exporter_sim.py --listen {ip} --port 9400
Restart=always
RestartSec=2

[Install]
WantedBy=multi-user.target
"""


def install(cname, name, ip):
    podman("cp", os.path.join(HERE, "hwsim", "dcgm_exporter_sim.py"), "%s:/usr/lib/hwsim/dcgm_exporter_sim.py" % cname)
    script = "cat > /etc/systemd/system/rackforge-lab-dcgm-exporter.service <<'UNIT'\n%sUNIT\n" % UNIT.format(name=name, ip=ip)
    script += "systemctl daemon-reload\nsystemctl enable -q --now rackforge-lab-dcgm-exporter.service\n"
    podman("exec", "-i", cname, "bash", "-s", inp=script)
