"""Action plugin: validate every rackforge role's settings for a host before any change.

Runs on the controller only (no connection to the host): it cannot touch a node. For each role
named in `roles` it reads the role's meta/argument_specs.yml (types, choices), defaults/main.yml
and meta/rules.yml (semantic rules), takes the host's effective value of every variable (the
inventory's, else the role default, templated for this host), and fails, naming each wrong
variable with its value and what is allowed, when:
  - a value has the wrong type or is not one of the choices,
  - a value breaks a semantic rule (range, format, shape, reference to a profile or host),
  - a variable carries a role's prefix but no role declares it (a typo Ansible would ignore).
The decisions live in module_utils/rackforge/settings.py (pure); this file only does I/O.

A role's rules file may also hold `checks`: rules across settings that its value rules cannot state
(the CNP priority differs from the lossless one, the networks are disjoint). Each is a Jinja
expression templated for the host, like an assert's:
  - {variable: name, that: expression, problem: text, when: expression}: `that` is true when the
    settings agree; `problem` (templated) says what is wrong with `variable`, whose value is shown;
  - {problems: expression, when: expression}: a list of {variable, value, problem}, from a filter;
    with `variable` too, a list of texts, each a problem of that variable (a filter that says what
    is wrong with a value, as k8s_label_problems does).
They run once every setting has passed its own rules (they read values those rules vouch for).

`derived` (optional) names variables the role computes from its settings (rendered configs,
command lines) whose rendering is itself a check: a filter that refuses an input raises, naming the
setting. Each is templated for the host and must give a string; the reason it does not is a problem
like any other (its value, a rendered config with secrets, is never shown).

Returns `validated` (the roles checked, with those an earlier call registered as `rackforge_settings`
checked: an empty `roles` checks nothing and keeps them) and `problems`; never the settings' values, which carry
secrets (a receiver's URL, a mail password) that `-v` would print.
"""

from __future__ import annotations

import importlib.util
import os

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROLES_DIR = os.path.join(ROOT, "roles")
_CACHE = {}


