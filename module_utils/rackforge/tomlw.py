"""A TOML writer for what tomlr (and Python's tomllib) read (dicts, lists, strings, numbers,
booleans, dates): enough to write a containerd config back after a structured merge; the
standard library has no writer. Comments of the original are not kept: the caller
writes only when the parsed content really changes."""

from __future__ import annotations

import datetime
import json
import math
import re

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k):
    return k if _BARE.match(k) else json.dumps(k)


def _value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # JSON string escapes are TOML basic-string escapes
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join("%s = %s" % (_key(k), _value(x)) for k, x in v.items()) + "}"
    raise TypeError("cannot write %r as TOML" % (v,))


def _is_table_array(v):
    return isinstance(v, list) and v and all(isinstance(x, dict) for x in v)


def _table(path, data, out, header):
    scalars = [(k, v) for k, v in data.items() if not isinstance(v, dict) and not _is_table_array(v)]
    tables = [(k, v) for k, v in data.items() if isinstance(v, dict)]
    arrays = [(k, v) for k, v in data.items() if _is_table_array(v)]
    if header:
        out.append("")
        out.append(header)
    for k, v in scalars:
        out.append("%s = %s" % (_key(k), _value(v)))
    for k, v in tables:
        sub = [*path, k]
        # a table that holds only tables needs no header of its own, unless it is empty
        needs_header = not v or any(not isinstance(x, dict) and not _is_table_array(x) for x in v.values())
        _table(sub, v, out, "[%s]" % ".".join(_key(p) for p in sub) if needs_header else None)
    for k, items in arrays:
        sub = [*path, k]
        for item in items:
            _table(sub, item, out, "[[%s]]" % ".".join(_key(p) for p in sub))


def dumps(data):
    out = []
    _table([], data, out, None)
    return "\n".join(out).lstrip("\n") + "\n"
