"""One masking rule for secrets (issue 15, item 10), used by the debug log, `render`,
the run history and the screen; and a state dir that cannot be written no longer prints
every error twice, once unmasked (Low).

The property tests build credentials from an alphabet that appears nowhere else in the
text around them (upper-case hex with a `Q` marker), with spaces and quotes mixed in,
write them the ways they reach rlconsole (shell words made by `shlex.quote`, JSON, YAML
lines, flags, URLs, headers) and require that no run of 4+ of its characters survives.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui.cli import main
from tui.core.actions.events import ActionEvent
from tui.core.job.history import RunRecord, history_path, record_run, runs
from tui.core.secrets import is_secret_name, mask_argv, mask_data, mask_env, mask_secrets

REPO = Path(__file__).resolve().parent.parent
GOOD = (Path(__file__).parent / "data" / "good_profile.yaml").read_text()

NAMES = ["WANDB_KEY", "OPENAI_KEY", "GITHUB_PAT", "HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY",
         "DB_PASSWORD", "MY_SECRET", "PAT", "HUGGING_FACE_HUB_TOKEN", "GIT_CREDENTIALS"]
PLAIN = ["PATH", "PYTHONPATH", "TOKENIZERS_PARALLELISM", "MCCL_SOCKET_IFNAME", "HOME", "PATIENCE",
         "CUDA_DEVICE_MAX_CONNECTIONS", "RAY_ADDRESS"]

# secret material: Q-marked upper hex, with spaces and both quotes inside
_piece = st.text(alphabet="0123456789ABCDEF", min_size=4, max_size=12).map(lambda s: "Q" + s)
secret_values = st.lists(st.tuples(_piece, st.sampled_from([" ", "'", '"', " '", '" ', "", "\\"])),
                         min_size=1, max_size=4).map(lambda parts: "".join(a + b for a, b in parts).rstrip("\\"))


def _leaks(secret: str, text: str) -> list[str]:
    return [m for m in re.findall(r"Q[0-9A-F]{3,}", secret) if m in text]


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(NAMES), value=secret_values, before=st.sampled_from(["", "env ", "-e ", "export "]))
def test_shell_words_are_masked_whole(name: str, value: str, before: str) -> None:
    line = f"{before}{name}={shlex.quote(value)} python3 -m verl.trainer.main_ppo"
    out = mask_secrets(line)
    assert not _leaks(value, out), (line, out)
    assert out.endswith("python3 -m verl.trainer.main_ppo") and name in out


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(NAMES), value=secret_values)
def test_json_and_yaml_values_are_masked_whole(name: str, value: str) -> None:
    doc = json.dumps({"env_vars": {name: value, "PATH": "/usr/bin"}})
    out = mask_secrets(doc)
    assert not _leaks(value, out) and '"PATH": "/usr/bin"' in out, out
    yaml_line = f"  {name}: {value}"
    assert not _leaks(value, mask_secrets(yaml_line))


@settings(max_examples=300, deadline=None)
@given(flag=st.sampled_from(["--hf-token", "--token", "--api-key", "--password", "--wandb_key", "--github-pat"]),
       value=secret_values, eq=st.booleans())
def test_flags_are_masked(flag: str, value: str, eq: bool) -> None:
    line = f"huggingface-cli download {flag}{'=' if eq else ' '}{shlex.quote(value)} --local-dir /data/m"
    out = mask_secrets(line)
    assert not _leaks(value, out), (line, out)
    assert "--local-dir /data/m" in out


@settings(max_examples=200, deadline=None)
@given(user=st.text(alphabet="abcdefgh", min_size=1, max_size=8), pw=_piece,
       scheme=st.sampled_from(["https", "http", "git+https", "redis"]))
def test_url_credentials_are_masked(user: str, pw: str, scheme: str) -> None:
    out = mask_secrets(f"git clone {scheme}://{user}:{pw}@example.org/x.git and {scheme}://{pw}@h/y")
    assert pw not in out and f"{scheme}://{user}:***@example.org/x.git" in out


@pytest.mark.parametrize("header", ["Authorization: token {}", "authorization: Bearer {}", "Authorization: Basic {}",
                                    "-H 'Authorization: token {}'", "Authorization={}"])
def test_authorization_headers_are_masked(header: str) -> None:
    assert "Q1234ABCD" not in mask_secrets("curl " + header.format("Q1234ABCD") + " https://api")


def test_names_by_pattern() -> None:
    assert all(is_secret_name(n) for n in NAMES + [n.lower() for n in NAMES])
    assert not any(is_secret_name(n) for n in PLAIN)
    # Hydra keys in free text stay readable (only env-style upper-case names are matched)
    assert mask_secrets("actor.ppo_max_token_len_per_gpu=9216") == "actor.ppo_max_token_len_per_gpu=9216"
    assert mask_secrets("TOKENIZERS_PARALLELISM=false PATH=/bin") == "TOKENIZERS_PARALLELISM=false PATH=/bin"


def test_secrets_inside_other_values_and_lowercase_json_keys() -> None:
    assert "Q42AB" not in mask_secrets('FOO="unterminated WANDB_KEY=Q42AB')
    assert mask_secrets('{"wandb_key": "a Q42AB"}') == '{"wandb_key": "***"}'
    assert mask_secrets("X: 1, OPENAI_KEY: sk Q42AB more") == "X: 1, OPENAI_KEY: ***"


def test_pathological_input_still_masks() -> None:
    """Long runs that a backtracking pattern would chew on for seconds."""
    for text in ("--" + "a-" * 3000 + " --hf-token Q42AB", "-" * 6000 + " --token Q42AB", "A" * 5000 + " GITHUB_PAT=Q42AB", "x --" * 2000 + " --key Q42AB"):
        assert "Q42AB" not in mask_secrets(text)


def test_mask_env_and_data_whole_values() -> None:
    env = {"WANDB_KEY": "a b'c", "PATH": "/bin", "GIT_URL": "https://u:Q9ABCDEF@h/x", "n": 3}
    assert mask_env(env) == {"WANDB_KEY": "***", "PATH": "/bin", "GIT_URL": "https://u:***@h/x", "n": 3}
    assert mask_data({"env_vars": env, "x": ["OPENAI_KEY=sk-Q1234"]}) == {
        "env_vars": {"WANDB_KEY": "***", "PATH": "/bin", "GIT_URL": "https://u:***@h/x", "n": 3},
        "x": ["OPENAI_KEY=***"]}


def test_action_events_are_masked_at_the_source() -> None:
    ev = ActionEvent("model", "output", "HF_TOKEN='Q12 34' huggingface-cli download --token QABCDEF x")
    assert "Q12" not in ev.message and "QABCDEF" not in ev.message


def _profile_with_secrets(tmp_path: Path) -> Path:
    text = GOOD.replace("env:\n  MCCL_SOCKET_IFNAME: lo\n",
                        "env:\n  MCCL_SOCKET_IFNAME: lo\n  WANDB_KEY: \"Q1111 'Q2222' \\\"Q3333\"\n"
                        "  GITHUB_PAT: Q4444AB\n  HF_ENDPOINT: https://me:Q5555AB@hub.example/\n")
    assert text != GOOD
    f = tmp_path / "p.yaml"
    f.write_text(text)
    return f


@pytest.mark.parametrize("fmt", [[], ["--json"]])
def test_render_masks_unless_show_secrets(fmt: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _profile_with_secrets(tmp_path)
    assert main(["render", "--profile", str(f), *fmt]) == 0
    out = capsys.readouterr().out
    assert not re.search(r"Q[1-5]{4}", out), out
    assert "WANDB_KEY" in out and "MCCL_SOCKET_IFNAME" in out
    assert main(["render", "--profile", str(f), "--show-secrets", *fmt]) == 0
    shown = capsys.readouterr().out
    for s in ("Q1111", "Q2222", "Q3333", "Q4444AB", "Q5555AB"):
        assert s in shown


def test_run_history_stores_masked_env(tmp_path: Path) -> None:
    record_run(RunRecord(profile="p", profile_path="/x", job_id="j1", submitted_at=1.0,
                         entrypoint=["python3", "--hf-token", "Q7777AB"],
                         runtime_env={"env_vars": {"OPENAI_KEY": "sk Q8888AB", "PATH": "/bin"}}))
    raw = history_path().read_text()
    assert "Q7777AB" not in raw and "Q8888AB" not in raw
    (r,) = runs("p")
    assert r.runtime_env == {"env_vars": {"OPENAI_KEY": "***", "PATH": "/bin"}}


def test_debug_log_masks(tmp_path: Path) -> None:
    """A real process: the command line it logs holds credentials in three forms."""
    state = tmp_path / "state"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path), "RLCONSOLE_STATE_DIR": str(state)}
    bad = "GITHUB_PAT=Q9999AB WANDB_KEY='Q1 2 3AB' https:/u:Q6666AB@h.yaml"
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "render", "--profile", bad],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 2
    text = (state / "rlconsole.log").read_text()
    assert "GITHUB_PAT=***" in text and "command: render" in text
    assert not re.search(r"Q9999|3AB", text), text


def test_unwritable_state_dir_prints_each_error_once_masked(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path),
           "RLCONSOLE_STATE_DIR": str(blocker / "state")}
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "render", "--profile",
                           str(tmp_path / "GITHUB_PAT=Q4321AB.yaml")],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Q4321AB" not in proc.stderr and "GITHUB_PAT=***" in proc.stderr


# --------------------------------------------------------------------------- issue 27 (Low)
# lower-case names, Hydra overrides, URL query secrets, webhook paths

LOWER_NAMES = ["hf_token", "wandb_api_key", "openai_key", "db_password", "accessToken", "github_pat",
               "aws_secret_access_key", "HF_Token"]


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(LOWER_NAMES), value=secret_values,
       prefix=st.sampled_from(["", "+", "++", "~", "trainer.", "+trainer.", "++actor_rollout_ref.actor."]))
def test_lower_case_and_hydra_names_are_masked_whole(name: str, value: str, prefix: str) -> None:
    line = f"python3 -m verl.trainer.main_ppo {prefix}{name}={shlex.quote(value)} trainer.nnodes=4"
    out = mask_secrets(line)
    assert not _leaks(value, out), (line, out)
    assert f"{prefix}{name}=***" in out and out.endswith(" trainer.nnodes=4")


@pytest.mark.parametrize("line", [
    "hf_token=Q42AB huggingface-cli download",
    "+wandb_api_key=Q42AB",
    "++trainer.wandb_api_key=Q42AB",
    "export hf_token='Q42AB x'",
    "wandb_api_key: Q42AB",
    "https://api.example/v1/x?token=Q42AB",
    "https://api.example/v1/x?page=2&api_key=Q42AB&q=1",
    "https://blob.example/f?sv=2020&sig=Q42AB&se=2027",
    "https://maps.example/api?key=Q42AB",
    "https://h.example/cb?access_token=Q42AB#frag",
    "https://s3.example/b/o?X-Amz-Signature=Q42AB&X-Amz-Credential=Q42AB",
    "https://hooks.slack.com/services/T0001/B0002/Q42AB",
    "https://hooks.slack.com/workflows/T0001/A0002/123/Q42AB",
    "https://discord.com/api/webhooks/112233445566/Q42AB-x_y",
    "https://discordapp.com/api/webhooks/112233445566/Q42AB",
    "https://ci.example/webhook/Q42ABa1b2c3d4e5f6",
    "https://ci.example/webhooks/hooky/Q42AB",
    "https://chat.example/hooks/Q42ABzzzzzzzzzzzzzzzzzzzzz",
    "curl -d @- 'https://hooks.slack.com/services/T0001/B0002/Q42AB'",
])
def test_query_tokens_webhook_paths_and_hydra_keys_are_masked(line: str) -> None:
    out = mask_secrets(line)
    assert "Q42AB" not in out, out
    assert mask_secrets(out) == out  # masking twice changes nothing
    assert "Q42AB" not in " ".join(mask_argv(shlex.split(line)))


PLAIN_LINES = [
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=9216 data.prompt_key=prompt data.reward_fn_key=data_source",
    "actor_rollout_ref.rollout.max_num_batched_tokens=8192 +trainer.val_before_train=False",
    "https://example.org/x?page=2&q=token",
    "https://discord.com/api/webhooks/112233445566",
    "https://ci.example/webhooks/alerts",
    "invalid token: expected a name",
]


def test_hydra_keys_in_mappings_and_argv() -> None:
    """Secret Hydra keys masked in argv and mappings; plain keys and URLs stay readable
    (what a key merely containing `token`/`key` says is not hidden)."""
    for line in PLAIN_LINES:
        assert mask_secrets(line) == line
    assert is_secret_name("+wandb_api_key") and is_secret_name("trainer.wandb_api_key") and is_secret_name("hf_token")
    assert not is_secret_name("actor.ppo_max_token_len_per_gpu") and not is_secret_name("data.prompt_key")
    assert mask_argv(["python3", "++trainer.wandb_api_key=Q42AB", "data.prompt_key=prompt"]) == [
        "python3", "++trainer.wandb_api_key=***", "data.prompt_key=prompt"]
    assert mask_data({"overrides": {"+wandb_api_key": "Q42AB", "trainer.hf_token": "Q42AB", "data.prompt_key": "p"},
                      "hook": "https://hooks.slack.com/services/T1/B2/Q42AB"}) == {
        "overrides": {"+wandb_api_key": "***", "trainer.hf_token": "***", "data.prompt_key": "p"},
        "hook": "https://hooks.slack.com/services/T1/B2/***"}


def test_render_masks_hydra_overrides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The regression: a profile's `+wandb_api_key` override reached `render` in clear
    (free-text names were matched in upper case only)."""
    text = GOOD.replace("    trainer:\n      nnodes: 2\n",
                        "    +wandb_api_key: QA1B2C3D4\n    trainer:\n      nnodes: 2\n"
                        "      ++wandb_api_key: QE5F6A7B8\n      hf_token: QC9D0E1F2\n")
    assert text != GOOD
    f = tmp_path / "p.yaml"
    f.write_text(text)
    for fmt in ([], ["--json"]):
        assert main(["render", "--profile", str(f), *fmt]) == 0
        out = capsys.readouterr().out
        assert not re.search(r"Q[A-F0-9]{8}", out), out
        assert "wandb_api_key" in out and "nnodes" in out
    assert main(["render", "--profile", str(f), "--show-secrets"]) == 0
    assert "QE5F6A7B8" in capsys.readouterr().out


