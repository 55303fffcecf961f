"""The settings engine (module_utils/rackforge/settings.py): types, rules, typos, and messages
that name only what is wrong."""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml
from ansible.module_utils.rackforge import settings as s

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLES = sorted(p.parent.parent.name for p in ROOT.glob("roles/*/meta/argument_specs.yml"))


def spec(role):
    return yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]


def rules(role):
    path = ROOT / "roles" / role / "meta" / "rules.yml"
    return yaml.safe_load(path.read_text())["rules"] if path.exists() else {}


def defaults(role):
    return yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()) or {}


@pytest.mark.parametrize(
    ("kind", "value", "ok"),
    [
        ("str", ["x"], False),  # Ansible's own role validation turns this into "['x']"
        ("str", {"a": 1}, False),
        ("str", True, False),
        ("str", 550, True),
        ("int", "3", True),
        ("int", "three", False),
        ("int", True, False),
        ("int", 3.5, False),
        ("float", "1.5", True),
        ("float", "fast", False),
        ("bool", "yes please", False),
        ("bool", "yes", True),
        ("list", "a,b", False),  # Ansible would split it on commas
        ("dict", "k=v", False),  # and parse this into a dict
        ("dict", [1], False),
    ],
)
def test_types_are_strict(kind, value, ok):
    problems, _ = s.check_types({"x_var": {"type": kind}}, {"x_var": value})
    assert (not problems) == ok, problems


def test_list_elements_and_choices():
    problems, coerced = s.check_types({"p": {"type": "list", "elements": "int"}}, {"p": ["1", 2]})
    assert not problems and coerced["p"] == [1, 2]
    problems, _ = s.check_types({"p": {"type": "list", "elements": "int"}}, {"p": [1, "x"]})
    assert [p["variable"] for p in problems] == ["p[1]"]
    problems, _ = s.check_types({"m": {"type": "str", "choices": ["a", "b"]}}, {"m": "c"})
    assert problems[0]["problem"] == "must be one of a, b"


def test_unknown_name_suggests_the_closest():
    known = ["rdma_roce_lossless_priority", "rdma_roce_dscp"]
    found = s.unknown_names(["rdma_roce_lossles_priority", "unrelated_var", "rdma_roce_dscp"], ("rdma_roce_",), known)
    assert [(p["variable"], p["problem"]) for p in found] == [
        ("rdma_roce_lossles_priority", "is not a variable of any rackforge role: did you mean rdma_roce_lossless_priority?")
    ]


RULE_CASES = [
    ({"min": 0}, -1, "must be >= 0"),
    ({"min": 1, "max": 7}, 8, "must be 1..7"),
    ({"min": 1280, "max": 9000, "allow": [0]}, 100, "must be 1280..9000 or 0"),
    ({"format": "version3"}, "550.127", "must be an exact X.Y.Z version"),
    ({"format": "cidr"}, "10.244.1.0/16", "has host bits set (the network is 10.244.0.0/16)"),
    ({"format": "ip"}, "eth0", "must be an IP address"),
    ({"format": "host"}, "nfs_1.lab", "must be an IP address or a host name"),
    ({"format": "host"}, "fd00::5::1", "must be an IP address"),
    ({"format": "host"}, "-nfs1", "must be an IP address or a host name"),
    ({"format": "sha256", "nonempty": True}, "", "must not be empty (a sha256 in 64 lowercase hex digits)"),
    ({"keys": {"format": "label_name"}}, {"bad label": "x"}, "must be a Prometheus label name"),
    ({"keys": {"format": "label_name"}}, {"__meta": "x"}, "not starting with __"),
    ({"type": "dict", "fields": {"a": {"type": "int"}}}, {"b": 1}, "takes only a (unknown: b)"),
    ({"items": {"type": "dict", "required": ["name"]}}, [{}], "needs name"),
    ({"unique": "name"}, [{"name": "a"}, {"name": "a"}], 'must not repeat "a"'),
    ({"key_of": "profiles"}, "nope", "must name an entry of profiles (one of a, b)"),
    ({"prefix_var": "branch"}, "550.127.05", 'must be a version of branch "535" (535.x.y)'),
    ({"min_version": "1.24.0"}, "1.23.9", "must be 1.24.0 or later"),
]


