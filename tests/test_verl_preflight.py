"""The preflight against real VeRL (issue 35): what the VeRL on the head does decides.

- `code.transformer_config`: keys Megatron's TransformerConfig lacks are a WARN ("no effect")
  where the head's VeRL drops them (>= 0.5), a FAIL only where it raises (0.4.x); the sim's
  stand-in worker does what the release it stands for does.
- `code.overrides`: every rejected override in one pass, each with its own fix, composed by
  the same script the check runs on the head, here against real releases' config files.
- The live path: a sim on real VeRL 0.7.0's config, the seed's five flag-keys and three bad
  overrides, through `rlconsole check --json`.

Real releases come from the wheels in $RLCONSOLE_VERL_WHEELS (.ci/run downloads them); where
they are missing the tests skip, and under CI=true a skip is a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tui.core.actions.plan import preflight_events
from tui.core.checks import COMPOSE_SCRIPT, CheckStatus, transformer_config_verdict
from tui.sim.verl_release import ReleaseUnavailable, VerlRelease, fetch_release, wheels_dir_versions

SEED_FLAG_KEYS = ("no_gradient_accumulation_fusion", "accumulate_allreduce_grads_in_fp32",
                  "no_masked_softmax_fusion", "no_bias_swiglu_fusion", "swiglu")


def release(version: str, cache: Path) -> VerlRelease:
    os.environ["XDG_CACHE_HOME"] = str(cache)
    try:
        return fetch_release(version)
    except ReleaseUnavailable as e:
        pytest.skip(f"real VeRL {version} not available (set RLCONSOLE_VERL_WHEELS to a dir of wheels): {e}")


@pytest.fixture(scope="module")
def verl_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("verl-cache")


@pytest.fixture(scope="module")
def newest(verl_cache: Path) -> VerlRelease:
    vs = wheels_dir_versions()
    if not vs:
        pytest.skip("no VeRL wheels in $RLCONSOLE_VERL_WHEELS")
    return release(vs[-1], verl_cache)


def compose(config_dir: Path, name: str, overrides: list[str]) -> list[dict]:
    """The check's own script, as the head runs it: its REJECTED lines, or [] when OK."""
    res = subprocess.run([sys.executable, "-c", COMPOSE_SCRIPT, str(config_dir), name, *overrides],
                         capture_output=True, text=True, timeout=300)
    assert "DONE" in res.stdout, res.stderr[-2000:]
    rejected = [json.loads(x[9:]) for x in res.stdout.splitlines() if x.startswith("REJECTED:")]
    assert ("OK" in res.stdout.splitlines()) == (not rejected)
    return rejected


# --------------------------------------------------------------------------- the verdict


@pytest.mark.parametrize("version, status", [("0.4.1", CheckStatus.FAIL), ("0.5.0", CheckStatus.WARN),
                                             ("0.7.0", CheckStatus.WARN), ("0.9.1", CheckStatus.WARN),
                                             ("", CheckStatus.WARN), ("garbage", CheckStatus.WARN)])
def test_transformer_config_verdict_follows_the_version(version: str, status: CheckStatus) -> None:
    r = transformer_config_verdict(list(SEED_FLAG_KEYS), version, "node1")
    assert r.status is status, r
    assert all(k in r.message for k in SEED_FLAG_KEYS)
    if status is CheckStatus.FAIL:
        assert "TypeError" in r.message
    elif version.startswith("0."):
        assert f"dropped with a warning by VeRL {version}" in r.message and "have no effect" in r.message
    else:
        assert "unknown" in r.message


def test_a_warning_does_not_refuse_submit() -> None:
    """Submit's preflight refuses on a FAIL only: the seed's dropped keys are said, not fatal."""
    events = preflight_events([transformer_config_verdict(list(SEED_FLAG_KEYS), "0.7.0", "node1")])
    assert [e.kind for e in events] == ["warn"]
    assert "no effect" in events[0].message
    events = preflight_events([transformer_config_verdict(list(SEED_FLAG_KEYS), "0.4.1", "node1")])
    assert events[-1].kind == "fail"


# --------------------------------------------------------------------------- the stand-in worker


