"""Read a Hydra override's value the way Hydra's grammar would, for the common cases.

The profile stores YAML values that `render` writes back as Hydra literals, so the value
must be parsed, not copied: `True` is a boolean, `'error'` the string error, `1e-6` a
float, `['a','b']` a list of two strings, `${x.y}` an interpolation kept as written.
Anything outside this subset (dicts, sweeps, function calls such as `choice(...)`)
raises `ValueError` and is reported, so an unknown construct is never silently changed.
"""

from __future__ import annotations

import re
from typing import Any

_INT_RE = re.compile(r"^[+-]?(0|[1-9][0-9_]*)$")
_FLOAT_RE = re.compile(r"^[+-]?(([0-9][0-9_]*)?\.[0-9][0-9_]*|[0-9][0-9_]*\.?)([eE][+-]?[0-9_]+)?$")
_BARE_RE = re.compile(r"^[^\s'\"\[\]{}(),=:\\]+$")
_INTERP_RE = re.compile(r"^\$\{[^{}'\"\\\s]+\}$")


def _unquote(s: str) -> str:
    q = s[0]
    body = s[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            j = i
            while j < len(body) and body[j] == "\\":
                j += 1
            run = j - i
            if j == len(body) or body[j] == q:
                out.append("\\" * (run // 2))
                if j < len(body) and run % 2:
                    out.append(q)
                    j += 1
            elif body[j] == "$" and run % 2:
                out.append("\\" * (run // 2) + "$")
                j += 1
            else:
                out.append("\\" * run)
            i = j
            continue
        if c == q:
            raise ValueError("unescaped quote inside a quoted value")
        if c == "$" and body.startswith("${", i):
            raise ValueError("an interpolation inside a quoted string")
        out.append(c)
        i += 1
    return "".join(out)


def _scalar(s: str) -> Any:
    t = s.strip()
    if not t:
        return ""
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return _unquote(t)
    low = t.lower()
    if low == "null":
        return None
    if low in ("true", "false"):
        return low == "true"
    if _INT_RE.match(t):
        return int(t.replace("_", ""))
    if low in ("inf", "+inf", "-inf", "nan", "+nan", "-nan"):
        return float(low)
    if _FLOAT_RE.match(t) and any(ch.isdigit() for ch in t):
        return float(t.replace("_", ""))
    if _INTERP_RE.match(t):
        return t
    if _BARE_RE.match(t) and "${" not in t:
        # Hydra keeps inner blanks of an unquoted value but strips the ends.
        return t
    if re.fullmatch(r"[^'\"\[\]{}(),=\\]+", t) and "${" not in t and ":" not in t:
        return t
    raise ValueError(f"value {s!r} is outside what the importer reads (quote it in the script)")


def _split_list(body: str) -> list[str]:
    items: list[str] = []
    cur: list[str] = []
    q = ""
    i = 0
    while i < len(body):
        c = body[i]
        if q:
            cur.append(c)
            if c == "\\" and i + 1 < len(body):
                cur.append(body[i + 1])
                i += 2
                continue
            if c == q:
                q = ""
        elif c in "'\"":
            q = c
            cur.append(c)
        elif c in "[]{}":
            raise ValueError("nested lists or mappings are not imported")
        elif c == ",":
            items.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    if q:
        raise ValueError("unterminated quote in a list")
    if cur or items:
        items.append("".join(cur))
    return items


def parse_value(s: str) -> Any:
    """A Hydra override value as the Python value Hydra would give the config."""
    t = s.strip()
    if t.startswith("[") and t.endswith("]"):
        body = t[1:-1]
        if not body.strip():
            return []
        return [_scalar(x) for x in _split_list(body)]
    if t.startswith("{") and t.endswith("}") and t[1:-1].strip() == "":
        return {}
    if t.startswith(("[", "{")) or re.match(r"^[A-Za-z_]+\(", t):
        raise ValueError(f"value {s!r} is outside what the importer reads (lists of scalars only)")
    return _scalar(s)


_OVERRIDE_RE = re.compile(r"^(\+\+|\+|~)?([A-Za-z_0-9][\w\-@/]*(?:\.[\w\-@/]+)*)(?:@[\w.:\-]+)?=(.*)$", re.S)


def split_override(arg: str) -> tuple[str, str, str] | None:
    """(prefix, key, raw value) of `[+|++]key=value`, or None for something else."""
    m = _OVERRIDE_RE.match(arg)
    if not m:
        return None
    return m.group(1) or "", m.group(2), m.group(3)
