"""The fleet report as one static HTML page (pure functions, no I/O; no script, a strict CSP);
re-exported by ansible.module_utils.rackforge.fleet, the import path to use."""

from __future__ import annotations

import html
import re

from ansible.module_utils.rackforge.fleet_state import STATUS_WORDS, STATUSES, age_words
from ansible.module_utils.rackforge.fleet_text import _links, _not_run, _ports_up, _run_words, _shown

CSS = """
body{font-family:system-ui,-apple-system,"DejaVu Sans",sans-serif;margin:1.5em 2em;color:#1b1b1b;line-height:1.35}
h1{margin:0 0 .2em}h2{margin:1.6em 0 .4em;border-bottom:1px solid #ccc}h3{margin:1.1em 0 .3em}
table{border-collapse:collapse;margin:.4em 0 1em}td,th{border:1px solid #bbb;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f0f0f0}pre{margin:0;white-space:pre-wrap;max-width:70em;font-size:85%}
.counts{display:flex;flex-wrap:wrap;gap:.6em;list-style:none;padding:0}
.counts li{padding:.5em 1em;border-radius:4px;border:1px solid #999;font-size:110%}
.counts .n{font-size:180%;font-weight:bold;display:block}
.s-unhealthy{background:#b00020;color:#fff}.s-not_checked{background:#e65100;color:#fff}
.s-stale{background:#ffd54f;color:#000}.s-removed{background:#9e9e9e;color:#000}.s-healthy{background:#2e7d32;color:#fff}
.s-total{background:#fff}
.badge{padding:1px 8px;border-radius:3px;font-size:80%;vertical-align:middle}
.ok{background:#d9f2d9}.bad{background:#f8d0d0}.na{background:#eee}
.grid td{width:1.6em;height:1.4em;padding:0;text-align:center;font-size:70%}
.matrix td{padding:1px 4px;text-align:right;font-size:75%}
.grid td.words{width:auto;text-align:left;padding:0 .5em;white-space:nowrap;font-size:85%}
.wrong{min-width:20em}.by{overflow-wrap:anywhere;min-width:11em}.wrong ul{margin:0;padding-left:1.1em}.wrong li{margin-bottom:.3em}
.wrong .remedy{display:block;padding:1px 4px;font-size:90%}
.remedy{background:#fff8e1}.meta{color:#444}.nowrap{white-space:nowrap}
"""


CSP = "default-src 'none'; style-src 'unsafe-inline'"


def _e(value):
    return html.escape(_shown(value), quote=True)


def _anchor(host):
    return "node-" + re.sub(r"[^A-Za-z0-9_.-]", "-", host)


def _badge(status):
    return '<span class="badge s-%s">%s</span>' % (status, STATUS_WORDS[status])


def _evidence_html(evidence):
    if not evidence:
        return "-"
    out = (evidence.get("stderr") or "") + (evidence.get("stdout") or "")
    return "<b>command</b> <code>%s</code> <b>rc</b> %s<pre>%s</pre>" % (
        _e(evidence.get("command")),
        _e(evidence.get("rc")),
        html.escape(out.strip() or "(no output)"),
    )


def _findings_html(node):
    findings = (node["health"] or {}).get("findings") or []
    if not findings:
        return "<p>No findings.</p>" if node["health"] else ""
    rows = [
        "<table class='findings'><tr><th>check</th><th>component</th><th>what is wrong</th><th>expected</th>"
        "<th>observed</th><th>remedy</th></tr>"
    ]
    for f in findings:
        rows.append(
            '<tr class="finding" data-check="%s"><td><code>%s</code>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>'
            '<td class="remedy">%s</td></tr>'
            % (
                _e(f["check"]),
                _e(f["check"]),
                " (could not run)" if f["not_run"] else "",
                _e(f.get("component")),
                _e(f["message"]),
                _e(f.get("expected")),
                _e(f.get("observed")),
                _e(f["remedy"]),
            )
        )
        if f.get("evidence"):
            rows.append('<tr class="evidence"><td>evidence</td><td colspan="5">%s</td></tr>' % _evidence_html(f["evidence"]))
    rows.append("</table>")
    return "".join(rows)


