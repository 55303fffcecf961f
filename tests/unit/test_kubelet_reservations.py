"""The kubelet's reservations: quantities, the sizing rule on the node classes rackforge targets
(512 GB-2 TB HGX servers) and the lab, the operator's maps checked before any change, the
drop-in document, and the lab kubelet (lab/k8sim) loading that drop-in the way the real one does."""

from __future__ import annotations

import json

import pytest
import yaml
from ansible.module_utils.rackforge import kubelet as kr
from ansible.module_utils.testing import patch_module_args

GIB, MIB = kr.GIB, kr.MIB


@pytest.mark.parametrize(
    ("text", "value"),
    [("2Gi", 2 * GIB), ("1500Mi", 1500 * MIB), ("500m", 0.5), ("2", 2), ("1.5G", 1.5e9), ("100k", 1e5), ("4Ti", 4 * 1024 * GIB)],
)
def test_quantities(text, value):
    assert kr.parse_quantity(text) == value


@pytest.mark.parametrize("text", ["2GB", "1 Gi", "-1Gi", "Gi", "1e3", "", "2gi"])
def test_what_is_not_a_quantity(text):
    with pytest.raises(kr.QuantityError):
        kr.parse_quantity(text)


@pytest.mark.parametrize(("cpus", "millis"), [(1, 60), (2, 70), (4, 80), (8, 90), (64, 230), (224, 630)])
def test_cpu_tiers(cpus, millis):
    # 6 % of the first core, 1 % of the second, 0.5 % of the next two, 0.25 % above four
    assert kr.cpu_tiers_millicores(cpus) == millis


def test_a_2_tb_hgx_node_keeps_almost_all_of_its_memory_for_pods():
    mem = 2015 * GIB + 123 * MIB  # MemTotal of a 2 TiB server (firmware and the kernel keep some)
    plan, problems = kr.plan(mem, 224, "auto", "auto", "auto")
    assert problems == []
    assert plan["systemReserved"] == {"cpu": "630m", "memory": "16384Mi"}  # 1 % capped at 16 GiB
    assert plan["kubeReserved"] == {"cpu": "630m", "memory": "1465Mi"}  # 255 Mi + 11 Mi x 110 pods
    assert plan["evictionHard"]["memory.available"] == "8192Mi"  # 0.5 % capped at 8 GiB
    # the disk thresholds are written out: setting evictionHard at all drops the kubelet's defaults
    assert plan["evictionHard"]["nodefs.available"] == "10%" and plan["evictionHard"]["imagefs.available"] == "15%"
    assert plan["reserved"]["memory"] == (16384 + 1465 + 8192) * MIB
    assert plan["allocatable"]["memory"] == mem - plan["reserved"]["memory"]
    assert plan["allocatable"]["cpu"] == 224 - 1.26


def test_a_512_gb_node_and_the_lab_class_machine():
    plan, _ = kr.plan(503 * GIB, 128, "auto", "auto", "auto")
    assert plan["systemReserved"]["memory"] == "5150Mi" and plan["evictionHard"]["memory.available"] == "2575Mi"
    plan, _ = kr.plan(23 * GIB + 500 * MIB, 2, "auto", "auto", "auto")
    assert plan["systemReserved"] == {"cpu": "70m", "memory": "1024Mi"}  # the 1 GiB floor
    assert plan["evictionHard"]["memory.available"] == "500Mi"  # the 500 MiB floor


def test_sizing_uses_whole_gib_so_memtotal_jitter_rewrites_nothing():
    a, _ = kr.plan(2015 * GIB + 10 * MIB, 224, "auto", "auto", "auto")
    b, _ = kr.plan(2015 * GIB + 900 * MIB, 224, "auto", "auto", "auto")
    assert kr.config_document(a, "x") == kr.config_document(b, "x")


def test_operator_maps_replace_auto_and_eviction_keeps_the_disk_defaults():
    plan, problems = kr.plan(1024 * GIB, 128, {"memory": "32Gi", "cpu": "2"}, {}, {"memory.available": "5%"}, prefix="kubernetes_node_")
    assert problems == []
    assert plan["systemReserved"] == {"memory": "32Gi", "cpu": "2"} and plan["kubeReserved"] == {}
    assert plan["evictionHard"] == dict(kr.KUBELET_DEFAULT_EVICTION, **{"memory.available": "5%"})
    assert plan["allocatable"]["memory"] == int(1024 * GIB - 32 * GIB - 0.05 * 1024 * GIB)
    assert plan["allocatable"]["cpu"] == 126
    doc = yaml.safe_load(kr.config_document(plan, "header"))
    assert doc == {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "systemReserved": {"cpu": "2", "memory": "32Gi"},
        "evictionHard": plan["evictionHard"],
    }  # the empty kubeReserved is left out: the kubelet keeps its own default


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (
            ({"memroy": "1Gi"}, "auto", "auto"),
            "kubernetes_node_system_reserved: 'memroy' is not one of cpu, memory, ephemeral-storage, pid",
        ),
        (("auto", {"memory": "2GB"}, "auto"), "kubernetes_node_kube_reserved.memory: '2GB' is not a Kubernetes quantity"),
        (("auto", {"memory": "0"}, "auto"), "kubernetes_node_kube_reserved.memory: 0 reserves nothing"),
        (("auto", "auto", {"memory.avail": "1Gi"}), "kubernetes_node_eviction_hard: 'memory.avail' is not one of memory.available"),
        (("auto", "auto", {"nodefs.available": "120%"}), "kubernetes_node_eviction_hard.nodefs.available: 120% is not a percentage"),
        (("some", "auto", "auto"), "kubernetes_node_system_reserved: 'some' is neither 'auto' nor a map"),
        (
            ({"memory": "63Gi"}, "auto", "auto"),
            "kubernetes_node_system_reserved, kubernetes_node_kube_reserved and kubernetes_node_eviction_hard reserve 64.9 GiB"
            " of this node's 64.0 GiB of memory: nothing is left for pods",
        ),
        (({"cpu": "16"}, {"cpu": "16"}, "auto"), "reserve 32 CPUs of this node's 32: nothing is left for pods"),
    ],
)
def test_bad_maps_and_reservations_the_node_cannot_satisfy(args, needle):
    plan, problems = kr.plan(64 * GIB, 32, *args, prefix="kubernetes_node_")
    assert plan is None
    assert any(needle in p for p in problems), problems


