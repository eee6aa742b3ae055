"""Diagnosis: match the live log against a catalog of known failure signatures.

Why a catalog of data (diagnosis.yaml) and not code: the people who meet a new failure
at 3 a.m. are users, not rlconsole developers. They can add a signature (a regex, an
explanation, a fix) to `<user config dir>/diagnosis.yaml` and the next run explains it.

Why entries by class: one cause is printed many ways (torch, torch_musa, vLLM, SGLang,
Ray, another version of each). An entry names a class of cause (`class:`, default its id)
and lists every wording of it: its `pattern` and, before it, `variants` that may be
weaker (a warning printed before the failure, a Ray wrapper that names the exception
type). Findings of one class within the de-duplication window are one incident: one
alert, the other wordings noted on it as "also seen".

Why the prefilter and de-duplication: diagnosis sees every line of a 15-20 hour log, so
it must cost next to nothing on the 99.9% of lines that are not errors (a lower-cased
keyword check, no regex), and one traceback printed by 32 ranks must raise one alert,
not 32.

Why a verdict that reads the log as an expert does: when a run dies the tail holds several
failures. `Diagnoser.verdict` ranks them: an error outranks a warning; a cause outranks an
error no entry knows (`unrecognised-error`, the first real exception of the log), which
outranks a consequence (a collective timeout, an abort), which outranks a wrapper (Ray's
"an actor died", RayTaskError); among equals the first in time wins, and the reported line
is that finding's first line. The job-end alert, `status --json`, `watch` and `rlconsole
diagnose` all use it. Patterns match whole words, and a traceback's echoed source lines
are code, never a finding (`EchoFilter`), because real logs quote both.

No Textual here: the core never imports it.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tui.core.alert import Alert, AlertLevel
from tui.core.locations import user_catalog_path
from tui.core.safetext import shown
from tui.core.secrets import mask_secrets

PACKAGED_CATALOG = Path(__file__).with_name("diagnosis.yaml")
LEVELS: tuple[str, ...] = ("error", "warning")
REQUIRED_KEYS: tuple[str, ...] = ("id", "level", "pattern", "title", "explanation", "fix")
OPTIONAL_KEYS: tuple[str, ...] = ("keywords", "ignore_case", "role", "class", "variants")
VARIANT_KEYS: tuple[str, ...] = ("pattern", "level", "role", "keywords", "ignore_case", "title")
ROLES: tuple[str, ...] = ("cause", "consequence", "wrapper")
"""What a failure usually is when other failures surround it, strongest first: a `cause`
names why the run died (an OOM, a missing file); a `consequence` is usually caused by
another failure printed before or after it (a collective timeout after a peer crashed, an
exception Ray could not unpickle); a `wrapper` only says that something died (Ray's
ActorDiedError, RayTaskError, a dead worker, an abort in native code)."""
_ROLE_RANK: dict[str, int] = {"cause": 0, "consequence": 2, "wrapper": 3}
"""The verdict's order of strength; 1 is an error no entry knows (UNRECOGNISED_ID): weaker
than a known cause, stronger than a known consequence, which it usually explains."""
_LEVEL_RANK: dict[str, int] = {"error": 0, "warning": 1, "info": 2}
UNRECOGNISED_ID = "unrecognised-error"
"""The verdict's id for the first real error in a log when no entry knows its class."""
DEFAULT_DEDUP_LINES = 2000
"""A traceback (~50 lines) from 32 ranks spans ~1600 lines; findings of one class inside
this window are one incident (the same entry with other named-group values is another)."""
MAX_OPEN_INCIDENTS = 16
"""A class keeps at most this many open incidents (distinct subjects) at a time."""
MAX_ALSO_NOTES = 3
"""An incident's alert names at most this many other wordings of its class as "also seen"."""
MAX_VERDICT_FINDINGS = 1000
"""A verdict keeps at most this many findings (the first) for inspection; what it names
and lists is computed over all, so `rlconsole diagnose` on a 20-hour log stays small."""
MAX_GROUP_CHARS = 200
"""Cap on a substituted group value, so a runaway match cannot flood the alert line."""
USER_LINE_CHARS = 4096
"""A user catalog's pattern is searched in a line's first this many characters only. Its
patterns are checked when loaded (`pattern_risk`: no repeat inside a repeat), but a
pattern can still be slower than linear (`\\S+x` started inside a run, `.*a.*b`): on 4096
characters that stays in the tens of milliseconds, on a 64 KiB line it would be seconds.
The packaged catalog is ours and linear (tests/test_parser_bounds.py), so it reads the
whole line."""


class CatalogError(ValueError):
    """A catalog file is unusable; the message names the file, the entry and the key."""




_TEMPLATE = re.compile(r"\{\{|\}\}|\{(\w+)\}|[{}]")
"""The tokens of a title/explanation/fix: `{{` and `}}` (a literal brace), `{name}` (a
named group), and any other brace (broken: refused when a catalog loads)."""


def render_template(text: str, groups: dict[str, str]) -> str:
    """`text` with each `{name}` replaced by the named group's value, in one pass: a value
    is never read again as a template (a `{` or `:>99999` in a log line stays text), and
    there is no format spec at all (no `str.format` on anything holding log text). An
    unknown `{name}` and a stray brace are left as written; `{{`/`}}` are one brace."""

    def one(m: re.Match[str]) -> str:
        tok = m.group(0)
        if tok in ("{{", "}}"):
            return tok[0]
        name = m.group(1)
        if name is not None and name in groups:
            return groups[name]
        return tok

    return _TEMPLATE.sub(one, text)


