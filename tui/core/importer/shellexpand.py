"""Expand one raw bash word into the argv words bash would pass, without running anything.

Covers what launch scripts use: quoting ('', "", $'', backslash), `$VAR`/`${VAR}`,
`${VAR:-word}` and its `-`/`:=`/`=`/`:+`/`+`/`#`/`%` relatives (the word itself expanded,
so defaults can name other variables), `${#VAR}`, simple arrays (`${a[@]}`, `${a[1]}`),
`$((arithmetic))`, `~`, `"$@"`/`$*` (the script's arguments: none here), and word
splitting of unquoted results. Anything whose value needs a command to run (`$(...)`,
backticks) becomes a visible placeholder and is reported; it is never guessed. Globs are
left as written (bash too keeps a pattern that matches no file).
"""

from __future__ import annotations

import ast
import fnmatch
import operator
import re
import warnings
from dataclasses import dataclass, field
from typing import Callable

from tui.core.importer.limits import (
    MAX_ARITH_CHARS,
    MAX_ARITH_DEPTH,
    MAX_EXPANDED_CHARS,
    MAX_ITEMS,
    MAX_NESTING,
    MAX_WORD_CHARS,
    Refused,
)

PLACEHOLDER_OPEN = "<unresolved:"


def placeholder(what: str, line: int) -> str:
    return f"{PLACEHOLDER_OPEN} line {line}: {' '.join(what.split())}>"


def has_placeholder(value: object) -> bool:
    if isinstance(value, list):
        return any(has_placeholder(v) for v in value)
    return isinstance(value, str) and PLACEHOLDER_OPEN in value


PWD_PLACEHOLDER = "<launch_dir_path>"
"""What `$PWD` becomes: bash sets it to the directory the script is started from, which an
import cannot know; a placeholder (`check` fails on it) rather than a guess or the empty string
(no blank in it: an unquoted `$PWD` is split on blanks)."""


@dataclass
class ShellState:
    """Variables as bash would hold them at one point of the script."""

    vars: dict[str, str] = field(default_factory=dict)
    arrays: dict[str, list[str]] = field(default_factory=dict)
    exported: set[str] = field(default_factory=set)
    home: str = "/root"
    script: str = "script.sh"
    # (line, message) for everything the caller should hear about.
    notes: list[tuple[int, str]] = field(default_factory=list)
    # Names read but never set (bash expands them to empty).
    unset_reads: dict[str, int] = field(default_factory=dict)
    args_used: set[int] = field(default_factory=set)  # lines where the script's arguments were read
    functions: set[str] = field(default_factory=set)
    home_used: set[int] = field(default_factory=set)  # lines where $HOME/~ was expanded
    pwd_used: set[int] = field(default_factory=set)  # lines where $PWD was read
    frames: list[list[str]] = field(default_factory=list)  # arguments of the functions being run
    spent: int = 0  # characters expanded so far: bounds the whole walk's time and memory
    items: int = 0  # fields, elements, commands, exported copies, notes made so far (MAX_ITEMS)
    depth: int = 0  # expansions inside each other right now
    arith_depth: int = 0  # arithmetic operators inside each other, across names and nested $((
    _noted: set[tuple[int, str]] = field(default_factory=set)

    def charge(self, n: int, line: int) -> None:
        self.spent += n
        if self.spent > MAX_EXPANDED_CHARS:
            raise Refused(line, f"expanding the script takes more than {MAX_EXPANDED_CHARS:,} characters "
                                "(a variable doubled in a loop?); refused")

    def count(self, n: int, line: int) -> None:
        """`n` more things kept (each costs memory whatever its length): bounded in all."""
        self.items += n
        if self.items > MAX_ITEMS:
            raise Refused(line, f"expanding the script makes more than {MAX_ITEMS:,} words, array elements "
                                "and commands (a loop of function calls?); refused")

    def get(self, name: str, line: int) -> str | None:
        if name in self.arrays:
            a = self.arrays[name]
            return a[0] if a else ""
        if name in self.vars:
            return self.vars[name]
        if name == "HOME":
            self.home_used.add(line)
            return self.home
        if name == "PWD":  # bash always sets it: the directory the script is launched from
            self.pwd_used.add(line)
            return PWD_PLACEHOLDER
        return None

    def note(self, line: int, msg: str) -> None:
        if (line, msg) not in self._noted:
            self.count(1, line)
            self._noted.add((line, msg))
            self.notes.append((line, msg))


