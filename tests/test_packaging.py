"""The wheel carries everything the commands read at run time.

A plain `pip install .` (or of the wheel) must run `rlconsole demo` and the headless
chain: profiles, the diagnosis catalog, the app's stylesheet and the whole stand-in
VeRL tree are package data, and a file that the code opens but the wheel lacks only
shows up on a user's machine. The list below is taken from the code's own constants,
not written by hand, and the wheel is built from this checkout.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_SKIP_DIRS = {".git", "build", "dist", "__pycache__", ".pytest_cache", ".hypothesis", "docs", "benchmarks"}


def _ignore(dirpath: str, names: list[str]) -> set[str]:
    return {n for n in names if n in _SKIP_DIRS or n.startswith(".venv") or n.endswith((".egg-info", ".pyc"))}


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """Build the wheel from a copy of the checkout (the build must not litter the tree)."""
    src = tmp_path_factory.mktemp("src") / "rlconsole"
    shutil.copytree(REPO, src, ignore=_ignore)
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    wheels = list(out.glob("rlconsole-*.whl"))
    assert len(wheels) == 1, wheels
    with zipfile.ZipFile(wheels[0]) as z:
        return set(z.namelist())


def _opened_by_the_code() -> list[Path]:
    """Every data file the commands open, from the constants the code opens them by."""
    from profiles import __file__ as profiles_init
    from tui.app import RlconsoleApp
    from tui.core.diagnosis import PACKAGED_CATALOG
    from tui.core.profile import packaged_profiles_dir
    from tui.sim.tree_install import TREE

    files = sorted(packaged_profiles_dir().glob("*.yaml"))
    assert files, "no packaged profiles found"
    files.append(PACKAGED_CATALOG)
    files.append(Path(sys.modules[RlconsoleApp.__module__].__file__).with_name(str(RlconsoleApp.CSS_PATH)))
    tree = [p for p in TREE.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    assert len(tree) > 10, "the stand-in tree looks empty"
    files += tree
    assert Path(profiles_init).parent == packaged_profiles_dir()
    return files


def test_every_file_the_code_opens_is_in_the_wheel(wheel_names: set[str]) -> None:
    missing = []
    for f in _opened_by_the_code():
        assert f.is_file(), f"the code names {f}, which does not exist"
        rel = f.resolve().relative_to(REPO).as_posix()
        if rel not in wheel_names:
            missing.append(rel)
    assert not missing, f"{len(missing)} run-time files missing from the wheel: {missing[:20]}"


def test_the_wheel_has_every_module_and_no_tests(wheel_names: set[str]) -> None:
    for pkg in ("tui", "widgets", "profiles"):
        for f in (REPO / pkg).rglob("*.py"):
            if "__pycache__" in f.parts:
                continue
            rel = f.relative_to(REPO).as_posix()
            assert rel in wheel_names, f"{rel} is not in the wheel"
    assert not any(n.startswith("tests/") for n in wheel_names), "tests leaked into the wheel"


def _top_level_imports(root: Path) -> set[str]:
    import ast

    names: set[str] = set()
    for f in root.rglob("*.py"):
        if "__pycache__" in f.parts:
            continue
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def _norm(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def _runtime_closure() -> set[str]:
    """The declared runtime requirements of the installed rlconsole and everything they
    require in turn (extras markers excluded)."""
    import re
    from importlib.metadata import PackageNotFoundError, requires

    seen: set[str] = set()
    todo = ["rlconsole"]
    while todo:
        dist = todo.pop()
        try:
            reqs = requires(dist) or []
        except PackageNotFoundError:
            continue
        for r in reqs:
            if "extra ==" in r and not r.startswith("ray"):
                continue
            name = _norm(re.split(r"[\s\[<>=!~;(]", r, maxsplit=1)[0])
            if name not in seen:
                seen.add(name)
                todo.append(name)
    return seen


def test_runtime_imports_are_declared() -> None:
    """Every third-party module that the package (the stand-in VeRL tree included)
    imports at run time comes with a plain install: it belongs to a declared runtime
    requirement or one of theirs, never only to the test extra. (The stand-in tree's
    own packages, verl and megatron, are the tree itself.)"""
    from importlib.metadata import packages_distributions

    ours = {"tui", "widgets", "profiles", "verl", "megatron", "scripts"}
    stdlib = set(sys.stdlib_module_names)
    dists = packages_distributions()
    closure = _runtime_closure()
    assert "textual" in closure and "hydra-core" in closure, closure
    missing = {}
    for pkg in ("tui", "widgets", "profiles"):
        for mod in _top_level_imports(REPO / pkg):
            if mod in ours or mod in stdlib or mod == "__future__":
                continue
            owners = {_norm(d) for d in dists.get(mod, [])}
            assert owners, f"{mod!r} is imported by {pkg}/ but is not installed at all"
            if not owners & closure:
                missing[mod] = sorted(owners)
    assert not missing, f"imported at run time but not a runtime dependency: {missing}"


def test_a_profiles_folder_in_the_current_directory_does_not_hide_the_packaged_profiles(tmp_path: Path) -> None:
    """`python -m tui.cli` puts the current directory first on sys.path, so a user's own
    `./profiles` folder (no `__init__.py`: a namespace package) answers `import profiles`.
    The packaged profiles must still be found, and the user's folder still searched first."""
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "mine.yaml").write_text("name: mine\n")
    code = ("from tui.core.profile import packaged_profiles_dir, profile_search_dirs\n"
            "print(packaged_profiles_dir())\n"
            "print(profile_search_dirs()[0])\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    packaged, first = (Path(x) for x in r.stdout.split("\n")[:2])
    assert (packaged / "qwen3-8b-grpo-32gpu.yaml").is_file(), packaged
    assert packaged.resolve() == (REPO / "profiles").resolve()
    assert first.resolve() == (tmp_path / "profiles").resolve()
