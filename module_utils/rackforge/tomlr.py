"""A TOML 1.0 reader for the managed nodes' Python (3.8+): tomllib exists only from 3.11, and
Ubuntu 22.04 (3.10), RHEL 9 (3.9) and Debian 11 (3.9) run the modules. loads() returns what
tomllib.loads() returns (dicts, lists, str, int, float, bool, datetime/date/time); the unit
tests hold the two to the same result on real containerd configs and on a corpus of TOML forms.
Errors raise TOMLDecodeError naming the line."""

from __future__ import annotations

import datetime
import re


class TOMLDecodeError(ValueError):
    """Text that is not valid TOML (the message names the line)."""


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_NUMBER = re.compile(
    r"[+-]?(?:0x[0-9A-Fa-f](?:_?[0-9A-Fa-f])*|0o[0-7](?:_?[0-7])*|0b[01](?:_?[01])*"
    r"|(?:0|[1-9](?:_?[0-9])*)(?:\.[0-9](?:_?[0-9])*)?(?:[eE][+-]?[0-9](?:_?[0-9])*)?|inf|nan)"
)
_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|z|[+-]\d{2}:\d{2})?)?")
_TIME = re.compile(r"(\d{2}):(\d{2}):(\d{2})(\.\d+)?")
_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}


class _Parser:
    def __init__(self, text):
        self.s = text.replace("\r\n", "\n")
        self.i = 0

    # ------------------------------------------------------------------ helpers
    def error(self, what):
        line = self.s.count("\n", 0, self.i) + 1
        raise TOMLDecodeError("%s (line %d)" % (what, line))

    def peek(self, n=1):
        return self.s[self.i : self.i + n]

    def skip_ws(self):
        while self.i < len(self.s) and self.s[self.i] in " \t":
            self.i += 1

    def skip_comment(self):
        if self.peek() == "#":
            end = self.s.find("\n", self.i)
            self.i = len(self.s) if end < 0 else end

    def skip_blank(self):
        """Whitespace, newlines and comments (inside arrays)."""
        while True:
            self.skip_ws()
            self.skip_comment()
            if self.peek() == "\n":
                self.i += 1
                continue
            return

    def end_of_line(self):
        self.skip_ws()
        self.skip_comment()
        if self.i < len(self.s):
            if self.peek() != "\n":
                self.error("expected the end of the line, found %r" % self.peek())
            self.i += 1

    # ------------------------------------------------------------------ keys
    def key(self):
        parts = [self.simple_key()]
        while True:
            self.skip_ws()
            if self.peek() != ".":
                return parts
            self.i += 1
            self.skip_ws()
            parts.append(self.simple_key())

    def simple_key(self):
        c = self.peek()
        if c == '"':
            return self.basic_string()
        if c == "'":
            return self.literal_string()
        m = _BARE_KEY.match(self.s, self.i)
        if not m:
            self.error("expected a key, found %r" % c)
        self.i = m.end()
        return m.group(0)

    # ------------------------------------------------------------------ strings
    def basic_string(self):
        if self.peek(3) == '"""':
            return self.multiline_basic()
        self.i += 1
        out = []
        while True:
            if self.i >= len(self.s) or self.peek() == "\n":
                self.error("unterminated string")
            c = self.s[self.i]
            if c == '"':
                self.i += 1
                return "".join(out)
            if c == "\\":
                out.append(self.escape())
                continue
            out.append(c)
            self.i += 1

    def escape(self):
        self.i += 1
        c = self.peek()
        if c in _ESCAPES:
            self.i += 1
            return _ESCAPES[c]
        if c in ("u", "U"):
            n = 4 if c == "u" else 8
            digits = self.s[self.i + 1 : self.i + 1 + n]
            if not re.match(r"^[0-9A-Fa-f]{%d}$" % n, digits):
                self.error("bad unicode escape")
            self.i += 1 + n
            return chr(int(digits, 16))
        self.error("bad escape \\%s" % c)
        return ""

    def multiline_basic(self):
        self.i += 3
        if self.peek() == "\n":
            self.i += 1
        out = []
        while True:
            if self.i >= len(self.s):
                self.error("unterminated multi-line string")
            if self.peek(3) == '"""':
                # the content may end with up to two quotes: """"" closes after two of them
                extra = 0
                while extra < 2 and self.s[self.i + 3 + extra : self.i + 4 + extra] == '"':
                    extra += 1
                out.append('"' * extra)
                self.i += 3 + extra
                return "".join(out)
            c = self.s[self.i]
            if c == "\\":
                rest = re.match(r"\\[ \t]*\n[ \t\n]*", self.s[self.i :])
                if rest:
                    self.i += rest.end()
                    continue
                out.append(self.escape())
                continue
            out.append(c)
            self.i += 1

    def literal_string(self):
        if self.peek(3) == "'''":
            self.i += 3
            if self.peek() == "\n":
                self.i += 1
            end = self.s.find("'''", self.i)
            if end < 0:
                self.error("unterminated multi-line literal string")
            extra = 0
            while extra < 2 and self.s[end + 3 + extra : end + 4 + extra] == "'":
                extra += 1
            end += extra
            text = self.s[self.i : end]
            self.i = end + 3
            return text
        end = self.s.find("'", self.i + 1)
        newline = self.s.find("\n", self.i + 1)
        if end < 0 or (0 <= newline < end):
            self.error("unterminated literal string")
        text = self.s[self.i + 1 : end]
        self.i = end + 1
        return text

    # ------------------------------------------------------------------ values
    def value(self):
        c = self.peek()
        if c == '"':
            return self.basic_string()
        if c == "'":
            return self.literal_string()
        if c == "[":
            return self.array()
        if c == "{":
            return self.inline_table()
        if self.s.startswith("true", self.i):
            self.i += 4
            return True
        if self.s.startswith("false", self.i):
            self.i += 5
            return False
        m = _DATETIME.match(self.s, self.i)
        if m:
            return self.datetime(m)
        m = _TIME.match(self.s, self.i)
        if m:
            self.i = m.end()
            return datetime.time(int(m.group(1)), int(m.group(2)), int(m.group(3)), _micro(m.group(4)))
        m = _NUMBER.match(self.s, self.i)
        if not m or not m.group(0):
            self.error("expected a value, found %r" % self.s[self.i : self.i + 10])
        self.i = m.end()
        return _number(m.group(0))

    def datetime(self, m):
        self.i = m.end()
        year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
        try:
            if m.group(4) is None:
                return datetime.date(year, month, day)
            tz = None
            if m.group(8):
                if m.group(8) in ("Z", "z"):
                    tz = datetime.timezone.utc
                else:
                    sign = 1 if m.group(8)[0] == "+" else -1
                    hours, minutes = int(m.group(8)[1:3]), int(m.group(8)[4:6])
                    tz = datetime.timezone(sign * datetime.timedelta(hours=hours, minutes=minutes))
            return datetime.datetime(year, month, day, int(m.group(4)), int(m.group(5)), int(m.group(6)), _micro(m.group(7)), tz)
        except ValueError as exc:
            self.error("bad date or time: %s" % exc)
        return None

    def array(self):
        self.i += 1
        out = []
        while True:
            self.skip_blank()
            if self.peek() == "]":
                self.i += 1
                return out
            out.append(self.value())
            self.skip_blank()
            if self.peek() == ",":
                self.i += 1
                continue
            if self.peek() == "]":
                self.i += 1
                return out
            self.error("expected , or ] in an array")

    def inline_table(self):
        self.i += 1
        table = {}
        self.skip_ws()
        if self.peek() == "}":
            self.i += 1
            return table
        while True:
            self.skip_ws()
            keys = self.key()
            self.skip_ws()
            if self.peek() != "=":
                self.error("expected = after a key")
            self.i += 1
            self.skip_ws()
            self.assign(table, keys, self.value(), set())
            self.skip_ws()
            if self.peek() == ",":
                self.i += 1
                continue
            if self.peek() == "}":
                self.i += 1
                return table
            self.error("expected , or } in an inline table")

    # ------------------------------------------------------------------ documents
    def assign(self, table, keys, value, frozen):
        for k in keys[:-1]:
            node = table.setdefault(k, {})
            if not isinstance(node, dict) or id(node) in frozen:
                self.error("key %s is already defined" % ".".join(keys))
            table = node
        if keys[-1] in table:
            self.error("key %s is defined twice" % ".".join(keys))
        table[keys[-1]] = value
        if isinstance(value, dict):
            frozen.add(id(value))  # an inline table cannot be extended

    def document(self):
        root = {}
        current = root
        defined = set()
        frozen = set()
        while True:
            self.skip_blank()
            if self.i >= len(self.s):
                return root
            if self.peek(2) == "[[":
                self.i += 2
                self.skip_ws()
                keys = self.key()
                self.skip_ws()
                if self.peek(2) != "]]":
                    self.error("expected ]] after an array-of-tables header")
                self.i += 2
                parent = self.walk(root, keys[:-1], frozen)
                items = parent.setdefault(keys[-1], [])
                if not isinstance(items, list) or id(items) in frozen:
                    self.error("%s is not an array of tables" % ".".join(keys))
                current = {}
                items.append(current)
                self.end_of_line()
                continue
            if self.peek() == "[":
                self.i += 1
                self.skip_ws()
                keys = self.key()
                self.skip_ws()
                if self.peek() != "]":
                    self.error("expected ] after a table header")
                self.i += 1
                path = tuple(keys)
                if path in defined:
                    self.error("table [%s] is defined twice" % ".".join(keys))
                defined.add(path)
                parent = self.walk(root, keys[:-1], frozen)
                node = parent.setdefault(keys[-1], {})
                if not isinstance(node, dict) or id(node) in frozen:
                    self.error("[%s] is already a value" % ".".join(keys))
                current = node
                self.end_of_line()
                continue
            keys = self.key()
            self.skip_ws()
            if self.peek() != "=":
                self.error("expected = after the key %s" % ".".join(keys))
            self.i += 1
            self.skip_ws()
            self.assign(current, keys, self.value(), frozen)
            self.end_of_line()

    def walk(self, root, keys, frozen):
        node = root
        for k in keys:
            child = node.setdefault(k, {})
            if isinstance(child, list):
                if not child or not isinstance(child[-1], dict):
                    self.error("%s is not a table" % k)
                child = child[-1]
            if not isinstance(child, dict) or id(child) in frozen:
                self.error("%s is not a table" % k)
            node = child
        return node


def _micro(fraction):
    return int((fraction[1:] + "000000")[:6]) if fraction else 0


def _number(text):
    clean = text.replace("_", "")
    sign = -1 if clean.startswith("-") else 1
    body = clean.lstrip("+-")
    if body == "inf":
        return sign * float("inf")
    if body == "nan":
        return float("nan")
    if body.startswith(("0x", "0o", "0b")):
        return sign * int(body[2:], {"x": 16, "o": 8, "b": 2}[body[1]])
    if any(c in body for c in ".eE"):
        return float(clean)
    return int(clean)


def loads(text):
    """Parse a TOML document into a dict, as tomllib.loads does."""
    if not isinstance(text, str):
        raise TypeError("loads() takes a str")
    return _Parser(text).document()
