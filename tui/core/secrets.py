"""The one rule for what is a secret and how it is hidden.

Everything rlconsole writes or shows goes through here: the debug log (a logging
filter), the SSH audit lines, `render` (unless `--show-secrets`), the run history
(`runs.jsonl`) and the console's screen. One rule, so that a credential masked in one
place cannot leak in another.

What counts as a secret:
* a variable whose NAME says so: it contains TOKEN, KEY, SECRET, PASSWORD, PASSWD or
  CREDENTIAL, or has PAT as a word (GITHUB_PAT), e.g. WANDB_API_KEY, WANDB_KEY,
  OPENAI_KEY, HF_TOKEN; TOKENIZERS_PARALLELISM is not one (it says "tokenizer");
* the password (or a lone user, which is how tokens ride in URLs) in `scheme://user:pass@`;
* the value after a `--...token`, `--...password`, `--...secret`, `--...key` or `--...pat`
  flag (`--hf-token X`, `--api-key=X`);
* the credential of an `Authorization:` header, whatever its scheme (`token X`,
  `Bearer X`, `Basic X`);
* the value of any other header whose name says it is a credential (`X-Api-Key`,
  `Private-Token`, `X-Auth-Token`; and `Cookie`) written in quotes (`-H 'X-Api-Key: X'`,
  `"X-Api-Key: X"`: the value ends at the closing quote) or as curl's `-H Name:X`;
* the password of curl's `-u`/`--user`/`-U`/`--proxy-user user:password` (the user stays);
* a Telegram bot token in a URL path (`/bot123456:ABC.../sendMessage`, `/file/bot...`).
* a PEM private key block;
* `*_PWD` variables (`MYSQL_PWD`; never the shell's `PWD`/`OLDPWD`), a URL's password
  with no user (`redis://:PASSWORD@`), `?pass=`/`?pw=`/`?auth=` query values, a bare
  `Bearer X` (a token-like X: not prose), `name = 'X'` and `{'name': 'X'}` (judged by
  the name, as `name=X` and JSON are);
* a token by its shape, the prefix kept: GitHub's `ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_`/
  `github_pat_`, Hugging Face's `hf_`, `sk-` (OpenAI, `sk-proj-`, `sk-ant-`), Slack's
  `xoxb-`...; strict enough (length, mixed case, digits) that `hf_model`, `sk-learn`,
  `ghp_x` stay words;
* a lower- or mixed-case name that ENDS with a credential word (`hf_token`,
  `wandb_api_key`, `accessToken`, `db_password`; `key`, `sig`, `signature` only as the
  whole name or its last word), in free text (`hf_token=X`), as a Hydra override
  (`+wandb_api_key=X`, `++trainer.wandb_api_key=X`: the `+`/`~` prefix and the dotted
  path are not part of the name) or as a URL query parameter (`?token=X`, `&api_key=X`,
  `&sig=X`); a plain Hydra key that merely contains one (`ppo_max_token_len_per_gpu`,
  `data.prompt_key`) is not one;
* the secret path of a webhook URL: Slack's `hooks.slack.com/services/T/B/SECRET`,
  Discord's `/api/webhooks/ID/TOKEN`, and after any `/webhook(s)/` or `/hooks/` segment
  the last of several segments and every random-looking one.

Values are masked WHOLE: a shell word made of several quoted pieces (`'a b'"'"'c'`, what
`shlex.quote` makes of a value with a quote in it), a JSON string with escaped quotes,
or the rest of a `NAME: value` line. A mask that stopped at the first space or quote
would print the rest of the secret.

Upper-case free-text names (environment variables) are secret when they CONTAIN a
credential word; lower-case ones only when they END with one, so Hydra keys such as
`ppo_max_token_len_per_gpu=9216` stay readable; dictionary keys (an env mapping) are
matched in any case (a dotted or `+`-prefixed key by the lower-case rule).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

MASK = "***"

# a NAME that says its value is a credential
_WORDS = r"(?:TOKEN(?!IZER)|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL)"
SECRET_NAME = rf"(?:[A-Z0-9_]*{_WORDS}[A-Z0-9_]*|(?:[A-Z0-9_]*_)?PAT(?:_[A-Z0-9_]*)?|[A-Z0-9_]*_PWD)"
# (`_PWD` as the last word: MYSQL_PWD, DB_PWD; never the shell's PWD or OLDPWD, a directory)
_NAME_RE = re.compile(SECRET_NAME)

# one shell word: unquoted runs, '...' and "..." pieces glued together
_SHELL_WORD = r"""(?:'[^']*'|"(?:[^"\\]|\\.)*"|'[^\n]*|"[^\n]*|\\.|[^\s'"\\,;}])+"""
# (an unbalanced quote takes the rest of the line: better too much masked than a leak)
_JSON_STR = r'"(?:[^"\\]|\\.)*"'

_PEM = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S)

# Names are found as whole words (`[A-Z0-9_]+` after a non-word character: linear time)
# and judged by is_secret_name in the replacement, never by a regex that retries the
# keyword at every offset of a long upper-case run.
_NAME = r"(?<![A-Za-z0-9_])([A-Z][A-Z0-9_]*)"
_JSON_PAIR = re.compile(rf'(?<!\\)"([A-Za-z][A-Za-z0-9_]*)"(\s*:\s*){_JSON_STR}')
_ASSIGN = re.compile(rf"{_NAME}=({_SHELL_WORD})")
_COLON = re.compile(rf"(?<![\"']){_NAME}:[ \t]*({_JSON_STR}|'[^'\n]*'|[^\s,;}}][^\n,;}}]*)")
_FLAG = re.compile(r"(?i)((?<!-)--(?:[a-z0-9][a-z0-9_-]{0,200}?)?(?:token|password|passwd|secret|key|pat|bearer)(?:=|[ \t]+))"
                   rf"(?!-)(?:{_SHELL_WORD})")
_AUTH = re.compile(r"(?i)(\bauthorization\s*[:=]\s*(?:(?:token|bearer|basic|digest|negotiate)\s+)?)"
                   r"[^\s'\",;}]+")
_URL_PW = re.compile(r"(?i)(\b[a-z][a-z0-9+.\-]{0,30}://)([^/\s:@'\"]*):([^/\s@'\"]*)@")
# (the user may be empty: `redis://:password@host`)
_URL_USER = re.compile(r"(?i)(\b[a-z][a-z0-9+.\-]{0,30}://)([^/\s:@'\"]+)@")
# curl's user:password (`-u bot:X`, `-ubot:X`, `--user=bot:X`, `--proxy-user`, `-U`): the
# word after the flag, when it holds a colon (`sudo -u root`, `python -u` are not one)
_CURL_USER = re.compile(rf"(?<![\w-])(-u|-U|--user|--proxy-user)(=|[ \t]+|(?=[^\s-]))({_SHELL_WORD})")
# a header in quotes, `'Name: value'` / `"Name: value"`: the value up to the closing quote
# (judged by name in the replacement); the same quote closes it, so a run of starts each
# stops at the next quote (linear)
_QUOTED_HEADER = re.compile(r"""(?<![A-Za-z0-9_.\-\\])(')([A-Za-z][A-Za-z0-9_\-]{0,100}):([ \t]*)([^'\n]*)(?=')|"""
                            r"""(?<![A-Za-z0-9_.\-\\])(")([A-Za-z][A-Za-z0-9_\-]{0,100}):([ \t]*)((?:[^"\\\n]|\\.)*)(?=")""")
