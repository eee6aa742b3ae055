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

from .limits import MAX_ARRAY_ITEMS, Refused
from .shellexpand import ShellState, expand_string, expand_word, split_array_body
from .shellscan import RawCommand, scan

_ASSIGN_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\[([^\]]*)\])?(\+?)=(.*)$", re.S)
_KEYWORDS = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!",
             "time", "{", "}", "esac", "case", "for", "select", "function"}


@dataclass
class Word:
    text: str
    line: int


@dataclass
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
    raws = scan(text)
    st = ShellState(home=home, script=script_name)
    set_lines: dict[str, int] = {}
    commands: list[Command] = []
    cwd: str | None = None
    func_depth = 0
    bodies: dict[str, list[RawCommand]] = {}
    current_fn = ""
    calls = 0
    raws = list(raws)
    k = 0
    control_noted = False

    def assign(word: str, line: int, export: bool = False) -> str | None:
        m = _ASSIGN_RE.match(word)
        if not m:
            return None
        name, _, index, plus, value = m.groups()
        if value.startswith("(") and value.endswith(")") and index is None:
            items: list[str] = []
            for w in split_array_body(value[1:-1]):
                items.extend(expand_word(w, st, line))
            st.arrays[name] = (st.arrays.get(name, []) if plus else []) + items
            _check_array(name, len(st.arrays[name]), line)
            st.vars.pop(name, None)
        else:
            v = expand_string(value, st, line, assignment=True)
            if index is not None:
                arr = st.arrays.setdefault(name, [st.vars.pop(name)] if name in st.vars else [])
                try:
                    idx = int(expand_string(index, st, line))
                except ValueError:
                    idx = len(arr)
                idx = idx + len(arr) if idx < 0 else idx
                if idx < 0:
                    st.note(line, f"{name}[{index}]: a bad array subscript (bash says so too); ignored")
                    return name
                _check_array(name, idx + 1, line)
                while len(arr) <= idx:
                    arr.append("")
                arr[idx] = (arr[idx] + v) if plus else v
            elif name in st.arrays:
                st.arrays[name][0:1] = [(st.arrays[name][0] if st.arrays[name] else "") + v if plus else v]
            else:
                st.vars[name] = (st.vars.get(name, "") + v) if plus else v
        set_lines[name] = line
        if export:
            st.exported.add(name)
        return name

    while k < len(raws):
        rc = raws[k]
        k += 1
        words = list(rc.words)
        # Function definitions: `name() {` / `function name {` ... `}` are skipped.
        if rc.sep == "\0return":  # the end of a function call's body
            st.frames.pop()
            continue
        if func_depth:
            func_depth += sum(1 for w in words if w.text == "{") - sum(1 for w in words if w.text == "}")
            if func_depth <= 0:
                words = [w for w in words if w.text != "}"]
            if words:
                bodies[current_fn].append(RawCommand(words, rc.line, rc.end_line, rc.broken_by,
                                                     rc.broken_line, rc.sep, rc.heredoc, rc.redirects))
            continue
        if words and (words[0].text.endswith("()") or (len(words) > 1 and words[1].text == "()")
                      or words[0].text == "function"):
            fname = (words[1].text if words[0].text == "function" else words[0].text).replace("()", "")
            st.functions.add(fname)
            current_fn = fname
            bodies[fname] = []
            texts = [w.text for w in words]
            opens = texts.count("{") - texts.count("}")
            func_depth = max(opens, 0)
            if "{" in texts:
                rest = [w for w in words[texts.index("{") + 1:] if w.text != "}"]
                if rest:
                    bodies[fname].append(RawCommand(rest, rc.line, rc.end_line, rc.broken_by, rc.broken_line,
                                                    rc.sep, rc.heredoc, rc.redirects))
            elif k < len(raws) and raws[k].words and raws[k].words[0].text == "{":
                func_depth = 1
                k += 1
            continue
        while words and words[0].text in _KEYWORDS:
            kw = words.pop(0).text
            if kw in ("for", "select", "case"):
                st.note(rc.line, f"`{kw}`: loops and cases are not followed (the body is read once, in order)")
                words = []
                break
            if kw in ("if", "while", "until", "elif") and not control_noted:
                control_noted = True
                st.note(rc.line, f"`{kw}`: conditions are not evaluated; every branch is read once, in order")
        if not words:
            continue
        # Leading NAME=value words.
        prefix: list[tuple[str, int]] = []
        while words and _ASSIGN_RE.match(words[0].text):
            prefix.append((words[0].text, words[0].line))
            words.pop(0)
        if not words:
            for word, ln in prefix:
                assign(word, ln)
            continue
        name = expand_string(words[0].text, st, words[0].line)
        if name in ("export", "declare", "typeset", "local", "readonly"):
            export = name == "export"
            for w in words[1:]:
                if w.text.startswith("-"):
                    if "x" in w.text:
                        export = True
                    continue
                if not assign(w.text, w.line, export=export):
                    n = expand_string(w.text, st, w.line)
                    if export and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n):
                        st.exported.add(n)
                        set_lines.setdefault(n, w.line)
            continue
        if name == "unset":
            for w in words[1:]:
                n = w.text
                st.vars.pop(n, None)
                st.arrays.pop(n, None)
                st.exported.discard(n)
            continue
        if name == "shift":
            n = expand_string(words[1].text, st, words[1].line) if len(words) > 1 else "1"
            if st.frames and n.isdigit():
                del st.frames[-1][:int(n)]
            elif not st.frames:
                st.args_used.append(rc.line)
            continue
        if name in ("set", "shopt", "true", ":", "trap", "umask", "ulimit", "wait", "echo", "printf"):
            if name == "set" and any(w.text == "--" for w in words):
                st.note(rc.line, "`set --` replaces the script's arguments; not followed")
            continue
        if name in ("source", "."):
            st.note(rc.line, f"`{name} {' '.join(w.text for w in words[1:])}`: sourced files are not read")
            continue
        if name in st.functions:
            calls += 1
            if calls > 100 or len(st.frames) > 10:
                st.note(rc.line, f"`{name}`: too many (or recursive) function calls; not followed")
                continue
            args: list[str] = []
            for w in words[1:]:
                args.extend(expand_word(w.text, st, w.line))
            st.note(rc.line, f"`{name}`: the function's body is read here, as bash would run it")
            st.frames.append(args)
            raws[k:k] = bodies.get(name, []) + [RawCommand([], rc.line, rc.line, sep="\0return")]
            continue
        argv: list[Word] = []
        for w in words:
            argv.extend(Word(t, w.line) for t in expand_word(w.text, st, w.line))
        if not argv:
            continue
        if argv[0].text in ("cd", "pushd"):
            target = argv[1].text if len(argv) > 1 else st.home
            if target.startswith("/"):
                cwd = target
            elif cwd and target not in ("-",):
                cwd = cwd.rstrip("/") + "/" + target
            else:
                cwd = None
                st.note(rc.line, f"cd {target}: relative to where the script is started; not known")
            continue
        penv: dict[str, tuple[str, int]] = {}
        for word, ln in prefix:
            m = _ASSIGN_RE.match(word)
            assert m
            penv[m.group(1)] = (expand_string(m.group(5), st, ln, assignment=True), ln)
        exported = {n: (st.vars[n] if n in st.vars else (st.arrays[n][0] if st.arrays.get(n) else ""),
                        set_lines.get(n, 0))
                    for n in sorted(st.exported) if n in st.vars or n in st.arrays}
        cmd = Command(argv, rc.line, rc.end_line, penv, exported, cwd, rc)
        # The commands a broken continuation leaves behind are bash's separate commands.
        while rc.broken_by and k < len(raws) and raws[k].words and _looks_like_argument(raws[k].words[0].text):
            nxt = raws[k]
            k += 1
            dw: list[Word] = []
            for w in nxt.words:
                dw.extend(Word(t, w.line) for t in expand_word(w.text, st, w.line))
            cmd.dropped.append((nxt, dw))
            rc = nxt
        commands.append(cmd)
    notes = sorted(st.notes)
    return Walk(commands, st, set_lines, notes)