@dataclass(frozen=True)
class Signature:
    """One wording of a known failure: how to recognise it in a line, what it means, what
    to do. An entry of the catalog gives one Signature per wording (its variants, then its
    pattern), all with its id, class, title, explanation and fix."""

    id: str
    level: AlertLevel
    pattern: re.Pattern[str]
    """The catalog's pattern held to whole words (`whole_words`): what `find` searches."""
    title: str
    explanation: str
    fix: str
    keywords: tuple[str, ...] = ()
    source: str = ""
    role: str = "cause"
    max_chars: int | None = None
    """Search only a line's first this many characters (a user's pattern: USER_LINE_CHARS)."""
    cls: str = ""
    """The class of cause (the entry's `class:`, else its id): one incident per class."""
    fields: tuple[str, ...] = ()
    """The {names} its texts use: a wording without such a group fills them with ""."""

    @property
    def klass(self) -> str:
        return self.cls or self.id

    def render(self, text: str, groups: dict[str, str]) -> str:
        return render_template(text, groups)


@dataclass
class Finding:
    """A signature matched on one line, with its texts already filled in."""

    signature: Signature
    line_no: int
    line: str
    groups: dict[str, str] = field(default_factory=dict)

    @property
    def title(self) -> str:
        return self.signature.render(self.signature.title, self.groups)

    @property
    def explanation(self) -> str:
        return self.signature.render(self.signature.explanation, self.groups)

    @property
    def fix(self) -> str:
        return self.signature.render(self.signature.fix, self.groups)

    @property
    def unrecognised(self) -> bool:
        return self.signature.id == UNRECOGNISED_ID

    def alert(self) -> Alert:
        """The alert for the console: title and the substituted fix, pointing at the line;
        an error no entry knows reads "unrecognised failure: <the line>"."""
        title = f"unrecognised failure: {self.title}" if self.unrecognised else self.title
        return Alert(level=self.signature.level, source="log",
                     message=f"{title} — {self.fix}", line=self.line_no,
                     diagnosis=self.signature.id)


# ----------------------------------------------------------------------- loading


def _fields(text: str) -> set[str]:
    """Names of the {placeholders} in `text`; raises ValueError on anything but `{name}`,
    `{{` and `}}` (a format spec or conversion, `{name:>{width}}`, `{name!r}`, a lone brace:
    templates are filled by plain replacement, see `render_template`)."""
    names: set[str] = set()
    for m in _TEMPLATE.finditer(text):
        if m.group(1) is not None:
            names.add(m.group(1))
        elif m.group(0) in ("{", "}"):
            tail = text[m.start():m.start() + 20]
            raise ValueError(f"only {{name}} is filled in (write {{{{ or }}}} for a brace), "
                             f"at {tail!r}")
    return names


# Python's own regex parser: the one way to read a pattern exactly as `re` does. Private
# (`re._parser` since 3.11, `sre_parse` before, which warns from 3.11 on), so it is only
# used to refuse patterns; an unexpected shape is answered "not known to be safe".
_SRE: Any = importlib.import_module("re._parser" if sys.version_info >= (3, 11) else "sre_parse")
_LONG_REPEAT = 16
"""A repeat of more than this many times counts as unbounded for `pattern_risk`."""
_ALPHABET = "".join(map(chr, range(0x250))) + "\u2028\u3000ж中€😀"
"""The characters `pattern_risk` tries as a branch's first character: every ASCII and
Latin one and a few from other classes (a line separator, a wide space, Cyrillic, CJK)."""


def _first_chars(items: Any) -> set[str]:
    """The characters of `_ALPHABET` a sequence of parsed regex items can start with
    (everything when unsure or when the sequence can match the empty string)."""
    every = set(_ALPHABET)
    out: set[str] = set()
    for op, av in items:
        name = getattr(op, "name", str(op))
        if name == "LITERAL":
            c = chr(av)
            return out | {c, c.lower(), c.upper()}
        if name == "NOT_LITERAL":
            return every
        if name == "ANY":
            return every
        if name == "IN":
            return out | _class_chars(av)
        if name in ("SUBPATTERN", "ATOMIC_GROUP"):
            sub = av[-1] if name == "SUBPATTERN" else av
            first = _first_chars(sub)
            if _nullable(sub):
                out |= first
                continue
            return out | first
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            lo, _hi, sub = av
            out |= _first_chars(sub)
            if lo == 0 or _nullable(sub):
                continue
            return out
        if name == "BRANCH":
            alts = av[1]
            for alt in alts:
                out |= _first_chars(alt)
            if any(_nullable(alt) for alt in alts):
                continue
            return out
        if name in ("AT", "ASSERT", "ASSERT_NOT"):
            continue  # zero width: the next item gives the first character
        return every  # a back reference, a conditional group: anything
    return every  # can match nothing: then any next character is its first


def _nullable(items: Any) -> bool:
    """Whether a sequence of parsed regex items can match the empty string (True when unsure)."""
    for op, av in items:
        name = getattr(op, "name", str(op))
        if name in ("AT", "ASSERT", "ASSERT_NOT"):
            continue
        if name in ("LITERAL", "NOT_LITERAL", "ANY", "IN"):
            return False
        if name == "SUBPATTERN":
            if not _nullable(av[-1]):
                return False
        elif name == "ATOMIC_GROUP":
            if not _nullable(av):
                return False
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            if av[0] > 0 and not _nullable(av[2]):
                return False
        elif name == "BRANCH":
            if not any(_nullable(alt) for alt in av[1]):
                return False
        else:
            return True
    return True