@pytest.mark.parametrize(("rule", "value", "needle"), RULE_CASES, ids=[str(c[0]) for c in RULE_CASES])
def test_rule_kinds(rule, value, needle):
    context = {"profiles": {"a": {}, "b": {}}, "branch": "535"}
    problems = s.check_value("v", value, rule, context)
    assert problems and needle in problems[0]["problem"], problems
    assert s.check_value("v", value, dict(rule, when={"gate": True}), dict(context, gate=False)) == []  # `when` gates it


def test_every_rule_file_names_declared_variables_and_valid_rule_kinds():
    declared = {name for role in ROLES for name in spec(role)}
    globals_ = {"rackforge_hw_profile", "rackforge_hardware_profiles"}
    for role in ROLES:
        for name, listed in rules(role).items():
            assert name in declared or name in globals_, "%s/meta/rules.yml: %s is declared by no argument spec" % (role, name)
            assert isinstance(listed, (dict, list)) and listed, name
            for rule in s.rule_list(listed):
                assert isinstance(rule, dict), name
                # a rule with an unknown format raises here instead of passing silently later
                s.check_value(name, "probe", rule, {})


def test_every_check_across_settings_is_well_formed():
    """meta/rules.yml `checks` (templated by the rackforge_settings action): each names a declared
    variable with its `that` and `problem`, or gives a `problems` expression; nothing else."""
    declared = {name for role in ROLES for name in spec(role)}
    seen = 0
    for role in ROLES:
        data = yaml.safe_load((ROOT / "roles" / role / "meta" / "rules.yml").read_text()) or {}
        assert set(data) <= {"rules", "checks"}, (role, set(data))
        for check in data.get("checks", []):
            seen += 1
            if "problems" in check:
                assert set(check) <= {"problems", "when", "variable"}, (role, check)
                assert "variable" not in check or check["variable"] in declared, (role, check["variable"])
            else:
                assert set(check) <= {"variable", "that", "problem", "when"} and {"variable", "that", "problem"} <= set(check), (
                    role,
                    check,
                )
                assert check["variable"] in declared, (role, check["variable"])
    assert seen >= 8


def test_every_default_satisfies_its_spec_and_rules():
    """A role's own defaults are valid (where they are not templates or required settings)."""
    for role in ROLES:
        values = {k: v for k, v in defaults(role).items() if not (isinstance(v, str) and "{{" in v)}
        problems, coerced = s.check_types(spec(role), values)
        assert not problems, (role, problems)
        context = dict(coerced)
        required_by_operator = {p["variable"] for p in s.check_rules(rules(role), coerced, context) if "must not be empty" in p["problem"]}
        others = [p for p in s.check_rules(rules(role), coerced, context) if p["variable"] not in required_by_operator]
        # what remains may only be the settings the operator must give (hosts, endpoints, CIDRs)
        assert all(p["variable"].split(".")[0] in spec(role) for p in others), others
        assert not [p for p in others if "must be set" not in p["problem"] and "must name" not in p["problem"]], (role, others)


def test_messages_name_only_the_wrong_variable():
    """Issue 24's rule: a message never mentions a setting that is fine."""
    for role in ROLES:
        good = {k: v for k, v in defaults(role).items() if not (isinstance(v, str) and "{{" in v)}
        for name, option in spec(role).items():
            if option.get("type") == "raw":  # any value passes a type check; the role's own check names it
                continue
            wrong = {"int": "not-a-number", "float": "not-a-number", "bool": "yes please", "list": {"a": 1}, "dict": [1]}.get(
                option.get("type", "str"), ["not", "a", "string"]
            )
            problems, _ = s.check_types(spec(role), dict(good, **{name: wrong}))
            text = " ".join(s.format_problems(problems))
            assert name in text, (role, name, text)
            others = [n for n in spec(role) if n != name and not name.startswith(n)]
            assert not [n for n in others if n in text], (role, name, text)