def _nvlink_html(health):
    gpus = health["gpus"] if health else []
    if not gpus:
        return ""
    rows = ["<h3>NVLink (one cell per link: green active, red inactive)</h3><table class='grid'>"]
    for g in gpus:
        inactive = list(g.get("inactive_links") or [])
        width = max(int(g.get("expected_links") or 0), int(g.get("active_links") or 0) + len(inactive))
        cells = "".join(
            '<td class="%s" title="link %d%s">%d</td>'
            % ("bad" if (link in inactive or g.get("all_inactive")) else "ok", link, " inactive" if link in inactive else "", link)
            for link in range(width)
        )
        words = "%s/%s active" % (g.get("active_links"), g.get("expected_links"))
        if inactive:
            words += ", inactive: %s" % ",".join(str(x) for x in inactive)
        rows.append("<tr><th>GPU %s</th>%s<td class='words'>%s</td></tr>" % (_e(g.get("index")), cells, _e(words)))
    rows.append("</table>")
    return "".join(rows)


def _ports_html(health):
    ports = health["ports"] if health else []
    if not ports:
        return ""
    rows = [
        "<h3>RDMA ports</h3><table class='ports'><tr><th>CA/port</th><th>netdev</th><th>state</th><th>rate</th>"
        "<th>active MTU</th><th>PFC priorities</th><th>counters</th><th>verdict</th></tr>"
    ]
    for p in ports:
        counters = ", ".join("%s=%s" % (k, v) for k, v in sorted((p.get("counters") or {}).items()) if v)
        healthy = p.get("healthy", True)
        rows.append(
            '<tr class="%s"><td>%s/%s</td><td>%s</td><td>%s/%s</td><td>%s Gb/s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>'
            % (
                "ok" if healthy else "bad",
                _e(p.get("ca")),
                _e(p.get("port")),
                _e(p.get("netdev")),
                _e(p.get("state")),
                _e(p.get("physical_state")),
                _e(p.get("rate")),
                _e(p.get("active_mtu")),
                _e(p.get("pfc_priorities")),
                _e(counters or "-"),
                "ok" if healthy else "FAULT",
            )
        )
    rows.append("</table>")
    return "".join(rows)


def _gpu_matrix_html(nvlink, findings):
    """nvbandwidth's GPU pair matrix (GB/s): a pair with a finding red, the diagonal grey."""
    cells = {tuple(int(x) for x in key.split("-")): value for key, value in ((nvlink.get("pairs") or {}).get("gbps") or {}).items()}
    if not cells:
        return ""
    slow = {f["component"].replace("<-", "->") for f in findings if f.get("check") == "nvlink_bandwidth"}
    gpus = sorted({g for pair in cells for g in pair})
    rows = [
        "<h4>NVLink GPU pairs, GB/s (median %s; red: a finding)</h4><table class='matrix'><tr><th></th>%s</tr>"
        % (_e((nvlink.get("pairs") or {}).get("median_gbps")), "".join("<th>%d</th>" % g for g in gpus))
    ]
    for r in gpus:
        tds = []
        for c in gpus:
            if (r, c) not in cells:
                tds.append('<td class="na">-</td>')
                continue
            bad = "GPU %d -> GPU %d" % (r, c) in slow
            tds.append('<td class="%s" title="GPU %d to GPU %d">%.0f</td>' % ("bad" if bad else "ok", r, c, cells[(r, c)]))
        rows.append("<tr><th>%d</th>%s</tr>" % (r, "".join(tds)))
    rows.append("</table>")
    return "".join(rows)


