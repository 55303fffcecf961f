"""rackforge module_utils: pure parsers and evaluators shared by the modules and the tests."""

from __future__ import annotations

# Environment for every command the modules run: tool output is parsed, so it must not be localised.
C_ENV = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}
