"""The NVIDIA CDI spec: the lab's SIMULATED `nvidia-ctk cdi generate` held to a real spec, the
staleness check (module_utils/rackforge/cdi.py) and the nvidia_cdi_spec module that keeps it."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import nvidia_cdi_spec
import nvidia_gpu_info
import pytest
import yaml
from ansible.module_utils.rackforge import cdi
from ansible.module_utils.testing import patch_module_args
from hwsim_helper import HWSIM, Sim

ROOT = pathlib.Path(__file__).resolve().parents[2]
REAL = yaml.safe_load((ROOT / "tests/fixtures/captured/nvidia-ctk-cdi-spec-t4-570.133.20.yaml").read_text())
DRIVER = "535.261.03"
LIBDIR = "usr/lib/x86_64-linux-gnu"
sys.path.insert(0, str(ROOT / "lab" / "hwsim"))
from hwsimlib import ctk_sim  # noqa: E402


def host_files(root, version=DRIVER, opticalflow=False):
    """What the lab's driver and toolkit packages install (lab/mirror/mirror_nvidia.py), under root."""
    files = [
        "%s/libcuda.so.%s" % (LIBDIR, version),
        "%s/libnvidia-ml.so.%s" % (LIBDIR, version),
        "%s/libnvidia-ml.so.1" % LIBDIR,
        "usr/bin/nvidia-smi",
        "usr/bin/nvidia-persistenced",
        "usr/bin/nvidia-cdi-hook",
        "lib/firmware/nvidia/%s/gsp_ga10x.bin" % version,
        "lib/firmware/nvidia/%s/gsp_tu10x.bin" % version,
        "run/nvidia-persistenced/socket",
        "dev/nvidiactl",
        "dev/nvidia-uvm",
        "dev/nvidia-uvm-tools",
        "dev/nvidia-modeset",
    ] + ["dev/nvidia%d" % i for i in range(8)]
    if opticalflow:
        files.append("%s/libnvidia-opticalflow.so.1" % LIBDIR)
    for rel in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """A Sim (the REAL nvidia-smi over the lab NVML) and a host root with the driver's files; the
    device nodes are plain files there, taken as char devices (a test never runs mknod)."""
    (tmp_path / "sim").mkdir()
    sim = Sim(tmp_path / "sim")
    root = tmp_path / "root"
    host_files(root)
    for key, value in sim.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(ctk_sim, "ROOT", str(root))
    monkeypatch.setattr(ctk_sim, "NVIDIA_SMI", str(sim.bin / "nvidia-smi"))
    monkeypatch.setattr(ctk_sim, "_is_char", lambda p: os.path.isfile(ctk_sim._host(p)))
    return sim, root


def by_depth(paths):
    return sorted(paths, key=lambda p: (p.count("/"), p))


def test_the_real_spec_is_ordered_as_the_simulator_orders():
    """The sorter rules (pkg/nvcdi/transform/sorter.go) hold on the real capture."""
    mounts = [m["hostPath"] for m in REAL["containerEdits"]["mounts"]]
    assert mounts == by_depth(mounts)
    nodes = [n["path"] for n in REAL["containerEdits"]["deviceNodes"]]
    assert nodes == by_depth(nodes)
    names = [d["name"] for d in REAL["devices"]]
    assert names == sorted(names) == ["0", "GPU-6cf00fa7-59ac-16f2-3e83-d24ccdc56f84", "all"]


