"""Issue 19's rule for a codebase a newcomer can read: no source file over 400 lines (split by
concern instead). Tracked Python and YAML files count; captured outputs and generated state do not."""

from __future__ import annotations

import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIMIT = 400


def test_no_source_file_is_over_400_lines():
    tracked = subprocess.run(["git", "ls-files", "*.py", "*.yml", "*.yaml"], cwd=ROOT, capture_output=True, text=True, check=True)
    paths = [p for p in tracked.stdout.split() if not p.startswith("tests/fixtures/")]
    assert len(paths) > 100  # the listing worked
    long = {p: n for p in paths if (n := len((ROOT / p).read_text().splitlines())) > LIMIT}
    assert not long, "split these by concern: %s" % long
