"""The nvidia-smi topology parsers (parse_topo_m, parse_topo_p2p) on real captures under
tests/fixtures/realworld; the other parsers are tested in test_nvidia_smi_parsers.py."""

from __future__ import annotations

import pytest
from ansible.module_utils.rackforge import nvidia_smi as n
from conftest import fixture


def test_topo_m_h100_nv18_and_pcie_nv12():
    t = n.parse_topo_m(fixture("nvidia-smi-topo-m", "h100-8gpu-nv18-2numa"))
    assert t["devices"] == ["GPU%d" % i for i in range(8)]
    assert set(t["links"]["GPU0"].values()) == {"NV18"} and len(t["links"]["GPU0"]) == 7
    assert t["numa_affinity"]["GPU7"] == "1"
    t2 = n.parse_topo_m(fixture("nvidia-smi-topo-m", "h100-pcie-2gpu-nv12"))
    assert t2["links"] == {"GPU0": {"GPU1": "NV12"}, "GPU1": {"GPU0": "NV12"}}


# --- topo -m -------------------------------------------------------------------------------------------


def test_topo_m_590_ansi_underlined_header():
    text = fixture("nvidia-smi-topo-m", "h100-590-ansi-underlined-header-1gpu")
    assert "\x1b[4m" in text  # the capture keeps the escape codes
    t = n.parse_topo_m(text)
    assert t["devices"] == ["GPU0"] and t["links"] == {"GPU0": {}}
    assert (t["cpu_affinity"], t["numa_affinity"], t["gpu_numa_id"], t["nics"]) == ({"GPU0": "0-19"}, {"GPU0": "0"}, {"GPU0": "N/A"}, {})


def test_topo_m_windows_empty_affinity_cells_stay_empty():
    t = n.parse_topo_m(fixture("nvidia-smi-topo-m", "rtx2080s-win-610-ansi-empty-affinity"))
    assert t["devices"] == ["GPU0"]
    assert (t["cpu_affinity"], t["numa_affinity"], t["gpu_numa_id"]) == ({}, {}, {"GPU0": "N/A"})


def test_topo_m_gpu_numa_id_column_space_separated():
    t = n.parse_topo_m(fixture("nvidia-smi-topo-m", "h100-pcie-2gpu-nv12"))
    assert t["gpu_numa_id"] == {"GPU0": "N/A", "GPU1": "N/A"} and t["numa_affinity"] == {"GPU0": "1", "GPU1": "1"}


# Layout of an 8-GPU/10-NIC node as nvidia-smi prints it (TABs, empty affinity cells on NIC rows, NIC
# Legend), trimmed to 2 GPUs and 2 NICs for this test: composed, not a capture.
TOPO_NICS = (
    "\t\x1b[4mGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    "GPU0\t X \tNV12\tPXB\tSYS\t48-63,176-191\t3\t\tN/A\n"
    "GPU1\tNV12\t X \tPXB\tSYS\t48-63,176-191\t3\t\tN/A\n"
    "NIC0\tPXB\tPXB\t X \tSYS\t\t\t\t\n"
    "NIC1\tSYS\tSYS\tSYS\t X \t\t\t\t\n"
    "\nLegend:\n\n  X    = Self\n\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_bond_0\n\n"
)


def test_topo_m_nic_rows_and_nic_legend():
    t = n.parse_topo_m(TOPO_NICS)
    assert t["devices"] == ["GPU0", "GPU1", "NIC0", "NIC1"]
    assert t["links"]["GPU0"] == {"GPU1": "NV12", "NIC0": "PXB", "NIC1": "SYS"}
    assert t["links"]["NIC1"] == {"GPU0": "SYS", "GPU1": "SYS", "NIC0": "SYS"}
    assert t["nics"] == {"NIC0": "mlx5_0", "NIC1": "mlx5_bond_0"}
    assert t["cpu_affinity"] == {"GPU0": "48-63,176-191", "GPU1": "48-63,176-191"}
    assert t["gpu_numa_id"] == {"GPU0": "N/A", "GPU1": "N/A"}


@pytest.mark.parametrize(
    "text",
    [
        "",
        fixture("nvidia-smi-topo-m", "rtx2080s-win-591-error-option-m-missing-value"),
        TOPO_NICS.split("NIC0\tPXB", maxsplit=1)[0],  # cut short: no NIC rows
        TOPO_NICS.replace("GPU1\tNV12\t X ", "GPU1\tNV12\tNV12"),  # no X on the diagonal
        TOPO_NICS.replace("GPU0\t X \tNV12\tPXB", "GPU0\t X \tNV12"),  # a short row
        TOPO_NICS.replace("NV12\tPXB\tSYS\t48", "NVab\tPXB\tSYS\t48"),  # not a topology code
        "\tGPU0\tCPU Affinity\nGPU0\t X \t0-1\nGPU0\t X \t0-1\n",  # a row twice
    ],
)
def test_topo_m_empty_or_implausible_matrix_is_parse_error(text):
    with pytest.raises(n.ParseError):
        n.parse_topo_m(text)


# --- topo -p2p --------------------------------------------------------------------------------------------


def test_topo_p2p_on_real_captures():
    ok = n.parse_topo_p2p(fixture("nvidia-smi-topo-p2p", "h100-8gpu-p2p-read-all-ok"))
    assert ok["devices"] == ["GPU%d" % i for i in range(8)]
    assert all(v == "OK" for row in ok["status"].values() for v in row.values())
    assert len(ok["status"]["GPU3"]) == 7 and "GPU3" not in ok["status"]["GPU3"]
    l4 = n.parse_topo_p2p(fixture("nvidia-smi-topo-p2p", "l4-2gpu-p2p-read-chipset-not-supported"))
    assert l4["status"] == {"GPU0": {"GPU1": "CNS"}, "GPU1": {"GPU0": "CNS"}}


def test_topo_p2p_reads_the_real_binary_layout_tabs_and_underlined_header():
    text = " \t\x1b[4mGPU0\tGPU1\t\x1b[0m\n GPU0\tX\tNS\t\n GPU1\tNS\tX\t\n\nLegend:\n\n  X    = Self\n"
    assert n.parse_topo_p2p(text)["status"] == {"GPU0": {"GPU1": "NS"}, "GPU1": {"GPU0": "NS"}}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "        GPU0    GPU1\n GPU0   X       OK\n",  # cut short: no row for GPU1
        "        GPU0    GPU1\n GPU0   X       OK\n GPU1   OK      OK\n",  # no X on the diagonal
        "        GPU0    GPU1\n GPU0   X       NV12\n GPU1   NV12    X\n",  # a topo -m code, not a P2P status
        "        GPU0    GPU1\n GPU0   X\n GPU1   OK      X\n",  # short row
    ],
)
def test_topo_p2p_refuses_what_it_cannot_read(text):
    with pytest.raises(n.ParseError):
        n.parse_topo_p2p(text)