def test_simulated_spec_has_the_real_specs_shape(lab):
    sim, _root = lab
    spec = ctk_sim.spec()
    assert list(spec) == ["cdiVersion", "kind", "devices", "containerEdits"]  # specs-go's struct order
    assert spec["kind"] == REAL["kind"] == "nvidia.com/gpu"
    assert spec["cdiVersion"] == "0.5.0"  # a name starting with a digit needs 0.5.0
    common, real = spec["containerEdits"], REAL["containerEdits"]
    assert sorted(common) == sorted(real) and common["env"] == real["env"] == ["NVIDIA_VISIBLE_DEVICES=void"]
    assert common["deviceNodes"] == real["deviceNodes"]
    # hooks: the real spec's, less what 1.17.3 does not have (enable-cuda-compat is 1.17.5+) and the
    # graphics links (the lab has no graphics libraries)
    real_hooks = [h for h in real["hooks"] if h["args"][1] != "enable-cuda-compat" and "gbm" not in " ".join(h["args"])]
    assert [json.dumps(h, sort_keys=True) for h in common["hooks"]] == [json.dumps(h, sort_keys=True) for h in real_hooks]
    real_opts = {m["hostPath"]: m["options"] for m in real["mounts"]}
    for m in common["mounts"]:
        assert m["containerPath"] == m["hostPath"]
        kind = "/run/nvidia-persistenced/socket" if m["hostPath"].endswith("socket") else "/usr/bin/nvidia-smi"
        assert m["options"] == real_opts[kind]
    paths = [m["hostPath"] for m in common["mounts"]]
    assert paths == by_depth(paths)
    assert "/%s/libcuda.so.%s" % (LIBDIR, DRIVER) in paths and "/lib/firmware/nvidia/%s/gsp_ga10x.bin" % DRIVER in paths
    assert "/%s/libnvidia-ml.so.1" % LIBDIR not in paths  # only the *.so.<driver version> files
    uuids = [g["uuid"] for g in json.loads(json.dumps(run_gpu_info(sim)))]
    names = [d["name"] for d in spec["devices"]]
    assert names == sorted([str(i) for i in range(8)] + uuids + ["all"])
    device0 = next(d for d in spec["devices"] if d["name"] == "0")
    assert device0["containerEdits"] == REAL["devices"][0]["containerEdits"] == {"deviceNodes": [{"path": "/dev/nvidia0"}]}
    everything = next(d for d in spec["devices"] if d["name"] == "all")
    assert [n["path"] for n in everything["containerEdits"]["deviceNodes"]] == ["/dev/nvidia%d" % i for i in range(8)]


def run_gpu_info(sim):
    res = subprocess.run(
        [str(sim.bin / "nvidia-smi"), "--query-gpu=uuid", "--format=csv,noheader"], check=False, capture_output=True, text=True, env=sim.env
    )
    return [{"uuid": u} for u in res.stdout.split()]


def ctk(sim, root, *args):
    env = dict(sim.env, HWSIM_CTK_ROOT=str(root), HWSIM_NVIDIA_SMI=str(sim.bin / "nvidia-smi"))
    return subprocess.run([sys.executable, str(HWSIM), "nvidia-ctk", *args], capture_output=True, text=True, env=env, check=False)


def test_generate_writes_compact_json_mode_0644(lab):
    sim, root = lab
    out = root / "var/run/cdi/nvidia.json"
    res = ctk(sim, root, "cdi", "generate", "--output=%s" % out)
    assert res.returncode == 0, res.stderr
    text = out.read_text()
    assert "\n" not in text and text.startswith('{"cdiVersion":"0.5.0","kind":"nvidia.com/gpu","devices":[')
    assert oct(out.stat().st_mode & 0o777) == "0o644"
    listing = ctk(sim, root, "cdi", "list")
    assert listing.stdout.splitlines()[0] == "nvidia.com/gpu=0" and listing.stdout.splitlines()[-1] == "nvidia.com/gpu=all"
    assert "Found 17 CDI devices" in listing.stderr


def test_a_missing_libcuda_is_the_real_tools_error(lab):
    sim, root = lab
    (root / LIBDIR / ("libcuda.so." + DRIVER)).unlink()
    res = ctk(sim, root, "cdi", "generate", "--output=%s" % (root / "var/run/cdi/nvidia.json"))
    assert res.returncode == 1
    assert "failed to locate libcuda.so.%s: pattern libcuda.so.%s not found" % (DRIVER, DRIVER) in res.stderr
    assert not (root / "var/run/cdi/nvidia.json").exists()