# curl's `-H Name:value` / `--header=Name:value` unquoted: the value to the word's end
_BARE_HEADER = re.compile(r"(?<![\w-])(-H|--header)(=|[ \t]+)([A-Za-z][A-Za-z0-9_\-]{0,100}):([ \t]*)([^\s'\"]+)")
_SECRET_HEADERS = ("cookie",)
"""Header names that are credentials without saying so (besides Authorization, which
`_AUTH` masks keeping its scheme)."""
# Telegram's Bot API: the token is a path segment, `/bot<id>:<secret>/method` (an id of
# 5+ digits: `/bot1:info` is a path)
_TELEGRAM = re.compile(r"(/(?:file/)?bot)(\d{5,20}):([^/\s?#'\"]+)")

# A lower/mixed-case name (Hydra key, URL query parameter, JSON-ish config) is a secret
# when it ENDS with a credential word: `hf_token`, `wandb_api_key`, `accessToken`;
# `key`/`sig`/`signature` only as the whole name or last `_`/`-` word after a word that
# says so (`api_key`, `x-amz-signature`), never `prompt_key` or `max_token_len`.
_LOWER_SECRET = re.compile(
    r"(?i)(?:token|secret|password|passwd|credentials?|apikey|^key|"
    r"(?:^|[_-])(?:pat|pwd|sig|signature)|"
    r"(?:api|access|secret|private|auth|client|signing|encryption|master|account|license|"
    r"subscription|wandb|openai|hf|github|aws|azure|gcp)[_-]?key)$")
