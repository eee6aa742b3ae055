"""A failing test is reported as a failure even when pytest cannot make its usual report
(tests/conftest.py `_plain_report`): in CI, CPython 3.11.7's `ast.parse` raised a
SystemError while pytest formatted a failed console test, the exception ended the xdist
worker, and the run ended in an INTERNALERROR naming no cause. Checked on a real inner
pytest with an xdist worker, as CI runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

INNER = '''
import _pytest.python


def test_boom(monkeypatch):
    def broken(self, excinfo):
        raise SystemError("AST constructor recursion depth mismatch (before=144, after=162)")
    monkeypatch.setattr(_pytest.python.Function, "repr_failure", broken)
    assert 1 == 2, "the test's own failure"


def test_after():
    assert True
'''


def test_a_failure_pytest_cannot_describe_is_reported_and_the_worker_goes_on(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER)
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "tests.conftest", "-p", "no:cacheprovider",
         "-n", "1", "--rootdir", str(tmp_path), str(tmp_path / "test_inner.py")],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out  # tests failed -- not 3, an internal error
    assert "INTERNALERROR" not in out, out
    assert "1 failed, 1 passed" in out, out
    assert "the test's own failure" in out and "report of this call could not be made: SystemError" in out, out
    assert "test_inner.py:9: in test_boom" in out, out
