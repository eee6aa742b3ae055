"""rlconsole against REAL VeRL's Hydra config: the seed profile, VeRL's own example launch
scripts, the simulated cluster's config tree and its stand-in fallback.

The configs are the release wheels' own `verl/trainer/config/**.yaml`
(`tui.sim.verl_release.fetch_release`), from the directory `$RLCONSOLE_VERL_WHEELS` only
(CI downloads `verl==0.7.0` and the newest `verl` into it first; no test reaches the
network: RLCONSOLE_VERL_OFFLINE=1). Without that directory, or without a 0.7.0 wheel in it,
the tests that need a release skip, which CI turns into failures.

The example scripts (`tests/data/verl_examples/`, upstream files kept verbatim, see its
README) go through rlconsole's own importer and renderer, exactly what `rlconsole import`
and `rlconsole submit` would send; each override is then judged by Hydra itself: composed
ALONE onto `ppo_megatron_trainer`, accepted or rejected.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from pathlib import Path
from typing import Any, Collection, Iterable

import pytest
import yaml

from tui.core.importer import import_script, render_profile
from tui.core.profile import Profile, load_profile, load_profile_text
from tui.core.render import entrypoint
from tui.sim.verl_release import STANDIN_CLAIMS, ReleaseUnavailable, VerlRelease, fetch_release, wheels_dir_versions

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = Path(__file__).parent / "data" / "verl_examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.sh"))
SEED_PROFILE = ROOT / "profiles" / "qwen3-8b-grpo-32gpu.yaml"
STANDIN_DIR = ROOT / "tui" / "sim" / "tree" / "verl" / "trainer" / "config"
VENDOR_DEMO = STANDIN_DIR / "ppo_megatron_trainer_demo.yaml"
BASE = "ppo_megatron_trainer"
DEMO = "ppo_megatron_trainer_demo"

PINNED = "0.7.0"
RELEASES = (PINNED, "newest")  # "newest": the newest wheel in $RLCONSOLE_VERL_WHEELS
V070_COMMIT = "f9c855f7cf04d603c9546bc01776c74806a879c1"  # volcengine/verl tag v0.7.0
SOURCE_RE = re.compile(r"^# source: https://github\.com/(?:volcengine|verl-project)/verl/blob/([0-9a-f]{40})/(examples/\S+\.sh)$")


# --------------------------------------------------------------------------- helpers


def overrides_of(profile: Profile) -> list[str]:
    """The Hydra overrides `rlconsole submit` passes (what `render` shows after the module)."""
    return [a for a in entrypoint(profile) if "=" in a and not a.startswith("--")]


@functools.cache
def _parsed(override: str) -> tuple[str, bool] | None:
    """(the key or config group an override sets, whether it is a `+key` addition) as Hydra's
    grammar reads it; None if it cannot."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType
    from hydra.errors import HydraException

    try:
        o = OverridesParser.create().parse_override(override)
    except HydraException:
        return None
    return str(o.key_or_group), o.type == OverrideType.ADD


def _attempt(config_name: str, overrides: list[str]) -> str | None:
    """None if Hydra composes `config_name` with `overrides`, else its error on one line.
    Runs inside an `initialize_config_dir` context."""
    from hydra import compose
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        compose(config_name=config_name, overrides=overrides)
    except (HydraException, OmegaConfBaseException) as e:
        return " ".join(str(e).split()) or repr(e)
    return None


def _first_failing(config_name: str, batch: list[str]) -> str:
    """The override at which a failing batch fails: the shortest failing prefix's last one.
    (Hydra applies overrides in order and stops at the first it cannot apply.)"""
    lo, hi = 1, len(batch)
    while lo < hi:
        mid = (lo + hi) // 2
        if _attempt(config_name, batch[:mid]) is None:
            lo = mid + 1
        else:
            hi = mid
    return batch[lo - 1]


def verdicts(config_dir: Path, overrides: Iterable[str], config_name: str = BASE,
             suspects: Collection[str] = ()) -> dict[str, str | None]:
    """Each override composed ALONE onto `config_name` in `config_dir`: None where Hydra
    accepts it, else Hydra's error.

    One compose per override would take minutes (a compose is ~0.2 s; the examples give
    hundreds of distinct overrides), so the same verdicts are reached in batches: the
    overrides are composed together (in layers, so that no batch holds two `+` additions
    of one key, which would refuse each other); when a batch fails, the override Hydra names
    (or, if it names none, the one a bisection of the batch finds) is composed alone for its
    own verdict and leaves the batch; when the batch composes, every override left in it is
    accepted. `suspects` (those expected to be rejected) are composed alone from the start,
    so that a batch of the others composes at once. (Checked once against one compose per
    override: the examples' 341 distinct overrides on 0.7.0 and 0.9.1, identical verdicts.)"""
    from hydra import initialize_config_dir

    out: dict[str, str | None] = {}
    layers: list[list[str]] = [[]]
    adds: dict[str, int] = {}
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        for o in dict.fromkeys(overrides):
            p = _parsed(o)
            if o in suspects or p is None:
                out[o] = _attempt(config_name, [o])
                continue
            i = adds.get(p[0], 0) if p[1] else 0
            if p[1]:
                adds[p[0]] = i + 1
            layers.extend([] for _ in range(i + 1 - len(layers)))
            layers[i].append(o)
        for pending in layers:
            while pending:
                err = _attempt(config_name, pending)
                if err is None:
                    out.update(dict.fromkeys(pending))
                    break
                named = set(re.findall(r"'([^']+)'", err))
                culprit = (next((o for o in pending if (_parsed(o) or ("",))[0] in named), None)
                           or _first_failing(config_name, pending))
                out[culprit] = _attempt(config_name, [culprit])
                pending.remove(culprit)
    return out