def _settings():
    """module_utils/rackforge/settings.py (the project's module_utils are not importable on the
    controller under ansible.module_utils; the filters load theirs the same way)."""
    spec = importlib.util.spec_from_file_location(
        "rackforge_settings_rules", os.path.join(ROOT, "module_utils", "rackforge", "settings.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


settings = _settings()


def _role_files(loader, role):
    """(spec options, defaults, rules) of a role, read once per controller process."""
    if role not in _CACHE:
        base = os.path.join(ROLES_DIR, role)
        if not os.path.isdir(base):
            raise AnsibleError("rackforge_settings: no role %r under %s" % (role, ROLES_DIR))

        def load(rel, trusted=False):
            path = os.path.join(base, rel)
            if not os.path.exists(path):
                return {}
            return loader.load_from_file(path, trusted_as_template=trusted) or {}

        spec = load("meta/argument_specs.yml").get("argument_specs", {}).get("main", {}).get("options", {})
        rules = load("meta/rules.yml", trusted=True)  # its checks are templates
        _CACHE[role] = (spec, load("defaults/main.yml", trusted=True), rules.get("rules", {}), rules.get("checks", []))
    return _CACHE[role]


def all_roles():
    return sorted(r for r in os.listdir(ROLES_DIR) if os.path.exists(os.path.join(ROLES_DIR, r, "meta", "argument_specs.yml")))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    @staticmethod
    def _render(templar, variables, names):
        """Problems of the derived variables: each must render, for this host, to a string."""
        problems = []
        for name in names:
            if name not in variables:
                problems.append({"variable": name, "value": None, "problem": "is not a variable of this host", "derived": True})
                continue
            try:
                out = templar.template(variables[name])
            except Exception as exc:  # the filter's refusal names the setting
                problems.append({"variable": name, "value": None, "problem": "cannot be rendered: %s" % exc, "derived": True})
                continue
            if not isinstance(out, str):
                problems.append(
                    {"variable": name, "value": None, "problem": "rendered a %s, not text" % type(out).__name__, "derived": True}
                )
        return problems

    @staticmethod
    def _checks(templar, variables, values, role, checks):
        """Problems of a role's checks across settings (see the module docstring)."""
        problems = []
        for check in checks:
            try:
                if "when" in check and not templar.evaluate_conditional(check["when"]):
                    continue
                name = check.get("variable")
                value = (values[name] if name in values else templar.template(variables.get(name))) if name else None
                if "problems" in check:
                    found = templar.template(check["problems"])
                    if name and isinstance(found, list) and all(isinstance(p, str) for p in found):
                        found = [{"variable": name, "value": value, "problem": p} for p in found]
                    if not isinstance(found, list) or not all(isinstance(p, dict) and {"variable", "problem"} <= set(p) for p in found):
                        raise AnsibleError("rackforge_settings: %s's check %r gave no list of problems" % (role, check["problems"]))
                    problems += [{"variable": p["variable"], "value": p.get("value"), "problem": p["problem"]} for p in found]
                elif not templar.evaluate_conditional(check["that"]):
                    problems.append({"variable": name, "value": value, "problem": templar.template(check["problem"])})
            except AnsibleError:
                raise
            except Exception as exc:  # a defect in the role's check, not in the inventory
                raise AnsibleError("rackforge_settings: %s's check %r failed: %s" % (role, check, exc)) from exc
        return problems

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        roles = self._task.args.get("roles") or []
        if not isinstance(roles, list):
            raise AnsibleError("rackforge_settings: `roles` must be a list of role names")
        earlier = task_vars.get("rackforge_settings")
        earlier = earlier.get("validated") or [] if isinstance(earlier, dict) else []
        if not roles:
            result.update(changed=False, validated=sorted(earlier), problems=[], msg="no role left to check")
            return result
        everything = all_roles()
        specs, defaults, rules, checks = {}, {}, {}, {}
        for role in everything:
            spec, dflt, rule, checks[role] = _role_files(self._loader, role)
            specs[role], rules[role] = spec, rule
            defaults.update(dflt)

        # effective values: the host's variables over the role defaults, templated for this host
        variables = dict(defaults)
        variables.update(task_vars)
        templar = self._templar.copy_with_new_env(available_variables=variables)
        wanted = sorted({name for role in roles for name in specs[role]} | {name for role in roles for name in rules[role]})
        values, problems = {}, []
        for name in wanted:
            if name not in variables:
                continue
            try:
                values[name] = templar.template(variables[name])
            except Exception as exc:  # any templating error is the variable's problem, reported as such
                problems.append({"variable": name, "value": None, "problem": "cannot be evaluated for this host: %s" % exc})
        context = dict(values)
        # the variables the rules' `when` read, of roles not checked in this call (another role's
        # setting a rule depends on): in the context, not checked here
        for name in sorted(set().union(*(settings.when_names(rules[role]) for role in roles)) - set(values)):
            if name in variables:
                try:
                    context[name] = templar.template(variables[name])
                except Exception:  # its own role's check reports it
                    continue
        for role in roles:
            found, coerced = settings.check_types(specs[role], {n: v for n, v in values.items() if n in specs[role]})
            problems += found
            values.update(coerced)
            context.update(coerced)
        bad = {settings.root_name(p["variable"]) for p in problems}
        for role in roles:
            problems += settings.check_rules(rules[role], {n: v for n, v in values.items() if n not in bad}, context)
        known = {name for spec in specs.values() for name in spec}
        prefixes = tuple(role + "_" for role in everything)
        problems += settings.unknown_names([n for n in task_vars if isinstance(n, str)], prefixes, known)

        if not problems:  # the checks read settings their own rules vouch for
            for role in roles:
                problems += self._checks(templar, variables, values, role, checks[role])

        derived = self._task.args.get("derived") or []
        if not isinstance(derived, list):
            raise AnsibleError("rackforge_settings: `derived` must be a list of variable names")
        if not problems:  # rendered from settings already found wrong, they would only repeat them
            problems += self._render(templar, variables, derived)

        # a setting whose argument spec says no_log (a receiver's URL, a mail password): its
        # problems name it and say what is wrong, never its value
        secret = {name for role in roles for name, opt in specs[role].items() if isinstance(opt, dict) and opt.get("no_log")}
        for p in problems:
            if settings.root_name(p["variable"]) in secret:
                p.update(value=None, secret=True)

        result.update(changed=False, validated=sorted(set(roles) | (set() if problems else set(earlier))), problems=problems)
        if problems:
            lines = settings.format_problems(problems)
            result["failed"] = True
            result["msg"] = "%d setting(s) wrong, nothing was changed:\n- %s" % (len(lines), "\n- ".join(lines))
        else:
            result["msg"] = "settings of %s are valid" % ", ".join(sorted(roles))
        return result
