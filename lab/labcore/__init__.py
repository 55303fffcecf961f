"""The machinery behind lab/lab.py, by concern (standard library only: it runs before the venv exists).

containers  podman and process helpers, the lab's names and paths, waiting for systemd and sshd
nodes       what makes a container a lab node: access, simulator, boot units, (re)start and reboot
inventory   the inventories the lab writes (inventories/lab), from what it started
"""