# NAME=value with a lower-case letter in NAME; Hydra's `+`, `++`, `~` prefixes and a
# dotted path before the name (the last component is judged)
_LOWER_ASSIGN = re.compile(rf"(?<![A-Za-z0-9_.\-?&])([+~]{{0,2}}[A-Za-z_][A-Za-z0-9_.\-]{{0,200}})=({_SHELL_WORD})")
_LOWER_COLON = re.compile(r"""(?<![A-Za-z0-9_.\-"'])([A-Za-z][A-Za-z0-9]*[_-][A-Za-z0-9_\-]*|password|passwd):[ \t]+"""
                          rf"({_JSON_STR}|'[^'\n]*'|[^\s,;}}][^\n,;}}]*)")
# ?name=value / &name=value (a URL's query, wherever it is): the value up to the next
# parameter, so the rest of the URL stays readable
_QUERY = re.compile(r"([?&;])([A-Za-z0-9_.\-]{1,100})=([^&#\s'\"<>]*)")
# `Bearer <credential>` without its `Authorization:` (a log line, an error quoting the
# header's value): a token-like word after it; prose ("the bearer of bad news") is not one
_BEARER = re.compile(r"(?i)(?<![\w-])(bearer[ \t]+)([A-Za-z0-9\-._~+/]{8,}=*)")
# credentials by their shape, wherever they stand: GitHub's (`ghp_`, `gho_`, `ghu_`,
# `ghs_`, `ghr_`, `github_pat_`), Hugging Face's (`hf_`), OpenAI-style (`sk-`,
# `sk-proj-`), Slack's (`xoxb-`...). The prefix stays (it says what kind). A start never
# sits inside a word (the look-behind), so a long run is scanned once.
_TOKEN_SHAPE = re.compile(r"(?<![A-Za-z0-9_\-])(gh[pousr]_|github_pat_|hf_|sk-(?:proj-|ant-|svcacct-)?|xox[abposr]-)"
                          r"([A-Za-z0-9_\-]{10,})")
_SHAPE_HINT = re.compile(r"gh[pousr]_|github_pat_|hf_|sk-|xox[abposr]-")
# a Python dict's `'name': 'value'` (a repr in a log line), judged by name as a JSON pair
_PY_PAIR = re.compile(r"(?<![\\A-Za-z0-9_])'([A-Za-z][A-Za-z0-9_]{0,100})'(\s*:\s*)'[^'\n]*'")
# `name = value` with blanks around the `=` (Python, INI): lower-case names by their end
_SPACED_ASSIGN = re.compile(r"(?<![A-Za-z0-9_.\-])([A-Za-z_][A-Za-z0-9_]{0,100})[ \t]+=[ \t]+"
                            r"""('[^'\n]*'|"(?:[^"\\\n]|\\.)*"|[^\s,;)}]+)""")