_CATEGORIES: dict[str, Callable[[str], bool]] = {
    "CATEGORY_DIGIT": str.isdecimal, "CATEGORY_SPACE": str.isspace,
    "CATEGORY_WORD": lambda ch: ch.isalnum() or ch == "_",
}


def _class_chars(items: Any) -> set[str]:
    """The characters of `_ALPHABET` in a character class `[...]` (parsed), either case."""
    every = set(_ALPHABET)
    chars: set[str] = set()
    negate = False
    for op, av in items:
        name = getattr(op, "name", str(op))
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            chars |= {chr(av), chr(av).lower(), chr(av).upper()}
        elif name == "RANGE":
            lo, hi = av
            chars |= {ch for ch in _ALPHABET
                      if any(lo <= ord(c) <= hi for c in (ch, ch.lower(), ch.upper()) if len(c) == 1)}
        elif name == "CATEGORY":
            cat = getattr(av, "name", str(av))
            pred = _CATEGORIES.get(cat.replace("NOT_", ""))
            if pred is None:
                return every
            chars |= {ch for ch in _ALPHABET if pred(ch) != ("NOT_" in cat)}
        else:
            return every
    return every - chars if negate else chars


def pattern_risk(pattern: str, flags: int = 0) -> str | None:
    """Why `pattern` can take exponential time on one line, or None. Refused: a repeat of a
    group that itself holds a repeat (`(a+)+`, `(.*)*`, `(\\w+\\s?)+`), and a repeated
    alternation whose branches can start alike (`(x|x)*`, `(a|ab)+`, `(\\w|\\d)+`): on a line
    that almost matches, the engine tries every way to split it. Bounded small repeats
    (`(\\d{1,3}\\.){3}`) pass; a possessive repeat or an atomic group never backtracks into
    itself, but is checked alike (kept simple: rewrite the pattern instead)."""
    try:
        parsed = _SRE.parse(pattern, flags)
    except Exception:  # noqa: BLE001 - compiled fine by `re` already; unknown to the parser here
        return None
    return _risk(list(parsed), 0)


def _repeats(items: Any) -> list[tuple[int, int, Any]]:
    """The repeats (`lo, hi, items`) in a sequence, through plain groups."""
    out: list[tuple[int, int, Any]] = []
    for op, av in items:
        name = getattr(op, "name", str(op))
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            out.append(tuple(av))
        elif name == "SUBPATTERN":
            out += _repeats(av[-1])
    return out


def _risk(items: Any, outer: int) -> str | None:
    """`pattern_risk` on parsed items, inside repeats of at most `outer` times (0: none)."""
    for op, av in items:
        name = getattr(op, "name", str(op))
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            lo, hi, sub = av
            if outer > 1 and hi > 1 and lo != hi and (hi > _LONG_REPEAT or outer > _LONG_REPEAT):
                return "a repeat inside a repeated group (like `(a+)+` or `(.*)*`)"
            found = _risk(list(sub), max(outer, hi))
            if found:
                return found
            if hi > _LONG_REPEAT and _nullable(sub):
                return "a repeat of something that can be empty (like `(a?)*`)"
            if hi > _LONG_REPEAT:
                optional = [_first_chars(x[2]) for x in _repeats(sub) if x[0] != x[1]]
                if any(a & b for i, a in enumerate(optional) for b in optional[i + 1:]):
                    return "a repeated group with two optional parts that can match alike (like `(a?a?)+`)"
        elif name == "BRANCH":
            alts = [list(a) for a in av[1]]
            if outer > _LONG_REPEAT:
                firsts = [_first_chars(a) for a in alts]
                for i in range(len(firsts)):
                    for j in range(i + 1, len(firsts)):
                        if firsts[i] & firsts[j]:
                            return ("a repeated alternation whose branches can start alike "
                                    "(like `(x|x)*` or `(a|ab)+`)")
            for a in alts:
                found = _risk(a, outer)
                if found:
                    return found
        elif name == "SUBPATTERN":
            found = _risk(list(av[-1]), outer)
            if found:
                return found
        elif name == "ATOMIC_GROUP":
            found = _risk(list(av), outer)
            if found:
                return found
        elif name in ("ASSERT", "ASSERT_NOT"):
            found = _risk(list(av[1]), outer)
            if found:
                return found
        elif name == "GROUPREF_EXISTS":
            for sub in av[1:]:
                if sub is not None:
                    found = _risk(list(sub), outer)
                    if found:
                        return found
    return None


def _compile(raw: dict[str, Any], where: str, default_ignore_case: bool = False) -> re.Pattern[str]:
    """One wording's pattern, compiled and checked (`pattern_risk`)."""
    ignore_case = raw.get("ignore_case", default_ignore_case)
    if not isinstance(ignore_case, bool):
        raise CatalogError(f"{where}: key 'ignore_case' must be true or false")
    if not isinstance(raw.get("pattern"), str) or not raw["pattern"].strip():
        raise CatalogError(f"{where}: key 'pattern' must be a non-empty string")
    try:
        rx = re.compile(raw["pattern"], re.IGNORECASE if ignore_case else 0)
    except re.error as e:
        raise CatalogError(f"{where}: key 'pattern' is not a valid regex: {e}") from None
    risk = pattern_risk(raw["pattern"], rx.flags)
    if risk:
        raise CatalogError(f"{where}: key 'pattern' can take exponential time on one log line: "
                           f"{risk}; repeat a single character or a fixed text instead") from None
    return rx


