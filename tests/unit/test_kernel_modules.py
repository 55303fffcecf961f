"""kernel_modules over the simulated kernel (hwsim's modinfo/modprobe and /sys/module): options are
checked against `modinfo -p` before any change, the boot list and options are written both or
neither, modprobe loads what is not loaded, with the options written first; check mode and
state=check change nothing; a second run changes nothing."""

from __future__ import annotations

import json

import kernel_modules
import pytest
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import kmods
from hwsim_helper import Sim
from module_helper import call_module

MODULES = ["ib_uverbs", "rdma_ucm", "overlay"]


@pytest.fixture
def sim(tmp_path, monkeypatch):
    s = Sim(tmp_path, driver=None)
    for key, value in s.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(AnsibleModule, "get_bin_path", s.get_bin_path())
    (s.tmp / "etc" / "modprobe.d").mkdir(parents=True, exist_ok=True)
    (s.tmp / "etc" / "modules-load.d").mkdir(parents=True, exist_ok=True)
    return s


def args(sim, **extra):
    base = {
        "modules": MODULES,
        "load_file": str(sim.tmp / "etc" / "modules-load.d" / "rackforge-rdma.conf"),
        "options": {},
        "options_file": str(sim.tmp / "etc" / "modprobe.d" / "rackforge-rdma.conf"),
        "owner": "roles/rdma_roce",
        "modules_var": "rdma_roce_kernel_modules",
        "options_var": "rdma_roce_module_options",
        "sysfs_root": str(sim.sysfs),
    }
    return dict(base, **extra)


def run(a, capsys, check_mode=False):
    return call_module(kernel_modules, a, capsys, check_mode=check_mode)


def loaded(sim):
    return set(json.loads((sim.tmp / "run" / "modules.json").read_text()))


def test_loads_what_is_not_loaded_with_the_options_written_first_and_a_second_run_changes_nothing(sim, capsys):
    before = loaded(sim)
    assert "ib_uverbs" in before and "rdma_ucm" not in before and "overlay" not in before
    a = args(sim, options={"overlay": {"redirect_dir": True, "redirect_max": 512}})
    res = run(a, capsys)
    assert res["changed"] and res["loaded"] == ["rdma_ucm", "overlay"] and res["options_changed"]
    assert {"rdma_ucm", "rdma_cm", "overlay"} <= loaded(sim)
    assert (sim.tmp / "etc" / "modules-load.d" / "rackforge-rdma.conf").read_text().splitlines()[1:] == MODULES
    options = (sim.tmp / "etc" / "modprobe.d" / "rackforge-rdma.conf").read_text()
    assert options.splitlines()[-1] == "options overlay redirect_dir=1 redirect_max=512"
    # the simulated kernel took the options from modprobe.d at load, as the real one does
    params = sim.sysfs / "module" / "overlay" / "parameters"
    assert (params / "redirect_dir").read_text().strip() == "1" and (params / "redirect_max").read_text().strip() == "512"
    again = run(a, capsys)
    assert not again["changed"] and again["loaded"] == [] and again["changed_files"] == [] and not again["options_changed"]


@pytest.mark.parametrize(
    "options, message",
    [
        (
            {"ib_uverbs": {"disable_raw_qp": 0}},
            "rdma_roce_module_options.ib_uverbs: unknown parameter(s) disable_raw_qp; ib_uverbs has no parameters at all (modinfo -p)",
        ),
        (
            {"ib_core": {"netns_mod": 0}},
            "rdma_roce_module_options.ib_core: unknown parameter(s) netns_mod; ib_core has send_queue_size, recv_queue_size, netns_mode, force_mr",
        ),
        ({"mlx5_cor": {"prof_sel": 2}}, "rdma_roce_module_options.mlx5_cor: module mlx5_cor not found on this node (modinfo: ERROR"),
    ],
)
def test_an_option_the_installed_module_does_not_take_fails_before_any_change(sim, capsys, options, message):
    before = loaded(sim)
    res = run(args(sim, options=options), capsys)
    assert res["failed"] and message in res["msg"] and "Nothing was changed" in res["msg"]
    assert loaded(sim) == before
    assert not list((sim.tmp / "etc" / "modules-load.d").iterdir()) and not list((sim.tmp / "etc" / "modprobe.d").iterdir())


def test_a_module_the_kernel_does_not_have_is_named_with_its_variable_and_nothing_changes(sim, capsys):
    before = loaded(sim)
    res = run(args(sim, modules=["overlay", "br_netfiltr"], modules_var="container_runtime_kernel_modules"), capsys)
    assert res["failed"] and "container_runtime_kernel_modules: this kernel has no module br_netfiltr" in res["msg"]
    assert loaded(sim) == before and not list((sim.tmp / "etc" / "modules-load.d").iterdir())


def test_check_mode_and_state_check_change_nothing(sim, capsys):
    before = loaded(sim)
    a = args(sim, options={"ib_core": {"recv_queue_size": 1024}})
    res = run(a, capsys, check_mode=True)
    assert res["changed"] and res["loaded"] == ["rdma_ucm", "overlay"] and len(res["changed_files"]) == 2
    assert [d["after_header"] for d in res["diff"]] == [a["load_file"], a["options_file"]]
    checked = run(dict(a, state="check"), capsys)
    assert not checked["changed"] and checked["loaded"] == ["rdma_ucm", "overlay"]
    assert loaded(sim) == before and not list((sim.tmp / "etc" / "modprobe.d").iterdir())


def test_options_taken_away_remove_the_options_file(sim, capsys):
    a = args(sim, options={"ib_core": {"recv_queue_size": 1024}})
    run(a, capsys)
    res = run(dict(a, options={}), capsys)
    assert res["changed"] and res["changed_files"] == [a["options_file"]] and res["options_changed"]
    assert not (sim.tmp / "etc" / "modprobe.d" / "rackforge-rdma.conf").exists()


def test_the_pure_rules():
    assert kmods.parse_params("send_queue_size:Size of send queue (int)\nforce_mr:Force (bool)\n") == ["send_queue_size", "force_mr"]
    assert kmods.render_value(False) == "0" and kmods.render_value(7) == "7"
    assert kmods.plan(["br-netfilter", "overlay", "overlay"], {"br_netfilter"}, {"overlay": True}, "v") == ["overlay"]
    with pytest.raises(kmods.KmodError, match="v: this kernel has no module nope"):
        kmods.plan(["nope"], set(), {"nope": False}, "v")