# a URL's host and path, for the webhook rule
_URL_PATH = re.compile(r"(?i)(\b[a-z][a-z0-9+.\-]{0,30}://(?:[^\s/?#'\"@]*@)?([^\s/?#'\"]+))(/[^\s?#'\"]*)")
_HOOK_MARK = re.compile(r"(?i)webhooks?[a-z0-9]*|hooks")
_RANDOM_SEG = re.compile(r"[A-Za-z0-9_\-=.~%+@]{20,}|(?=.*[0-9])(?=.*[A-Za-z])[A-Za-z0-9_\-=.~%+@]{8,}")

# cheap pre-checks: most log lines hold none of these, and skip every pattern
_UPPER_WORD = re.compile(r"TOKEN|KEY|SECRET|PASSW|CREDENTIAL|PAT|_PWD")
_LOWER_WORD = re.compile(r"(?i)token|key|secret|passw|credential|pat")
_LOWER_HINT = re.compile(r"(?i)token|key|secret|passw|pwd|credential|pat|sig")
_QUERY_HINT = re.compile(r"(?i)[?&;](?:pass|pw|auth|access_code)")


def _named(m: re.Match[str], keep: str) -> str:
    return keep if is_secret_name(m.group(1)) else m.group(0)


def _assign(m: re.Match[str]) -> str:
    if is_secret_name(m.group(1)):
        return f"{m.group(1)}={MASK}"
    # not a secret, but its value (an unbalanced quote takes the rest of the line) may
    # hold one: look inside it too
    return f"{m.group(1)}=" + _ASSIGN.sub(_assign, m.group(2))


def is_secret_name(name: str) -> bool:
    """Whether a variable's name says its value is a credential (any case). A Hydra key
    (`+wandb_api_key`, `trainer.wandb_api_key`) is judged by its last component, by the
    lower-case rule (so `actor.ppo_max_token_len_per_gpu` is not one)."""
    name = str(name)
    if "." in name or name[:1] in "+~":
        return is_lower_secret_name(name)
    return _NAME_RE.fullmatch(name.upper()) is not None


def is_lower_secret_name(name: str) -> bool:
    """The rule for lower/mixed-case names in free text, Hydra keys and URL queries: the
    name (after Hydra's `+`/`~` and the dotted path) ENDS with a credential word."""
    last = str(name).lstrip("+~").rpartition(".")[2]
    if last.isupper():
        return _NAME_RE.fullmatch(last) is not None
    return _LOWER_SECRET.search(last) is not None


def _lower_assign(m: re.Match[str]) -> str:
    if is_lower_secret_name(m.group(1)):
        return f"{m.group(1)}={MASK}"
    return m.group(0)


_QUERY_NAMES = frozenset({"pass", "pw", "auth", "passcode", "access_code"})
"""Query parameter names that carry a credential without ending in a credential word
(`?pass=`, `?auth=`); only in a URL's query, where they mean that."""


def _query(m: re.Match[str]) -> str:
    # a value masked already stays as it is (`?token=***: ...` keeps its colon): masking
    # twice changes nothing
    value = m.group(3)
    if value and not value.startswith(MASK) and (m.group(2).lower() in _QUERY_NAMES
                                                 or is_lower_secret_name(m.group(2))):
        return f"{m.group(1)}{m.group(2)}={MASK}"
    return m.group(0)


def _hook_path(m: re.Match[str]) -> str:
    """A webhook URL's path with the segments that are its credential masked."""
    host, path = m.group(2).lower(), m.group(3)
    segs = path.split("/")
    mark = None
    for i, seg in enumerate(segs):
        if _HOOK_MARK.fullmatch(seg) or (host.endswith("slack.com") and seg in ("services", "workflows", "triggers")):
            mark = i
            break
    if mark is None:
        return m.group(0)
    rest = [i for i in range(mark + 1, len(segs)) if segs[i]]
    for n, i in enumerate(rest):
        # the last of several segments (ID/TOKEN, T/B/SECRET), and any random-looking one
        if segs[i].startswith(MASK):
            continue
        if (n == len(rest) - 1 and len(rest) >= 2) or _RANDOM_SEG.fullmatch(segs[i]):
            segs[i] = MASK
    return m.group(1) + "/".join(segs)


