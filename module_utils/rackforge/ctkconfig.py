"""The NVIDIA Container Toolkit's config.toml (/etc/nvidia-container-runtime/config.toml): set its
top-level keys in place, keeping every other line (its commented defaults included).

Facts from the toolkit's source (NVIDIA/nvidia-container-toolkit v1.17.3, internal/config):
- The package's postinst runs `nvidia-ctk config --in-place`, which writes the defaults with the
  defaults it does not set commented out (`#accept-nvidia-visible-devices-envvar-when-unprivileged
  = true`); a value that differs from the default is kept uncommented across upgrades.
- The toolkit decodes the file into a struct: a key it does not know, or a top-level key written
  under a table, is silently ignored. So only the keys below are accepted, and the result is
  parsed again to prove each one landed at the top level with the value asked for.
"""

from __future__ import annotations

import re

from ansible.module_utils.rackforge.tomlr import loads

# the top-level keys rackforge sets, with their type
KNOWN = {
    "accept-nvidia-visible-devices-envvar-when-unprivileged": bool,
    "accept-nvidia-visible-devices-as-volume-mounts": bool,
}
_TABLE = re.compile(r"^\s*\[")


def _toml_value(value):
    return "true" if value is True else "false"


def problems(settings):
    """What is wrong with the settings asked for ([] when nothing)."""
    out = []
    for key, value in sorted(settings.items()):
        if key not in KNOWN:
            out.append("%s is not a key rackforge sets (allowed: %s)" % (key, ", ".join(sorted(KNOWN))))
        elif not isinstance(value, KNOWN[key]):
            out.append("%s must be a %s, got %r" % (key, KNOWN[key].__name__, value))
    return out


def set_top_level(text, settings):
    """(new text, [keys changed]) with each key of settings set at the top level of the TOML text:
    an existing line for the key before the first table is replaced (the first commented one when
    none is active), else the key is added at the top. Raises ValueError when the result does not
    read back with the values asked for, or reads differently elsewhere."""
    bad = problems(settings)
    if bad:
        raise ValueError("; ".join(bad))
    before = loads(text)
    lines = text.splitlines(keepends=True)
    top = next((i for i, line in enumerate(lines) if _TABLE.match(line)), len(lines))
    changed, added = [], []
    for key, value in sorted(settings.items()):
        if before.get(key) is value:
            continue
        changed.append(key)
        line = "%s = %s\n" % (key, _toml_value(value))
        active = re.compile(r"^\s*%s\s*=" % re.escape(key))
        commented = re.compile(r"^\s*#\s*%s\s*=" % re.escape(key))
        at = next((i for i in range(top) if active.match(lines[i])), None)
        if at is None:
            at = next((i for i in range(top) if commented.match(lines[i])), None)
        if at is None:
            added.append(line)
        else:
            lines[at] = line
    after_text = "".join(added + lines)
    after = loads(after_text)
    for key, value in settings.items():
        if after.get(key) is not value:
            raise ValueError("%s did not read back as %s at the top level" % (key, _toml_value(value)))
    if {k: v for k, v in after.items() if k not in settings} != {k: v for k, v in before.items() if k not in settings}:
        raise ValueError("setting %s would change other keys" % ", ".join(changed))
    return after_text, changed
