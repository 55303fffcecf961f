"""The fleet report in a real headless browser (Debian's chromium, installed by scripts/setup.sh).
The report forbids scripts itself (Content-Security-Policy) and is read as it is: its first screen
shows the summary counts and the faulted node's finding with its remedy (pixels of a screenshot,
at the places the browser laid them out, on top of everything else there), and the text a reader
sees (innerText, which leaves out what CSS hides) holds every section.

Only file:// URLs; every host name resolves to nothing (--host-resolver-rules), so the browser
reaches no network."""

from __future__ import annotations

import html
import json
import re
import shutil
import struct
import subprocess
import zlib

import pytest
from ansible.module_utils.rackforge import fleet
from test_fleet import at, rich_state

CHROMIUM = shutil.which("chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--hide-scrollbars",
]
WIDTH, HEIGHT = 1400, 1000
# the report's CSS colours (module_utils/rackforge/fleet.py CSS)
UNHEALTHY_RED = (0xB0, 0x00, 0x20)
HEALTHY_GREEN = (0x2E, 0x7D, 0x32)
STALE_YELLOW = (0xFF, 0xD5, 0x4F)
REMEDY_CREAM = (0xFF, 0xF8, 0xE1)
FINDING = "GPU 5 (GPU-00000005): NVLink(s) 3 inactive: 17 of 18 expected links active"