def _keywords(raw: dict[str, Any], where: str, default: list[str]) -> tuple[str, ...]:
    kws = raw.get("keywords", default)
    if isinstance(kws, str):
        kws = [kws]
    if not isinstance(kws, list) or not all(isinstance(k, str) and k for k in kws):
        raise CatalogError(f"{where}: key 'keywords' must be a list of non-empty strings")
    return tuple(k.lower() for k in kws)


def _entry(raw: Any, where: str, user: bool = False) -> list[Signature]:
    """One catalog entry: a Signature per wording, its `variants` (tried first, in order)
    then its `pattern`, each with the entry's id, class and texts."""
    if not isinstance(raw, dict):
        raise CatalogError(f"{where}: an entry must be a mapping, got {type(raw).__name__}")
    sid = raw.get("id")
    where = f"{where} (id {sid!r})" if isinstance(sid, str) else where
    for key in REQUIRED_KEYS:
        if key not in raw:
            raise CatalogError(f"{where}: missing key {key!r}")
        if not isinstance(raw[key], str) or not raw[key].strip():
            raise CatalogError(f"{where}: key {key!r} must be a non-empty string")
    unknown = sorted(set(raw) - set(REQUIRED_KEYS) - set(OPTIONAL_KEYS))
    if unknown:
        raise CatalogError(f"{where}: unknown key {unknown[0]!r} "
                           f"(allowed: {', '.join(REQUIRED_KEYS + OPTIONAL_KEYS)})")
    if raw["level"] not in LEVELS:
        raise CatalogError(f"{where}: key 'level' must be one of {', '.join(LEVELS)}, "
                           f"got {raw['level']!r}")
    ignore_case = raw.get("ignore_case", False)
    if not isinstance(ignore_case, bool):
        raise CatalogError(f"{where}: key 'ignore_case' must be true or false")
    rx = _compile(raw, where)
    role = raw.get("role", "cause")
    if role not in ROLES:
        raise CatalogError(f"{where}: key 'role' must be one of {', '.join(ROLES)}, got {role!r}")
    cls = raw.get("class", raw["id"])
    if not isinstance(cls, str) or not cls.strip():
        raise CatalogError(f"{where}: key 'class' must be a non-empty string")
    entry_kws = list(_keywords(raw, where, []))
    wordings: list[tuple[re.Pattern[str], AlertLevel, str, tuple[str, ...], str]] = []
    variants = raw.get("variants", [])
    if not isinstance(variants, list):
        raise CatalogError(f"{where}: key 'variants' must be a list of mappings with a 'pattern'")
    for n, v in enumerate(variants, 1):
        vwhere = f"{where}: variants[{n}]"
        if not isinstance(v, dict):
            raise CatalogError(f"{vwhere}: a variant must be a mapping with a 'pattern'")
        vunknown = sorted(set(v) - set(VARIANT_KEYS))
        if vunknown:
            raise CatalogError(f"{vwhere}: unknown key {vunknown[0]!r} (allowed: {', '.join(VARIANT_KEYS)})")
        vlevel = v.get("level", raw["level"])
        if vlevel not in LEVELS:
            raise CatalogError(f"{vwhere}: key 'level' must be one of {', '.join(LEVELS)}, got {vlevel!r}")
        vrole = v.get("role", role)
        if vrole not in ROLES:
            raise CatalogError(f"{vwhere}: key 'role' must be one of {', '.join(ROLES)}, got {vrole!r}")
        vrx = _compile(v, vwhere, ignore_case)
        vtitle = v.get("title", raw["title"])
        if not isinstance(vtitle, str) or not vtitle.strip():
            raise CatalogError(f"{vwhere}: key 'title' must be a non-empty string")
        if "title" in v:
            try:
                vnames = _fields(vtitle)
            except ValueError as e:
                raise CatalogError(f"{vwhere}: key 'title' has a broken {{placeholder}}: {e}") from None
            vmissing = sorted(vnames - set(vrx.groupindex))
            if vmissing:
                raise CatalogError(f"{vwhere}: key 'title' uses {{{vmissing[0]}}} but the pattern has "
                                   f"no group (?P<{vmissing[0]}>...)")
        wordings.append((vrx, vlevel, vrole, _keywords(v, vwhere, entry_kws), vtitle))
    wordings.append((rx, raw["level"], role, tuple(entry_kws), raw["title"]))
    for key in ("title", "explanation", "fix"):
        try:
            names = _fields(raw[key])
        except ValueError as e:
            raise CatalogError(f"{where}: key {key!r} has a broken {{placeholder}}: {e}") from None
        missing = sorted(names - set(rx.groupindex))
        if missing:
            raise CatalogError(f"{where}: key {key!r} uses {{{missing[0]}}} but the pattern has "
                               f"no group (?P<{missing[0]}>...)")
    fields = tuple(sorted(set().union(*(_fields(t) for t in
                                        [raw["explanation"], raw["fix"]] + [w[4] for w in wordings]))))
    return [Signature(id=raw["id"], level=level, pattern=whole_words(wrx), title=title.strip(),
                      explanation=raw["explanation"].strip(), fix=raw["fix"].strip(),
                      keywords=kws, source=where, role=wrole,
                      max_chars=USER_LINE_CHARS if user else None, cls=cls.strip(), fields=fields)
            for wrx, level, wrole, kws, title in wordings]