def _acceptance_html(host, acceptance):
    """A node's last fabric acceptance: its RDMA pairs per rail and its NVLink pair matrix."""
    result = acceptance.get("result") or {}
    findings = result.get("findings") or []
    nvlink = result.get("nvlink") or {}
    parts = [
        "<h3>Fabric acceptance (%s): %s</h3>" % (_e(acceptance.get("at")), "passed" if not findings else "%d finding(s)" % len(findings))
    ]
    pairs = result.get("rdma") or []
    if pairs:
        parts.append(
            "<table class='ports'><tr><th>rail</th><th>partner</th><th>write bw Gb/s</th><th>latency us</th>"
            "<th>RDMA-CM us</th><th>verdict</th></tr>"
        )
        for p in sorted(pairs, key=lambda p: (p.get("rail", 0), p.get("a"), p.get("b"))):
            peer = p.get("b") if p.get("a") == host else p.get("a")
            bw, lat = p.get("bw_gbps"), p.get("lat_us")
            parts.append(
                '<tr class="%s"><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>'
                % (
                    "ok" if p.get("ok") else "bad",
                    _e(p.get("rail")),
                    _e(peer),
                    "-" if bw is None else "%.1f" % bw,
                    "-" if lat is None else "%.2f" % lat,
                    "-" if p.get("cm_lat_us") is None else "%.2f" % p["cm_lat_us"],
                    "ok" if p.get("ok") else "FAIL",
                )
            )
        parts.append("</table>")
    if nvlink.get("busbw_gbps") is not None:
        parts.append("<p>all-reduce bus bandwidth %.1f GB/s</p>" % nvlink["busbw_gbps"])
    parts.append(_gpu_matrix_html(nvlink, findings))
    return "".join(parts)


def _wrong_html(n, shown=3):
    """The node table's summary: an unhealthy node's first findings, else why it has its status."""
    if n["status"] == "healthy":
        return "-"
    if n["status"] != "unhealthy":
        return _e(n["status_reason"])
    findings = n["health"]["findings"]
    items = "".join(
        '<li><span class="msg">%s</span> <span class="remedy">%s</span></li>' % (_e(f["message"]), _e(f["remedy"]))
        for f in findings[:shown]
    )
    more = "<li>and %d more</li>" % (len(findings) - shown) if len(findings) > shown else ""
    return "<ul>%s%s</ul>" % (items, more)


def _node_html(n):
    h = n["health"]
    meta = "profile %s, driver %s; checked %s by %s" % (
        _e(n["profile"]),
        _e(n["driver_version"]),
        _e("%s (%s)" % (n["checked_at"], age_words(n["age_hours"])) if n["checked_at"] else "never"),
        _e(_run_words(n["checked_by"])),
    )
    parts = [
        '<section class="node" id="%s"><h2>%s %s</h2>' % (_e(_anchor(n["host"])), _e(n["host"]), _badge(n["status"])),
        '<p class="meta">%s.<br>%s</p>' % (meta, _e(n["status_reason"])),
    ]
    if h is not None and n["status"] != "unhealthy" and not h["healthy"]:
        parts.append("<p><b>Last verdict UNHEALTHY</b> (as of %s):</p>" % _e(n["checked_at"]))
    parts += [_findings_html(n), _nvlink_html(h), _ports_html(h)]
    if n.get("acceptance"):
        parts.append(_acceptance_html(n["host"], n["acceptance"]))
    parts.append("</section>")
    return "".join(parts)


def render_html(report):
    return "".join(html_chunks(report))


