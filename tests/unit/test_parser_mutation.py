"""Mutation test: every real capture, damaged in many seeded ways, must either parse or raise the
parser module's own ParseError, never anything else (ValueError, IndexError, KeyError, ...).

The captures are discovered when the tests are collected, so captures other sessions add under
tests/fixtures/realworld/<tool>/ are mutated too. A directory missing from PARSERS fails the test
(a capture with no parser to hold it to is a gap, not a pass).
"""

from __future__ import annotations

import random
import re
import zlib

import pytest
from ansible.module_utils.rackforge import hardware, kernel_log, mdstat, nccl, nvbandwidth, pci, perftest
from ansible.module_utils.rackforge import nvidia_smi as n
from ansible.module_utils.rackforge import rdma as r
from conftest import captures

NO_PARSE_ERROR = ()  # hardware.py has no ParseError: its parsers must not raise at all

# fixture directory -> [(parser, the exception type it may raise)]; None: no parser exists for that output
PARSERS = {
    "nvidia-smi-nvlink-status": [(n.parse_nvlink_status, n.ParseError)],
    "nvidia-smi-nvlink-errors": [(n.parse_nvlink_errors, n.ParseError)],
    "nvidia-smi-nvlink-remote": None,
    # dcgm-exporter's /metrics: the format the lab's SIMULATED exporter is held to
    # (tests/unit/test_dcgm_exporter_sim.py); Prometheus parses it, rackforge does not
    "dcgm-exporter": None,  # `nvlink -R`: rackforge has no parser for it (kept as a format reference)
    "nvidia-smi-q": [(n.parse_query_text, n.ParseError), (n.parse_fabric, n.ParseError)],
    "nvidia-smi-q-x": [(n.parse_query_xml, n.ParseError)],
    "nvidia-smi-query-gpu": [(n.parse_query_gpu_csv, n.ParseError)],
    "nvidia-smi-topo-m": [(n.parse_topo_m, n.ParseError)],
    "nvidia-smi-topo-p2p": [(n.parse_topo_p2p, n.ParseError)],
    "nvidia-smi-L": [(n.parse_gpu_list, n.ParseError)],
    "ibstat": [(r.parse_ibstat, r.ParseError)],
    "ibstatus": [(r.parse_ibstatus, r.ParseError)],
    "ibv_devinfo": [(r.parse_ibv_devinfo, r.ParseError)],
    "rdma-link": [(r.parse_rdma_link, r.ParseError)],
    "show_gids": [(r.parse_show_gids, r.ParseError)],
    "ethtool-S": [(r.parse_ethtool_stats, r.ParseError)],
    "mlnx_qos": [(r.parse_mlnx_qos, r.ParseError)],
    "meminfo": [(hardware.parse_meminfo, NO_PARSE_ERROR)],
    "perftest": [(perftest.parse_perftest, perftest.ParseError)],
    "nccl-tests": [(nccl.parse_nccl_tests, nccl.ParseError)],
    "nvbandwidth": [(nvbandwidth.parse_nvbandwidth, nvbandwidth.ParseError)],
    "kernel-log-xid": [(kernel_log.parse_xid, kernel_log.ParseError)],
    "lspci-vv": [(pci.parse_lspci_vv, pci.ParseError)],
    "mdstat": [(mdstat.parse_mdstat, mdstat.ParseError)],
}

GARBAGE_LINES = [
    "Failed to initialize NVML: Driver/library version mismatch",
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    "N/A",
    ":",
    "::::",
    "[N/A]",
    "<gpu>",
    "</nvidia_smi_log>",
    "GPU 0:",
    "GPU 0: x (UUID: )",
    "Link 0:",
    "Link x: y",
    "port:",
    "state:",
    "hca_id:",
    "CA ''",
    "Port 1:",
    "tc: 0 ratelimit: , tsa: ",
    "prio:x dscp:1,2",
    "mlx5_0 1 x fe80::1 v2 eth0",
    "link mlx5_0/x state",
    "Receive buffer size (bytes): a,b",
    "\tGPU0\tGPU1\tCPU Affinity",
    "GPU0\t X \tNV18\t0-1\t0",
    "NIC Legend:",
    "  NIC0:",
    "x" * 300,
    "\x00\x01\x02",
]


def _lines(text):
    return text.split("\n")


def _join(lines):
    return "\n".join(lines)


def _digits_to_letters(s):
    return s.translate(str.maketrans("0123456789", "abcdefghij"))