def load_catalog(path: Path | str, text: str | None = None, *, user: bool | None = None) -> list[Signature]:
    """Parse and validate one catalog file (all or nothing). Raises CatalogError. A user's
    catalog (any file but the packaged one, unless `user` says) searches only a line's
    first USER_LINE_CHARS characters."""
    path = Path(path)
    if user is None:
        user = path.resolve() != PACKAGED_CATALOG.resolve()
    if text is None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise CatalogError(f"{path}: cannot read: {e}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f", line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise CatalogError(f"{path}{line}: invalid YAML: {problem}") from None
    if doc is None:
        return []
    if isinstance(doc, dict):
        if doc.get("version", 1) != 1:
            raise CatalogError(f"{path}: key 'version' must be 1, got {doc.get('version')!r}")
        entries = doc.get("signatures")
        if entries is None:
            return []
    else:
        entries = doc  # a bare list of entries is accepted too
    if not isinstance(entries, list):
        raise CatalogError(f"{path}: key 'signatures' must be a list of entries")
    sigs: list[Signature] = []
    seen: set[str] = set()
    for n, raw in enumerate(entries, 1):
        wordings = _entry(raw, f"{path}: signatures[{n}]", user)
        sig = wordings[-1]
        if sig.id in seen:
            raise CatalogError(f"{sig.source}: duplicate id {sig.id!r}")
        seen.add(sig.id)
        sigs.extend(wordings)
    return sigs


def merge(base: Iterable[Signature], extra: Iterable[Signature]) -> list[Signature]:
    """Catalog order with user entries applied: an entry (all its wordings) whose id is a
    packaged one replaces that entry's wordings in place, new ids append."""
    groups: dict[str, list[Signature]] = {}
    order: list[str] = []
    for s in base:
        if s.id not in groups:
            groups[s.id] = []
            order.append(s.id)
        groups[s.id].append(s)
    replaced: set[str] = set()
    for s in extra:
        if s.id not in replaced:
            replaced.add(s.id)
            if s.id not in groups:
                order.append(s.id)
            groups[s.id] = []
        groups[s.id].append(s)
    return [s for sid in order for s in groups[sid]]


# ----------------------------------------------------------------------- matching


def literal_alternation(words: Iterable[str]) -> str:
    """A regex matching where any of `words` occurs, shaped as their trie (`ab|ac` is
    `a(?:b|c)`): at each position of a line it follows one branch per character read, so a
    search costs the line's length times the longest word at worst, however many words,
    and no quantifier is in it to backtrack over. No word may be empty."""
    trie: dict[str, Any] = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}  # a word ends here

    def build(node: dict[str, Any]) -> str:
        run = ""  # a chain with one way on is written out, not recursed into
        while len(node) == 1 and "" not in node:
            (ch, node), = node.items()
            run += re.escape(ch)
        if "" in node:
            return run  # a shorter word already matched: what follows cannot matter
        alts = [re.escape(ch) + build(sub) for ch, sub in sorted(node.items())]
        return run + "(?:" + "|".join(alts) + ")"

    return build(trie)


@dataclass
class _Incident:
    """One incident of a class in the live log: its first line, the finding that opened it,
    its alert, and the other wordings of the class seen since ("also seen")."""

    first: int
    sig_id: str
    key: tuple[Any, ...]
    values: frozenset[str] = frozenset()
    """The finding's non-empty named-group values (what it is about: a key, a path)."""
    title: str = ""
    alert: Alert | None = None
    base: str = ""
    also: list[str] = field(default_factory=list)


