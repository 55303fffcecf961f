"""Settings validation (pure): every role variable checked against its role's argument spec
(types, choices), against the role's semantic rules (meta/rules.yml: ranges, formats, shapes,
references) and for typos (a name with a role's prefix that no spec declares). Used by the
rackforge_settings action plugin before any change; no I/O here.

Each problem is one dict {"variable", "value", "problem"}: the message names only the variable
that is wrong, its value and what is allowed, never the settings that are fine.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import re

BOOL_TRUE = ("yes", "on", "1", "true", "y", "t")
BOOL_FALSE = ("no", "off", "0", "false", "n", "f")

# Named ranges (a rule's `range:`): one home for a range the modules check again when called
# alone (library/roce_qos.py, library/rdma_health.py): an 802.1p priority, a DSCP value.
RANGES = {"priority": (0, 7), "dscp": (0, 63)}


def _ranged(rule):
    """The rule with a named range spelled out as its min and max."""
    if "range" not in rule:
        return rule
    low, high = RANGES[rule["range"]]
    return dict(rule, min=low, max=high)


# formats a rule can ask for: (compiled pattern or checker, what it means)
FORMATS = {
    "sha256": (re.compile(r"^[0-9a-f]{64}$"), "a sha256 in 64 lowercase hex digits"),
    "url": (re.compile(r"^https?://[^\s/]+(/\S*)?$"), "an http(s) URL"),
    "version3": (re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$"), "an exact X.Y.Z version"),
    "version2": (re.compile(r"^[0-9]+\.[0-9]+$"), "an X.Y version"),
    "semver_v": (re.compile(r"^v[0-9]+\.[0-9]+\.[0-9]+$"), "a vX.Y.Z version"),
    # Prometheus label names; "__" is reserved for Prometheus' own labels
    "label_name": (re.compile(r"^(?!__)[a-zA-Z_][a-zA-Z0-9_]*$"), "a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with __)"),
    "systemd_unit": (re.compile(r"^[A-Za-z0-9@_.:\\-]+$"), "a systemd unit name"),
    "dns_name": (
        re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"),
        "a DNS-1123 name (lowercase letters, digits, '-' and '.')",
    ),
    "absolute_path": (re.compile(r"^/\S*$"), "an absolute path"),
    "duration": (re.compile(r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), "a Go duration such as 1h30m"),
    "prom_duration": (re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$"), "a Prometheus duration such as 30s, 5m or 15d"),
    "prom_size": (re.compile(r"^[0-9]+(B|KB|MB|GB|TB|PB|EB)$"), "a size such as 400GB (B, KB, MB, GB, TB, PB, EB)"),
    "hostport": (re.compile(r"^[A-Za-z0-9.\-\[\]:]+:[0-9]{1,5}$"), "host:port"),
    "ip": (None, "an IP address"),
    # a server to connect to: an IP address, or a host name (RFC 1123 labels, any case)
    "host": (
        re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*$"),
        "an IP address or a host name",
    ),
    "cidr": (None, "a network in CIDR form with no host bits set (e.g. 10.0.0.0/16)"),
}


class SettingsError(ValueError):
    """A spec or rule that is itself malformed (a defect in the role, not in the inventory)."""


def shown(value):
    """A value as the message shows it (JSON; strings quoted)."""
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def _problem(variable, value, problem):
    return {"variable": variable, "value": value, "problem": problem}


# ----------------------------------------------------------------------------- types
def _coerce(kind, value):
    """(ok, coerced) for one argument-spec type. Stricter than Ansible's own role validation for
    str/path (which silently turns a list or dict into its repr): those must be scalars."""
    if kind == "raw":
        return True, value
    if kind in ("str", "path"):
        if isinstance(value, bool) or isinstance(value, (dict, list)):
            return False, value
        if isinstance(value, (int, float)):
            return True, str(value)
        return isinstance(value, str), value
    if kind == "bool":
        if isinstance(value, bool):
            return True, value
        text = str(value).strip().lower()
        if text in BOOL_TRUE:
            return True, True
        if text in BOOL_FALSE:
            return True, False
        return False, value
    if kind == "int":
        if isinstance(value, bool):
            return False, value
        if isinstance(value, int):
            return True, value
        if isinstance(value, float) and value.is_integer():
            return True, int(value)
        if isinstance(value, str) and re.match(r"^\s*-?[0-9]+\s*$", value):
            return True, int(value)
        return False, value
    if kind == "float":
        if isinstance(value, bool):
            return False, value
        if isinstance(value, (int, float)):
            return True, float(value)
        if isinstance(value, str):
            try:
                return True, float(value)
            except ValueError:
                return False, value
        return False, value
    if kind == "list":
        return isinstance(value, list), value
    if kind == "dict":
        return isinstance(value, dict), value
    raise SettingsError("unknown argument spec type %r" % kind)


TYPE_WORDS = {
    "str": "a string",
    "path": "a path (string)",
    "bool": "true or false",
    "int": "an integer",
    "float": "a number",
    "list": "a list",
    "dict": "a mapping",
    "raw": "any value",
}


def check_option(name, option, value):
    """(problems, coerced value) of one variable against its argument spec option."""
    if value is None:
        if option.get("required"):
            return [_problem(name, value, "is required (%s)" % TYPE_WORDS.get(option.get("type", "str")))], value
        return [], value
    kind = option.get("type", "str")
    ok, coerced = _coerce(kind, value)
    if not ok:
        return [_problem(name, value, "must be %s" % TYPE_WORDS[kind])], value
    if kind == "list" and option.get("elements"):
        problems, items = [], []
        for i, item in enumerate(coerced):
            item_ok, item_value = _coerce(option["elements"], item)
            if not item_ok:
                problems.append(_problem("%s[%d]" % (name, i), item, "must be %s" % TYPE_WORDS[option["elements"]]))
            items.append(item_value)
        if problems:
            return problems, value
        coerced = items
    choices = option.get("choices")
    if choices is not None:
        values = coerced if kind == "list" else [coerced]
        wrong = [v for v in values if v not in choices and str(v) not in [str(c) for c in choices]]
        if wrong:
            return [_problem(name, value, "must be one of %s" % ", ".join(str(c) for c in choices))], value
    return [], coerced


def check_types(options, values):
    """(problems, coerced) for the variables in `values` that the spec `options` declares."""
    problems, coerced = [], {}
    for name in sorted(values):
        if name not in options:
            continue
        found, coerced[name] = check_option(name, options[name], values[name])
        problems += found
    return problems, coerced


# ----------------------------------------------------------------------------- names
def unknown_names(names, prefixes, known):
    """Problems for every name with one of `prefixes` that is not in `known`, each with the
    closest known name when there is one (Ansible itself ignores such typos)."""
    problems = []
    known = sorted(known)
    for name in sorted(names):
        if name in known or not any(name.startswith(p) for p in prefixes):
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        hint = "did you mean %s?" % close[0] if close else "no role declares it"
        problems.append(_problem(name, None, "is not a variable of any rackforge role: %s" % hint))
    return problems


# ----------------------------------------------------------------------------- rules
def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def format_problem(fmt, value):
    """None when `value` has the format, else what is wrong with it."""
    if fmt not in FORMATS:
        raise SettingsError("unknown format %r" % fmt)
    pattern, meaning = FORMATS[fmt]
    if not isinstance(value, str):
        return "must be %s" % meaning
    if fmt == "host" and ":" in value:  # only an IPv6 address has colons
        fmt = "ip"
    if fmt == "ip":
        try:
            ipaddress.ip_address(value)
            return None
        except ValueError:
            return "must be %s" % meaning
    if fmt == "cidr":
        try:
            net = ipaddress.ip_network(value, strict=False)
        except ValueError:
            return "must be %s" % meaning
        if "/" not in value:
            return "must be %s" % meaning
        if net.network_address != ipaddress.ip_interface(value).ip:
            return "has host bits set (the network is %s)" % net
        return None
    return None if pattern.match(value) else "must be %s" % meaning


def _version(text):
    """'1.31.4' -> (1, 31, 4); non-numeric parts count as 0 (the format rule reports them)."""
    return tuple(int(p) if p.isdigit() else 0 for p in str(text).split("."))


def _matches(have, want):
    """have matches a when's want; a true/false want as the bool type reads have (as the tasks' | bool do)."""
    if not isinstance(want, bool):
        return have == want or str(have) == str(want)
    ok, as_bool = _coerce("bool", have)
    return ok and as_bool is want


def _applies(rule, context):
    """A rule's `when`: {variable: value or [values]} that must all hold in the context (a true or
    false value matches however the variable spells it: true, "true", "yes" ...)."""
    for var, want in (rule.get("when") or {}).items():
        have = context.get(var)
        wants = want if isinstance(want, list) else [want]
        if not any(_matches(have, w) for w in wants):
            return False
    return True


def check_value(path, value, rule, context):
    """Problems of one value against one rule (recursing into keys, values, items and fields)."""
    rule = _ranged(rule)
    if not _applies(rule, context):
        return []
    if value is None:
        if rule.get("nonempty") or rule.get("required"):
            return [_problem(path, value, "must be set (%s)" % describe(rule))]
        return []
    out = []
    kind = rule.get("type")
    if kind:
        ok, coerced = _coerce(kind, value)
        if not ok:
            return [_problem(path, value, "must be %s" % TYPE_WORDS[kind])]
        value = coerced
    if value in rule.get("allow", ()):
        return []
    if rule.get("nonempty") and value in ("", [], {}):
        return [_problem(path, value, "must not be empty (%s)" % describe(rule))]
    if "choices" in rule and value not in rule["choices"]:
        return [_problem(path, value, "must be one of %s" % ", ".join(str(c) for c in rule["choices"]))]
    if "min" in rule or "max" in rule:
        if not _is_number(value):
            return [_problem(path, value, "must be a number")]
        low, high = rule.get("min"), rule.get("max")
        if (low is not None and value < low) or (high is not None and value > high):
            also = " or %s" % ", ".join(shown(a) for a in rule["allow"]) if rule.get("allow") else ""
            return [_problem(path, value, "must be %s%s" % (_range_words(low, high), also))]
    if "format" in rule and value != "":
        problem = format_problem(rule["format"], value)
        if problem:
            return [_problem(path, value, problem)]
    if "regex" in rule and not (isinstance(value, str) and re.match(rule["regex"], value)):
        return [_problem(path, value, "must be %s" % rule.get("means", "a string matching %s" % rule["regex"]))]
    if "min_version" in rule and _version(value) < _version(rule["min_version"]):
        return [_problem(path, value, "must be %s or later" % rule["min_version"])]
    if "prefix_var" in rule:
        other = context.get(rule["prefix_var"])
        if not str(value).startswith("%s." % other):
            return [_problem(path, value, "must be a version of %s %s (%s.x.y)" % (rule["prefix_var"], shown(other), other))]
    if "key_of" in rule:
        table = context.get(rule["key_of"]) or {}
        if value not in table:
            return [
                _problem(path, value, "must name an entry of %s (one of %s)" % (rule["key_of"], ", ".join(sorted(table)) or "none defined"))
            ]
    if isinstance(value, dict):
        if "keys" in rule:
            for key in value:
                out += check_value("%s key %s" % (path, shown(key)), key, rule["keys"], context)
        for field in rule.get("required", []):
            if field not in value:
                out.append(_problem(path, value, "needs %s" % field))
        if "fields" in rule:
            out += _check_fields(path, value, rule, context)
        if "values" in rule:
            for key in sorted(value, key=str):
                out += check_value("%s[%s]" % (path, shown(key)), value[key], rule["values"], context)
    if isinstance(value, list):
        if "items" in rule:
            for i, item in enumerate(value):
                label = item.get("name") if isinstance(item, dict) and isinstance(item.get("name"), str) else i
                out += check_value("%s[%s]" % (path, label), item, rule["items"], context)
        if rule.get("unique"):
            key = rule["unique"]
            seen = [item.get(key) if isinstance(item, dict) and key is not True else item for item in value]
            dupes = sorted({shown(v) for v in seen if seen.count(v) > 1})
            if dupes:
                out.append(_problem(path, value, "must not repeat %s" % ", ".join(dupes)))
    return out


def _check_fields(path, value, rule, context):
    fields = rule["fields"]
    out = []
    if rule.get("closed", True):
        extra = sorted(set(value) - set(fields), key=str)
        if extra:
            out.append(_problem(path, value, "takes only %s (unknown: %s)" % (", ".join(sorted(fields)), ", ".join(str(e) for e in extra))))
    for field, sub in fields.items():
        if field in value:
            out += check_value("%s.%s" % (path, field), value[field], sub, context)
    return out


def _range_words(low, high):
    if low is not None and high is not None:
        return "%s..%s" % (low, high)
    if low is not None:
        return ">= %s" % low
    return "<= %s" % high


def describe(rule):
    """What a rule allows, in words (for 'must be set' messages)."""
    rule = _ranged(rule)
    parts = []
    if "type" in rule:
        parts.append(TYPE_WORDS[rule["type"]])
    if "choices" in rule:
        parts.append("one of %s" % ", ".join(str(c) for c in rule["choices"]))
    if "min" in rule or "max" in rule:
        parts.append(_range_words(rule.get("min"), rule.get("max")))
    if "allow" in rule:
        parts.append("or %s" % ", ".join(shown(a) for a in rule["allow"]))
    if "format" in rule:
        parts.append(FORMATS[rule["format"]][1])
    if "means" in rule:
        parts.append(rule["means"])
    return ", ".join(parts) or "a value"


def check_rules(rules, values, context):
    """Problems of every variable in `values` that `rules` has a rule (or a list of rules) for.
    `context` holds every variable's effective value (for `when`, `prefix_var`, `key_of`)."""
    out = []
    for name in sorted(rules):
        if name in values:
            for rule in rule_list(rules[name]):
                out += check_value(name, values[name], rule, context)
    return out


def rule_list(rule):
    """A variable's rules: one rule, or a list of them (each with its own `when`)."""
    return rule if isinstance(rule, list) else [rule]


def when_names(rules):
    """The variables the rules' `when` clauses read (the context must hold them)."""
    return {var for r in rules.values() for rule in rule_list(r) for var in (rule.get("when") or {})}


def root_name(variable):
    """The setting a problem's path is about: x of 'x[0].url', 'x.key' or 'x key "k"'."""
    return variable.split("[")[0].split(".")[0].split(" ")[0]


def format_problems(problems):
    """One line per problem: 'variable = value: problem' (a typo has no value to show)."""
    lines = []
    for p in problems:
        hidden = p["value"] is None and ("not a variable" in p["problem"] or p.get("derived") or p.get("secret"))
        value = "" if hidden else " = %s" % shown(p["value"])
        lines.append("%s%s: %s" % (p["variable"], value, p["problem"]))
    return lines
