"""kubernetes_objects (the model share's PersistentVolume and claim on the control plane): the
manifest written where it differs and applied every run, changed only when kubectl created or
configured something; check mode asks kubectl which objects are missing. kubectl here is a fake
that answers as kubectl apply/get print (`<kind>/<name> created|configured|unchanged`)."""

from __future__ import annotations

import pathlib
import sys

import kubernetes_objects
import pytest
import yaml
from module_helper import call_module

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "filter_plugins"))
from storage import model_share_volumes  # noqa: E402  (filter_plugins/storage.py)

OBJECTS = model_share_volumes("models", "inference", "10.0.0.5", "/export/models", 1024, ["vers=4.2", "ro", "hard", "_netdev"])


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """A fake kubectl over a dict of objects: apply reads the manifest as YAML, as kubectl does."""
    store, calls = {}, []

    def run(self, argv, environ_update=None, **kw):
        calls.append(argv)
        args = argv[3:]  # after kubectl --kubeconfig FILE
        if args[0] == "apply":
            lines = []
            for o in (d for d in yaml.safe_load_all(pathlib.Path(args[2]).read_text()) if d):
                key = "%s/%s" % (o["kind"].lower(), o["metadata"]["name"])
                lines.append("%s %s" % (key, "created" if key not in store else ("unchanged" if store[key] == o else "configured")))
                store[key] = o
            return 0, "\n".join(lines) + "\n", ""
        if args[0] == "get":
            key = "%s/%s" % (args[1], args[2])
            return 0, (key + "\n") if key in store else "", ""
        raise AssertionError(argv)

    monkeypatch.setattr(kubernetes_objects.AnsibleModule, "run_command", run)
    monkeypatch.setattr(
        kubernetes_objects.AnsibleModule, "get_bin_path", lambda self, name, required=False, opt_dirs=None: "/usr/bin/" + name
    )
    return store, calls, {"objects": OBJECTS, "dest": str(tmp_path / "model-storage.yml"), "owner": "roles/model_storage"}


def test_check_mode_then_apply_then_no_op_then_a_deleted_object_is_put_back(cluster, capsys):
    store, calls, args = cluster
    dry = call_module(kubernetes_objects, args, capsys, check_mode=True)
    assert dry["changed"] and dry["missing"] == ["namespace/inference", "persistentvolume/models-inference", "persistentvolumeclaim/models"]
    assert not pathlib.Path(args["dest"]).exists() and not any(c[3] == "apply" for c in calls)
    first = call_module(kubernetes_objects, args, capsys)
    assert (
        first["changed"] and first["file_changed"] and len(first["applied"]) == 3 and all(a.endswith(" created") for a in first["applied"])
    )
    assert [d for d in yaml.safe_load_all(pathlib.Path(args["dest"]).read_text()) if d] == OBJECTS
    again = call_module(kubernetes_objects, args, capsys)
    assert not again["changed"] and not again["file_changed"]
    assert call_module(kubernetes_objects, args, capsys, check_mode=True)["changed"] is False
    del store["persistentvolumeclaim/models"]  # deleted by hand
    back = call_module(kubernetes_objects, args, capsys)
    assert back["changed"] and "persistentvolumeclaim/models created" in back["applied"] and not back["file_changed"]


def test_an_object_without_a_name_is_refused_before_anything_and_a_refused_apply_carries_kubectl_s_words(cluster, capsys, monkeypatch):
    _store, calls, args = cluster
    bad = call_module(kubernetes_objects, dict(args, objects=[{"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {}}]), capsys)
    assert bad["failed"] and "objects[0]: needs metadata.name" in bad["msg"] and calls == []
    assert not pathlib.Path(args["dest"]).exists()
    refusal = 'The PersistentVolume "models-inference" is invalid: spec.persistentvolumesource: Forbidden: is immutable after creation'
    monkeypatch.setattr(kubernetes_objects.AnsibleModule, "run_command", lambda self, argv, environ_update=None, **kw: (1, "", refusal))
    out = call_module(kubernetes_objects, args, capsys)
    assert out["failed"] and out["rc"] == 1 and out["stderr"] == refusal and "is immutable" in out["msg"]


def test_the_claim_is_the_one_the_seed_s_deployment_mounts():
    """examples/inference mounts the claim `models` in `inference`: model_storage's defaults."""
    defaults = yaml.safe_load((ROOT / "roles" / "model_storage" / "defaults" / "main.yml").read_text())
    deployment = next(
        d for d in yaml.safe_load_all((ROOT / "examples" / "inference" / "deployment.yaml").read_text()) if d["kind"] == "Deployment"
    )
    volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "models")
    assert volume["persistentVolumeClaim"]["claimName"] == defaults["model_storage_pvc_name"]
    assert deployment["metadata"]["namespace"] == defaults["model_storage_namespace"]
    namespace, pv, pvc = model_share_volumes(
        defaults["model_storage_pvc_name"],
        defaults["model_storage_namespace"],
        "10.0.0.5",
        "/models",
        defaults["model_storage_capacity_gi"],
        [],
    )
    assert namespace == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "inference"}}
    assert (pvc["metadata"]["namespace"], pvc["metadata"]["name"], pvc["spec"]["volumeName"]) == (
        "inference",
        "models",
        pv["metadata"]["name"],
    )
