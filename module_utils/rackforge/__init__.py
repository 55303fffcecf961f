"""rackforge module_utils: pure parsers and evaluators shared by the modules and the tests,
plus the one sysfs/procfs file reader the modules share."""

from __future__ import annotations

# Environment for every command the modules run: tool output is parsed, so it must not be localised.
C_ENV = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}


def read_file(path, default=None):
    """A sysfs/procfs file's text, stripped; default when it cannot be read."""
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return default