class Diagnoser:
    """Matches log lines against the catalog; one alert per incident.

    `signatures` defaults to the packaged catalog plus the user's
    `<config dir>/diagnosis.yaml` if it exists. A user catalog that does not load is
    ignored as a whole and reported once through `take_problems()`; the packaged one is
    ours and must load (a CatalogError there is a bug, so it propagates).
    """

    def __init__(self, signatures: list[Signature] | None = None, *,
                 user_catalog: Path | str | None | bool = True,
                 dedup_lines: int = DEFAULT_DEDUP_LINES) -> None:
        self.problems: list[Alert] = []
        if signatures is None:
            signatures = load_catalog(PACKAGED_CATALOG)
        if user_catalog is not False and user_catalog is not None:
            path = user_catalog_path() if user_catalog is True else Path(user_catalog)
            if path.is_file():
                try:
                    signatures = merge(signatures, load_catalog(path))
                except CatalogError as e:
                    self.problems.append(Alert(level="warning", source="diagnosis",
                                               message=f"user diagnosis catalog ignored: {e}"))
        self.signatures: list[Signature] = list(signatures)
        self.dedup_lines = dedup_lines
        self._incidents: dict[str, list[_Incident]] = {}
        self._echo = EchoFilter()
        # Prefilter: every keyword once, minus those containing a shorter one (if
        # "out of memory" is absent, "musa out of memory" is too), as one trie-shaped
        # regex: a line is read once, not once per keyword (two hundred of them).
        every = list(dict.fromkeys(k for s in self.signatures for k in s.keywords))
        self._keywords: tuple[str, ...] = tuple(
            k for k in every if not any(o != k and o in k for o in every))
        self._gate: re.Pattern[str] | None = (
            re.compile(literal_alternation(self._keywords)) if self._keywords else None)
        self._always = [s for s in self.signatures if not s.keywords]

    def take_problems(self) -> list[Alert]:
        """Catalog problems to show once; later calls return nothing."""
        out, self.problems = self.problems, []
        return out

    def find(self, line: str, line_no: int) -> Finding | None:
        """The wording that names `line`, ignoring de-duplication: the first in catalog
        order among those of the strongest role that match (one line can hold a watchdog's
        "terminated with exception" and, after it, the CUDA error that caused it)."""
        low = None
        if self._gate is not None:
            low = line.lower()
            if self._gate.search(low) is None and not self._always:
                return None
        best: tuple[Signature, re.Match[str]] | None = None
        for sig in self.signatures:
            if sig.keywords:
                if low is None or not any(k in low for k in sig.keywords):
                    continue
            if best is not None and _ROLE_RANK[sig.role] >= _ROLE_RANK[best[0].role]:
                continue  # only a stronger role can still win this line
            if sig.max_chars is None:
                m = sig.pattern.search(line)
            else:
                m = sig.pattern.search(line, 0, sig.max_chars)
            if m is not None:
                best = (sig, m)
                if sig.role == "cause":
                    break
        if best is None:
            return None
        sig, m = best
        groups = {k: (v.strip()[:MAX_GROUP_CHARS] if v is not None else "") for k, v in m.groupdict().items()}
        for name in sig.fields:
            groups.setdefault(name, "")
        return Finding(signature=sig, line_no=line_no, line=line, groups=groups)

    def diagnose(self, line: str, line_no: int) -> Finding | None:
        """Like `find`, but None for what is not news: a finding of a class already open as
        an incident within `dedup_lines` lines (the same wording with the same named-group
        values, or another entry of the class about the same thing, then noted on the
        incident's alert as "also seen"), and a traceback's echo of a source line (`raise
        RuntimeError(f"NCCL error: ...")` is code, not an error). A finding about something
        else (another named-group value: a second missing directory, another config key) is
        another incident. Lines must come in order: the echo needs the line before."""
        in_frame = self._echo.step(line)
        f = self.find(line, line_no)
        if f is None or in_frame or EchoFilter.is_code(line):
            return None
        cls = f.signature.klass
        key = (f.signature.id, tuple(sorted(f.groups.items())))
        values = frozenset(v for v in f.groups.values() if v)
        # the window runs from each incident's reported line, so a recurrence later is seen
        open_ = [i for i in self._incidents.get(cls, []) if 0 <= line_no - i.first < self.dedup_lines]
        for inc in open_:
            if inc.key == key:
                return None  # a repeat (32 ranks, one traceback)
        for inc in open_:
            if not values or not inc.values or values & inc.values:
                self._note_also(inc, f)
                return None  # another wording of the same incident
        # another entry of the class about something else (another key, another directory),
        # or the same entry with other values, is another incident
        open_.append(_Incident(first=line_no, sig_id=f.signature.id, key=key, values=values, title=f.title))
        self._incidents[cls] = open_[-MAX_OPEN_INCIDENTS:]
        return f

    @staticmethod
    def _note_also(inc: _Incident, f: Finding) -> None:
        title = f.title
        if title == inc.title or title in inc.also or len(inc.also) >= MAX_ALSO_NOTES:
            return
        inc.also.append(title)
        if inc.alert is not None:
            # the alert was delivered already: whoever holds it (the console's list, the
            # banner) shows the note; its text is made safe as the alert's own was
            inc.alert.message = inc.base + shown(mask_secrets(f" (also seen: {'; '.join(inc.also)})"))

    def match(self, line: str, line_no: int) -> Alert | None:
        """The alert for `line` (title + fix with named groups filled in), or None."""
        f = self.diagnose(line, line_no)
        if f is None:
            return None
        a = f.alert()
        incs = self._incidents.get(f.signature.klass)
        if incs:
            incs[-1].alert, incs[-1].base = a, a.message
        return a

    def reset(self) -> None:
        """Forget reported incidents (a new job's log starts)."""
        self._incidents.clear()
        self._echo = EchoFilter()

    def verdict(self, lines: Iterable[str], start: int = 0) -> Verdict:
        """Why the run these lines end died: see `Verdict`. Independent of what `match`
        already reported (no de-duplication), so it can be asked again at any time."""
        echo = EchoFilter()
        first = FirstError()
        findings: list[Finding] = []
        best: tuple[tuple[int, int, int], Finding] | None = None
        seen: list[str] = []  # ids in log order, each once
        for i, line in enumerate(lines):
            in_frame = echo.step(line)
            f = self.find(line, start + i)
            known = f is not None and not in_frame and not EchoFilter.is_code(line)
            first.step(line, start + i, in_frame, known)
            if not known or f is None:
                continue
            rank = (_LEVEL_RANK.get(f.signature.level, 2), _ROLE_RANK[f.signature.role], f.line_no)
            if best is None or rank < best[0]:
                best = (rank, f)
            if f.signature.id not in seen:
                seen.append(f.signature.id)
            if len(findings) < MAX_VERDICT_FINDINGS:
                findings.append(f)
        chosen = best[1] if best is not None else None
        if first.found is not None:
            rank = (_LEVEL_RANK["error"], 1, first.found.line_no)
            if best is None or rank < best[0]:
                chosen = self._unrecognised(first.found)
        also = [sid for sid in seen if chosen is None or sid != chosen.signature.id]
        return Verdict(finding=chosen, also=also, findings=findings)

    def _unrecognised(self, err: ErrorLine) -> Finding:
        """The finding for the first real error no entry names: the catalog's
        `reward-function` entry when its traceback ran through reward code, else
        `unrecognised-error`, titled with the error line as printed (made safe to show)."""
        sig = _UNRECOGNISED
        if err.reward:
            sig = next((s for s in reversed(self.signatures)
                        if s.id == REWARD_FUNCTION_ID and "error" in s.fields), _UNRECOGNISED)
        groups = {name: "" for name in sig.fields}
        groups["error"] = err.text
        return Finding(signature=sig, line_no=err.line_no, line=err.line, groups=groups)