def test_alert_messages_are_masked_at_the_source() -> None:
    """What the console's alerts list, `status`, `watch` and a notification show."""
    from tui.core.alerts import Alert, OpenAlerts

    a = Alert("error", "log", "Traceback: hf_token=Q42AB at https://h/x?token=Q43AB (HF_TOKEN=Q44AB)", key="k")
    box = OpenAlerts()
    box.add(a)
    shown = " ".join(x.one_line() for x in box.current()) + json.dumps(a.to_json())
    assert not re.search(r"Q4[2-4]AB", shown), shown


# --------------------------------------------------------------------------- issue 39 N2
# the credential forms `watch --notify` targets are written in: curl's user:password, a
# quoted credential header, a Telegram bot URL (each a secret marked Q42AB)

N2_LINES = [
    "curl -sS -u bot:Q42AB https://ntfy.example/alerts",
    "curl -sS --user bot:Q42AB https://ntfy.example/alerts",
    "curl --user=bot:Q42AB https://ntfy.example/alerts",
    "curl -ubot:Q42AB https://ntfy.example/alerts",
    "curl -u 'bot:Q42AB x'\"'\"'y' https://ntfy.example/alerts",
    "curl -U proxy:Q42AB --proxy-user proxy:Q42AB https://x.example",
    "curl -H 'X-Api-Key: Q42AB' https://api.example/notify",
    "curl -H \"X-Api-Key: Q42AB\" https://api.example/notify",
    "curl -H 'X-Api-Key: Q42AB with spaces' -d @- https://api.example/notify",
    "curl --header 'Private-Token: Q42AB' https://gitlab.example/api",
    "curl -H X-Auth-Token:Q42AB https://api.example/notify",
    "curl -H 'Cookie: session=Q42AB' https://api.example/notify",
    "curl --oauth2-bearer Q42AB https://api.example/notify",
    "curl -d @- https://api.telegram.org/bot123456789:Q42AB-AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/sendMessage",
    "https://api.telegram.org/bot123456789:Q42AB_xyz/sendMessage?chat_id=42",
    "https://api.telegram.org/file/bot123456789:Q42AB/documents/file_1.txt",
    "notify curl -H 'X-Api-Key: Q42AB' http://127.0.0.1:9/x: attempt 1 failed (command exited 22)",
]