def _bearer(m: re.Match[str]) -> str:
    value = m.group(2)
    if value.isalpha() and len(value) < 20:  # a word ("Bearer authentication"), not a token
        return m.group(0)
    return m.group(1) + MASK


def _token_shape(m: re.Match[str]) -> str:
    """A word of a token's shape: the rest long and random enough (mixed case, digits) that
    `hf_model`, `hf_transformers_cache`, `sk-learn` or `github_pat_notes` stay words."""
    prefix, rest = m.group(1), m.group(2)
    mixed = any(c.isupper() for c in rest) and any(c.islower() for c in rest)
    if prefix.startswith("gh") and not prefix.startswith("github"):
        ok = len(rest) >= 30 and rest.isalnum()
    elif prefix == "github_pat_":
        ok = len(rest) >= 40 and "-" not in rest and mixed
    elif prefix == "hf_":
        ok = len(rest) >= 30 and rest.isalnum() and mixed
    elif prefix.startswith("sk-"):  # sk-<20+ letters and digits>, or a long one with - and _
        digits = any(c.isdigit() for c in rest)
        ok = (len(rest) >= 20 and rest.isalnum() and digits and not rest.isdigit()) or \
            (len(rest) >= 40 and mixed and digits)
    else:  # Slack
        ok = len(rest) >= 10 and any(c.isdigit() for c in rest) and "_" not in rest
    return prefix + MASK if ok else m.group(0)


def _spaced_assign(m: re.Match[str]) -> str:
    name = m.group(1)
    if m.group(2).startswith(MASK) or not (is_lower_secret_name(name) if not name.isupper() else is_secret_name(name)):
        return m.group(0)
    return m.group(0)[:m.start(2) - m.start(0)] + MASK


def _curl_user(m: re.Match[str]) -> str:
    word = m.group(3)
    colon = word.find(":")
    if colon < 0 or word[colon + 1:].startswith(MASK) or re.fullmatch(r"\d+:\d+", word):
        return m.group(0)  # no password, masked already, or a uid:gid (`docker run -u 0:0`)
    user = word[:colon]
    close = user[0] if user[:1] in ("'", '"') and user[0] not in user[1:] else ""
    return f"{m.group(1)}{m.group(2)}{user}:{MASK}{close}"


def is_secret_header(name: str) -> bool:
    """A header whose value is a credential (`X-Api-Key`, `Private-Token`, `Cookie`),
    Authorization aside (masked keeping its scheme)."""
    low = name.lower()
    if low.endswith("authorization"):
        return False
    return low in _SECRET_HEADERS or is_lower_secret_name(name)


def _quoted_header(m: re.Match[str]) -> str:
    q, name, gap, value = (m.group(1), m.group(2), m.group(3), m.group(4)) if m.group(1) else \
        (m.group(5), m.group(6), m.group(7), m.group(8))
    if not value or value.startswith(MASK) or not is_secret_header(name):
        return m.group(0)
    return f"{q}{name}:{gap}{MASK}"


def _bare_header(m: re.Match[str]) -> str:
    if m.group(5).startswith(MASK) or not is_secret_header(m.group(3)):
        return m.group(0)
    return f"{m.group(1)}{m.group(2)}{m.group(3)}:{m.group(4)}{MASK}"


