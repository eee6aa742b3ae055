"""Real VeRL's Hydra configuration, from a release wheel on the package index.

The simulated cluster's trainer is a stand-in, but what it accepts on its command line must be
what the VeRL a user runs accepts: so its config directory is the release's own
`verl/trainer/config` (the wheel from PyPI, `pip download --no-deps verl==X`), unpacked once
into the user's cache directory. Nothing of a release is committed to this repository.

Where a wheel comes from, in order: the cache (`$XDG_CACHE_HOME/rlconsole/verl/<X>/`); a
directory of wheels named by `RLCONSOLE_VERL_WHEELS` (what CI downloads before the tests,
so that no test reaches the network); the package index through pip. With
`RLCONSOLE_VERL_OFFLINE=1` the index is never asked. A release that cannot be had is a
`ReleaseUnavailable` with one line saying why; the sim then runs on its stand-in config and
says so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = ["DEFAULT_VERL", "STANDIN_CLAIMS", "ReleaseUnavailable", "VerlRelease", "cache_root", "fetch_release",
           "parse_version", "release_from_wheel", "wheels_dir_versions"]

DEFAULT_VERL = "0.7.0"
"""The release the sim runs by default: the first with `vanilla_mbridge`, the closest to the seed's run."""

STANDIN_CLAIMS = "0.7.0"
"""The release whose keys the stand-in config (tui/sim/tree/.../ppo_megatron_trainer.yaml) is a subset of."""

_VERSION_RE = re.compile(r"^\d+(\.\d+){1,3}((a|b|rc|\.post|\.dev)\d+)?$")
_CONFIG_PREFIX = "verl/trainer/config/"
_VERSION_MEMBER = "verl/version/version"
_MAX_MEMBER_BYTES = 1 << 20   # one config file; the largest real one is ~40 KB
_MAX_MEMBERS = 400            # config files in one release (0.9.1 has ~90)
_MARK = ".rlconsole-release.json"


class ReleaseUnavailable(Exception):
    """The release's config cannot be had here (offline, no such version, a broken wheel)."""


@dataclass(frozen=True)
class VerlRelease:
    """One release's config directory, unpacked from its wheel."""

    version: str
    config_dir: Path
    wheel: str  # the wheel's file name, for the label ("from verl-0.7.0-py3-none-any.whl")

    @property
    def label(self) -> str:
        return f"real VeRL {self.version} config (PyPI wheel {self.wheel})"


def parse_version(text: str) -> tuple[int, ...] | None:
    """`0.7.0` -> (0, 7, 0); the numeric release part only; None for anything else."""
    m = re.match(r"^\s*(\d+(?:\.\d+){0,3})", text or "")
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rlconsole" / "verl"


def _check_version(version: str) -> str:
    v = version.strip()
    if not _VERSION_RE.match(v):
        raise ReleaseUnavailable(f"--verl: {version!r} is not a release number (e.g. 0.7.0)")
    return v


def _cached(version: str) -> VerlRelease | None:
    d = cache_root() / version
    try:
        mark = json.loads((d / _MARK).read_text())
    except (OSError, ValueError):
        return None
    if mark.get("version") != version or not (d / "config" / "ppo_megatron_trainer.yaml").is_file():
        return None
    return VerlRelease(version, d / "config", str(mark.get("wheel", "")))


def _safe_member(name: str) -> PurePosixPath | None:
    """A wheel member under the config dir, as a relative path that cannot leave it."""
    if not name.startswith(_CONFIG_PREFIX) or name.endswith("/"):
        return None
    rel = PurePosixPath(name[len(_CONFIG_PREFIX):])
    if rel.is_absolute() or any(p in ("", ".", "..") for p in rel.parts) or rel.suffix != ".yaml":
        return None
    return rel