@pytest.mark.parametrize("line", N2_LINES)
def test_curl_users_quoted_headers_and_telegram_tokens_are_masked(line: str) -> None:
    out = mask_secrets(line)
    assert "Q42AB" not in out, out
    assert mask_secrets(out) == out  # masking twice changes nothing
    assert "Q42AB" not in " ".join(mask_argv(shlex.split(line)))
    assert "***" in out and ("curl" in out) == ("curl" in line)


def test_the_parts_that_say_who_stay_readable() -> None:
    assert mask_secrets("curl -u bot:Q42AB https://x") == "curl -u bot:*** https://x"
    assert mask_secrets("curl -H 'X-Api-Key: Q42AB' https://x") == "curl -H 'X-Api-Key: ***' https://x"
    assert (mask_secrets("https://api.telegram.org/bot123456:Q42AB/sendMessage?chat_id=7")
            == "https://api.telegram.org/bot123456:***/sendMessage?chat_id=7")
    assert mask_argv(["curl", "-u", "bot:Q42AB x", "-H", "X-Api-Key: Q42AB", "https://x"]) == [
        "curl", "-u", "bot:***", "-H", "X-Api-Key: ***", "https://x"]


@pytest.mark.parametrize("line", [
    "sudo -u root python -u train.py",
    "docker run -u 1000:1000 verl:latest",
    "curl -u bot https://x.example",              # no password given: curl asks for it
    "curl -H 'Content-Type: application/json' -H 'Accept: */*' https://x.example",
    "ssh -L 8265:localhost:8265 -o 'ConnectTimeout: 5' head",
    "https://example.org/robots/bot1:info",
    "msg = 'step: 12 loss: 0.5'",
])
def test_lines_without_those_credentials_are_unchanged(line: str) -> None:
    assert mask_secrets(line) == line