class _Fields:
    """Accumulates fields; unquoted expansion results are split on blanks (default IFS)."""

    def __init__(self, st: ShellState, line: int, nosplit: bool = False) -> None:
        self.nosplit = nosplit  # assignment values and ${x:-word} words are not split
        self.fields: list[str] = []
        self.cur: list[str] = []
        self.started = False  # the current field exists even if empty (quotes seen)
        self.vanish = False  # a quoted "$@" of nothing was in it: empty, the field is not one
        self.st = st
        self.line = line
        self.size = 0

    def _grow(self, n: int, calls: int = 0) -> None:
        """Every piece is counted before it is kept: one word, and the whole walk, are bounded."""
        self.size += n
        if self.size > MAX_WORD_CHARS:
            raise Refused(self.line, f"a word expands to more than {MAX_WORD_CHARS:,} characters; refused")
        self.st.charge(n + calls, self.line)

    def lit(self, s: str, quoted: bool) -> None:
        self._grow(len(s), 1)
        self.cur.append(s)
        if quoted or s:
            self.started = True

    def split(self, s: str) -> None:
        if not s:
            return
        if PLACEHOLDER_OPEN in s or self.nosplit:  # unknown output is never split (or guessed)
            self.lit(s, True)
            return
        self._grow(len(s))
        parts = re.split(r"[ \t\n]+", s)
        for k, part in enumerate(parts):
            if k > 0:
                self.end()
            if part:
                self.cur.append(part)
                self.started = True

    def end(self) -> None:
        text = "".join(self.cur)
        if self.started and not (self.vanish and not text):
            self.st.count(1, self.line)
            self.fields.append(text)
        self.cur = []
        self.started = False
        self.vanish = False

    def many(self, items: list[str]) -> None:
        """Quoted "${a[@]}" / "$@": one field per element, glued to the text around."""
        if not items:
            self.vanish = True  # bash: "$@" with no arguments is no word at all
            return
        self._grow(sum(len(it) for it in items), len(items))
        for k, it in enumerate(items):
            if k > 0:
                self.end()
            self.lit(it, True)


def _i64(x: int) -> int:
    """bash's arithmetic is signed 64-bit and wraps; so every result here wraps (which also
    keeps `10**100000` or `1<<10**9` a small number, as in bash)."""
    x &= (1 << 64) - 1
    return x - (1 << 64) if x >> 63 else x


