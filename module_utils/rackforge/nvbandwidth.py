"""Pure parser for the plain-text output of NVIDIA nvbandwidth (no I/O).

Public, stable API (names and return shapes do not change):

- parse_nvbandwidth(text) -> {"tests": {key: result}}, where result is
  {"matrix": {(row, col): float}, "sum": float | None,
   "testcase": str | None, "title": str, "unit": str | None}
- ParseError(ValueError): the only exception raised.

The format follows nvbandwidth's own source (github.com/NVIDIA/nvbandwidth, v0.1 to v0.8:
the PeerValueMatrix printer in common.h / inline_common.h, Output::addTestcase and
Output::addTestcaseResults in output.cpp, runTestcase in nvbandwidth.cpp) and is held to the real
captures in tests/fixtures/realworld/nvbandwidth/:

- "Running <testcase>." opens a test. Each result matrix is a title line (e.g.
  "memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)"; latency tests end in "(ns)"), a header of
  column indices 0..n-1, then one line per row: the row label and one cell per column, each cell
  right-aligned in 10 characters, either a fixed two-decimal number or "N/A" (no peer access, the
  diagonal). A row is never wrapped, however many GPUs. Host tests have the single row 0.
- After a blank line comes "SUM <key> <sum>" ("&&&& PERF <key> <sum> +GB/s" with --perfFormatter).
  Results are keyed by that key: the testcase name, or for the bidirectional device-to-device
  tests (three matrices each) <testcase>_read1 / _read2 / _total (write1 / write2 / _total).
  "testcase" is the name from the Running line. A matrix without a SUM line (the README
  sample) is keyed by its testcase and has "sum": None.
- N/A cells are omitted from "matrix"; v0.1 printed 0.00 on the diagonal, and those are values.
- Preamble and trailer (version, CUDA and driver versions, hostname, "Device N: ..." lines, "NOTE:"
  lines), -v lines (per-sample, MIN/MAX/AVG) and later additions such as
  COEFFICIENT_OF_VARIATION lines are ignored.
- Waived tests are left out: since v0.5 nvbandwidth prints only "Waived: " with no test name
  (v0.4 and older "Waiving <testcase>.").
- ParseError on: empty or non-text input, text with neither a result matrix nor an
  "nvbandwidth Version:" line, a test whose Running line is followed by no matrix (a run aborted
  by an ASSERT or CUDA error), a status line "ERROR: ..." / "Error: ...", a row whose cell count
  differs from the header, a cell that is neither a number nor N/A, a duplicate key.
"""

from __future__ import annotations

import re

_RUNNING = re.compile(r"^Running (\S+)\.$")
_SUM = re.compile(r"^(?:SUM|&&&& PERF) (\S+) (\S+)(?: [+-]\S+)?$")
_NUMBER = re.compile(r"^\d+(?:\.\d+)?$")
_LABEL = re.compile(r"^\d+(?:->\d+)?$")
_UNIT = re.compile(r"\(([^()]+)\)$")


class ParseError(ValueError):
    """Raised when text is not nvbandwidth output the parser can read."""


def _number(token, lineno):
    if not _NUMBER.match(token):
        raise ParseError("nvbandwidth: line %d: %r is neither a number nor N/A" % (lineno, token))
    return float(token)


def _header(line):
    """Column count of a matrix header line (leading blank, indices 0..n-1), else None."""
    tokens = line.split()
    if not tokens or not line[:1].isspace():
        return None
    if tokens != [str(k) for k in range(len(tokens))]:
        return None
    return len(tokens)


def _rows(lines, i, ncols):
    """Read rows from lines[i] up to the blank line ending the matrix -> (matrix, next index)."""
    matrix, first = {}, i
    while i < len(lines) and lines[i].strip():
        tokens = lines[i].split()
        # Multinode bisect labels are padded process ids ("36-> 0"), so the label is all that
        # precedes the last ncols cells.
        label = "".join(tokens[:-ncols]) if len(tokens) > ncols else ""
        if not _LABEL.match(label):
            raise ParseError("nvbandwidth: line %d: expected a row label and %d cells, got %r" % (i + 1, ncols, lines[i].strip()))
        row = int(label) if label.isdigit() else label
        for col, cell in enumerate(tokens[-ncols:]):
            if cell != "N/A":
                matrix[(row, col)] = _number(cell, i + 1)
        i += 1
    if i == first:
        raise ParseError("nvbandwidth: line %d: matrix header with no rows" % first)
    return matrix, i


def parse_nvbandwidth(text):
    """Parse nvbandwidth's plain-text output; see the module docstring for the shape."""
    if not isinstance(text, str):
        raise ParseError("nvbandwidth: expected text, got %s" % type(text).__name__)
    if not text.strip():
        raise ParseError("nvbandwidth: empty output")
    lines = [raw.rstrip() for raw in text.splitlines()]
    tests = {}
    testcase = None
    pending = False  # a Running line not yet followed by a matrix
    versioned = False
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        m = _RUNNING.match(stripped)
        if m:
            if pending:
                raise ParseError("nvbandwidth: test %s printed no result matrix" % testcase)
            testcase, pending = m.group(1), True
            i += 1
            continue
        if stripped.startswith(("ERROR: ", "Error: ")):
            raise ParseError("nvbandwidth: line %d: nvbandwidth reported %r" % (i + 1, stripped))
        versioned = versioned or stripped.startswith("nvbandwidth Version:")
        ncols = _header(line)
        if ncols is None:
            i += 1
            continue
        title = lines[i - 1].strip() if i > 0 else ""
        if not title:
            raise ParseError("nvbandwidth: line %d: matrix header without a title line" % (i + 1))
        matrix, i = _rows(lines, i + 1, ncols)
        j = i
        while j < len(lines) and not lines[j].strip():
            j += 1
        key, total = testcase, None
        m = _SUM.match(lines[j].strip()) if j < len(lines) else None
        if m:
            key, total = m.group(1), _number(m.group(2), j + 1)
            if testcase is not None and not key.startswith(testcase):
                raise ParseError("nvbandwidth: line %d: SUM for %s inside test %s" % (j + 1, key, testcase))
            i = j + 1
        if key is None:
            raise ParseError("nvbandwidth: matrix %r has neither a Running line nor a SUM line" % title)
        if key in tests:
            raise ParseError("nvbandwidth: result %s printed twice" % key)
        unit = _UNIT.search(title)
        tests[key] = {"matrix": matrix, "sum": total, "testcase": testcase, "title": title, "unit": unit.group(1) if unit else None}
        pending = False
    if pending:
        raise ParseError("nvbandwidth: test %s printed no result matrix (run aborted?)" % testcase)
    if not tests and not versioned:
        raise ParseError("nvbandwidth: no result matrix and no 'nvbandwidth Version:' line")
    return {"tests": tests}
