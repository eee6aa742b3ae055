"""The core never imports Textual, Rich, the widgets or the app: it must run headless
(`status`, `check`, the actions, a future `watch`) without a UI toolkit, and the TUI and
the CLI stay two faces of the same core. Checked in a fresh interpreter, so a lazy import
anywhere in the core (not only at module top) that pulls a UI module in is caught too,
as long as importing triggers it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FORBIDDEN = ("textual", "rich", "widgets", "tui.app", "tui.screens", "tui.backend", "tui.sim",
             "tui.commands", "tui.messages", "tui.cli")


def test_core_imports_no_ui_and_no_app() -> None:
    code = f"""
import importlib, json, pkgutil, sys
import tui.core
names = []
for m in pkgutil.walk_packages(tui.core.__path__, "tui.core."):
    if ".sim.tree" in m.name:      # the stand-in VeRL tree runs on the nodes, not here
        continue
    importlib.import_module(m.name)
    names.append(m.name)
bad = sorted(k for k in sys.modules for f in {FORBIDDEN!r} if k == f or k.startswith(f + "."))
print(json.dumps({{"modules": names, "bad": bad}}))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(out["modules"]) > 30, out["modules"]
    assert out["bad"] == [], f"the core pulled in UI/app modules: {out['bad']}"


def test_import_contracts_hold() -> None:
    """The contracts in pyproject.toml ([tool.importlinter]), checked by import-linter on
    the whole static import graph (lazy imports inside functions included): the core is
    headless, and widgets never import the app layer (they receive keys and post their
    own nested messages)."""
    import shutil

    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe, "import-linter is a test dependency: pip install -e '.[test]'"
    r = subprocess.run([exe, "--no-cache"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    assert "0 broken" in r.stdout and "5 kept" in r.stdout, r.stdout[-2000:]


def test_ruff_finds_nothing() -> None:
    """[tool.ruff] in pyproject.toml (pycodestyle, pyflakes, bugbear, pyupgrade to 3.10,
    async) holds on `tui/` and `widgets/` with zero findings; the stand-in VeRL tree is
    excluded there, with the reason."""
    import shutil

    exe = shutil.which("ruff", path=str(Path(sys.executable).parent))
    assert exe, "ruff is a test dependency: pip install -e '.[test]'"
    r = subprocess.run([exe, "check", "--no-cache", "tui", "widgets"], capture_output=True, text=True, cwd=REPO,
                       timeout=300)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]


def test_mypy_finds_nothing() -> None:
    """[tool.mypy] in pyproject.toml (Python 3.10, unused ignores reported) holds on `tui/`
    and `widgets/` with zero findings; the stand-in VeRL tree is excluded there, with the
    reason. The cache goes to a temp dir: the test leaves nothing in the checkout."""
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        r = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", cache], capture_output=True, text=True,
                           cwd=REPO, timeout=600)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    assert "Success: no issues found" in r.stdout, r.stdout[-2000:]


def _getattr_on_backend(path: Path) -> list[str]:
    """`getattr(<...backend...>, ...)` calls in one file: reaching around the `Backend`
    protocol for something it does not declare."""
    import ast

    out = []
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                and node.args and "backend" in ast.unparse(node.args[0])):
            out.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_no_getattr_on_a_backend() -> None:
    """The app, its screens, the palette and the widgets use a backend only through what
    `tui/backend/base.py` declares: a `getattr(backend, ...)` is a seam leaking (it worked
    on one backend and silently did nothing on another)."""
    files = [REPO / "tui" / "app.py", REPO / "tui" / "commands.py", *sorted((REPO / "tui" / "screens").glob("*.py")),
             *sorted((REPO / "widgets").glob("*.py")), *sorted((REPO / "tui" / "cli").glob("*.py"))]
    found = [hit for f in files for hit in _getattr_on_backend(f)]
    assert found == [], "\n".join(found)


def test_the_getattr_check_sees_one(tmp_path: Path) -> None:
    """The check above finds a planted `getattr(self.backend, ...)` (it can fail)."""
    planted = REPO / "tui" / "screens" / "_planted_for_test.py"
    planted.write_text("def f(self):\n    return getattr(self.backend, 'watcher', None)\n")
    try:
        assert _getattr_on_backend(planted) == ["tui/screens/_planted_for_test.py:2: getattr(self.backend, 'watcher', None)"]
    finally:
        planted.unlink()


def test_backend_protocol_declares_what_the_ui_uses() -> None:
    """Every `backend.<name>` / `self.backend.<name>` the app and screens read is declared
    on the `Backend` protocol (or is a StaticBackend test hook used only by tests)."""
    import ast

    from tui.backend.base import Backend

    declared = set(Backend.__annotations__) | {n for n in dir(Backend) if not n.startswith("_")}
    files = [REPO / "tui" / "app.py", REPO / "tui" / "commands.py", *sorted((REPO / "tui" / "screens").glob("*.py"))]
    used: set[str] = set()
    for f in files:
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Attribute, ast.Name)):
                base = node.value.attr if isinstance(node.value, ast.Attribute) else node.value.id
                if base == "backend":
                    used.add(node.attr)
    assert used, "found no backend use at all: the scan is broken"
    assert used <= declared, f"used but not declared on Backend: {sorted(used - declared)}"


def import_cycles(packages: tuple[str, ...] = ("tui", "widgets"),
                  within: tuple[str, ...] = ("tui.core", "tui.backend", "tui.cli", "widgets")) -> list[list[str]]:
    """The import cycles among modules under `within`, counting every import grimp sees:
    module level, inside functions and under TYPE_CHECKING. A cycle hidden behind a
    function-level import still ties two modules into one: neither can be read, tested
    or moved without the other."""
    import grimp

    g = grimp.build_graph(*packages, cache_dir=None)
    mods = sorted(m for m in g.modules if m.startswith(within) and ".sim.tree" not in m)
    keep = set(mods)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    # Tarjan's strongly connected components, iteratively (no recursion limit to meet)
    for root in mods:
        if root in index:
            continue
        work = [(root, iter(sorted(g.find_modules_directly_imported_by(root) & keep)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g.find_modules_directly_imported_by(w) & keep))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycles_even_inside_functions() -> None:
    """The core, the backends, the CLI faces and the widgets hold no import cycle, not
    even through a function-level import (two were hidden that way: alerts <-> diagnosis,
    actions.jobs <-> jobwatch)."""
    assert import_cycles() == []


def test_the_cycle_check_sees_a_planted_function_level_cycle() -> None:
    """A planted pair of modules importing each other inside functions is found (the
    check above can fail)."""
    a = REPO / "tui" / "core" / "_planted_cycle_a.py"
    b = REPO / "tui" / "core" / "_planted_cycle_b.py"
    a.write_text("def f():\n    from . import _planted_cycle_b\n    return _planted_cycle_b\n")
    b.write_text("def g():\n    from . import _planted_cycle_a\n    return _planted_cycle_a\n")
    try:
        assert ["tui.core._planted_cycle_a", "tui.core._planted_cycle_b"] in import_cycles()
    finally:
        a.unlink()
        b.unlink()