def _tdiv(a: int, b: int) -> int:
    """C's division: truncated toward zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _pow(a: int, b: int) -> int:
    if b < 0:
        raise ValueError("exponent less than 0")
    return pow(a, b, 1 << 64)


_ARITH_OPS: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Mod: lambda a, b: a - b * _tdiv(a, b), ast.Pow: _pow,
    ast.FloorDiv: _tdiv, ast.Div: _tdiv,
    ast.LShift: lambda a, b: a << (b & 63), ast.RShift: lambda a, b: a >> (b & 63),
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
}


def _arith(expr: str, st: ShellState, line: int, depth: int = 0) -> int:
    """bash integer arithmetic: + - * / % ** << >> & | ^, parentheses, names and $vars,
    in signed 64 bits as bash computes."""
    if depth > 10:
        raise ValueError("recursive arithmetic")
    text = expand_string(expr, st, line, quoted=True)
    if len(text) > MAX_ARITH_CHARS:
        raise Refused(line, f"an arithmetic expression of more than {MAX_ARITH_CHARS:,} characters; refused")
    try:
        with warnings.catch_warnings():  # (`1a` is an "invalid decimal literal" warning on stderr)
            warnings.simplefilter("ignore")
            tree = ast.parse(text.strip() or "0", mode="eval")
    except (RecursionError, MemoryError):
        raise Refused(line, "arithmetic nested too deeply; refused") from None
    except ValueError as e:  # (a null byte)
        raise SyntaxError(str(e)) from None

    def ev(n: ast.AST, d: int = 0) -> int:
        # One depth for the whole evaluation: a name's value is evaluated inside it (bash
        # does), so `a=-----b; b=-----c ...` cannot nest MAX_ARITH_DEPTH per name.
        st.arith_depth += 1
        try:
            if st.arith_depth > MAX_ARITH_DEPTH:
                raise Refused(line, f"arithmetic nested more than {MAX_ARITH_DEPTH} deep; refused")
            return _i64(ev1(n, d + 1))
        finally:
            st.arith_depth -= 1

    def ev1(n: ast.AST, d: int) -> int:
        if isinstance(n, ast.Expression):
            return ev(n.body, d)
        if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool):
            return n.value
        if isinstance(n, ast.Name):
            v = st.get(n.id, line)
            if v is None or v.strip() == "":
                return 0
            return _arith(v, st, line, depth + 1)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd, ast.Invert)):
            x = ev(n.operand, d)
            return -x if isinstance(n.op, ast.USub) else (x if isinstance(n.op, ast.UAdd) else ~x)
        if isinstance(n, ast.BinOp) and type(n.op) in _ARITH_OPS:
            a, b = ev(n.left, d), ev(n.right, d)
            if isinstance(n.op, (ast.Div, ast.FloorDiv, ast.Mod)) and b == 0:
                raise ValueError("division by zero")
            return _ARITH_OPS[type(n.op)](a, b)
        raise ValueError(f"unsupported arithmetic {ast.dump(n)[:40]}")

    return ev(tree)


def _find_close(s: str, i: int, open_: str, close: str) -> int:
    """Index of the bracket closing the one at s[i], skipping quotes."""
    depth = 0
    j = i
    while j < len(s):
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == "'" and open_ == "(":
            k = s.find("'", j + 1)
            j = len(s) if k < 0 else k + 1
            continue
        if c == '"':
            k = j + 1
            while k < len(s) and s[k] != '"':
                k += 2 if s[k] == "\\" else 1
            j = k + 1
            continue
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return len(s) - 1


_PARAM_RE = re.compile(r"^(#?)([A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])(\[([^\]]*)\])?(.*)$", re.S)


def _param(body: str, st: ShellState, line: int, quoted: bool, out: _Fields) -> None:
    """${...}: the parameter and its operator (one handler per operator, `_PARAM_OPS`)."""
    m = _PARAM_RE.match(body)
    if not m:
        st.note(line, f"${{{body}}}: not an expansion the importer knows; left as a placeholder")
        out.lit(placeholder("${" + body + "}", line), True)
        return
    length, name, _, index, rest = m.groups()
    if name in ("@", "*"):
        _all_args(name, st, line, quoted, out)
        return
    if index is not None and index in ("@", "*"):
        _all_items(name, index, bool(length), st, quoted, out)
        return
    value = _param_value(name, index, st, line)
    if length:
        out.lit(str(len(value or "")), quoted)
        return
    if rest:
        op_m = re.match(r"^(:?[-=+?]|##?|%%?|/)(.*)$", rest, re.S)
        if not op_m:
            st.note(line, f"${{{body}}}: operator not supported; left as a placeholder")
            out.lit(placeholder("${" + body + "}", line), True)
            return
        op, word = op_m.groups()
        p = _ParamOp(body, name, op, word, value, st, line, quoted, out)
        done, value = _PARAM_OPS.get(op, _unsupported)(p)
        if done:
            return
    if value is None:
        if name not in st.unset_reads:
            st.unset_reads[name] = line
        value = ""
    if quoted:
        out.lit(value, True)
    else:
        out.split(value)


def _spread(items: list[str], all_words: bool, quoted: bool, out: _Fields) -> None:
    """"$@"-like: a field per item; "$*"-like: one field; unquoted: split."""
    if quoted and all_words:
        out.many(items)
    elif quoted:
        out.lit(" ".join(items), True)
    else:
        out.split(" ".join(items))


def _all_args(name: str, st: ShellState, line: int, quoted: bool, out: _Fields) -> None:
    """${@}/${*}: inside a function its arguments; at the top, the script's (unknown)."""
    if st.frames:
        _spread(st.frames[-1], name == "@", quoted, out)
    else:  # imported as if the script got none: a quoted "$@" is then no field at all, as in bash
        st.args_used.add(line)
        _spread([], name == "@", quoted, out)