def mask_secrets(text: str) -> str:
    """`text` with every credential value replaced by `***`; the names stay, so a log
    still says which variable was set."""
    if not text:
        return text
    if "PRIVATE KEY-----" in text:
        text = _PEM.sub("-----PRIVATE KEY (masked)-----", text)
    lower = _LOWER_HINT.search(text) is not None
    if "=" in text and ("?" in text or "&" in text or ";" in text) and (lower or _QUERY_HINT.search(text)):
        text = _QUERY.sub(_query, text)
    if _UPPER_WORD.search(text):
        text = _JSON_PAIR.sub(lambda m: _named(m, f'"{m.group(1)}"{m.group(2)}"{MASK}"'), text)
        text = _ASSIGN.sub(_assign, text)
        text = _COLON.sub(lambda m: _named(m, f"{m.group(1)}: {MASK}"), text)
    elif '"' in text and _LOWER_WORD.search(text):  # {"wandb_key": "..."}: JSON keys in any case
        text = _JSON_PAIR.sub(lambda m: _named(m, f'"{m.group(1)}"{m.group(2)}"{MASK}"'), text)
    if lower:
        if "=" in text:
            text = _LOWER_ASSIGN.sub(_lower_assign, text)
        if ":" in text:
            text = _LOWER_COLON.sub(lambda m: f"{m.group(1)}: {MASK}" if is_lower_secret_name(m.group(1))
                                    else m.group(0), text)
    if ":" in text:
        if ("'" in text or '"' in text) and (lower or "ookie" in text or "OOKIE" in text):
            text = _QUOTED_HEADER.sub(_quoted_header, text)
        if "-H" in text or "--header" in text:
            text = _BARE_HEADER.sub(_bare_header, text)
        if "-u" in text or "-U" in text or "--user" in text or "--proxy-user" in text:
            text = _CURL_USER.sub(_curl_user, text)
        if "/bot" in text or "/file/bot" in text:
            text = _TELEGRAM.sub(rf"\1\2:{MASK}", text)
    if "--" in text and (_LOWER_WORD.search(text) or "earer" in text or "EARER" in text):
        text = _FLAG.sub(rf"\1{MASK}", text)
    if "uthorization" in text or "UTHORIZATION" in text:
        text = _AUTH.sub(rf"\1{MASK}", text)
    if "earer" in text or "EARER" in text:
        text = _BEARER.sub(_bearer, text)
    if _SHAPE_HINT.search(text):
        text = _TOKEN_SHAPE.sub(_token_shape, text)
    if "'" in text and ":" in text and (lower or _UPPER_WORD.search(text)):
        text = _PY_PAIR.sub(lambda m: _named(m, f"'{m.group(1)}'{m.group(2)}'{MASK}'"), text)
    if " =" in text or "\t=" in text:
        text = _SPACED_ASSIGN.sub(_spaced_assign, text)
    if "://" in text and "@" in text:
        text = _URL_PW.sub(rf"\1\2:{MASK}@", text)
        text = _URL_USER.sub(rf"\1{MASK}@", text)
    if "://" in text and "hook" in text.lower():
        text = _URL_PATH.sub(_hook_path, text)
    return text


def mask_argv(argv: list[str]) -> list[str]:
    """An argv with credentials masked, flags included (`--hf-token X`: X is the next
    word, so words are masked in context: the joined command line is masked and split
    again; a masked word stays one word)."""
    try:
        return shlex.split(mask_secrets(shlex.join(argv)))
    except ValueError:
        return [mask_secrets(a) for a in argv]


def mask_env(env: dict[str, Any]) -> dict[str, Any]:
    """An environment mapping with secret-named values masked whole, and credentials
    inside other values (a URL with a password) masked by the text rule."""
    out: dict[str, Any] = {}
    for k, v in env.items():
        if is_secret_name(k) and v not in (None, ""):
            out[k] = MASK
        elif isinstance(v, str):
            out[k] = mask_secrets(v)
        else:
            out[k] = v
    return out


def mask_data(value: Any) -> Any:
    """A JSON-like structure with every env-like mapping masked (recursively): what the
    run history stores and `render --json` prints."""
    if isinstance(value, dict):
        masked = mask_env(value)
        return {k: (mask_data(v) if isinstance(v, (dict, list)) else masked[k]) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_data(v) for v in value]
    if isinstance(value, str):
        return mask_secrets(value)
    return value
