"""The README and docs/setup.md say what the make targets do: `make test` leaves out the slow tests that
`make test-all` (CI's command) runs, `make lab` opens the learner's copy of the lessons, and the conda route
names what Jupyter needs as root."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SETUP = (ROOT / "docs" / "setup.md").read_text()
MAKEFILE = (ROOT / "Makefile").read_text()


def _make_variable(name: str) -> str:
    return re.search(rf"^{name}\s*:?=\s*(.*)$", MAKEFILE, re.MULTILINE).group(1)


def test_make_test_leaves_out_the_slow_tests_that_make_test_all_and_ci_run():
    assert '-m "not slow"' in _make_variable("PYTEST_TESTS") and "slow" not in _make_variable("PYTEST_ALL")
    assert "make test-all" in (ROOT / ".ci" / "run").read_text()
    for name, text in (("README.md", README), ("docs/setup.md", SETUP)):
        (line,) = [ln for ln in text.splitlines() if ln.startswith("make test ")]
        assert "every test" not in line and "but the slow ones" in line, f"{name}: {line}"
        at = text.index("\nmake test-all ")
        assert "CI" in text[at : at + 250], f"{name} names make test-all, what CI runs"


def test_make_lab_is_said_to_open_the_copy_and_make_fresh_is_named():
    for name, text in (("README.md", README), ("docs/setup.md", SETUP)):
        (line,) = [ln for ln in text.splitlines() if ln.startswith("make lab ")]
        assert "my-notebooks/" in line and "on notebooks/" not in line, f"{name}: {line}"
        assert "make fresh LESSON=04" in text, name


def test_the_conda_route_opens_the_copy_and_says_allow_root():
    conda = SETUP[SETUP.index("## conda") :].split("\n## ", 1)[0]
    assert "python tools/lab.py" in conda and "--allow-root" in conda
    env_cmd = (ROOT / "environment.yml").read_text().splitlines()[0]
    assert "python tools/lab.py" in env_cmd and "jupyter lab notebooks/" not in env_cmd, env_cmd


def test_make_test_runs_in_several_processes_with_each_notebook_whole_in_one():
    """nbval runs a notebook's cells in order in one kernel: under pytest-xdist its cells must stay in one process
    (``--dist loadscope``); the tests need no order and go one by one (``--dist load``)."""
    assert "-n $(TEST_WORKERS) --dist load" in _make_variable("PYTEST_TESTS")
    assert "-n $(TEST_WORKERS) --dist load" in _make_variable("PYTEST_ALL")
    assert "-n $(TEST_WORKERS) --dist loadscope" in _make_variable("PYTEST_NOTEBOOKS")
    assert re.search(r'"pytest-xdist>=[\d.]+"', (ROOT / "pyproject.toml").read_text())
    assert "TEST_WORKERS=0" in SETUP
