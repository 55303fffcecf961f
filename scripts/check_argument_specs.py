#!/usr/bin/env python3
"""Contract check: every role's meta/argument_specs.yml options == defaults/main.yml keys, and
every option has a type and a description. Exit 1 naming the role and the keys that differ."""

from __future__ import annotations

import pathlib
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent


def check(role):
    errors = []
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text()) or {}
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())
    options = specs["argument_specs"]["main"].get("options", {})
    for key in sorted(set(defaults) - set(options)):
        errors.append("%s: %s is in defaults/main.yml but not in meta/argument_specs.yml" % (role.name, key))
    for key in sorted(set(options) - set(defaults)):
        errors.append("%s: %s is in meta/argument_specs.yml but not in defaults/main.yml" % (role.name, key))
    for key, spec in options.items():
        if "type" not in spec or not spec.get("description"):
            errors.append("%s: %s needs a type and a description in argument_specs" % (role.name, key))
        if key in defaults and spec.get("default") != defaults[key]:
            errors.append("%s: %s default differs: argument_specs %r, defaults %r" % (role.name, key, spec.get("default"), defaults[key]))
        if not key.startswith(role.name + "_"):
            errors.append("%s: %s is not prefixed with the role name" % (role.name, key))
    return errors


def main():
    roles = sorted(p for p in (ROOT / "roles").iterdir() if (p / "defaults" / "main.yml").exists())
    errors = [e for role in roles for e in check(role)]
    for e in errors:
        print("argument_specs: " + e)
    print("argument_specs: %d roles checked, %d problems" % (len(roles), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