def test_the_new_forms_stay_linear_on_hostile_lines() -> None:
    """Runs of header starts without a closing quote, flags without a value: the same
    code on n and 4n characters, compared in a ratio (tests/test_parser_bounds.py)."""
    from tests.test_parser_bounds import assert_linear_retried

    def runs_of(unit: str) -> Callable[[int], str]:
        return lambda n: (unit * (n // len(unit) + 1))[:n]

    for unit in ("'x-api-key:", '"api_key: \\', "-u a:", "-u 'a:", "-H k:", "/bot12345:", "'token: \"key: -u a:'"):
        assert_linear_retried(mask_secrets, runs_of(unit))


# --------------------------------------------------------------------------- issue 39 D12
# the forms round 4 found still in clear (each secret marked Q42AB, or a token of its shape)

D12_LINES = [
    "MYSQL_PWD=Q42AB mysql -u root -h db",
    "export MYSQL_PWD='Q42AB x'",
    "env DB_PWD=Q42AB ./migrate",
    "redis://:Q42AB@cache.example:6379/0",
    "REDIS_URL=rediss://:Q42AB@cache.example:6380",
    "https://api.example/v1/push?pass=Q42AB&chat=7",
    "https://api.example/v1/push?password=Q42AB",
    "https://api.example/v1/push?chat=7&auth=Q42AB",
    "https://api.example/v1/push?token=Q42AB#frag",
    "request failed: Bearer Q42ABeyJhbGciOiJIUzI1NiJ9.e30.sig",
    "sent header bearer Q42AB0123456789abcdef",
    "db_password = 'Q42AB'",
    "{'hf_token': 'Q42AB', 'model': 'qwen'}",
    "cloning with ghp_Q42ABcdefghijklmnopqrstuvwxyz0123456789",
    "github_pat_11Q42ABFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFG done",
    "HF login hf_Q42ABcdefghijklmnopqrstuvwxyzAB ok",
    "OPENAI=sk-Q42ABcdefghijklmnopqrstuvwxyz0123456789 python x.py",
    "key: sk-proj-Q42ABcd-efghijklmnop_qrstuvwxyz0123456789ABCDEF",
    "slack xoxb-1234567890-Q42AB0123456789-abcdefghijklmnop",
]


@pytest.mark.parametrize("line", D12_LINES)
def test_round4_credential_forms_are_masked(line: str) -> None:
    out = mask_secrets(line)
    assert "Q42AB" not in out, out
    assert "***" in out
    assert mask_secrets(out) == out  # masking twice changes nothing


def test_round4_forms_keep_what_says_who_and_what() -> None:
    """The name, the user, the scheme and the token's kind stay readable."""
    assert mask_secrets("MYSQL_PWD=Q42AB mysql") == "MYSQL_PWD=*** mysql"
    assert mask_secrets("redis://:Q42AB@cache:6379/0") == "redis://:***@cache:6379/0"
    assert mask_secrets("https://x/p?chat=7&pass=Q42AB&n=1") == "https://x/p?chat=7&pass=***&n=1"
    assert mask_secrets("got Bearer Q42AB0123456789 back") == "got Bearer *** back"
    assert mask_secrets("db_password = 'Q42AB' # x") == "db_password = *** # x"
    assert mask_secrets("{'hf_token': 'Q42AB', 'lr': '0.1'}") == "{'hf_token': '***', 'lr': '0.1'}"
    assert mask_secrets("use ghp_Q42ABcdefghijklmnopqrstuvwxyz0123456789.") == "use ghp_***."
    assert mask_secrets("HF_HUB hf_Q42ABcdefghijklmnopqrstuvwxyzAB") == "HF_HUB hf_***"
    assert mask_secrets("sk-Q42ABcdefghijklmnopqrstuvwxyz0123") == "sk-***"


@pytest.mark.parametrize("line", [
    "PWD=/home/rl OLDPWD=/tmp cd data",                      # the shell's directories, not passwords
    "paths.hf_model=/data/models/qwen hf_transfer hf_model",
    "pip install scikit-learn sk-learn sk-some-very-long-package-name-2024",
    "export HF_HUB_ENABLE_HF_TRANSFER=1 ghp_x gh_pages github_pat_notes",
    "the bearer of bad news; Bearer authentication failed; bearer token expired",
    "https://example.org/list?author=bob&page=2&passes=3",
    "if token == 'x': lr = 0.1; x = 5",
    "{'name': 'grpo', 'lr': '0.1'}",
    "xoxo-hugs and xoxb-short",
    "SyntaxError: unexpected token: '}'",
])
def test_round4_look_alikes_stay_readable(line: str) -> None:
    assert mask_secrets(line) == line


def test_round4_forms_stay_linear_on_hostile_lines() -> None:
    """Runs of the new forms' starts with no end: n and 4n characters, compared in a ratio."""
    from tests.test_parser_bounds import assert_linear_retried

    def runs_of(unit: str) -> Callable[[int], str]:
        return lambda n: (unit * (n // len(unit) + 1))[:n]

    for unit in ("Bearer ", "bearer a", "hf_", "sk-", "ghp_a", "xoxb-1", "github_pat_", "'a': ", "'hf_token': '",
                 "a = ", "a =", "redis://:", "?pass=", "&auth=a", "MYSQL_PWD=", "sk-a1B"):
        assert_linear_retried(mask_secrets, runs_of(unit))
    for shape in ("hf_", "sk-", "ghp_", "xoxb-", "github_pat_", "Bearer "):
        assert_linear_retried(mask_secrets, lambda n, s=shape: s + "aB1" * (n // 3))