def chromium(tmp_path, *args):
    assert CHROMIUM, "chromium is not installed: scripts/setup.sh installs it (apt-get install chromium)"
    cmd = [CHROMIUM, *FLAGS, "--user-data-dir=%s" % (tmp_path / "profile"), *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


def png_pixels(path):
    """(width, height, rows of (r, g, b)) of an 8-bit RGB or RGBA PNG (what chromium writes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * channels, [], bytearray(width * channels)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append([tuple(line[x * channels : x * channels + 3]) for x in range(width)])
        prev = line
    return width, height, rows


def count(rows, colour, box=None, tolerance=6):
    """Pixels of `colour` in rows (inside box {x, y, w, h} when given)."""
    x0, y0, x1, y1 = (0, 0, len(rows[0]), len(rows)) if box is None else _edges(box)
    return sum(1 for row in rows[y0:y1] for px in row[x0:x1] if all(abs(p - q) <= tolerance for p, q in zip(px, colour)))


def ink(rows, box, dark=True):
    """Text pixels in a box: dark ones on a light background (or light ones on a dark one)."""
    x0, y0, x1, y1 = _edges(box)
    return sum(1 for row in rows[y0:y1] for px in row[x0:x1] if (sum(px) < 250 if dark else sum(px) > 650))


def _edges(box):
    return int(box["x"]) + 1, int(box["y"]) + 1, int(box["x"] + box["w"]) - 1, int(box["y"] + box["h"]) - 1


def area(box):
    return max(0, int(box["w"]) - 2) * max(0, int(box["h"]) - 2)


PROBE = """<script>
(function () {
  function box(selector) {
    var e = document.querySelector(selector);
    if (!e) { return null; }
    var r = e.getBoundingClientRect(), st = getComputedStyle(e);
    var hit = document.elementFromPoint(r.left + r.width / 2, r.top + Math.min(r.height / 2, 8));
    return {x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height, visibility: st.visibility, display: st.display,
            text: e.innerText, on_top: !!hit && (hit === e || e.contains(hit))};
  }
  var probe = {text: document.body.innerText, page_width: document.documentElement.scrollWidth, boxes: {}};
  var wanted = %s;
  for (var name in wanted) { probe.boxes[name] = box(wanted[name]); }
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(probe);
  document.body.appendChild(pre);
})();
</script></body>"""
ROW = '#nodes tr[data-host="node2"] td.wrong li:first-child'
BOXES = {
    "count_unhealthy": "#count-unhealthy",
    "count_healthy": "#count-healthy",
    "row_finding": ROW + " span.msg",
    "row_remedy": ROW + " span.remedy",
    "nodes": "#nodes",
    "not_run": "#not-run",
    "stale": "#stale",
    "detail_finding": '#node-node2 tr.finding[data-check="nvlink_inactive"]',
    "detail_remedy": '#node-node2 tr.finding[data-check="nvlink_inactive"] td.remedy',
}


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """The rich report (test_fleet.rich_state: node2 with NVLink 3 on GPU 5 inactive and a port down)."""
    tmp = tmp_path_factory.mktemp("fleet-browser")
    report = fleet.build_report(rich_state(), at(30), 24)
    path = tmp / "fleet.html"
    path.write_text(fleet.render_html(report))
    return tmp, path, report


@pytest.fixture(scope="module")
def layout(page):
    """Where the browser laid out what matters, and the text a reader sees: read by a script in a
    copy of the page (the report's Content-Security-Policy forbids scripts; the copy drops it)."""
    tmp, path, _ = page
    text = path.read_text()
    csp = '<meta http-equiv="Content-Security-Policy" content="%s">' % fleet.CSP
    assert csp in text
    probed = tmp / "probed.html"
    probed.write_text(text.replace(csp, "").replace("</body>", PROBE % json.dumps(BOXES)))
    dom = chromium(tmp, "--window-size=%d,%d" % (WIDTH, HEIGHT), "--dump-dom", probed.as_uri())
    return json.loads(html.unescape(re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S).group(1)))


@pytest.fixture(scope="module")
def screen(page):
    """The first screen of the report itself (scripts forbidden), as pixel rows."""
    tmp, path, _ = page
    shot = tmp / "fleet.png"
    chromium(tmp, "--screenshot=%s" % shot, "--window-size=%d,%d" % (WIDTH, HEIGHT), path.as_uri())
    width, height, rows = png_pixels(shot)
    assert (width, height) == (WIDTH, HEIGHT)
    return rows


def test_the_report_forbids_scripts_and_a_script_does_not_run(page):
    tmp, path, _ = page
    trap = tmp / "trap.html"
    trap.write_text(path.read_text().replace("</body>", "<script>document.title = 'script ran'</script></body>"))
    dom = chromium(tmp, "--dump-dom", trap.as_uri())
    assert "<title>rackforge fleet report</title>" in dom and "script ran</title>" not in dom


def test_the_first_screen_shows_the_summary_counts(layout, screen):
    red, green = layout["boxes"]["count_unhealthy"], layout["boxes"]["count_healthy"]
    assert red["text"].split() == ["2", "unhealthy"] and green["text"].split() == ["1", "healthy"]
    for b in (red, green):
        assert b["y"] + b["h"] <= HEIGHT, "the summary is below the first screen"
    # painted: the box in its colour, with its count and word drawn in white on it
    for b, colour in ((red, UNHEALTHY_RED), (green, HEALTHY_GREEN)):
        painted, drawn = count(screen, colour, b), ink(screen, b, dark=False)
        assert painted > 0.6 * area(b) and drawn > 150, (b["text"], painted, area(b), drawn)
    yellow = count(screen, STALE_YELLOW)
    assert yellow > 3000, yellow  # the stale box beside them


def test_the_first_screen_shows_the_faulted_nodes_finding_and_remedy(layout, screen):
    finding, remedy = layout["boxes"]["row_finding"], layout["boxes"]["row_remedy"]
    assert finding["text"] == FINDING and remedy["text"] == fleet.REMEDIES["nvlink_inactive"]
    for b in (finding, remedy):
        assert b["on_top"] and b["visibility"] == "visible" and b["y"] + b["h"] <= HEIGHT, b
    drawn = ink(screen, finding)
    assert drawn > 300, drawn  # the message is drawn
    painted, drawn = count(screen, REMEDY_CREAM, remedy), ink(screen, remedy)
    assert painted > 0.3 * area(remedy) and drawn > 300, (painted, area(remedy), drawn)


def test_a_reader_sees_every_section_with_its_content(layout):
    text = " ".join(layout["text"].split())
    assert "2 unhealthy 1 not checked 1 stale 1 removed 1 healthy 6 nodes" in text
    assert FINDING in text and fleet.REMEDIES["nvlink_inactive"] in text and fleet.REMEDIES["rdma_port_state"] in text
    assert "roce_gid_not_run" in text and "/usr/sbin/show_gids" in text  # a check that could not run, with its evidence
    assert "no run has reached this node for 30.0 h" in text and "not in the inventory of the run" in text
    boxes = layout["boxes"]
    for name, b in boxes.items():
        assert b and b["w"] > 0 and b["h"] > 0 and b["visibility"] == "visible" and b["display"] != "none", (name, b)
        assert b["x"] >= 0 and b["x"] + b["w"] <= layout["page_width"] + 1, (name, b)
    assert boxes["detail_remedy"]["text"] == fleet.REMEDIES["nvlink_inactive"]
    order = ["count_unhealthy", "nodes", "not_run", "stale", "detail_finding"]
    assert [boxes[n]["y"] for n in order] == sorted(boxes[n]["y"] for n in order)
