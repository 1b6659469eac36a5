"""Fixtures shared by the tests: seeded random inputs (every test module that draws random numbers uses `seed`,
most through `pytestmark = pytest.mark.usefixtures("seed")`), poisoned outputs."""

import random

import numpy as np
import pytest
import torch

from gpulab.kernels import _autotune

# No test reads or writes the autotuner's stored choices (a user's cache, gpulab/data's recording): a stored choice
# would decide what a test of the autotuner times. The tests of the stores switch them on for themselves.
_autotune.STORES_ON = False


@pytest.fixture
def poisoned(monkeypatch):
    """Every floating ``torch.empty`` a launcher calls (outputs, padding buffers) starts as NaN, so an element the
    kernel leaves unwritten fails the comparison. A test module may define its own ``poisoned`` (e.g. for
    ``torch.empty_like``), which takes precedence."""
    real = torch.empty

    def empty(*args, **kw):
        t = real(*args, **kw)
        return t.fill_(float("nan")) if t.is_floating_point() else t

    monkeypatch.setattr(torch, "empty", empty)


def pytest_addoption(parser):
    parser.addoption(
        "--seed",
        type=int,
        default=None,
        help="seed of the random inputs of tests that take the 'seed' fixture (default: a fresh seed "
        "for each test, shown when the test fails)",
    )


@pytest.fixture
def seed(request):
    """Seeds torch's, NumPy's and ``random``'s global generators for one test: with ``--seed N`` if given, else a
    fresh seed every run (new inputs each time). A failing test's report shows the seed and the command that
    replays it. Returns the seed."""
    s = request.config.getoption("--seed")
    if s is None:
        s = random.SystemRandom().randrange(2**32)
    torch.manual_seed(s)
    np.random.seed(s)
    random.seed(s)
    request.node.random_seed = s
    return s


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    s = getattr(item, "random_seed", None)
    if s is not None and report.failed:
        report.sections.append(("random inputs", f"seed {s}; replay: pytest '{item.nodeid}' --seed {s}"))
    return report


# ------------------------------------------------------------------------------- one browser for the session
# Playwright's sync API runs one event loop per thread: a second sync_playwright() while the first is open fails,
# so every browser test (JupyterLab lessons, the static site) shares this session's Chromium.


@pytest.fixture(scope="session")
def chromium_path() -> str:
    from tests.browser import harness

    path = harness.find_chromium()
    if path is None:
        pytest.skip(harness.CHROMIUM_MISSING)
    return path


@pytest.fixture(scope="session")
def browser(chromium_path):
    from tests.browser import harness

    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_path, headless=True, args=list(harness.CHROMIUM_ARGS))
        yield b
        b.close()
