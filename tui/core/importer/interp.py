"""Walk a script's commands in order and keep bash's variable state, running nothing.

Assignments, `export`/`declare`/`local`/`readonly`/`unset` and `cd` change the state;
every other command is expanded into its argv (with the line of each word) and handed
back, with the environment it would see. Control flow (`if`, `for`) cannot be decided
without running tests, so branches are read once in order and loops are skipped; a called
function's body is read where it is called, with its arguments as `$1`.. and `"$@"`. Each
such place is reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from tui.core.importer.limits import MAX_ARRAY_ITEMS, MAX_NESTING, Refused
from tui.core.importer.shellexpand import ShellState, expand_string, expand_word, split_array_body
from tui.core.importer.shellscan import RawCommand, RawWord, scan

_ASSIGN_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\[([^\]]*)\])?(\+?)=(.*)$", re.S)
_KEYWORDS = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!",
             "time", "{", "}", "esac", "case", "for", "select", "function"}


@dataclass(slots=True)
class Word:
    text: str
    line: int


@dataclass(slots=True)
class Command:
    """One command bash would run, expanded."""

    argv: list[Word]
    line: int
    end_line: int
    prefix_env: dict[str, tuple[str, int]]  # NAME=value words before the command
    exported: dict[str, tuple[str, int]]  # the exported variables it sees (value, line set)
    cwd: str | None
    raw: RawCommand
    # Commands bash runs separately because a comment/blank line broke this one's
    # continuation: their expanded words, for the launch's "dropped" report.
    dropped: list[tuple[RawCommand, list[Word]]] = field(default_factory=list)


@dataclass
class Walk:
    commands: list[Command]
    state: ShellState
    set_lines: dict[str, int]
    notes: list[tuple[int, str]]


def _looks_like_argument(word: str) -> bool:
    """A word that is a Hydra override or an option, i.e. the tail of a broken command."""
    return bool(re.match(r"^(\+\+|\+|~)?[A-Za-z_][\w\-@]*(\.[\w\-@]+)+=", word) or word.startswith("-")
                or re.match(r"^(\+\+|\+)[\w.]+=", word))


def _check_array(name: str, size: int, line: int) -> None:
    if size > MAX_ARRAY_ITEMS:
        raise Refused(line, f"array {name} grows past {MAX_ARRAY_ITEMS:,} elements; refused")


def walk(text: str, home: str, script_name: str = "script.sh") -> Walk:
    """The script's commands in order, expanded, with the variable state they leave."""
    return _Walker(text, home, script_name).run()


_Handler = Callable[["_Walker", str, list[RawWord], RawCommand], None]


