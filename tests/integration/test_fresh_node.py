"""Check mode as a gate on a never-converged node: site.yml --check --diff runs to the end, lists
what it would change, and changes nothing. Then the runfile method on the same node."""

from __future__ import annotations

from conftest import ROOT, node_state, not_idempotent, on_node, playbook

RUNFILE = ["-e", "nvidia_driver_install_method=runfile"]


def fresh_playbook(tmp, *args):
    # the fresh node's report and scrape target stay out of the shared lab's reports/
    return playbook(
        "site.yml",
        *args,
        inventory=ROOT / "inventories" / "lab" / "fresh.yml",
        report_dir=tmp / "reports",
        prometheus_dir=tmp / "prometheus",
    )


def test_check_mode_on_a_fresh_node_lists_the_changes_and_makes_none(fresh_node, tmp_path):
    before = node_state(fresh_node)
    res = fresh_playbook(tmp_path, "--check", "--diff")
    assert res.returncode == 0, res.stdout[-3000:]
    recap = res.recap[fresh_node]
    assert recap["unreachable"] == 0 and recap["failed"] == 0 and recap["changed"] >= 10
    out = " ".join(res.stdout.split())
    # rackforge_packages' diff: the packages as they would be (the repository is not added yet)
    assert "+nvidia-driver-535-open 535.247.01 (held)" in res.stdout  # the open kernel module (the default)
    assert "+nvidia-fabricmanager-535 535.247.01 (held)" in res.stdout
    assert "+run /usr/local/sbin/mlnx_qos -i ens1np0 --trust dscp --pfc 0,0,0,1,0,0,0,0" in res.stdout
    assert "+net.ipv4.tcp_rmem = 4096 87380 134217728" in res.stdout
    assert "UNHEALTHY (check mode: the state before this run" in out
    assert node_state(fresh_node) == before


def test_runfile_checksum_mismatch_fails_naming_the_url_and_changes_nothing(fresh_node, tmp_path):
    before = node_state(fresh_node)
    res = fresh_playbook(tmp_path, *RUNFILE, "-e", "nvidia_driver_runfile_sha256=" + "0" * 64)
    assert res.returncode != 0 and res.recap[fresh_node]["failed"] == 1
    out = " ".join(res.stdout.split())
    assert "nvidia_driver_runfile_url http://10.89.77.2/vendor/runfile/NVIDIA-Linux-x86_64-535.247.01.run could not be fetched" in out
    assert "does not match nvidia_driver_runfile_sha256 " + "0" * 64 in out
    assert res.recap[fresh_node]["changed"] == 0 and node_state(fresh_node) == before


def test_runfile_install_on_a_fresh_node_then_skipped(fresh_node, tmp_path):
    first = fresh_playbook(tmp_path, *RUNFILE)
    assert first.returncode == 0, first.stdout[-3000:]
    assert on_node(fresh_node, "nvidia-smi", "-L").stdout.count("NVIDIA H100 80GB HBM3") == 8
    pkgs = on_node(fresh_node, "dpkg-query", "-W", "-f", "${Package} ${Version} ${Status}\\n").stdout
    assert "nvidia-driver-535" not in pkgs  # the driver came from the runfile
    # -m=kernel-open (a 535 runfile's default module is the proprietary one): out of tree, no P taint
    assert on_node(fresh_node, "cat", "/var/lib/hwsim/sys/module/nvidia/taint").stdout.strip() == "OE"
    assert "nvidia-fabricmanager-535 535.247.01-1 hold ok installed" in pkgs  # at the runfile's version, held
    again = fresh_playbook(tmp_path, *RUNFILE)
    assert again.returncode == 0 and again.recap[fresh_node]["changed"] == 0, not_idempotent(again)
    assert "TASK [nvidia_driver : Run the NVIDIA installer" in again.stdout and "skipping: [%s]" % fresh_node in again.stdout
