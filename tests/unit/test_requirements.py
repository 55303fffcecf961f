"""The collections installed with ansible==12.3.0 satisfy requirements.yml (what AWX/Galaxy users install)."""

from __future__ import annotations

import json
import pathlib
import subprocess

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_installed_collections_match_requirements():
    wanted = yaml.safe_load((ROOT / "requirements.yml").read_text())["collections"]
    out = subprocess.run(["ansible-galaxy", "collection", "list", "--format", "json"], capture_output=True, text=True, check=True).stdout
    installed = {}
    for path_entries in json.loads(out).values():
        for name, info in path_entries.items():
            installed.setdefault(name, info["version"])
    for entry in wanted:
        assert installed.get(entry["name"]) == entry["version"], (entry, installed.get(entry["name"]))