def test_no_driver_is_an_nvml_error(tmp_path):
    (tmp_path / "sim").mkdir()
    sim = Sim(tmp_path / "sim", driver=None)
    res = ctk(sim, tmp_path, "cdi", "generate", "--output=%s" % (tmp_path / "x.json"))
    assert res.returncode == 1 and "failed to initialize NVML" in res.stderr


def test_yaml_output_is_refused_as_not_simulated(lab):
    sim, root = lab
    res = ctk(sim, root, "cdi", "generate", "--output=%s" % (root / "nvidia.yaml"))
    assert res.returncode == 1 and "SIMULATED" in res.stderr


def test_link_order_varies_between_runs_as_in_1_17_3(lab):
    _sim, root = lab
    (root / LIBDIR / "libnvidia-opticalflow.so.1").write_text("x")
    orders = set()
    for _ in range(20):
        hook = next(h for h in ctk_sim.spec()["containerEdits"]["hooks"] if h["args"][1] == "create-symlinks")
        orders.add(tuple(hook["args"]))
    assert len(orders) == 2


# ---------------------------------------------------------------------------------- the check


def spec_for(root, gpus):
    """A spec as nvidia-ctk writes it, its host paths under root."""
    lib = str(root / "libcuda.so.1")
    pathlib.Path(lib).write_text("x")
    devices = [{"name": n, "containerEdits": {}} for g in gpus for n in (str(g["index"]), g["uuid"])] + [
        {"name": "all", "containerEdits": {}}
    ]
    return {
        "cdiVersion": "0.5.0",
        "kind": "nvidia.com/gpu",
        "devices": devices,
        "containerEdits": {"mounts": [{"hostPath": lib, "containerPath": lib, "options": ["ro"]}]},
    }


GPUS = [{"index": 0, "uuid": "GPU-a"}, {"index": 1, "uuid": "GPU-b"}]


def test_a_current_spec_has_no_finding(tmp_path):
    assert cdi.findings("/s.json", json.dumps(spec_for(tmp_path, GPUS)), GPUS, os.path.exists) == []


def test_a_missing_spec_a_missing_gpu_and_a_gone_file_are_findings(tmp_path):
    assert [f["check"] for f in cdi.findings("/s.json", None, GPUS, os.path.exists)] == ["cdi_spec"]
    spec = spec_for(tmp_path, GPUS[:1])
    found = cdi.findings("/s.json", json.dumps(spec), GPUS, os.path.exists)
    assert [(f["check"], f["component"]) for f in found] == [("cdi_spec", "GPU 1 (GPU-b)")]
    (tmp_path / "libcuda.so.1").unlink()
    stale = cdi.findings("/s.json", json.dumps(spec_for(tmp_path, GPUS)), GPUS, lambda p: False)
    assert [f["check"] for f in stale] == ["cdi_spec_stale"] and "libcuda.so.1 (mount)" in stale[0]["observed"]


def test_a_spec_that_does_not_parse_is_not_run(tmp_path):
    found = cdi.findings("/s.json", "---\ncdiVersion: 0.5.0\n", GPUS, os.path.exists)
    assert found[0]["check"] == "cdi_spec_not_run" and found[0]["not_run"]


def test_gpu_info_reports_a_stale_spec(tmp_path, monkeypatch, capsys):
    (tmp_path / "sim").mkdir()
    sim = Sim(tmp_path / "sim")
    for key, value in sim.env.items():
        monkeypatch.setenv(key, value)
    spec = tmp_path / "nvidia.json"
    uuids = [g["uuid"] for g in run_gpu_info(sim)]
    data = spec_for(tmp_path, [{"index": i, "uuid": u} for i, u in enumerate(uuids)])
    data["containerEdits"]["mounts"][0]["hostPath"] = "/usr/lib/x86_64-linux-gnu/libcuda.so.535.247.01-gone"
    spec.write_text(json.dumps(data))
    with patch_module_args({"cdi_spec": str(spec)}), pytest.raises(SystemExit):
        nvidia_gpu_info.main()
    res = json.loads(capsys.readouterr().out)
    assert [f["check"] for f in res["findings"]] == ["cdi_spec_stale"]


