"""Placeholder values: what an example launch script leaves for its reader to fill in.

VeRL's example scripts ship values such as `actor_rollout_ref.model.path=<path_to_dsv3_config>`,
`/path/to/model`, `$HOME/models/CHANGE_ME`, `YOUR_WANDB_KEY` or `xxx`. Bash passes them on
without a word and the job dies minutes later (or, worse, runs against the wrong thing).
One rule, `placeholder_reason`, says which values are such placeholders; `rlconsole import`
reports them as it writes the profile and the `profile.placeholders` static check fails on
a profile that still holds one. The rule is conservative on purpose: a real path
(`/data/models/Qwen3-8B`), a word (`auto`), an interpolation (`${oc.env:HOME}`), a URL or a
chat-template token (`<|im_end|>`, `<think>`, `<tool_call>`) is never a placeholder.
"""

from __future__ import annotations

import re

# The importer's own visible mark for a `$(...)` it did not run (tui/core/importer/shellexpand.py).
UNRESOLVED_OPEN = "<unresolved:"

_ANGLE = re.compile(r"<\s*([A-Za-z][A-Za-z0-9_ .:/-]*?)\s*>")
# Words that make an angle-bracket token a slot to fill rather than a tag.
_SLOT_WORDS = frozenset((
    "your", "path", "dir", "directory", "folder", "model", "ckpt", "checkpoint", "config", "key", "token",
    "secret", "password", "name", "file", "filename", "user", "username", "host", "hostname", "ip", "addr",
    "address", "node", "project", "experiment", "dataset", "data", "url", "repo", "org", "entity", "port", "id",
))
_PATH_TO = re.compile(r"(?:^|[^A-Za-z0-9_.\-])path/to(?:/|$)", re.I)
_CHANGE_ME = re.compile(r"(?<![A-Za-z0-9])(?:change|replace)[-_ ]?me(?![A-Za-z0-9])", re.I)
_TODO = re.compile(r"(?<![A-Za-z0-9])(?:TODO|FIXME|TBD)(?![A-Za-z0-9])")
_YOUR_ANY = re.compile(r"(?:^|[^A-Za-z0-9_\-])your[-_ ][A-Za-z0-9]", re.I)
_YOUR_UPPER = re.compile(r"(?<![A-Za-z0-9])YOUR_[A-Z0-9]")
_XXX = re.compile(r"(?<![A-Za-z0-9])[xX]{3,}(?![A-Za-z0-9])")


def _slot(inner: str) -> bool:
    return any(w.lower() in _SLOT_WORDS for w in re.split(r"[_ .:/-]+", inner))


def placeholder_reason(value: object) -> str | None:
    """Which placeholder form `value` holds (a few words for a message), or None.

    A string, or any string of a list, counts when it holds:
    - `<unresolved: ...>`: the importer's own mark for a command substitution it never ran;
    - an angle-bracket token naming a slot, `<path_to_dsv3_config>`, `<your wandb key>`,
      `<MODEL_PATH>`: the documentation convention for "put yours here". Only when a word
      of it is one of `_SLOT_WORDS` (path, model, key, your...): `<think>`, `<tool_call>`,
      `<s>`, `<EOS>` are real tokens, and `<|im_end|>` is not even matched;
    - `path/to` as a path's own components (`/path/to/model`, `path/to/data`,
      `hdfs://path/to/x`), case-insensitive: the stock example path. `/data/mypath/to` is not;
    - `CHANGE-ME`, `CHANGE_ME`, `CHANGEME`, `REPLACE_ME` as a word, any case: "edit this"
      (the importer's own `/CHANGE-ME/...` values too);
    - `TODO`, `FIXME`, `TBD` as a word, upper case only: a note left in the value
      (lower-case `todo` can be a real name: a dataset, a project);
    - `YOUR_...`/`your-...`/`your ...` starting a word (`YOUR_WANDB_KEY`, `/home/your_name`,
      `hf_YOUR_TOKEN` in upper case): a value written for the reader. Lower case only at the
      start of a path part, so a name like `train_your_own_model` stays real;
    - `xxx` (three or more x, any case) as a word: `xxx`, `hf_xxx`, `sk-xxxx`, `/data/xxx/m`,
      the usual redaction or filler. `xxhash` or `XXXL` are not.
    Numbers, booleans and None are never placeholders.
    """
    if isinstance(value, (list, tuple)):
        return next((r for r in map(placeholder_reason, value) if r), None)
    if not isinstance(value, str):
        return None
    if UNRESOLVED_OPEN in value:
        return "a command the importer did not run"
    if any(_slot(m.group(1)) for m in _ANGLE.finditer(value)):
        return "an <...> slot"
    if _PATH_TO.search(value):
        return "the example path path/to"
    if _CHANGE_ME.search(value):
        return "CHANGE-ME"
    if _TODO.search(value):
        return "TODO/FIXME"
    if _YOUR_ANY.search(value) or _YOUR_UPPER.search(value):
        return "a YOUR_... value"
    if _XXX.search(value):
        return "an xxx filler"
    return None


def is_placeholder(value: object) -> bool:
    return placeholder_reason(value) is not None