def _all_items(name: str, index: str, length: bool, st: ShellState, quoted: bool, out: _Fields) -> None:
    """${a[@]}/${a[*]}/${#a[@]}: every element of an array (a scalar is one)."""
    items = st.arrays.get(name, [st.vars[name]] if name in st.vars else [])
    if length:
        out.lit(str(len(items)), quoted)
        return
    _spread(items, index == "@", quoted, out)


def _param_value(name: str, index: str | None, st: ShellState, line: int) -> str | None:
    """The parameter's value before its operator; None when it is unset."""
    if index is not None:
        try:
            k = _arith(index, st, line)
        except (ValueError, SyntaxError):
            k = 0
        arr = st.arrays.get(name, [st.vars[name]] if name in st.vars else [])
        return arr[k] if -len(arr) <= k < len(arr) else None
    if st.frames and (name == "#" or (name.isdigit() and name != "0")):
        args = st.frames[-1]
        return str(len(args)) if name == "#" else (args[int(name) - 1] if int(name) <= len(args) else "")
    if name.isdigit() or name in "#?$!-":
        if name.isdigit() and name != "0":
            st.args_used.add(line)
        return {"0": st.script, "#": "0", "?": "0"}.get(name)
    return st.get(name, line)


@dataclass
class _ParamOp:
    """One ${name<op>word}: what its operator's handler needs."""

    body: str
    name: str
    op: str
    word: str
    value: str | None
    st: ShellState
    line: int
    quoted: bool
    out: _Fields

    @property
    def empty(self) -> bool:
        """Unset, or (with the `:` form) set to the empty string."""
        return self.value is None or (self.op.startswith(":") and self.value == "")


# A handler returns (done, value): done when it wrote the fields itself; else the value to write.
_OpResult = tuple[bool, str | None]


def _use_default(p: _ParamOp) -> _OpResult:
    """${x:-word}: the word keeps its own quoting; quoted parts are not split."""
    if p.empty:
        _expand(p.word, p.st, p.line, p.out, p.quoted, in_param=True)
        return True, None
    return False, p.value


def _assign_default(p: _ParamOp) -> _OpResult:
    """${x:=word}: the word, also assigned to x."""
    if p.empty:
        value = expand_string(p.word, p.st, p.line, quoted=p.quoted)
        p.st.vars[p.name] = value
        return False, value
    return False, p.value


def _use_alternative(p: _ParamOp) -> _OpResult:
    """${x:+word}: the word when x is set, else nothing."""
    if not p.empty:
        _expand(p.word, p.st, p.line, p.out, p.quoted, in_param=True)
    return True, None


def _error_if_unset(p: _ParamOp) -> _OpResult:
    """${x:?word}: bash would stop; noted, and taken as empty."""
    if p.empty:
        p.st.note(p.line, f"${{{p.body}}}: bash would stop the script here ({p.name} is not set)")
        return False, ""
    return False, p.value


# op -> (try the longest match first, cut a prefix rather than a suffix)
_TRIMS = {"#": (False, True), "##": (True, True), "%": (True, False), "%%": (False, False)}


def _trim(p: _ParamOp) -> _OpResult:
    """${x#pat} ${x##pat} ${x%pat} ${x%%pat}: the shortest/longest prefix/suffix removed."""
    st, line = p.st, p.line
    pat = expand_string(p.word, st, line, quoted=True)
    v = p.value or ""
    longest, prefix = _TRIMS[p.op]

    def fits(part: str) -> bool:  # each cut tries a slice: counted, as it is quadratic
        st.charge(len(part) + 1, line)
        return fnmatch.fnmatchcase(part, pat)

    rng = range(len(v) + 1)
    order = reversed(rng) if longest else rng
    if prefix:
        cut = next((k for k in order if fits(v[:k])), None)
        return False, v[cut:] if cut is not None else v
    cut = next((k for k in order if fits(v[k:])), None)
    return False, v[:cut] if cut is not None else v


