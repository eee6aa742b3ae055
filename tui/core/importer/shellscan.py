"""Split a bash script into simple commands of raw words, the way bash's parser would,
without running anything.

Only the parser's decisions are made here (where words and commands end, comments,
backslash-newline, heredocs, `name=(array)`); the meaning of each word is given later by
`shellexpand`, because it depends on the variables set by the commands before it. The one
trap this module exists to see: a `# comment` or blank line after a trailing backslash
ends the command there, so every line after it becomes a separate command that bash runs
(and fails to find). Each command records whether it ended that way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from tui.core.importer.limits import MAX_ITEMS, MAX_NESTING, Refused

_NAME_EQ = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")


@dataclass(slots=True)
class RawWord:
    """One word as written (quotes and `$` still in it), and the script line it starts on."""

    text: str
    line: int


@dataclass(slots=True)
class RawCommand:
    words: list[RawWord]
    line: int
    end_line: int
    # Set when a comment or a blank line after a trailing backslash ended the command.
    broken_by: str | None = None  # "comment" or "blank line"
    broken_line: int = 0
    sep: str = "\n"  # what ended it: newline, ;, &&, ||, |, &
    heredoc: bool = False
    redirects: list[str] = field(default_factory=list)


class _Scanner:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.line = 1
        self.pending_heredocs: list[tuple[str, bool]] = []
        self.depth = 0  # quotes, $( and ${ open right now
        self.made = 0  # commands and words so far

    def count(self) -> None:
        """One more command or word: a 1 MiB script of `x;` lines is refused, not kept."""
        self.made += 1
        if self.made > MAX_ITEMS:
            raise Refused(self.line, f"more than {MAX_ITEMS:,} commands and words; refused")

    def enter(self) -> None:
        """One more construct inside another: bounded, so `$($($(...` cannot exhaust the stack."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise Refused(self.line, f"quotes, $( and ${{ nested more than {MAX_NESTING} deep; refused")

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def adv(self, n: int = 1) -> str:
        out = self.s[self.i:self.i + n]
        self.line += out.count("\n")
        self.i += n
        return out

    # ---- balanced constructs: return their raw text including delimiters

    def read_single(self) -> str:
        j = self.s.find("'", self.i + 1)
        if j < 0:
            j = len(self.s) - 1
        return self.adv(j + 1 - self.i)

    def read_double(self) -> str:
        self.enter()
        out = [self.adv()]
        while self.i < len(self.s):
            c = self.peek()
            if c == "\\":
                out.append(self.adv(2))
            elif c == '"':
                out.append(self.adv())
                break
            elif c == "$":
                out.append(self.read_dollar())
            elif c == "`":
                out.append(self.read_backtick())
            else:
                out.append(self.adv())
        self.depth -= 1
        return "".join(out)

    def read_backtick(self) -> str:
        out = [self.adv()]
        while self.i < len(self.s):
            c = self.peek()
            if c == "\\":
                out.append(self.adv(2))
            elif c == "`":
                out.append(self.adv())
                break
            else:
                out.append(self.adv())
        return "".join(out)

    def read_balanced(self, open_: str, close: str) -> str:
        """From an opening bracket to its match, skipping quoted text inside."""
        self.enter()
        depth = 0
        out: list[str] = []
        while self.i < len(self.s):
            c = self.peek()
            if c == "'" and open_ != "{":
                out.append(self.read_single())
                continue
            if c == '"':
                out.append(self.read_double())
                continue
            if c == "\\":
                out.append(self.adv(2))
                continue
            if c == "$" and self.peek(1) in "({":
                out.append(self.read_dollar())
                continue
            out.append(self.adv())
            if c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    break
        self.depth -= 1
        return "".join(out)

    def read_dollar(self) -> str:
        if self.peek(1) == "(":
            self.adv()
            return "$" + self.read_balanced("(", ")")
        if self.peek(1) == "{":
            self.adv()
            return "$" + self.read_balanced("{", "}")
        if self.peek(1) == "'":
            self.adv()
            out = ["$'"]
            self.adv()
            while self.i < len(self.s):
                c = self.peek()
                if c == "\\":
                    out.append(self.adv(2))
                elif c == "'":
                    out.append(self.adv())
                    break
                else:
                    out.append(self.adv())
            return "".join(out)
        return self.adv()

    # ---- heredoc bodies are skipped (they are input to a command, never run here)

    def skip_heredocs(self) -> None:
        for delim, strip_tabs in self.pending_heredocs:
            while self.i < len(self.s):
                j = self.s.find("\n", self.i)
                end = len(self.s) if j < 0 else j
                body_line = self.s[self.i:end]
                self.adv(end - self.i + (0 if j < 0 else 1))
                if (body_line.lstrip("\t") if strip_tabs else body_line) == delim:
                    break
        self.pending_heredocs = []


_OPS = ("&&", "||", ";;", ";", "|", "&")
_HEREDOC_RE = re.compile(r"""(['"]?)([A-Za-z0-9_\-.]+)\1""")


def scan(text: str) -> list[RawCommand]:
    """The script's simple commands, in order, each with its words and lines."""
    sc = _Scanner(text)
    cmds: list[RawCommand] = []
    words: list[RawWord] = []
    redirects: list[str] = []
    cur: list[str] = []
    cur_line = 0
    cmd_line = 0
    heredoc = False

    def end_word() -> None:
        nonlocal cur
        if cur:
            sc.count()
            _add_word("".join(cur), cur_line, words, redirects)
            cur = []

    def end_cmd(sep: str, broken_by: str | None = None, broken_line: int = 0) -> None:
        nonlocal words, redirects, cmd_line, heredoc
        end_word()
        if words or broken_by:
            sc.count()
            cmds.append(RawCommand(words, cmd_line or sc.line, sc.line, broken_by, broken_line,
                                   sep, heredoc, [r for r in redirects if r != "\0next"]))
        words, redirects, cmd_line, heredoc = [], [], 0, False

    while sc.i < len(sc.s):
        c = sc.peek()
        if c == "\\" and sc.peek(1) == "\n":
            sc.adv(2)
            broken_by = _continuation_break(sc, cur) if words or cur else None
            if broken_by:
                end_cmd("\n", broken_by, sc.line)
            continue
        if c in " \t":
            end_word()
            sc.adv()
            continue
        if c == "\n":
            end_cmd("\n")
            sc.adv()
            sc.skip_heredocs()
            continue
        if c == "#" and not cur:
            j = sc.s.find("\n", sc.i)
            sc.adv((len(sc.s) if j < 0 else j) - sc.i)
            continue
        if not cur and c in ";&|":
            op = next(o for o in _OPS if sc.s.startswith(o, sc.i))
            end_cmd(op)
            sc.adv(len(op))
            continue
        if not cur and c in "()" and not words:
            sc.adv()  # subshell / grouping parentheses: the commands inside are read in order
            continue
        if c in ";&|" and cur and not (c == "&" and cur and cur[-1].endswith((">", "<"))):
            end_word()
            continue
        if not cur:
            cur_line = sc.line
            if not cmd_line:
                cmd_line = sc.line
        if c == "<" and sc.s.startswith("<<", sc.i) and not sc.s.startswith("<<<", sc.i):
            end_word()
            heredoc = _heredoc_start(sc) or heredoc
        else:
            _read_part(sc, c, cur)
    end_cmd("\n")
    return cmds


def _add_word(w: str, line: int, words: list[RawWord], redirects: list[str]) -> None:
    """A finished word: a redirection (its target maybe the next word), that target, or a word."""
    if re.fullmatch(r"\d*(>>?|<|>&|<&|&>|&>>)(.*)", w) and not _NAME_EQ.match(w):
        m = re.fullmatch(r"\d*(>>?|<|>&|<&|&>|&>>)(.*)", w)
        redirects.append(w)
        if m and m.group(2) == "":
            redirects.append("\0next")  # the target is the next word
    elif redirects and redirects[-1] == "\0next":
        redirects[-1] = w
    else:
        words.append(RawWord(w, line))


def _continuation_break(sc: _Scanner, cur: list[str]) -> str | None:
    """Just past a backslash-newline: a comment or blank line right after it ends the command."""
    j = sc.s.find("\n", sc.i)
    rest = sc.s[sc.i:len(sc.s) if j < 0 else j]
    stripped = rest.strip()
    if stripped == "" or (stripped.startswith("#") and (not cur or rest[:1] in " \t")):
        return "comment" if stripped else "blank line"
    return None


_QUOTED: dict[str, Callable[[_Scanner], str]] = {
    "'": _Scanner.read_single, '"': _Scanner.read_double,
    "`": _Scanner.read_backtick, "$": _Scanner.read_dollar,
}


def _read_part(sc: _Scanner, c: str, cur: list[str]) -> None:
    """One piece of the current word at `c` (a quoted string, an expansion, a character)."""
    reader = _QUOTED.get(c)
    if reader is not None:
        cur.append(reader(sc))
    elif c == "\\":
        cur.append(sc.adv(2))
    elif c == "(" and cur and cur[-1].endswith("=") and _NAME_EQ.match("".join(cur[:256])):
        cur.append(sc.read_balanced("(", ")"))  # name=(array elements)
    elif c in "<>":
        cur.append(sc.adv())
        if sc.peek() in ">&":
            cur.append(sc.adv())
    else:
        cur.append(sc.adv())


def _heredoc_start(sc: _Scanner) -> bool:
    """`<<WORD`/`<<-WORD` at i: the body is skipped after this line; True if one starts."""
    sc.adv(2)
    strip = False
    if sc.peek() == "-":
        strip = True
        sc.adv()
    while sc.peek() and sc.peek() in " \t":  # (at the end peek() is "", which `in` finds in any string)
        sc.adv()
    m = _HEREDOC_RE.match(sc.s, sc.i)  # (at i: a slice per `<<` is quadratic)
    if m:
        sc.adv(m.end())
        sc.pending_heredocs.append((m.group(2), strip))
        return True
    return False
