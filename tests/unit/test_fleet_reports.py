"""The fleet report as an operator reads it (module_utils/rackforge/fleet.py): a remedy for every check
the project can report, the HTML and Markdown reports, escaping, and fleet.json against
docs/fleet-schema.json. The verdict and state builders are test_fleet.py's."""

from __future__ import annotations

import ast
import copy
import json
import subprocess
import sys

import jsonschema
import pytest
import yaml
from ansible.module_utils.rackforge import fleet, health
from test_fleet import (
    ROOT,
    SCHEMA,
    T0,
    VALIDATOR,
    at,
    first_state,
    ibstat,
    nvlink_status,
    result,
    rich_state,
    run,
    valid,
    verdict,
)

# ----------------------------------------------------------------------------- remedies
FINDING_HELPERS = {"finding", "_finding"}
NOT_RUN_HELPERS = {"not_run", "health_not_run", "cannot", "read_or_cannot"}


def _strings(node, tables):
    """String constants an expression can take: "a", "a" if x else "b", TABLE[key] of a module dict."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):
        body, orelse = _strings(node.body, tables), _strings(node.orelse, tables)
        return None if body is None or orelse is None else body + orelse
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in tables:
        return tables[node.value.id]
    return None


def check_names_in_source():
    """Every check name the health modules, health.py and the roles' tasks can report, and the
    calls whose check name this could not resolve (a form to teach it)."""
    names, unresolved = set(), []
    for path in [*sorted((ROOT / "module_utils" / "rackforge").glob("*.py")), *sorted((ROOT / "library").glob("*.py"))]:
        tree = ast.parse(path.read_text())
        tables = {  # module-level {key: "check"} dicts
            t.id: [v.value for v in node.value.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
            for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        params = {a.arg for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.Lambda)) for a in node.args.args}
        assigned = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name) and _strings(node.value, tables):
                        assigned.setdefault(t.id, []).extend(_strings(node.value, tables))
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values):
                    if isinstance(key, ast.Constant) and key.value == "check":
                        names.update(_strings(value, tables) or [])
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            func = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if func not in FINDING_HELPERS | NOT_RUN_HELPERS:
                continue
            arg = node.args[0]
            found = _strings(arg, tables)
            if found is None and isinstance(arg, ast.Name) and arg.id in assigned:
                found = assigned[arg.id]
            if found is None:
                # a helper passing its own parameter on (cannot(check, ...)), or not_run's own "<check>_not_run"
                if not ((isinstance(arg, ast.Name) and arg.id in params) or isinstance(arg, ast.BinOp)):
                    unresolved.append("%s:%d %s" % (path.name, node.lineno, ast.unparse(arg)))
                continue
            names.update(n + "_not_run" if func in NOT_RUN_HELPERS else n for n in found)

    def walk_yaml(value):
        if isinstance(value, dict):
            if isinstance(value.get("check"), str) and "{{" not in value["check"]:
                names.add(value["check"])
            for v in value.values():
                walk_yaml(v)
        elif isinstance(value, list):
            for v in value:
                walk_yaml(v)

    for path in (ROOT / "roles").glob("*/tasks/*.yml"):
        walk_yaml(yaml.safe_load(path.read_text()))
    return names, unresolved


def test_every_check_the_project_can_report_has_a_remedy():
    names, unresolved = check_names_in_source()
    assert not unresolved, "check names this test cannot read (teach check_names_in_source): %s" % unresolved
    # the search itself works: it finds the checks this report is known to carry
    assert {
        "driver",
        "gpu_count",
        "nvlink_inactive",
        "fabric",
        "rdma_port_state",
        "pfc",
        "pause_storm",
        "pfc_not_run",
        "rdma_not_run",
    } <= names
    missing = sorted(n for n in names if n not in fleet.REMEDIES)
    assert not missing, "checks without a remedy in fleet.REMEDIES: %s" % missing
    unused = sorted(n for n in fleet.REMEDIES if n not in names)
    assert not unused, "remedies for checks nothing reports (renamed or gone?): %s" % unused
    assert all(len(text) > 30 for text in fleet.REMEDIES.values())


def test_remedies_follow_the_check_name():
    nvlink = health.evaluate_nvlink(nvlink_status({5: [3]}), 18, 26.562)[0]
    assert nvlink["check"] == "nvlink_inactive" and "reseat / RMA the GPU baseboard" in fleet.remedy(nvlink)
    down = health.evaluate_rdma(ibstat(down=[1]), {}, {"mlx5_1": "ens1np0"}, {"rate": 400})[0][0]
    assert down["check"] == "rdma_port_state" and "cable / transceiver and the switch port" in fleet.remedy(down)
    # a check that could not run and has no entry of its own: the tool named from its evidence
    other = health.not_run("gpu_clocks", "nvidia-smi", "nvidia-smi failed", {"command": "/usr/bin/nvidia-smi -q -d CLOCK", "rc": 9})
    assert other["check"] not in fleet.REMEDIES
    assert fleet.remedy(other) == fleet.NOT_RUN_REMEDY % "nvidia-smi"
    assert "no_such_check" in fleet.remedy({"check": "no_such_check", "message": "x"})


# ----------------------------------------------------------------------------- rendering
def test_the_html_report_shows_what_an_operator_acts_on():
    report = valid(fleet.build_report(rich_state(), at(30), 24))
    page = fleet.render_html(report)
    assert '<li class="s-unhealthy" id="count-unhealthy"><span class="n">2</span>unhealthy</li>' in page
    for status, count in (("not_checked", 1), ("stale", 1), ("removed", 1), ("healthy", 1)):
        assert 'id="count-%s"><span class="n">%d</span>' % (status, count) in page
    # the faulted node: its finding, the remedy, the NVLink grid cell and the port table row
    assert "GPU 5 (GPU-00000005): NVLink(s) 3 inactive: 17 of 18 expected links active" in page
    assert fleet.REMEDIES["nvlink_inactive"] in page and fleet.REMEDIES["rdma_port_state"] in page
    assert 'title="link 3 inactive"' in page and "17/18 active, inactive: 3" in page
    assert "<td>Down/Disabled</td>" in page and ">FAULT</td>" in page
    # the check that could not run, with its evidence, in its own section
    not_run = page[page.index('id="not-run"') : page.index('id="stale"')]
    assert "roce_gid_not_run" in not_run and "/usr/sbin/show_gids" in not_run and "cannot read /sys/class/infiniband" in not_run
    # stale, removed and unreached nodes with their times
    stale = page[page.index('id="stale"') : page.index('id="details"')]
    assert "old-node" in stale and "gone-node" in stale and "node4" in stale and T0 in stale
    # acceptance results where a node has them
    assert 'id="acceptance"' in page and "Fabric acceptance" in page and "1 finding(s)" in page
    assert '<tr class="ok"><td>0</td><td>node2</td><td>392.1</td><td>2.31</td><td>2.35</td><td>ok</td></tr>' in page
    assert '<tr class="bad"><td>0</td><td>node3</td><td>180.4</td><td>2.40</td><td>-</td><td>FAIL</td></tr>' in page
    assert '<td class="bad" title="GPU 1 to GPU 2">150</td>' in page and '<td class="ok" title="GPU 2 to GPU 1">370</td>' in page
    assert "all-reduce bus bandwidth 478.2 GB/s" in page
    # most severe first
    assert page.index('id="node-node2"') < page.index('id="node-node4"') < page.index('id="node-old-node"') < page.index('id="node-node1"')
    assert "<script" not in page.lower()  # readable without JavaScript


def test_the_report_escapes_everything_it_shows():
    evil = '<script>alert("x")</script>|`'
    bad = verdict(down=[0])
    bad["findings"][0]["message"] = evil
    bad["findings"][0]["component"] = "<b>"
    state = fleet.merge(fleet.empty_state(), run(0, limit=evil), {"n<1>": result(bad, profile="<img src=x>")}, ["n<1>"])
    report = valid(fleet.build_report(state, at(0), 24))
    page = fleet.render_html(report)
    assert "<script" not in page and "<img" not in page and "<b>" not in page.replace("<b>command</b>", "")
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page and 'id="node-n-1-"' in page
    md = fleet.render_markdown(report)
    assert "<script" not in md and "&lt;script&gt;" in md and "\\|" in md
    assert json.loads(fleet.render_json(report))["nodes"][0]["health"]["findings"][0]["message"] == evil


def test_the_markdown_report_lists_findings_remedies_and_checks_that_could_not_run():
    md = fleet.render_markdown(valid(fleet.build_report(rich_state(), at(30), 24)))
    assert "**2 unhealthy, 1 not checked, 1 stale, 1 removed, 1 healthy** (6 nodes)" in md
    table = [line for line in md.splitlines() if line.startswith("| ") and "status" not in line]
    assert [row.split("|")[1].strip() for row in table] == ["node2", "node3", "node4", "old-node", "gone-node", "node1"]
    assert "| node2 | UNHEALTHY | hgx-h100-8gpu | 550.127.05 | 8 | 143/144 | 7/8 |" in md
    assert "remedy: %s" % fleet.REMEDIES["nvlink_inactive"] in md
    assert "- **node3** `roce_gid_not_run` show_gids failed: exit status 1 (`/usr/sbin/show_gids` rc 1)" in md
    assert "- **gone-node** REMOVED: not in the inventory of the run at %s" % at(30) in md


@pytest.mark.parametrize("state", [fleet.empty_state(), first_state(), rich_state()], ids=["empty", "three", "rich"])
def test_generated_reports_match_the_schema(state):
    report = fleet.build_report(state, at(30), 24)
    valid(json.loads(fleet.render_json(report)))
    broken = copy.deepcopy(report)
    del broken["version"]
    assert not VALIDATOR.is_valid(broken)
    if report["nodes"]:
        broken = copy.deepcopy(report)
        broken["nodes"][0]["status"] = "fine"
        assert not VALIDATOR.is_valid(broken)


def test_the_schema_is_a_valid_draft_2020_12_schema_with_a_version():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["properties"]["version"] == {"const": fleet.REPORT_VERSION, "description": "Version of this format."}
    assert SCHEMA["properties"]["nodes"]["items"]["$ref"] == "#/$defs/node"
    assert SCHEMA["$defs"]["node"]["properties"]["status"]["enum"] == list(fleet.STATUSES)


def test_lab_summary_prints_the_fleet_from_the_report(tmp_path):
    path = tmp_path / "fleet.json"
    path.write_text(fleet.render_json(fleet.build_report(rich_state(), at(30), 24)))
    out = subprocess.run([sys.executable, str(ROOT / "lab" / "summary.py"), str(path)], capture_output=True, text=True, check=True).stdout
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ") and not line.startswith("   ")}
    assert "2 unhealthy, 1 not checked, 1 stale, 1 removed, 1 healthy (6 nodes)" in out
    assert "UNHEALTHY" in rows["node2"] and "143/144" in rows["node2"] and "7/8" in rows["node2"]
    assert "STALE" in rows["old-node"] and "REMOVED" in rows["gone-node"] and "NOT CHECKED" in rows["node4"]
    assert "node2: GPU 5 (GPU-00000005): NVLink(s) 3 inactive" in out and fleet.REMEDIES["nvlink_inactive"] in out