def rejected(v: dict[str, str | None], overrides: Iterable[str]) -> list[str]:
    return [o for o in overrides if v[o] is not None]


def _config_with_demo(release: VerlRelease, dest: Path) -> Path:
    """A copy of the release's config dir with the seed's vendor file beside its own files."""
    d = dest / "config"
    shutil.copytree(release.config_dir, d)
    shutil.copy2(VENDOR_DEMO, d / VENDOR_DEMO.name)
    return d


def _leaf_paths(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> Iterable[tuple[str, ...]]:
    """Every leaf key of a YAML mapping (an empty mapping is a leaf)."""
    for k, v in data.items():
        if prefix == () and k == "defaults":
            continue
        if isinstance(v, dict) and v:
            yield from _leaf_paths(v, (*prefix, str(k)))
        else:
            yield (*prefix, str(k))


def _has_key(cfg: Any, path: tuple[str, ...]) -> bool:
    """Whether the composed (unresolved) config has this key as Hydra's overrides see it: a
    `???` value is a key; a key under an interpolation (`x: ${...}`) is not one (an override
    of it is rejected)."""
    from omegaconf import DictConfig

    node = cfg
    for k in path:
        if not isinstance(node, DictConfig) or node._is_interpolation() or k not in node.keys():
            return False
        node = node._get_node(k)
    return True


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, VerlRelease]:
    """0.7.0 and the newest release in $RLCONSOLE_VERL_WHEELS, unpacked once per module into
    a private cache (offline: the wheels directory only)."""
    wheels = os.environ.get("RLCONSOLE_VERL_WHEELS", "")
    if not wheels:
        pytest.skip("RLCONSOLE_VERL_WHEELS is not set: it names a directory of VeRL release wheels "
                    f"(pip download --no-deps -d DIR verl=={PINNED} verl)")
    versions = wheels_dir_versions()
    if PINNED not in versions:
        pytest.skip(f"no verl-{PINNED} wheel in RLCONSOLE_VERL_WHEELS={wheels} (found: {', '.join(versions) or 'none'}); "
                    f"pip download --no-deps -d {wheels} verl=={PINNED}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("verl-cache")))
        mp.setenv("RLCONSOLE_VERL_OFFLINE", "1")
        try:
            return {PINNED: fetch_release(PINNED), "newest": fetch_release(versions[-1])}
        except ReleaseUnavailable as e:
            pytest.fail(f"a wheel in {wheels} cannot be used: {e}")


@pytest.fixture(scope="module")
def example_overrides() -> dict[str, list[str] | str]:
    """Each example script through `rlconsole import` and the renderer: its overrides, or
    the importer's error."""
    out: dict[str, list[str] | str] = {}
    for script in EXAMPLES:
        try:
            result = import_script(script)
            out[script.stem] = overrides_of(load_profile_text(render_profile(result), str(script)))
        except Exception as e:  # noqa: BLE001 - any import failure is this script's finding, reported by its test
            out[script.stem] = f"{type(e).__name__}: {e}"
    return out


class _Verdicts:
    """Verdicts on every distinct example override, per release: the real config's and the
    sim tree's, each computed once for the module."""

    def __init__(self, releases: dict[str, VerlRelease], overrides: dict[str, list[str] | str], tmp: Path) -> None:
        self.releases = releases
        self.union = list(dict.fromkeys(o for ov in overrides.values() if isinstance(ov, list) for o in ov))
        self.tmp = tmp
        self._real: dict[str, dict[str, str | None]] = {}
        self._sim: dict[str, dict[str, str | None]] = {}

    def real(self, name: str) -> dict[str, str | None]:
        if name not in self._real:
            self._real[name] = verdicts(self.releases[name].config_dir, self.union)
        return self._real[name]

    def sim(self, name: str) -> dict[str, str | None]:
        if name not in self._sim:
            from tui.sim.tree_install import install_sim_tree

            paths = install_sim_tree(self.tmp / f"shared-{name}", verl_release=self.releases[name], train_rows=4, val_rows=2)
            real = self.real(name)
            self._sim[name] = verdicts(paths["config_path"], self.union, suspects=rejected(real, self.union))
        return self._sim[name]


@pytest.fixture(scope="module")
def example_verdicts(releases: dict[str, VerlRelease], example_overrides: dict[str, list[str] | str],
                     tmp_path_factory: pytest.TempPathFactory) -> _Verdicts:
    return _Verdicts(releases, example_overrides, tmp_path_factory.mktemp("sim-trees"))


# --------------------------------------------------------------------------- the examples themselves


def test_examples_are_real_verl_megatron_scripts() -> None:
    """At least ten, each naming its upstream commit and path on its first line, each a
    Megatron launch of `verl.trainer.main_ppo`."""
    assert len(EXAMPLES) >= 10
    for script in EXAMPLES:
        first, body = script.read_text().split("\n", 1)
        assert SOURCE_RE.match(first), f"{script.name}: first line must be '# source: https://github.com/.../blob/<commit>/<path>'"
        assert "verl.trainer.main_ppo" in body and "megatron" in body, script.name


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_imports(script: Path, example_overrides: dict[str, list[str] | str]) -> None:
    ov = example_overrides[script.stem]
    assert isinstance(ov, list), f"rlconsole import {script.name}: {ov}"
    assert len(ov) >= 20, ov


# --------------------------------------------------------------------------- the seed profile


@pytest.mark.parametrize("which", RELEASES)
def test_seed_profile_composes_on_the_real_release(which: str, releases: dict[str, VerlRelease], tmp_path: Path) -> None:
    """All the seed profile's overrides compose together on the release's config with the
    seed's vendor `ppo_megatron_trainer_demo.yaml` on top (the config name the seed runs)."""
    ov = overrides_of(load_profile(SEED_PROFILE))
    assert len(ov) >= 79
    # (with nothing rejected, `verdicts` has composed them all at once, as the job passes them)
    v = verdicts(_config_with_demo(releases[which], tmp_path), ov, config_name=DEMO)
    assert rejected(v, ov) == [], {o: v[o] for o in rejected(v, ov)}


# --------------------------------------------------------------------------- examples: sim tree vs real


@pytest.mark.parametrize("which", RELEASES)
@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_sim_tree_judges_example_overrides_as_the_release(script: Path, which: str,
                                                          example_overrides: dict[str, list[str] | str],
                                                          example_verdicts: _Verdicts) -> None:
    """Each override of the example, composed alone onto `ppo_megatron_trainer`: the sim's
    config tree (install_sim_tree(..., verl_release=R)) accepts exactly what release R
    accepts and rejects exactly what it rejects."""
    ov = example_overrides[script.stem]
    if not isinstance(ov, list):
        pytest.fail(f"rlconsole import {script.name}: {ov}")
    real, sim = example_verdicts.real(which), example_verdicts.sim(which)
    differ = {o: {"real": real[o], "sim": sim[o]} for o in ov if (real[o] is None) != (sim[o] is None)}
    assert not differ, differ


@pytest.mark.parametrize("script", [p for p in EXAMPLES if V070_COMMIT in p.read_text().split("\n", 1)[0]],
                         ids=lambda p: p.stem)
def test_v070_examples_compose_on_0_7_0(script: Path, example_overrides: dict[str, list[str] | str],
                                        example_verdicts: _Verdicts) -> None:
    """VeRL's own v0.7.0 examples, as rlconsole imports and renders them, are accepted by
    real 0.7.0 override for override (the importer changes nothing VeRL would refuse)."""
    ov = example_overrides[script.stem]
    assert isinstance(ov, list), ov
    real = example_verdicts.real(PINNED)
    assert rejected(real, ov) == [], {o: real[o] for o in rejected(real, ov)}


# --------------------------------------------------------------------------- the stand-in


def test_standin_keys_exist_in_the_release_it_claims(releases: dict[str, VerlRelease]) -> None:
    """Every leaf key of the stand-in `ppo_megatron_trainer.yaml` is a key of the claimed
    release's composed `ppo_megatron_trainer` (as overrides see it: not under an interpolation)."""
    from hydra import compose, initialize_config_dir

    assert releases[PINNED].version == STANDIN_CLAIMS
    standin = yaml.safe_load((STANDIN_DIR / "ppo_megatron_trainer.yaml").read_text())
    with initialize_config_dir(config_dir=str(releases[PINNED].config_dir), version_base=None):
        cfg = compose(config_name=BASE)
    leaves = list(_leaf_paths(standin))
    assert len(leaves) > 50
    missing = [".".join(p) for p in leaves if not _has_key(cfg, p)]
    assert missing == [], f"stand-in keys that VeRL {STANDIN_CLAIMS} lacks: {missing}"


def test_seed_profile_composes_on_the_standin() -> None:
    ov = overrides_of(load_profile(SEED_PROFILE))
    v = verdicts(STANDIN_DIR, ov, config_name=DEMO)
    assert rejected(v, ov) == [], {o: v[o] for o in rejected(v, ov)}
