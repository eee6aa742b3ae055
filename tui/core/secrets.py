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
* a PEM private key block.

Values are masked WHOLE: a shell word made of several quoted pieces (`'a b'"'"'c'`, what
`shlex.quote` makes of a value with a quote in it), a JSON string with escaped quotes,
or the rest of a `NAME: value` line. A mask that stopped at the first space or quote
would print the rest of the secret.

Free-text names are matched in upper case only (environment variables are), so Hydra
keys such as `ppo_max_token_len_per_gpu=9216` stay readable; dictionary keys (an env
mapping) are matched in any case.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

MASK = "***"

# a NAME that says its value is a credential
_WORDS = r"(?:TOKEN(?!IZER)|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL)"
SECRET_NAME = rf"(?:[A-Z0-9_]*{_WORDS}[A-Z0-9_]*|(?:[A-Z0-9_]*_)?PAT(?:_[A-Z0-9_]*)?)"
_NAME_RE = re.compile(SECRET_NAME)

# one shell word: unquoted runs, '...' and "..." pieces glued together
_SHELL_WORD = r"""(?:'[^']*'|"(?:[^"\\]|\\.)*"|'[^\n]*|"[^\n]*|\\.|[^\s'"\\,;}])+"""
# (an unbalanced quote takes the rest of the line: better too much masked than a leak)
_JSON_STR = r'"(?:[^"\\]|\\.)*"'

_PEM = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S)
_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # "NAME": "value" (JSON)
    (re.compile(rf'("{SECRET_NAME}"\s*:\s*){_JSON_STR}'), rf'\1"{MASK}"'),
    # NAME=value: one shell word, however many quoted pieces it is made of
    (re.compile(rf"(?<![A-Za-z0-9_])({SECRET_NAME})=(?:{_SHELL_WORD})"), rf"\1={MASK}"),
    # NAME: value (YAML, log lines): a quoted value, or the rest of the line
    (re.compile(rf"(?<![A-Za-z0-9_\"])({SECRET_NAME}):[ \t]*(?:{_JSON_STR}|'[^'\n]*'|[^\s,;}}][^\n,;}}]*)"),
     rf"\1: {MASK}"),
    # --hf-token X, --api-key=X, --password X
    (re.compile(r"(?i)(--(?:[a-z0-9]+[-_])*(?:token|password|passwd|secret|key|pat)(?:=|\s+))"
                rf"(?!-)(?:{_SHELL_WORD})"), rf"\1{MASK}"),
    # Authorization: <scheme> <credential>, or Authorization: <credential>
    (re.compile(r"(?i)(\bauthorization\s*[:=]\s*(?:(?:token|bearer|basic|digest|negotiate)\s+)?)"
                r"[^\s'\",;}]+"), rf"\1{MASK}"),
    # scheme://user:password@host and scheme://token@host
    (re.compile(r"(?i)(\b[a-z][a-z0-9+.\-]*://)([^/\s:@'\"]+):([^/\s@'\"]*)@"), rf"\1\2:{MASK}@"),
    (re.compile(r"(?i)(\b[a-z][a-z0-9+.\-]*://)([^/\s:@'\"]+)@"), rf"\1{MASK}@"),
]
_QUICK = re.compile(r"(?i)token|key|secret|passw|credential|authorization|://[^\s/]*@|PAT")


def is_secret_name(name: str) -> bool:
    """Whether a variable's name says its value is a credential (any case)."""
    return _NAME_RE.fullmatch(str(name).upper()) is not None


def mask_secrets(text: str) -> str:
    """`text` with every credential value replaced by `***`; the names stay, so a log
    still says which variable was set."""
    if not text or not _QUICK.search(text):
        return text
    text = _PEM.sub("-----PRIVATE KEY (masked)-----", text)
    for pat, repl in _PATTERNS:
        text = pat.sub(repl, text)
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
