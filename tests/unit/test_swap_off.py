"""swap_off: swap off now and at boot in one call; a container's swap (the host's) never touched."""

from __future__ import annotations

import pytest
import swap_off
from ansible.module_utils import _internal as module_utils_internal
from ansible.module_utils.common import warnings as ansible_warnings
from ansible.module_utils.rackforge.swap import active, fstab_without_swap
from module_helper import call_module

# /proc/swaps as the kernel prints it (mm/swapfile.c: swap_show's header, then one line per area)
SWAPS = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/sda3                               partition\t8388604\t\t0\t\t-2\n"
FSTAB = """# /etc/fstab: static file system information.
UUID=1b2c / ext4 errors=remount-ro 0 1
UUID=77aa none swap sw 0 0
# UUID=old none swap sw 0 0
/swapfile none swap defaults 0 0
"""


def test_the_active_areas_and_the_fstab_lines_are_read_as_the_kernel_and_mount_write_them():
    assert active(SWAPS) == ["/dev/sda3"] and active(SWAPS.splitlines()[0] + "\n") == []
    after, lines = fstab_without_swap(FSTAB)
    assert lines == ["UUID=77aa none swap sw 0 0", "/swapfile none swap defaults 0 0"]
    assert "# UUID=77aa none swap sw 0 0  # disabled by rackforge (kubelet)" in after
    assert "UUID=1b2c / ext4 errors=remount-ro 0 1\n" in after and "# UUID=old none swap sw 0 0\n" in after
    assert fstab_without_swap(after) == (after, [])


@pytest.fixture
def node(tmp_path, monkeypatch):
    (tmp_path / "swaps").write_text(SWAPS)
    (tmp_path / "fstab").write_text(FSTAB)
    ran = []

    def fake_run(self, argv, environ_update=None, **kw):
        ran.append(argv)
        (tmp_path / "swaps").write_text(SWAPS.splitlines()[0] + "\n")
        return 0, "", ""

    monkeypatch.setattr(swap_off.AnsibleModule, "run_command", fake_run)
    monkeypatch.setattr(swap_off.AnsibleModule, "get_bin_path", lambda self, name, required=False, opt_dirs=None: "/sbin/" + name)
    monkeypatch.setattr(swap_off, "in_container", lambda module: False)
    # as on the node: the warnings are returned (test_modules.run_module does the same)
    monkeypatch.setattr(ansible_warnings, "_global_warnings", {})
    monkeypatch.setattr(module_utils_internal, "is_controller", False)
    return tmp_path, ran, {"fstab": str(tmp_path / "fstab"), "proc_swaps": str(tmp_path / "swaps")}


def test_check_mode_shows_the_change_then_one_call_does_it_and_the_rerun_changes_nothing(node, capsys):
    tmp_path, ran, args = node
    out = call_module(swap_off, args, capsys, check_mode=True)
    assert out["changed"] and out["swapoff"] and ran == [] and (tmp_path / "fstab").read_text() == FSTAB
    assert "disabled by rackforge" in out["diff"][0]["after"]
    out = call_module(swap_off, args, capsys)
    assert out["changed"] and ran == [["/sbin/swapoff", "-a"]] and out["active"] == ["/dev/sda3"]
    assert (tmp_path / "fstab").read_text() == fstab_without_swap(FSTAB)[0]
    again = call_module(swap_off, args, capsys)
    assert not again["changed"] and len(ran) == 1 and again["fstab_lines"] == [] and again["diff"] == []


def test_in_a_container_the_host_s_swap_is_reported_and_left_on(node, capsys, monkeypatch):
    _tmp, ran, args = node
    monkeypatch.setattr(swap_off, "in_container", lambda module: True)
    out = call_module(swap_off, args, capsys)
    assert out["host_swap"] and not out["swapoff"] and ran == []
    assert any("the host's swap (/dev/sda3): not touched from a container" in w["event"]["msg"] for w in out["warnings"]), out
    assert out["changed"]  # the container's own fstab is still fixed
