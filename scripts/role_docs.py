#!/usr/bin/env python3
"""Render each role's variable table into roles/<role>/README.md from meta/argument_specs.yml
(between the VARIABLES markers). `--check` fails when a README is out of date."""

from __future__ import annotations

import json
import pathlib
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- BEGIN VARIABLES (scripts/role_docs.py) -->", "<!-- END VARIABLES -->"


def table(role):
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    rows = ["| variable | type | default | description |", "|---|---|---|---|"]
    for name, spec in specs.items():
        desc = " ".join(spec["description"]) if isinstance(spec["description"], list) else spec["description"]
        if spec.get("choices"):
            desc += " Choices: %s." % ", ".join("`%s`" % c for c in spec["choices"])
        default = json.dumps(spec.get("default")).replace("|", "\\|")
        rows.append("| `%s` | %s | `%s` | %s |" % (name, spec["type"], default, desc.replace("|", "\\|").strip()))
    return "\n".join(rows)


def main():
    check = "--check" in sys.argv
    stale = []
    for role in sorted(p for p in (ROOT / "roles").iterdir() if (p / "meta" / "argument_specs.yml").exists()):
        readme = role / "README.md"
        text = readme.read_text() if readme.exists() else "# %s\n\n%s\n%s\n" % (role.name, BEGIN, END)
        head, _, rest = text.partition(BEGIN)
        _, _, tail = rest.partition(END)
        new = "%s%s\n%s\n%s%s" % (head, BEGIN, table(role), END, tail)
        if new != text:
            stale.append(role.name)
            if not check:
                readme.write_text(new)
    if check and stale:
        print("role_docs: README variable tables out of date for %s (run scripts/role_docs.py)" % ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
