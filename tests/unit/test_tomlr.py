"""tomlr (the node-side TOML reader) agrees with Python's tomllib, which the nodes of Ubuntu 22.04,
RHEL 9 and Debian 11 do not have: on the real containerd configs, on a corpus of TOML forms, on
random documents written by tomlw, and on what must be refused."""

from __future__ import annotations

import datetime
import math
import pathlib
import random

import pytest
import tomllib
from ansible.module_utils.rackforge import tomlr
from ansible.module_utils.rackforge.tomlw import dumps

CAPTURED = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "captured"

CORPUS = [
    "a = 1\nb = \"x\\ty\\u00e9\\U0001F600\"\nc = 'lit\\'\n",
    '[t]\nx.y = [1, 2, # comment\n 3,]\n[t.sub]\nz = {a = 1, b.c = "d"}\n',
    "[[arr]]\nq = 1\n[[arr]]\nq = 2\n[arr.sub]\nr = 3\n",
    "s = \"\"\"\nline1\\\n   line2\"\"\"\nt = '''raw\n  text'''\nu = \"\"\"a\"\"\"\"\nv = '''it''s''''\n",
    "d = 1979-05-27T07:32:00Z\ne = 1979-05-27\nf = 07:32:00\ng = 1979-05-27T00:32:00.999999-07:00\nh = 1979-05-27 07:32:00\n",
    "i = 0xDEAD_BEEF\nj = 0o755\nk = 0b1101\nl = -1_000\nm = 6.626e-34\nn = +inf\no = -0.0\np = true\nq = false\n",
    "\"quoted key\" = 1\n'lit key' = 2\nbare-key_1 = 3\n",
    '[a]\n[a.b]\nc = 1\n[x."y.z"]\nw = []\nnested = [[1, 2], ["a"], [{x = 1}]]\n',
    "# only a comment\n\n   \n",
    'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n',
]
INVALID = ["a = ", "a = 1\na = 2", "[t]\n[t]", 'a = "x', "a = 1 b", "[a]\nb = 1\n[a.b]", "a = {b = 1}\n[a]\nc = 2", "a = 1979-13-01", "= 1"]


@pytest.mark.parametrize("name", sorted(p.name for p in CAPTURED.glob("*.toml")))
def test_real_containerd_configs(name):
    text = (CAPTURED / name).read_text()
    assert tomlr.loads(text) == tomllib.loads(text)


@pytest.mark.parametrize("text", CORPUS)
def test_corpus(text):
    assert tomlr.loads(text) == tomllib.loads(text)


@pytest.mark.parametrize("text", INVALID)
def test_refuses_what_tomllib_refuses(text):
    with pytest.raises(tomllib.TOMLDecodeError):
        tomllib.loads(text)
    with pytest.raises(tomlr.TOMLDecodeError, match="line"):
        tomlr.loads(text)


def _random_value(rng, depth):
    kind = rng.choice(["int", "float", "str", "bool", "date", "list", "table"] if depth < 3 else ["int", "str", "bool"])
    if kind == "int":
        return rng.randint(-(10**12), 10**12)
    if kind == "float":
        return rng.choice([rng.uniform(-1e6, 1e6), 0.5, -0.0, 1e-30])
    if kind == "str":
        return "".join(rng.choice("abc \"\\\t\né$.#=[]{}'") for _ in range(rng.randint(0, 12)))
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "date":
        return datetime.datetime(2026, 12, 1, 7, 40, rng.randint(0, 59), tzinfo=datetime.timezone.utc)
    if kind == "list":
        same = rng.choice(["int", "str"])
        return [_random_value(rng, 3) if same == "str" else rng.randint(0, 9) for _ in range(rng.randint(0, 4))]
    return {"k%d %s" % (i, rng.choice(["", ".dot", "-dash"])): _random_value(rng, depth + 1) for i in range(rng.randint(0, 4))}


def test_random_documents_written_by_tomlw():
    rng = random.Random(20261201)
    for _ in range(300):
        doc = {"key%d" % i: _random_value(rng, 0) for i in range(rng.randint(1, 6))}
        text = dumps(doc)
        mine, reference = tomlr.loads(text), tomllib.loads(text)
        assert mine == reference, text
        assert not any(isinstance(v, float) and math.isnan(v) for v in mine.values())