def mutations(text, seed):
    """Deterministic list of (name, mutated text)."""
    rnd = random.Random(seed)
    lines = _lines(text)
    nlines = len(lines)
    picks = sorted(set(rnd.randrange(nlines) for _ in range(min(8, nlines))))
    out = [("empty", ""), ("whitespace only", " \n\t\n"), ("single newline", "\n")]
    for frac in (0.03, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99):
        cut = int(len(text) * frac)
        out.append(("truncated at %d%% (char %d)" % (frac * 100, cut), text[:cut]))
    for _ in range(3):
        cut = rnd.randrange(len(text) + 1)
        out.append(("truncated at char %d" % cut, text[:cut]))
        out.append(("head cut off at char %d" % cut, text[cut:]))
    for i in picks:
        out.append(("line %d deleted" % i, _join(lines[:i] + lines[i + 1 :])))
        line = lines[i]
        half = len(line) // 2
        out.append(("line %d cut in half" % i, _join([*lines[:i], line[:half], *lines[i + 1 :]])))
        out.append(("line %d split in two" % i, _join([*lines[:i], line[:half], line[half:], *lines[i + 1 :]])))
        out.append(("line %d replaced by N/A" % i, _join([*lines[:i], "N/A", *lines[i + 1 :]])))
        key, sep, _ = line.partition(":")
        if sep:
            out.append(("line %d value N/A" % i, _join([*lines[:i], key + ": N/A", *lines[i + 1 :]])))
            out.append(("line %d value empty" % i, _join([*lines[:i], key + ":", *lines[i + 1 :]])))
        out.append(("line %d digits to letters" % i, _join([*lines[:i], _digits_to_letters(line), *lines[i + 1 :]])))
        out.append(("line %d duplicated" % i, _join([*lines[: i + 1], line, *lines[i + 1 :]])))
        garbage = rnd.choice(GARBAGE_LINES)
        out.append(("garbage line %r before line %d" % (garbage[:20], i), _join([*lines[:i], garbage, *lines[i:]])))
        noise = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 40)))
        out.append(
            (
                "random bytes (surrogateescape) in line %d" % i,
                _join([*lines[:i], line[:half] + noise.decode("utf-8", "surrogateescape") + line[half:], *lines[i + 1 :]]),
            )
        )
        out.append(("random bytes (latin-1) line %d" % i, _join([*lines[:i], noise.decode("latin-1"), *lines[i + 1 :]])))
    if nlines > 4:
        a = rnd.randrange(nlines - 2)
        b = rnd.randrange(a + 1, nlines)
        out.append(("lines %d-%d deleted" % (a, b), _join(lines[:a] + lines[b:])))
        out.append(("lines %d-%d only" % (a, b), _join(lines[a:b])))
        out.append(("lines shuffled", _join(rnd.sample(lines, nlines))))
    out.append(("all digits to letters", _digits_to_letters(text)))
    out.append(("every number N/A", re.sub(r"\d+(?:\.\d+)?", "N/A", text)))
    out.append(("every value after ':' N/A", re.sub(r":[^\n]*", ": N/A", text)))
    out.append(("every XML text N/A", re.sub(r">[^<>]+<", ">N/A<", text)))
    out.append(("every XML text empty", re.sub(r">[^<>]+<", "><", text)))
    out.append(("tabs to spaces", text.replace("\t", "    ")))
    out.append(("CRLF line ends", text.replace("\n", "\r\n")))
    out.append(("indentation stripped", _join(ln.strip() for ln in lines)))
    out.append(("every other line", _join(lines[::2])))
    blob = bytes(rnd.randrange(256) for _ in range(512))
    out.append(("random bytes only (surrogateescape)", blob.decode("utf-8", "surrogateescape")))
    out.append(("random bytes only (latin-1)", blob.decode("latin-1")))
    return out


@pytest.mark.parametrize("path", captures(), ids=lambda p: "%s/%s" % (p.parent.name, p.stem))
def test_every_capture_has_its_source_beside_it(path):
    src = path.with_name(path.stem + ".src.txt")
    assert src.is_file() and re.search(r"^source: \S", src.read_text(), re.M), "%s: no .src.txt with a source: line" % path


def test_every_capture_directory_has_a_parser_entry():
    missing = sorted({p.parent.name for p in captures()} - set(PARSERS))
    assert not missing, "tests/fixtures/realworld/%s: add the directory to PARSERS in %s" % (missing, __name__)


@pytest.mark.parametrize("path", captures(), ids=lambda p: "%s/%s" % (p.parent.name, p.stem))
def test_mutated_capture_raises_only_parse_error(path):
    parsers = PARSERS.get(path.parent.name)
    if parsers is None:
        pytest.skip("no parser for %s (see PARSERS)" % path.parent.name)
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    seed = zlib.crc32(("%s/%s" % (path.parent.name, path.name)).encode())
    failures = []
    for name, mutated in mutations(text, seed):
        for parse, allowed in parsers:
            try:
                parse(mutated)
            except allowed:
                pass
            except Exception as exc:  # what this test exists to find
                failures.append("%s(%s): %s: %s" % (parse.__name__, name, type(exc).__name__, str(exc)[:120]))
    assert not failures, "%d mutation(s) of %s raised something other than ParseError:\n%s" % (
        len(failures),
        path.name,
        "\n".join(failures),
    )


def test_mutations_are_deterministic_and_varied():
    text = "GPU 0: NVIDIA H100 (UUID: GPU-1)\n         Link 0: 26.562 GB/s\n         Link 1: <inactive>\n"
    first, second = mutations(text, 7), mutations(text, 7)
    assert first == second
    names = [name for name, _ in first]
    assert len(set(t for _, t in first)) > 30
    for kind in ("empty", "truncated", "deleted", "cut in half", "garbage line", "N/A", "digits to letters", "random bytes"):
        assert any(kind in name for name in names), kind