class _Walker:
    """One walk over a script: the state between commands and a handler per command kind."""

    def __init__(self, text: str, home: str, script_name: str) -> None:
        # What is left to read, the next command last: a call pushes its body on top (a
        # splice into one list would keep every body read so far, and copy the rest per call).
        self.todo = list(reversed(scan(text)))
        self.st = ShellState(home=home, script=script_name)
        self.set_lines: dict[str, int] = {}
        self.commands: list[Command] = []
        self.cwd: str | None = None
        self.func_depth = 0
        self.bodies: dict[str, list[RawCommand]] = {}
        self.current_fn = ""
        self.calls = 0
        self.control_noted = False

    def run(self) -> Walk:
        while self.todo:
            rc = self.todo.pop()
            self.st.count(1, rc.line)  # a function's body counts once per call
            try:
                self.step(rc)
            except RecursionError:  # (each nesting is bounded; together they can still be too deep)
                raise Refused(rc.line, f"expansions nested too deeply (over {MAX_NESTING}); refused") from None
        notes = sorted(self.st.notes)
        return Walk(self.commands, self.st, self.set_lines, notes)

    def step(self, rc: RawCommand) -> None:
        """One raw command: a function's end or body, a definition, or a command to run."""
        words = list(rc.words)
        if rc.sep == "\0return":  # the end of a function call's body
            self.st.frames.pop()
            return
        if self.func_depth:
            self.in_function_body(rc, words)
            return
        if words and (words[0].text.endswith("()") or (len(words) > 1 and words[1].text == "()")
                      or words[0].text == "function"):
            self.define_function(rc, words)
            return
        words = self.strip_keywords(rc, words)
        if not words:
            return
        # Leading NAME=value words.
        prefix: list[tuple[str, int]] = []
        while words and _ASSIGN_RE.match(words[0].text):
            prefix.append((words[0].text, words[0].line))
            words.pop(0)
        if not words:
            for word, ln in prefix:
                self.assign(word, ln)
            return
        name = expand_string(words[0].text, self.st, words[0].line)
        handler = _BUILTINS.get(name)
        if handler is not None:
            handler(self, name, words, rc)
        elif name in self.st.functions:
            self.call_function(name, words, rc)
        else:
            self.run_command(words, prefix, rc)

    # ---- function definitions: `name() {` / `function name {` ... `}` are kept, not run

    def in_function_body(self, rc: RawCommand, words: list[RawWord]) -> None:
        self.func_depth += sum(1 for w in words if w.text == "{") - sum(1 for w in words if w.text == "}")
        if self.func_depth <= 0:
            words = [w for w in words if w.text != "}"]
        if words:
            self.bodies[self.current_fn].append(RawCommand(words, rc.line, rc.end_line, rc.broken_by,
                                                           rc.broken_line, rc.sep, rc.heredoc, rc.redirects))

    def define_function(self, rc: RawCommand, words: list[RawWord]) -> None:
        if words[0].text == "function" and len(words) < 2:
            self.st.note(rc.line, "`function` without a name: a syntax error in bash; ignored")
            return
        fname = (words[1].text if words[0].text == "function" else words[0].text).replace("()", "")
        self.st.functions.add(fname)
        self.current_fn = fname
        self.bodies[fname] = []
        texts = [w.text for w in words]
        opens = texts.count("{") - texts.count("}")
        self.func_depth = max(opens, 0)
        if "{" in texts:
            rest = [w for w in words[texts.index("{") + 1:] if w.text != "}"]
            if rest:
                self.bodies[fname].append(RawCommand(rest, rc.line, rc.end_line, rc.broken_by, rc.broken_line,
                                                     rc.sep, rc.heredoc, rc.redirects))
        elif self.todo and self.todo[-1].words and self.todo[-1].words[0].text == "{":
            self.func_depth = 1
            self.todo.pop()

    def strip_keywords(self, rc: RawCommand, words: list[RawWord]) -> list[RawWord]:
        """Control-flow keywords are read past: branches once, in order; loops not followed."""
        while words and words[0].text in _KEYWORDS:
            kw = words.pop(0).text
            if kw in ("for", "select", "case"):
                self.st.note(rc.line, f"`{kw}`: loops and cases are not followed (the body is read once, in order)")
                return []
            if kw in ("if", "while", "until", "elif") and not self.control_noted:
                self.control_noted = True
                self.st.note(rc.line, f"`{kw}`: conditions are not evaluated; every branch is read once, in order")
        return words

    # ---- assignments and the builtins that change the state

    def assign(self, word: str, line: int, export: bool = False) -> str | None:
        m = _ASSIGN_RE.match(word)
        if not m:
            return None
        name, _, index, plus, value = m.groups()
        if value.startswith("(") and value.endswith(")") and index is None:
            self.assign_array(name, value[1:-1], bool(plus), line)
        elif index is not None:
            if not self.assign_element(name, index, expand_string(value, self.st, line, assignment=True),
                                       bool(plus), line):
                return name
        else:
            self.assign_scalar(name, expand_string(value, self.st, line, assignment=True), bool(plus), line)
        self.set_lines[name] = line
        if export:
            self.st.exported.add(name)
        return name

    def assign_array(self, name: str, body: str, plus: bool, line: int) -> None:
        st = self.st
        items: list[str] = []
        for w in split_array_body(body):
            items.extend(expand_word(w, st, line))
        arr = st.arrays.get(name, []) if plus else []
        _check_array(name, len(arr) + len(items), line)
        arr.extend(items)  # (in place: `a+=(x)` in a long script is not a copy per line)
        st.arrays[name] = arr
        st.vars.pop(name, None)

    def assign_element(self, name: str, index: str, v: str, plus: bool, line: int) -> bool:
        """name[index]=v; False (and a note) for a bad subscript, which bash ignores too."""
        st = self.st
        arr = st.arrays.setdefault(name, [st.vars.pop(name)] if name in st.vars else [])
        try:
            idx = int(expand_string(index, st, line))
        except ValueError:
            idx = len(arr)
        idx = idx + len(arr) if idx < 0 else idx
        if idx < 0:
            st.note(line, f"{name}[{index}]: a bad array subscript (bash says so too); ignored")
            return False
        _check_array(name, idx + 1, line)
        if idx >= len(arr):
            st.count(idx + 1 - len(arr), line)  # a gap is elements too (bash's are sparse; these are not)
            arr.extend([""] * (idx + 1 - len(arr)))
        if plus:
            st.charge(len(arr[idx]) + len(v), line)  # (the joined value is a copy: `a+=x` per line is quadratic)
        arr[idx] = (arr[idx] + v) if plus else v
        return True

    def assign_scalar(self, name: str, v: str, plus: bool, line: int) -> None:
        st = self.st
        if name in st.arrays:
            old = st.arrays[name][0] if st.arrays[name] else ""
        else:
            old = st.vars.get(name, "")
        if plus:
            v = old + v
            st.charge(len(v), line)  # (the joined value is a copy: `a+=x` per line is quadratic)
        if name in st.arrays:
            st.arrays[name][0:1] = [v]
        else:
            st.vars[name] = v

    def declare(self, name: str, words: list[RawWord], rc: RawCommand) -> None:
        """export/declare/typeset/local/readonly: assignments, `-x` or `export` marks exported."""
        export = name == "export"
        for w in words[1:]:
            if w.text.startswith("-"):
                if "x" in w.text:
                    export = True
                continue
            if not self.assign(w.text, w.line, export=export):
                n = expand_string(w.text, self.st, w.line)
                if export and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n):
                    self.st.exported.add(n)
                    self.set_lines.setdefault(n, w.line)

    def unset(self, name: str, words: list[RawWord], rc: RawCommand) -> None:
        for w in words[1:]:
            n = w.text
            self.st.vars.pop(n, None)
            self.st.arrays.pop(n, None)
            self.st.exported.discard(n)

    def shift(self, name: str, words: list[RawWord], rc: RawCommand) -> None:
        st = self.st
        n = expand_string(words[1].text, st, words[1].line) if len(words) > 1 else "1"
        if st.frames and re.fullmatch(r"[0-9]{1,9}", n):  # (ASCII digits: `²` is a digit to str.isdigit)
            del st.frames[-1][:int(n)]
        elif not st.frames:
            st.args_used.add(rc.line)

    def no_effect(self, name: str, words: list[RawWord], rc: RawCommand) -> None:
        """Builtins that leave the variables alone (`set --` would replace the arguments)."""
        if name == "set" and any(w.text == "--" for w in words):
            self.st.note(rc.line, "`set --` replaces the script's arguments; not followed")

    def source(self, name: str, words: list[RawWord], rc: RawCommand) -> None:
        self.st.note(rc.line, f"`{name} {' '.join(w.text for w in words[1:])}`: sourced files are not read")

    def call_function(self, name: str, words: list[RawWord], rc: RawCommand) -> None:
        """A call reads the function's body here, with its arguments as `$1`.. (bounded)."""
        st = self.st
        self.calls += 1
        if self.calls > 100 or len(st.frames) > 10:
            st.note(rc.line, f"`{name}`: too many (or recursive) function calls; not followed")
            return
        args: list[str] = []
        for w in words[1:]:
            args.extend(expand_word(w.text, st, w.line))
        st.note(rc.line, f"`{name}`: the function's body is read here, as bash would run it")
        st.frames.append(args)
        self.todo.append(RawCommand([], rc.line, rc.line, sep="\0return"))
        self.todo.extend(reversed(self.bodies.get(name, [])))

    # ---- commands bash would run

    def run_command(self, words: list[RawWord], prefix: list[tuple[str, int]], rc: RawCommand) -> None:
        st = self.st
        argv: list[Word] = []
        for w in words:
            argv.extend(Word(t, w.line) for t in expand_word(w.text, st, w.line))
        if not argv:
            return
        if argv[0].text in ("cd", "pushd"):
            self.cd(argv, rc)
            return
        penv: dict[str, tuple[str, int]] = {}
        for word, ln in prefix:
            m = _ASSIGN_RE.match(word)
            assert m
            penv[m.group(1)] = (expand_string(m.group(5), st, ln, assignment=True), ln)
        st.count(len(st.exported) + len(penv), rc.line)  # each command keeps its own copy
        exported = {n: (st.vars[n] if n in st.vars else (st.arrays[n][0] if st.arrays.get(n) else ""),
                        self.set_lines.get(n, 0))
                    for n in sorted(st.exported) if n in st.vars or n in st.arrays}
        cmd = Command(argv, rc.line, rc.end_line, penv, exported, self.cwd, rc)
        self.take_dropped(cmd, rc)
        self.commands.append(cmd)

    def cd(self, argv: list[Word], rc: RawCommand) -> None:
        target = argv[1].text if len(argv) > 1 else self.st.home
        if target.startswith("/"):
            self.cwd = target
        elif self.cwd and target not in ("-",):
            self.cwd = self.cwd.rstrip("/") + "/" + target
        else:
            self.cwd = None
            self.st.note(rc.line, f"cd {target}: relative to where the script is started; not known")

    def take_dropped(self, cmd: Command, rc: RawCommand) -> None:
        """The commands a broken continuation leaves behind are bash's separate commands."""
        todo = self.todo
        while rc.broken_by and todo and todo[-1].words and _looks_like_argument(todo[-1].words[0].text):
            nxt = todo.pop()
            dw: list[Word] = []
            for w in nxt.words:
                dw.extend(Word(t, w.line) for t in expand_word(w.text, self.st, w.line))
            cmd.dropped.append((nxt, dw))
            rc = nxt


# The builtins that change the walk's state (or are known to leave it alone), by name.
_BUILTINS: dict[str, _Handler] = {
    **dict.fromkeys(("export", "declare", "typeset", "local", "readonly"), _Walker.declare),
    "unset": _Walker.unset,
    "shift": _Walker.shift,
    **dict.fromkeys(("set", "shopt", "true", ":", "trap", "umask", "ulimit", "wait", "echo", "printf"),
                    _Walker.no_effect),
    **dict.fromkeys(("source", "."), _Walker.source),
}