def release_from_wheel(wheel: Path, version: str | None = None) -> VerlRelease:
    """Unpack a wheel's `verl/trainer/config/**.yaml` (and its version file) into the cache.

    The wheel is outside input: only YAML members under the config dir are taken, each
    bounded and confined under the cache directory."""
    try:
        zf = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as e:
        raise ReleaseUnavailable(f"{wheel.name}: not a readable wheel ({e})") from None
    with zf:
        try:
            found = zf.read(_VERSION_MEMBER).decode("utf-8", "replace").strip()
        except KeyError:
            found = ""
        v = _check_version(version or found)
        if found and found != v:
            raise ReleaseUnavailable(f"{wheel.name}: holds VeRL {found}, not {v}")
        members = [(i, rel) for i in zf.infolist() if (rel := _safe_member(i.filename)) is not None]
        if not members or len(members) > _MAX_MEMBERS:
            raise ReleaseUnavailable(f"{wheel.name}: {len(members)} config files (not a VeRL wheel?)")
        final = cache_root() / v
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{v}-", dir=final.parent))
        try:
            for info, rel in members:
                if info.file_size > _MAX_MEMBER_BYTES:
                    raise ReleaseUnavailable(f"{wheel.name}: {info.filename} is {info.file_size} bytes")
                dst = tmp / "config" / Path(*rel.parts)
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_bytes(zf.read(info)[:_MAX_MEMBER_BYTES])
            if not (tmp / "config" / "ppo_megatron_trainer.yaml").is_file():
                raise ReleaseUnavailable(f"{wheel.name}: no verl/trainer/config/ppo_megatron_trainer.yaml")
            (tmp / _MARK).write_text(json.dumps({"version": v, "wheel": wheel.name}))
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return VerlRelease(v, final / "config", wheel.name)


def _wheel_in(d: Path, version: str) -> Path | None:
    hits = sorted(d.glob(f"verl-{version}-*.whl"))
    return hits[0] if hits else None


def wheels_dir_versions() -> list[str]:
    """The versions of the wheels in `$RLCONSOLE_VERL_WHEELS`, oldest first."""
    d = os.environ.get("RLCONSOLE_VERL_WHEELS")
    if not d or not Path(d).is_dir():
        return []
    vs = {p.name.split("-")[1] for p in Path(d).glob("verl-*.whl")}
    return sorted(vs, key=lambda v: parse_version(v) or ())


def _download(version: str, timeout: float) -> Path:
    dest = Path(tempfile.mkdtemp(prefix="rlconsole-verl-wheel-"))
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--disable-pip-version-check",
           "-q", "-d", str(dest), f"verl=={version}"]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        shutil.rmtree(dest, ignore_errors=True)
        raise ReleaseUnavailable(f"pip download verl=={version}: {e}") from None
    wheel = _wheel_in(dest, version)
    if res.returncode != 0 or wheel is None:
        shutil.rmtree(dest, ignore_errors=True)
        last = [x for x in (res.stderr or res.stdout).splitlines() if x.strip() and not x.startswith("WARNING")]
        raise ReleaseUnavailable(f"pip download verl=={version} failed: {last[-1][:200] if last else res.returncode}")
    return wheel


def fetch_release(version: str = DEFAULT_VERL, *, timeout: float = 120.0) -> VerlRelease:
    """The release's config directory: cached, from `$RLCONSOLE_VERL_WHEELS`, or downloaded."""
    v = _check_version(version)
    hit = _cached(v)
    if hit is not None:
        return hit
    wheels = os.environ.get("RLCONSOLE_VERL_WHEELS")
    if wheels and (w := _wheel_in(Path(wheels), v)) is not None:
        return release_from_wheel(w, v)
    if os.environ.get("RLCONSOLE_VERL_OFFLINE", "").strip() not in ("", "0"):
        where = f" and not in $RLCONSOLE_VERL_WHEELS ({wheels})" if wheels else ""
        raise ReleaseUnavailable(f"VeRL {v} is not cached{where}, and RLCONSOLE_VERL_OFFLINE is set")
    wheel = _download(v, timeout)
    try:
        return release_from_wheel(wheel, v)
    finally:
        shutil.rmtree(wheel.parent, ignore_errors=True)


if __name__ == "__main__":  # python -m tui.sim.verl_release 0.7.0 ...: fill the cache (CI, offline prep)
    rc = 0
    for arg in sys.argv[1:] or [DEFAULT_VERL]:
        try:
            r = fetch_release(arg)
            print(f"{r.version}: {r.config_dir}")
        except ReleaseUnavailable as e:
            print(f"{arg}: {e}", file=sys.stderr)
            rc = 1
    sys.exit(rc)