def _unsupported(p: _ParamOp) -> _OpResult:
    """${x/pat/rep} and the like: left as a visible placeholder."""
    p.st.note(p.line, f"${{{p.body}}}: substitution not supported; left as a placeholder")
    p.out.lit(placeholder("${" + p.body + "}", p.line), True)
    return True, None


_PARAM_OPS: dict[str, Callable[[_ParamOp], _OpResult]] = {
    **dict.fromkeys((":-", "-"), _use_default),
    **dict.fromkeys((":=", "="), _assign_default),
    **dict.fromkeys((":+", "+"), _use_alternative),
    **dict.fromkeys((":?", "?"), _error_if_unset),
    **dict.fromkeys(("#", "##", "%", "%%"), _trim),
}


def _expand(s: str, st: ShellState, line: int, out: _Fields, in_dquote: bool,
            assignment: bool = False, in_param: bool = False) -> None:
    """`in_param`: the word of an unquoted ${x:-word}, whose literal blanks split fields."""
    st.depth += 1
    try:
        if st.depth > MAX_NESTING:
            raise Refused(line, f"quotes and expansions nested more than {MAX_NESTING} deep; refused")
        _expand_in(s, st, line, out, in_dquote, assignment, in_param)
    finally:
        st.depth -= 1


_DOLLAR_NAME_RE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])")
_TILDE_RE = re.compile(r"~([A-Za-z0-9_.\-]*)(?=/|$|:)")


def _expand_in(s: str, st: ShellState, line: int, out: _Fields, in_dquote: bool,
               assignment: bool, in_param: bool) -> None:
    """Left to right: a quoting or expansion handler per first character (`_PIECES`); a
    handler that does not apply (None) leaves the character as it is."""
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        handler = _PIECES.get(c)
        j = handler(s, i, st, line, out, in_dquote, assignment) if handler is not None else None
        if j is not None:
            i = j
        elif in_param and not in_dquote and c in " \t\n":
            out.split(c)
            i += 1
        else:
            out.lit(c, in_dquote)
            i += 1


def _single_quoted(s: str, i: int, st: ShellState, line: int, out: _Fields, in_dquote: bool,
                   assignment: bool) -> int | None:
    """'...': literal (a plain character inside double quotes)."""
    if in_dquote:
        return None
    j = s.find("'", i + 1)
    j = len(s) if j < 0 else j
    out.lit(s[i + 1:j], True)
    return j + 1


def _double_quoted(s: str, i: int, st: ShellState, line: int, out: _Fields, in_dquote: bool,
                   assignment: bool) -> int | None:
    """"...": expanded, not split (inside double quotes only a ${x:-"word"} can hold one: same rule)."""
    n = len(s)
    j = i + 1
    while j < n and s[j] != '"':
        if s[j] == "\\":
            j += 2
        elif s[j] == "$" and j + 1 < n and s[j + 1] in "({":
            j = _find_close(s, j + 1, s[j + 1], ")" if s[j + 1] == "(" else "}") + 1
        elif s[j] == "`":
            k = s.find("`", j + 1)
            j = n if k < 0 else k + 1
        else:
            j += 1
    out.lit("", True)
    _expand(s[i + 1:j], st, line, out, True)
    return j + 1


def _backslash(s: str, i: int, st: ShellState, line: int, out: _Fields, in_dquote: bool,
               assignment: bool) -> int | None:
    nxt = s[i + 1:i + 2]
    if nxt == "\n":  # a line continuation, also inside double quotes
        out.lit("", in_dquote)
    elif in_dquote:
        out.lit(nxt if nxt in '$`"\\' else "\\" + nxt, True)
    else:
        out.lit(nxt, True)
    return i + 2


def _backtick(s: str, i: int, st: ShellState, line: int, out: _Fields, in_dquote: bool,
              assignment: bool) -> int | None:
    """`...`: needs a command to run, so a visible placeholder."""
    j = s.find("`", i + 1)
    j = len(s) if j < 0 else j
    cmd = s[i + 1:j]
    st.note(line, f"`{cmd}`: needs a command to run; left as a placeholder")
    out.lit(placeholder("`" + cmd + "`", line), True)
    return j + 1