REWARD_FUNCTION_ID = "reward-function"
"""The catalog entry that names an exception raised inside the reward function (its
traceback runs through reward code); its texts use {error}, the exception line."""

_UNRECOGNISED = Signature(
    id=UNRECOGNISED_ID, level="error", pattern=re.compile(r"(?!)"), title="{error}",
    explanation=("No catalog entry knows this error. It is the first real error in the log (the "
                 "innermost exception of the first traceback, a fatal signal, a non-zero exit), which "
                 "is usually the cause of what follows it."),
    fix=("Read the traceback that ends at this line and the lines just before it on the same "
         "process or rank; if it recurs, add its wording to <config dir>/diagnosis.yaml so the "
         "next run names it (README: Known failures)."),
    role="cause", cls=UNRECOGNISED_ID, fields=("error",), source="rlconsole")


@dataclass
class Verdict:
    """The diagnosis of a log tail: the cause the console names, and the rest as context.

    `finding` is the strongest failure in the lines: an error before a warning; then a
    `cause`, else the first real error no entry knows (`unrecognised-error`), else a
    `consequence`, else a `wrapper` (see ROLES); among equals the first in time, so its
    line is the cause's first line (a consequence or Ray's wrapper printed before or after
    it never wins). `also` lists the ids of the other known failures seen, in log order,
    each once; `findings` the first MAX_VERDICT_FINDINGS of them.
    """

    finding: Finding | None
    also: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """`rlconsole diagnose --json` and `status --json`'s job.diagnosis."""
        f = self.finding
        return {"id": f.signature.id if f else None, "title": f.title if f else None,
                "fix": f.fix if f else None, "line": f.line_no + 1 if f and f.line_no >= 0 else None,
                "also": list(self.also)}


# ----------------------------------------------------------------------- the first real error

MAX_ERROR_TITLE = 300
"""An unrecognised error's title is its line from the exception's name on, this long at most."""


@dataclass
class ErrorLine:
    """A line `FirstError` takes for a real error: where, what, and how strong."""

    line_no: int
    line: str
    text: str
    kind: int
    """0: a Python exception line, 1: a fatal line (signal, FATAL, core dumped), 2: a
    non-zero exit."""
    reward: bool = False
    """Its traceback ran through reward code (a frame in a `reward` module, compute_score)."""


_EXC_SUFFIX = r"(?:Error|Exception|Exit|Interrupt|Fault|Failure)"
_EXC_NAME = re.compile(r"(?<![\w.])(?:[A-Za-z_]\w{0,60}\.){0,8}[A-Z]\w{0,60}?" + _EXC_SUFFIX
                       + r"(?=:\s|:?[ \t`'\"]*$)")
"""`SomeError: message` (or the name alone at the line's end) after any prefix: a dotted
name whose last part ends as Python's exception classes do (`...Error`, `...Exception`,
KeyboardInterrupt, SystemExit); never `...Warning`. Bounded repeats only: linear."""
_TB_NAME = re.compile(r"[A-Za-z_][\w.]{0,120}(?=:\s|:?\s*$)")
"""The exception line that ends a traceback, at the traceback's column: any dotted name
(`socket.timeout: timed out`, `KeyboardInterrupt`)."""
_FATAL = re.compile(r"Fatal Python error: |(?<![\w-])FATAL(?![\w-])|Segmentation fault|\bcore dumped\b"
                    r"|\*\*\* SIG[A-Z]{2,6} received|Caught signal \d{1,3} \(")
_EXIT = re.compile(r"exit(?:ed)?(?: with)? (?:code|status)[:= ]{1,3}(-?\d{1,4})|exitcode: (-?\d{1,4})"
                   r"|non-zero exit status (\d{1,4})", re.IGNORECASE)
_ANSI = re.compile(r"\x1b\[[0-9;]{0,32}[A-Za-z]")
_ERROR_HINTS = ("rror", "xception", "Traceback", "atal", "FATAL", "Segmentation", "xit", "nterrupt",
                "core dumped", "SIG", "Caught signal", "ault", "ailure")


def _is_reward_frame(line: str) -> bool:
    """A traceback frame in reward code: its file path names `reward` (VeRL's reward_score/,
    reward_manager/, a user's reward.py) or its function is compute_score or a *reward*
    function. Substring tests only: linear on any line."""
    at = line.find('File "')
    if at >= 0:
        end = line.find('"', at + 6)
        if "reward" in line[at + 6:end if end >= 0 else len(line)].lower():
            return True
    inn = line.rfind(", in ")
    return inn >= 0 and ("compute_score" in line[inn:] or "reward" in line[inn:].lower())