def html_chunks(report):
    """The HTML report in pieces: the front page, then one piece per node."""
    s = report["summary"]
    last = report["last_run"] or {}
    out = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        # no script, no fetch: the page is static, and a value that slipped past escaping could not run
        '<meta http-equiv="Content-Security-Policy" content="%s">' % CSP,
        "<title>rackforge fleet report</title>",
        "<style>%s</style></head><body>" % CSS,
        "<header><h1>rackforge fleet report</h1>",
        '<p class="meta">Generated %s. Last run: %s at %s. A node no run has reached for %s h is stale. '
        "Unhealthy nodes: the health gate of site.yml keeps them out of the cluster (no join; a driver upgrade leaves them "
        "cordoned); playbooks/health_check.yml only reports.</p></header>"
        % (_e(report["generated_at"]), _e(_run_words(last)), _e(last.get("at")), _e(report["stale_after_hours"])),
        '<section id="summary"><h2>Summary</h2><ul class="counts">',
    ]
    for status in STATUSES:
        label = STATUS_WORDS[status] if status != "healthy" else "healthy"
        out.append('<li class="s-%s" id="count-%s"><span class="n">%d</span>%s</li>' % (status, status, s[status], label.lower()))
    out.append('<li class="s-total" id="count-total"><span class="n">%d</span>nodes</li></ul></section>' % s["total"])
    out.append(
        '<section id="nodes"><h2>Nodes, most severe first</h2><table><tr><th>node</th><th>status</th><th>profile</th>'
        "<th>driver</th><th>GPUs</th><th>NVLinks active/expected</th><th>RDMA ports up</th><th>what is wrong</th>"
        "<th>checked, by</th></tr>"
    )
    for n in report["nodes"]:
        h = n["health"]
        out.append(
            '<tr class="row-%s" data-host="%s"><td class="nowrap"><a href="#%s">%s</a></td><td class="s-%s">%s</td>'
            '<td class="nowrap">%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class="wrong">%s</td>'
            '<td class="by">%s<br>%s</td></tr>'
            % (
                _e(n["status"]),
                _e(n["host"]),
                _e(_anchor(n["host"])),
                _e(n["host"]),
                _e(n["status"]),
                STATUS_WORDS[n["status"]],
                _e(n["profile"]),
                _e(n["driver_version"]),
                len(h["gpus"]) if h else "-",
                "%d/%d" % _links(h) if h else "-",
                "%d/%d" % _ports_up(h) if h else "-",
                _wrong_html(n),
                _e("%s (%s)" % (n["checked_at"], age_words(n["age_hours"])) if n["checked_at"] else "never"),
                _e(_run_words(n["checked_by"])),
            )
        )
    out.append("</table></section>")
    rows = _not_run(report)
    out.append('<section id="not-run"><h2>Checks that could not run</h2>')
    if rows:
        out.append("<table><tr><th>node</th><th>check</th><th>why</th><th>evidence</th><th>remedy</th></tr>")
        for n, f in rows:
            out.append(
                '<tr class="bad"><td><a href="#%s">%s</a></td><td><code>%s</code></td><td>%s</td><td>%s</td><td class="remedy">%s</td></tr>'
                % (
                    _e(_anchor(n["host"])),
                    _e(n["host"]),
                    _e(f["check"]),
                    _e(f.get("observed")),
                    _evidence_html(f.get("evidence")),
                    _e(f["remedy"]),
                )
            )
        out.append("</table>")
    else:
        out.append("<p>None: every check ran.</p>")
    out.append("</section>")
    others = [n for n in report["nodes"] if n["status"] in ("not_checked", "stale", "removed")]
    out.append('<section id="stale"><h2>Not checked, stale and removed nodes</h2>')
    if others:
        out.append("<table><tr><th>node</th><th>status</th><th>why</th><th>last verdict</th></tr>")
        for n in others:
            verdict = "none" if n["healthy"] is None else ("healthy" if n["healthy"] else "UNHEALTHY")
            if n["checked_at"]:
                verdict += " (%s, %s)" % (n["checked_at"], age_words(n["age_hours"]))
            out.append(
                '<tr><td><a href="#%s">%s</a></td><td>%s</td><td>%s</td><td>%s</td></tr>'
                % (_e(_anchor(n["host"])), _e(n["host"]), _badge(n["status"]), _e(n["status_reason"]), _e(verdict))
            )
        out.append("</table>")
    else:
        out.append("<p>None.</p>")
    out.append("</section>")
    accepted = [n for n in report["nodes"] if n.get("acceptance")]
    if accepted:
        out.append('<section id="acceptance"><h2>Acceptance results</h2><ul>')
        out += [
            '<li><a href="#%s">%s</a> (%s)</li>' % (_e(_anchor(n["host"])), _e(n["host"]), _e(n["acceptance"].get("at"))) for n in accepted
        ]
        out.append("</ul></section>")
    out.append('<section id="details"><h2>Nodes in detail</h2></section>')
    yield "".join(out)
    for n in report["nodes"]:
        yield _node_html(n)
    yield "</body></html>\n"