def _dollar(s: str, i: int, st: ShellState, line: int, out: _Fields, in_dquote: bool,
            assignment: bool) -> int | None:
    """$((...)), $(...), ${...}, $'...' and $name."""
    if s.startswith("$((", i):
        return _arith_piece(s, i, st, line, out, in_dquote)
    if s.startswith("$(", i):
        j = _find_close(s, i + 1, "(", ")")
        cmd = s[i + 2:j]
        st.note(line, f"$({' '.join(cmd.split())}): needs a command to run; left as a placeholder")
        out.lit(placeholder("$(" + cmd + ")", line), True)
        return j + 1
    if s.startswith("${", i):
        j = _find_close(s, i + 1, "{", "}")
        _param(s[i + 2:j], st, line, in_dquote, out)
        return j + 1
    if s.startswith("$'", i) and not in_dquote:
        return _ansi_c(s, i, out)
    m = _DOLLAR_NAME_RE.match(s, i)  # (at i: a slice per `$` is quadratic)
    if not m:
        out.lit("$", in_dquote)
        return i + 1
    _param(m.group(1), st, line, in_dquote, out)
    return m.end()


def _arith_piece(s: str, i: int, st: ShellState, line: int, out: _Fields, in_dquote: bool) -> int:
    j = _find_close(s, i + 1, "(", ")")
    expr = s[i + 3:j - 1]
    try:
        v = str(_arith(expr, st, line))
    except (ValueError, SyntaxError, ZeroDivisionError) as e:
        st.note(line, f"$(({expr})): cannot evaluate ({e}); left as a placeholder")
        v = placeholder("$((" + expr + "))", line)
    out.lit(v, in_dquote) if in_dquote else out.split(v)
    return j + 1


def _ansi_c(s: str, i: int, out: _Fields) -> int:
    """$'...': backslash escapes decoded, literal."""
    n = len(s)
    j = i + 2
    buf: list[str] = []
    while j < n and s[j] != "'":
        if s[j] == "\\" and j + 1 < n:
            buf.append({"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"', "e": "\x1b",
                        "a": "\a", "r": "\r"}.get(s[j + 1], "\\" + s[j + 1]))
            j += 2
        else:
            buf.append(s[j])
            j += 1
    out.lit("".join(buf), True)
    return j + 1


def _tilde(s: str, i: int, st: ShellState, line: int, out: _Fields, in_dquote: bool,
           assignment: bool) -> int | None:
    """~ at a word's start (or after = or : in an assignment) is $HOME; ~user is kept."""
    if in_dquote or not (i == 0 or (assignment and s[i - 1] in "=:")):
        return None
    m = _TILDE_RE.match(s, i)
    if m and not m.group(1):
        st.home_used.add(line)
        out.lit(st.home, True)
    else:
        out.lit("~", False)
    return i + 1


_Piece = Callable[[str, int, ShellState, int, _Fields, bool, bool], int | None]
_PIECES: dict[str, _Piece] = {
    "'": _single_quoted, '"': _double_quoted, "\\": _backslash, "`": _backtick, "$": _dollar, "~": _tilde,
}


def expand_word(raw: str, st: ShellState, line: int) -> list[str]:
    """The argv words one raw word becomes (zero, one or several)."""
    out = _Fields(st, line)
    _expand(raw, st, line, out, False)
    out.end()
    return out.fields


def expand_string(raw: str, st: ShellState, line: int, quoted: bool = True,
                  assignment: bool = False) -> str:
    """A word expanded without field splitting (assignment values, `${x:-word}` words)."""
    out = _Fields(st, line, nosplit=True)
    _expand(raw, st, line, out, False, assignment=assignment)
    out.end()
    return " ".join(out.fields)


def split_array_body(body: str) -> list[str]:
    """The raw element words of `(a "b c" $d)` (body without the parentheses)."""
    from tui.core.importer.shellscan import scan

    words: list[str] = []
    for cmd in scan(body.replace("\n", " ")):
        words.extend(w.text for w in cmd.words)
    return words