# values that break some rule; each rule is broken by the first of these it refuses
BREAKERS = (
    "",
    -1,
    0,
    10**9,
    "not valid!",
    "relative/path",
    "1.2.3.4.5",
    ["not valid!"],
    [""],
    [{"not": "a known field"}],
    [{"field": "DCGM_FI_DEV_X", "type": "gauge"}, {"field": "DCGM_FI_DEV_X", "type": "gauge"}],
    {"not valid!": "x"},
    {"x": {"not": "a known field"}},
    ["a", "a"],
)


def test_semantic_messages_name_only_the_wrong_variable():
    """Issue 24's rule for the semantic checks (meta/rules.yml): for every rule of every role, a
    value that breaks it is reported under that variable alone; no other setting, valid values
    included, appears in the message."""
    unbroken = []
    for role in ROLES:
        good = {k: v for k, v in defaults(role).items() if not (isinstance(v, str) and "{{" in v)}
        for name, rule in ((n, r) for n, listed in rules(role).items() for r in s.rule_list(listed)):
            context = dict(good)
            for var, want in (rule.get("when") or {}).items():  # make a conditional rule apply
                context[var] = want[0] if isinstance(want, list) else want
            bad = next((b for b in BREAKERS if s.check_value(name, b, rule, context)), None)
            if bad is None:
                unbroken.append("%s: %s" % (role, name))
                continue
            values = dict(context, **{name: bad})
            problems = s.check_rules(rules(role), values, values)
            mine = [p for p in problems if p["variable"] == name or p["variable"].startswith((name + "[", name + ".", name + " key"))]
            assert mine, (role, name, bad, problems)
            text = " ".join(s.format_problems(mine))
            referenced = {rule.get("key_of"), rule.get("prefix_var")}  # a rule naming its table says which
            others = [n for n in set(spec(role)) | set(rules(role)) if n != name and n not in referenced and not name.startswith(n)]
            assert not [n for n in others if re.search(r"\b%s\b" % re.escape(n), text)], (role, name, text)
    assert not unbroken, "rules no breaker value breaks (add one to BREAKERS): %s" % unbroken


def test_a_profile_may_carry_the_fabric_acceptance_floors_and_they_are_range_checked():
    """fabric_acceptance reads nccl_min_busbw_gbps and nvlink_pair_min_gbps from the profile: the
    profile check (closed fields) must take them, and refuse a value out of range by name."""
    example = ROOT / "inventories" / "example" / "group_vars" / "all" / "hardware_profiles.yml"
    profiles = yaml.safe_load(example.read_text())["rackforge_hardware_profiles"]
    h100 = dict(profiles["hgx-h100-8gpu"], nccl_min_busbw_gbps=400.0, nvlink_pair_min_gbps=300)
    values = {"rackforge_hardware_profiles": dict(profiles, **{"hgx-h100-8gpu": h100}), "rackforge_hw_profile": "hgx-h100-8gpu"}
    assert s.check_rules(rules("preflight"), values, values) == []
    bad = dict(values, rackforge_hardware_profiles=dict(profiles, **{"hgx-h100-8gpu": dict(h100, nvlink_pair_min_gbps=-5)}))
    problems = s.check_rules(rules("preflight"), bad, bad)
    assert [(p["variable"], p["problem"]) for p in problems] == [
        ('rackforge_hardware_profiles["hgx-h100-8gpu"].nvlink_pair_min_gbps', "must be 0..10000")
    ]


def test_a_rules_true_or_false_when_matches_however_the_variable_spells_it():
    """-e key=value gives strings ("true", "yes"); the tasks read them with | bool, so a rule's
    `when: {x: true}` must apply to them too (else a string switches the rule off)."""
    rule = {"regex": "^a$", "when": {"flag": True}}
    for spelled in (True, "true", "True", "yes", "on", "1"):
        assert s.check_value("v", "b", rule, {"flag": spelled}), spelled
    for spelled in (False, "false", "no", "0", "off", None, "maybe"):
        assert not s.check_value("v", "b", rule, {"flag": spelled}), spelled
    off = {"regex": "^a$", "when": {"flag": False}}
    assert s.check_value("v", "b", off, {"flag": "no"}) and not s.check_value("v", "b", off, {"flag": "yes"})
    assert s.check_value("v", "b", {"regex": "^a$", "when": {"mode": ["x", "y"]}}, {"mode": "y"})