class FirstError:
    """The first real error of a log, read line by line with the EchoFilter's answer for
    each line (`in_frame`) and whether a catalog entry named it (`known`): the innermost
    exception of the first traceback (Python prints the original one first when one
    exception leads to another), else the first fatal line (a fatal signal, FATAL, a core
    dump), else the first non-zero exit. Not an error: a `raise` echo, a warning
    (`UserWarning: ...`), the traceback after "Exception ignored in" (Python carried on),
    a line the catalog names (known failures, Ray's wrappers), and anything without such a
    form. Cheap on ordinary lines: a few substring tests, no regex."""

    def __init__(self) -> None:
        self.found: ErrorLine | None = None
        self._tb_col: int | None = None
        self._reward = False
        self._ignored = False
        self._unpickling = False

    def _take(self, cand: ErrorLine) -> None:
        if self.found is None or cand.kind < self.found.kind:
            self.found = cand

    def step(self, line: str, line_no: int, in_frame: bool, known: bool) -> None:
        if self.found is not None and self.found.kind == 0:
            return  # the first exception is found: nothing later can be stronger
        if in_frame:
            if self._tb_col is not None and not self._reward and ("reward" in line or "compute_score" in line):
                self._reward = _is_reward_frame(line)
            if "from_ray_exception" in line:
                # Ray rebuilding a worker's exception in the driver (ray/exceptions.py): what
                # this traceback ends in is how that failed, not the run's error
                self._unpickling = True
            return
        tb_col = self._tb_col
        self._tb_col = None
        if tb_col is None and not any(h in line for h in _ERROR_HINTS):
            return
        if "\x1b" in line:
            line = _ANSI.sub("", line)  # a colour glued to the name: `\x1b[31mValueError: ...`
        if "Exception ignored in" in line:
            self._ignored = True  # Python reports an exception it then ignores: handled
            return
        col = line.find("Traceback (most recent call last)")
        if col >= 0:
            self._tb_col, self._reward, self._unpickling = col, False, False
            return
        if known:
            return
        if EchoFilter.is_code(line):
            return
        m = None
        if tb_col is not None:
            m = _TB_NAME.match(line, tb_col)
        if m is None:
            m = _EXC_NAME.search(line)
        if m is not None:
            if self._ignored or (self._unpickling and tb_col is not None):
                self._ignored = self._unpickling = False
                return
            text = shown(line[m.start():].strip())[:MAX_ERROR_TITLE]
            self._take(ErrorLine(line_no, line, text, 0, reward=self._reward and tb_col is not None))
            return
        if self.found is not None and self.found.kind <= 1:
            return
        if _FATAL.search(line):
            self._take(ErrorLine(line_no, line, shown(line.strip())[:MAX_ERROR_TITLE], 1))
            return
        if self.found is None:
            e = _EXIT.search(line)
            if e is not None and int(next(g for g in e.groups() if g is not None)) != 0:
                self._take(ErrorLine(line_no, line, shown(line.strip())[:MAX_ERROR_TITLE], 2))


_EDGE = r"(?:(?<![^\W_])|(?![^\W_]))"
"""Not inside a word: no letter or digit on one side of this point (`_` separates words)."""
_GLOBAL_FLAGS = re.compile(r"(?:\(\?[aiLmsux]+\))+")


def whole_words(rx: re.Pattern[str]) -> re.Pattern[str]:
    """`rx` held to matches that do not start or end inside a word: `ActorDiedError` is not
    found in `kActorDiedErrorContext`. Letters and digits make words; `_` separates them
    (`IB_TIMEOUT` is a word of `MCCL_IB_TIMEOUT`).

    The edges are assertions inside the compiled regex, so the regex engine itself skips a
    start inside a word before trying the rest of the pattern. (A search that found any
    match and retried from the next character when it started inside a word scanned a
    greedy group to the line's end once per such start: quadratic on one long line.)"""
    src = rx.pattern
    head = _GLOBAL_FLAGS.match(src)  # `(?i)` must stay first
    flags_part = head.group(0) if head else ""
    body = src[len(flags_part):]
    end = "\n)" if rx.flags & re.VERBOSE else ")"  # a trailing `# comment` ends at the newline
    return re.compile(f"{flags_part}{_EDGE}(?:{body}{end}{_EDGE}", rx.flags)


_FRAME = re.compile(r'(?:File "[^"]*"|^\S*\.py"), line \d+, in ')
_CODE_PREFIX = re.compile(r"(?:\s*(?:\([^()]*\)|\[[^\[\]]*\]:?|\d+:|[\w.-]+\s+\|\s+[A-Z]+ [^\]]*\]))*\s*")
_CODE = ("raise ", "assert ")


class EchoFilter:
    """Tells a traceback's echoed source lines from messages, line by line in log order.

    Python prints each frame as `File "x.py", line N, in f` followed by that frame's
    source, indented deeper (and, since 3.11, `^^^^` markers). Those lines are code: a
    `raise RuntimeError(f"NCCL error: {e}")` is not an NCCL error. A Ray or rank prefix
    in front of every line (`(WorkerDict pid=1)`, `[rank3]:`) shifts both alike, so "deeper"
    is measured at the column where `File` stands. A line starting with `raise ` or
    `assert ` after such a prefix is code too, even without its frame line (a cut excerpt).
    """

    def __init__(self) -> None:
        self._col: int | None = None

    def step(self, line: str) -> bool:
        """Feed the next line; whether it is a frame line or the source echoed under one.
        Cheap for ordinary lines: a slice and a substring test, no regex."""
        if self._col is not None:
            c = self._col
            if len(line) > c + 1 and line[c:c + 2].isspace() and line.strip():
                return True
            self._col = None
        if '", line ' in line:
            m = _FRAME.search(line)
            if m is not None:
                self._col = m.start()
                return True  # the frame line itself names a file, not a failure
        return False

    @staticmethod
    def is_code(line: str) -> bool:
        """A `raise ...`/`assert ...` statement after the usual line prefixes (asked only
        of lines that matched a signature)."""
        m = _CODE_PREFIX.match(line)
        return line[m.end() if m else 0:].startswith(_CODE)