# ---------------------------------------------------------------------------------- the module


def run_spec_module(lab, monkeypatch, capsys, check=False, path=None):
    sim, root = lab
    wrapper = sim.bin / "nvidia-ctk"
    wrapper.write_text(
        '#!/bin/sh\nHWSIM_CTK_ROOT=%s HWSIM_NVIDIA_SMI=%s exec %s %s nvidia-ctk "$@"\n'
        % (root, sim.bin / "nvidia-smi", sys.executable, HWSIM)
    )
    wrapper.chmod(0o755)
    args = {
        "path": path or str(root / "var/run/cdi/nvidia.json"),
        "nvidia_ctk": str(wrapper),
        "_ansible_check_mode": check,
        "_ansible_diff": True,
    }
    with patch_module_args(args), pytest.raises(SystemExit):
        nvidia_cdi_spec.main()
    return json.loads(capsys.readouterr().out)


def test_module_writes_once_keeps_a_current_spec_and_rewrites_a_stale_one(lab, monkeypatch, capsys):
    sim, root = lab
    (root / LIBDIR / "libnvidia-opticalflow.so.1").write_text("x")  # two links: their order varies per run
    spec = root / "var/run/cdi/nvidia.json"
    checked = run_spec_module(lab, monkeypatch, capsys, check=True)
    assert checked["changed"] and not spec.exists(), checked
    first = run_spec_module(lab, monkeypatch, capsys)
    assert first["changed"] and spec.exists() and first["devices"][-1] == "all" and len(first["devices"]) == 17
    assert oct(spec.stat().st_mode & 0o777) == "0o644"
    for _ in range(8):  # a byte compare would report a change in all but 1 of 128 such series
        assert run_spec_module(lab, monkeypatch, capsys)["changed"] is False
    assert not [p for p in spec.parent.iterdir() if p.name != "nvidia.json"]  # no scratch left behind
    # the driver changed under the spec (a rollback to 535.247.01 and a reboot): its files are another version's
    (sim.tmp / "driver-version").write_text("535.247.01\n")
    sim.run("hwsim", "boot")
    host_files(root, version="535.247.01")
    for rel in ("%s/libcuda.so.%s" % (LIBDIR, DRIVER), "lib/firmware/nvidia/%s/gsp_ga10x.bin" % DRIVER):
        (root / rel).unlink()
    before = spec.read_text()
    again = run_spec_module(lab, monkeypatch, capsys, check=True)
    assert again["changed"] and spec.read_text() == before  # check mode writes nothing
    assert "libcuda.so.%s" % DRIVER in again["diff"]["before"] and "libcuda.so.535.247.01" in again["diff"]["after"]
    assert run_spec_module(lab, monkeypatch, capsys)["changed"] and "535.247.01" in spec.read_text()


def test_module_fails_with_the_tools_evidence(lab, monkeypatch, capsys):
    _sim, root = lab
    (root / LIBDIR / ("libcuda.so." + DRIVER)).unlink()
    res = run_spec_module(lab, monkeypatch, capsys)
    assert res["failed"] and res["rc"] == 1 and "libcuda.so" in res["stderr"]
    assert not (root / "var/run/cdi/nvidia.json").exists()


def test_module_refuses_a_yaml_path(lab, monkeypatch, capsys):
    res = run_spec_module(lab, monkeypatch, capsys, path="/var/run/cdi/nvidia.yaml")
    assert res["failed"] and "must end in .json" in res["msg"]