def _worker_check(tree: Path, version: str, strict: bool = False) -> subprocess.CompletedProcess[str]:
    (tree / "verl" / "verl" / "version" / "version").write_text(version + "\n")
    code = (
        "from verl.workers.megatron_workers import WorkerDict as W\n"
        "w = W.__new__(W); w.rank0 = 0\n"
        f"w._check_transformer_config({{'override_transformer_config': {{k: True for k in {list(SEED_FLAG_KEYS)!r}}}}})\n"
        "print('went on')\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{tree / 'Megatron-LM'}:{tree / 'verl'}",
           "RLCONSOLE_SIM_STRICT_TF_CONFIG": "1" if strict else "0"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_the_stand_in_worker_does_what_its_release_does(tmp_path: Path) -> None:
    from tui.sim.tree_install import install_sim_tree

    install_sim_tree(tmp_path, train_rows=8, val_rows=2)
    new = _worker_check(tmp_path, "0.7.0")
    assert new.returncode == 0 and "went on" in new.stdout, new.stderr
    assert "The following keys are not supported in the current Megatron version and will be removed: " \
           f"{list(SEED_FLAG_KEYS)}" in new.stderr
    old = _worker_check(tmp_path, "0.4.1")
    assert old.returncode != 0 and "went on" not in old.stdout
    assert "TypeError: TransformerConfig.__init__() got an unexpected keyword argument " \
           "'no_gradient_accumulation_fusion'" in old.stderr
    strict = _worker_check(tmp_path, "0.7.0", strict=True)
    assert strict.returncode != 0 and "unexpected keyword argument" in strict.stderr


# --------------------------------------------------------------------------- every rejected override


def test_every_rejected_override_in_one_pass_on_the_newest(newest: VerlRelease) -> None:
    """Three bad keys and a good one: three results, each with its own fix."""
    bad = {
        "trainer.n_gpus_per_nodes=8": "the nearest: trainer.n_gpus_per_node",
        "+actor_rollout_ref.actor.clip_ratio=0.3": "drop the +",
        "actor_rollout_ref.actor.megatron.override_transformer_config.swiglu=True": "prefix it with +",
    }
    rejected = compose(newest.config_dir, "ppo_megatron_trainer", ["data.train_batch_size=64", *bad])
    assert [r["override"] for r in rejected] == list(bad), rejected
    for r in rejected:
        assert bad[r["override"]] in r["fix"], r


def test_a_moved_key_is_named_where_it_went(verl_cache: Path) -> None:
    """0.9.1 moved actor.router_replay.mode under actor.megatron: the fix says so, not "+"."""
    rel = release("0.9.1", verl_cache)
    [r] = compose(rel.config_dir, "ppo_megatron_trainer", ["actor_rollout_ref.actor.router_replay.mode=R2"])
    assert r["fix"].startswith("moved to actor_rollout_ref.actor.megatron.router_replay.mode"), r
    assert "+" not in r["fix"]
    # ... where 0.7.0 still has it in the old place
    assert compose(release("0.7.0", verl_cache).config_dir, "ppo_megatron_trainer",
                   ["actor_rollout_ref.actor.router_replay.mode=R2"]) == []


def test_plus_on_a_key_real_verl_defines(verl_cache: Path) -> None:
    """0.7.0 defines attention_backend in override_transformer_config: `+` is the mistake
    there (the old stand-in said the reverse); `+` on a key whose value is null is fine."""
    rel = release("0.7.0", verl_cache)
    tc = "actor_rollout_ref.actor.megatron.override_transformer_config"
    [r] = compose(rel.config_dir, "ppo_megatron_trainer", [f"+{tc}.attention_backend=fused"])
    assert "drop the +" in r["fix"]
    assert compose(rel.config_dir, "ppo_megatron_trainer",
                   [f"{tc}.attention_backend=fused", f"+{tc}.recompute_granularity=full"]) == []


def test_the_seeds_vendor_config_name_on_an_upstream_tree(newest: VerlRelease) -> None:
    [r] = compose(newest.config_dir, "ppo_megatron_trainer_demo.yaml", ["data.train_batch_size=64"])
    assert r["override"] is None and "Cannot find primary config" in r["error"]
    assert "a vendor file" in r["fix"] and "--config-name=ppo_megatron_trainer" in r["fix"]
    assert "ppo_megatron_trainer" in r["fix"].split("config names in", 1)[1]


def test_the_seeds_overrides_compose_through_the_check_script(verl_cache: Path, newest: VerlRelease,
                                                              tmp_path: Path) -> None:
    """79/79 on 0.7.0 and on the newest, with the vendor file on top as the sim lays it out."""
    from tui.core.profile import load_profile
    from tui.core.render import entrypoint
    from tui.sim.tree_install import install_sim_tree

    repo = Path(__file__).resolve().parent.parent
    ov = [a for a in entrypoint(load_profile(repo / "profiles" / "qwen3-8b-grpo-32gpu.yaml"))
          if "=" in a and not a.startswith("--")]
    assert len(ov) == 79
    for rel in (release("0.7.0", verl_cache), newest):
        paths = install_sim_tree(tmp_path / rel.version, train_rows=8, val_rows=2, verl_release=rel)
        assert compose(paths["config_path"], "ppo_megatron_trainer_demo.yaml", ov) == [], rel.version
        src = json.loads(paths["verl_source"].read_text())
        assert src["source"] == "release" and src["version"] == rel.version
        assert (paths["verl_package"] / "version" / "version").read_text().strip() == rel.version


# --------------------------------------------------------------------------- live, on the sim


@pytest.fixture(scope="module")
def sim_on_real_verl(tmp_path_factory: pytest.TempPathFactory, verl_cache: Path):
    from tests.conftest import require_dockerd
    from tui.sim.cluster import sim_down, sim_up

    require_dockerd()
    release("0.7.0", verl_cache)  # skip (fail under CI) before starting anything
    sim = tmp_path_factory.mktemp("verl-sim")
    path = Path(sim_up(1, 2, state_dir=sim, verl="0.7.0"))
    try:
        yield sim, path
    finally:
        sim_down(state_dir=sim)


@pytest.mark.integration
def test_check_on_the_sim_says_what_real_verl_does(sim_on_real_verl: tuple[Path, Path], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from tui.cli import main
    from tui.sim.cluster import sim_status

    sim, path = sim_on_real_verl
    st = sim_status(sim)
    assert st.verl is not None and st.verl.startswith("real VeRL 0.7.0 config"), st
    assert "verl:       real VeRL 0.7.0 config" in st.to_text()
    assert main(["containers", "--profile", str(path), "--yes"]) == 0
    capsys.readouterr()

    data = yaml.safe_load(path.read_text())
    assert data["sim_verl"] == "VeRL 0.7.0 config"
    ov = data["training"]["overrides"]
    tc = ov["actor_rollout_ref"]["actor"]["megatron"]["+override_transformer_config"]
    tc.update({k: True for k in SEED_FLAG_KEYS})  # the seed's own five
    seedlike = tmp_path / "seedlike.yaml"
    seedlike.write_text(yaml.safe_dump(data, sort_keys=False))
    rc = main(["check", "--profile", str(seedlike), "--json"])
    doc = json.loads(capsys.readouterr().out)
    by = {r["id"]: r for r in doc["results"] if r["id"].startswith("code.")}
    assert by["code.transformer_config"]["status"] == "warn", by
    msg = by["code.transformer_config"]["message"]
    assert "dropped with a warning by VeRL 0.7.0" in msg and "no effect" in msg
    assert all(k in msg for k in SEED_FLAG_KEYS)
    assert by["code.overrides"]["status"] == "pass"
    # (a 1 x 2 sim fails the seed's PP=4 and has no model downloaded: those are not the point)
    assert not [r for r in doc["results"] if r["id"].startswith("code.") and r["status"] == "fail"], by

    # three bad keys: all three listed, each with its fix
    ov["trainer"]["n_gpus_per_nodes"] = 2
    ov["actor_rollout_ref"]["actor"]["+clip_ratio"] = 0.3
    ov["actor_rollout_ref"]["rollout"]["no_such_setting_at_all"] = 1
    seedlike.write_text(yaml.safe_dump(data, sort_keys=False))
    rc = main(["check", "--profile", str(seedlike), "--json"])
    doc = json.loads(capsys.readouterr().out)
    bad = [r for r in doc["results"] if r["id"] == "code.overrides"]
    assert rc == 1 and len(bad) == 3 and all(r["status"] == "fail" for r in bad), bad
    fixes = {r["message"].split(":", 1)[0]: r["fix"] for r in bad}
    assert "trainer.n_gpus_per_node" in fixes["trainer.n_gpus_per_nodes=2"]
    assert fixes["+actor_rollout_ref.actor.clip_ratio=0.3"].startswith("drop the +")
    assert "actor_rollout_ref.rollout.no_such_setting_at_all=1" in fixes


# --------------------------------------------------------------------------- offline


def test_offline_the_sim_says_it_runs_the_stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No cache, no wheels, no index: one line saying so and the stand-in's config, labelled;
    a release asked for by name that cannot be had is an error, not a silent stand-in."""
    from tui.sim.cluster import SimError, _verl_config
    from tui.sim.tree_install import install_sim_tree, read_config_source

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("RLCONSOLE_VERL_OFFLINE", "1")
    monkeypatch.delenv("RLCONSOLE_VERL_WHEELS", raising=False)
    said: list[str] = []
    cfg = _verl_config(None, said.append)
    assert cfg["config_dir"] is None and len(said) == 1
    assert "could not be had" in said[0] and "stand-in config" in said[0]
    with pytest.raises(SimError, match="--verl 0.9.1"):
        _verl_config("0.9.1", said.append)
    paths = install_sim_tree(tmp_path / "shared", train_rows=8, val_rows=2, why_standin="offline")
    src = read_config_source(paths["config_path"])
    assert src is not None and src["source"] == "stand-in" and src["label"].startswith("stand-in config")
    assert not (paths["config_path"] / "actor").exists()  # one config only, never a mix