def write_proc(tmp_path, mem_kb=2113472512, cpus=224):
    (tmp_path / "meminfo").write_text("MemTotal:       %d kB\nMemFree:        1000 kB\n" % mem_kb)
    (tmp_path / "cpuinfo").write_text("".join("processor\t: %d\nmodel name\t: x\n\n" % i for i in range(cpus)))
    return tmp_path


def run_module(capsys, **args):
    import kubelet_reservation_facts

    with patch_module_args(args), pytest.raises(SystemExit):
        kubelet_reservation_facts.main()
    return json.loads(capsys.readouterr().out)


def test_module_publishes_the_drop_in_and_the_numbers(tmp_path, capsys):
    res = run_module(capsys, proc_root=str(write_proc(tmp_path)))
    fact = res["ansible_facts"]["rackforge_kubelet_reservations"]
    assert not res["changed"]
    assert fact["capacity"] == {"memory": 2113472512 * 1024, "cpu": 224}
    doc = yaml.safe_load(fact["document"])
    assert doc["kind"] == "KubeletConfiguration" and doc["systemReserved"] == {"cpu": "630m", "memory": "16384Mi"}
    assert "sized from 2015 GiB of memory and 224 CPUs" in fact["document"]


def test_module_refuses_before_any_change_naming_the_variable(tmp_path, capsys):
    res = run_module(capsys, proc_root=str(write_proc(tmp_path, mem_kb=16 * 1024 * 1024, cpus=8)), system_reserved={"memory": "20Gi"})
    assert res["failed"] and "kubernetes_node_system_reserved" in res["msg"] and res["msg"].endswith("Nothing was changed.")


def test_module_says_what_it_could_not_read(tmp_path, capsys):
    (tmp_path / "meminfo").write_text("MemFree: 1 kB\n")
    (tmp_path / "cpuinfo").write_text("processor : 0\n")
    res = run_module(capsys, proc_root=str(tmp_path))
    assert res["failed"] and "MemTotal" in res["msg"]


# --------------------------------------------------------------------- the lab's kubelet (k8sim; fixture in tests/conftest.py)
def test_lab_kubelet_loads_the_drop_in_and_reports_upstreams_allocatable(tmp_path, k8sim_kubelet):
    plan, _ = kr.plan(2015 * GIB, 224, "auto", "auto", "auto")
    conf_dir = tmp_path / "kubelet.conf.d"
    conf_dir.mkdir()
    (conf_dir / "50-rackforge-reservations.conf").write_text(kr.config_document(plan, "test"))
    main = tmp_path / "config.yaml"
    main.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard: {nodefs.available: 20%}\n")
    cfg, paths = k8sim_kubelet.load_config(["--config=%s" % main, "--config-dir=%s" % conf_dir])
    assert paths == [str(main), str(conf_dir / "50-rackforge-reservations.conf")]
    assert cfg["evictionHard"]["nodefs.available"] == "10%"  # the drop-in, read after --config, wins key by key
    capacity, allocatable = k8sim_kubelet.node_resources(cfg, "MemTotal: %d kB\n" % (2015 * 1024 * 1024), 224)
    assert capacity == {"cpu": "224", "memory": "%dKi" % (2015 * 1024 * 1024), "pods": "110"}
    assert allocatable["memory"] == "%dKi" % ((2015 * GIB - plan["reserved"]["memory"]) // 1024)
    assert allocatable["cpu"] == "222740m"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("kubeReserved: {gpu: 1}", 'cannot reserve "gpu" resource'),
        ("evictionHard: {memory.free: 1Gi}", "unsupported eviction signal memory.free"),
        ("systemReserved: {memory: 2GB}", "quantities must match"),
    ],
)
def test_lab_kubelet_refuses_what_the_real_one_refuses(tmp_path, k8sim_kubelet, text, needle):
    (tmp_path / "10-x.conf").write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n%s\n" % text)
    with pytest.raises(Exception, match=needle):
        k8sim_kubelet.load_config(["--config-dir", str(tmp_path)])


def test_lab_kubelet_needs_apiversion_and_kind_in_every_drop_in(tmp_path, k8sim_kubelet):
    (tmp_path / "10-x.conf").write_text("systemReserved: {memory: 1Gi}\n")
    (tmp_path / "ignored.yaml").write_text("not: read\n")  # only *.conf files are drop-ins
    with pytest.raises(Exception, match="apiVersion/kind"):
        k8sim_kubelet.load_config(["--config-dir", str(tmp_path)])
