"""The product never names the lab: roles, playbooks, modules, plugins and the configuration they ship
know nothing of lab/, its simulator or its inventory; the lab adapts to the product through
inventory data (lab/inventory_vars), never a branch in product code."""

from __future__ import annotations

import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]

# what ships to operators and AWX (the lab, tests, bench and scripts are not the product)
PRODUCT = (
    "site.yml",
    "roles",
    "playbooks",
    "library",
    "module_utils",
    "action_plugins",
    "filter_plugins",
    "awx",
    "inventories/example",
    "ee",
    "execution-environment.yml",
)
# Role READMEs are not scanned: they say what is proven where (house style), which names the lab
# as evidence, not as behaviour. Their variable tables come from meta/argument_specs.yml, which is.
SKIPPED_NAMES = {"README.md"}
NAMES_THE_LAB = re.compile(
    r"\blab\b"  # the word, any case ("Lab", "LAB"); not "label", "collaborate"
    r"|\blabs\b"
    r"|hwsim|k8sim|labcore|lab\.py"  # the simulator, the Kubernetes stand-ins, the lab's code
    r"|rackforge_lab"  # the lab inventory's variables
    r"|10\.89\.77\.",  # the lab network
    re.IGNORECASE,
)
# No allow-list: nothing in the product uses these words for anything else today ("LABEL",
# "labels" are not matched). Add one, with its reason, only for a line where a match means
# something other than the lab.


def mentions(text):
    """[(line number, line)] of the lines that name the lab."""
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if NAMES_THE_LAB.search(line)]


def product_files():
    for entry in PRODUCT:
        path = ROOT / entry
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for p in candidates:
            if p.name in SKIPPED_NAMES or "__pycache__" in p.parts or p.suffix == ".pyc":
                continue
            yield p


def test_the_matcher_finds_the_lab_and_nothing_else():
    named = [
        "the lab points it at the simulator",
        "# Lab only",
        "argv: [python3, lab/lab.py, reboot]",
        "when: rackforge_lab | default(false)",
        "/usr/local/sbin/hwsim state",
        "kubectl k8sim-add-pod",
        "api: 10.89.77.10:6443",
    ]
    for text in named:
        assert mentions(text), text
    for text in ["LABEL org.opencontainers.image.title=x", "kubernetes_node_labels: {}", "collaborate", "slab allocator", "label: x"]:
        assert not mentions(text), text


def test_no_product_file_names_the_lab():
    files = list(product_files())
    assert any(p.suffix == ".py" for p in files) and any(p.name == "argument_specs.yml" for p in files)  # the scan reads the product
    found = []
    for p in files:
        rel = p.relative_to(ROOT).as_posix()
        try:
            text = p.read_text()
        except UnicodeDecodeError:
            continue  # binary files carry no prose
        found += ["%s:%d: %s" % (rel, n, line) for n, line in mentions(text)]
    assert not found, "product files that name the lab (reword generically, or move the knowledge into lab/):\n" + "\n".join(found)


def tasks_of(items):
    for task in items or []:
        yield task
        for key in ("block", "rescue", "always"):
            yield from tasks_of(task.get(key))


def test_the_upgrade_reboots_only_with_ansible_builtin_reboot():
    plays = yaml.safe_load((ROOT / "playbooks" / "upgrade_gpu_driver.yml").read_text())
    tasks = [t for play in plays for t in tasks_of(play.get("tasks"))]
    reboots = [t for t in tasks if "ansible.builtin.reboot" in t]
    assert len(reboots) == 1, [t.get("name") for t in reboots]
    args = reboots[0]["ansible.builtin.reboot"]
    # the proof of the reboot is a setting with the module's own default, not a branch
    assert args.get("boot_time_command") == "{{ upgrade_boot_time_command | default(omit) }}"
    assert "when" not in reboots[0] or "method" not in str(reboots[0]["when"])
    for task in tasks:  # nothing else restarts a node or waits for one on the side
        assert "ansible.builtin.wait_for_connection" not in task, task.get("name")
        assert not ("reboot" in str(task.get("ansible.builtin.command", "")) and task.get("delegate_to") == "localhost"), task.get("name")


def test_the_lab_inventory_sets_only_settings_the_upgrade_reads():
    lab_vars = yaml.safe_load((ROOT / "lab" / "inventory_vars" / "rackforge.yml").read_text())
    playbook = (ROOT / "playbooks" / "upgrade_gpu_driver.yml").read_text()
    upgrade = {k: v for k, v in lab_vars.items() if k.startswith("upgrade_")}
    assert "upgrade_reboot_method" not in upgrade
    assert upgrade.get("upgrade_boot_time_command")  # a container's boot_id is the host's: the lab says what changes
    for key in upgrade:
        assert re.search(r"\b%s\b" % key, playbook), "%s is set by the lab but the upgrade playbook never reads it" % key
