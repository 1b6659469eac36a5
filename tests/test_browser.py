"""Browser test of the lesson widgets: JupyterLab in headless Chromium runs each notebook, then moves a slider.

For every row of ``NOTEBOOKS``: open the notebook in JupyterLab, Run All Cells, check that no cell raised and no
widget failed to render, find the lesson widget (``.gpulab-widget``), record its plotly figure, press arrow keys
on its slider (``.gpulab-slider``) and check that the figure changed.

A new lesson adds one row::

    BrowserCase(path="02_sectors.ipynb", timeout_s=180),

(defaults: widget ``.gpulab-widget`` #0, slider ``.gpulab-slider`` and figure ``.js-plotly-plot`` inside it;
``nth=1`` drives the second widget of the notebook; ``marks=(pytest.mark.gpu,)`` for a GPU-only notebook).

``test_static_fallback_without_anywidget`` (slow) runs one lesson in a kernel where ``import anywidget`` fails, as a
front end without plotly FigureWidget support would have it, and checks the static figures gpulab falls back to.

Run: ``python -m pytest tests/test_browser.py -v`` (needs /usr/bin/chromium -- ``apt-get install chromium`` --
or ``GPULAB_CHROMIUM=/path/to/chrome``). On failure the screenshot, page text, JupyterLab log console and server
log are saved to a directory named in the failure message (``GPULAB_BROWSER_ARTIFACTS`` sets its parent).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import pytest

try:  # tests/ is a package (tests/__init__.py): the harness is tests.browser
    from . import browser as harness
except ImportError:  # tests/ on sys.path instead (rootdir-less runs, --import-mode=importlib without a package)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import browser as harness

BrowserCase = harness.BrowserCase
FIXTURES_DIR = harness.FIXTURES_DIR


NOTEBOOKS: list[BrowserCase] = [
    # Self-tests of the harness (they prove the harness works; keep them):
    # a go.FigureWidget (anywidget-based in plotly >= 6) updated by the slider's observer ...
    BrowserCase(path="figurewidget.ipynb", root=FIXTURES_DIR, timeout_s=60, id="selftest-figurewidget"),
    # ... and the fallback: a static go.Figure re-shown with fig.show() inside an ipywidgets.Output.
    BrowserCase(path="output_fallback.ipynb", root=FIXTURES_DIR, timeout_s=60, id="selftest-output-fallback"),
    # Lessons (root: notebooks/):
    BrowserCase(path="01_roofline.ipynb", timeout_s=300, skip_if_missing=True),
    BrowserCase(path="02_warp_divergence.ipynb", timeout_s=300, skip_if_missing=True),
    BrowserCase(path="03_precision.ipynb", timeout_s=300, skip_if_missing=True),
    BrowserCase(path="04_fusion.ipynb", timeout_s=300, skip_if_missing=True),
    BrowserCase(path="05_recomputation.ipynb", timeout_s=300, skip_if_missing=True),
    BrowserCase(path="06_coalescing.ipynb", timeout_s=300, skip_if_missing=True),
    BrowserCase(path="07_tiling.ipynb", timeout_s=300, skip_if_missing=True),
    BrowserCase(path="07b_waves.ipynb", timeout_s=300, skip_if_missing=True),
    BrowserCase(path="08_flash_attention.ipynb", timeout_s=300, skip_if_missing=True),
    # 08b_flash_backward has no slider (its figures are static), so it has no row here
    # the model-size explorer: its "layers" slider (the rung and d_model dropdowns sit beside it)
    BrowserCase(path="09_builder_test.ipynb", timeout_s=300, skip_if_missing=True),
    # the collectives explorer: its "p (ranks)" slider (gloo on 2 and 4 CPU processes first)
    BrowserCase(path="10_beyond_one_gpu.ipynb", timeout_s=300, skip_if_missing=True),
]


def _param(case: BrowserCase):
    marks = list(case.marks)
    if case.skip_if_missing and not case.file.exists():
        marks.append(pytest.mark.skip(reason=f"{case.file} does not exist yet (lesson not written)"))
    return pytest.param(case, id=case.test_id, marks=marks)


# ------------------------------------------------------------------------------------------------ fixtures


# chromium_path and browser: tests/conftest.py (one Playwright for the session)


@pytest.fixture(scope="session")
def jupyter_servers():
    """``get(root_dir)`` -> a JupyterLab rooted there, started on first use and shared by the session.

    The lessons' server is rooted at notebooks/ (as a reader sees it); the self-tests' at tests/browser/fixtures/.
    """
    servers: dict[Path, harness.JupyterLabServer] = {}

    def get(root: Path) -> harness.JupyterLabServer:
        root = Path(root).resolve()
        if root not in servers:
            servers[root] = harness.JupyterLabServer(root, python=sys.executable).start()
        return servers[root]

    yield get
    for s in servers.values():
        s.stop()


@pytest.fixture
def artifacts_dir(request) -> Path:
    parent = Path(os.environ.get("GPULAB_BROWSER_ARTIFACTS") or tempfile.gettempdir()) / "gpulab-browser-artifacts"
    name = request.node.name.replace("/", "_").replace("[", "-").replace("]", "")
    return parent / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"


def _run_checks(drv, artifacts_dir, label: str, checks):
    """``(checks(), None)``; when a check fails: the page's artifacts saved, and ``(None, message)`` for
    ``pytest.fail`` after the browser context is closed. Any other exception is raised as it is."""
    try:
        return checks(), None
    except Exception as exc:
        where = drv.save_artifacts(artifacts_dir, exc)
        print(f"\nbrowser test artifacts (screenshot, page text, log console, server log): {where}")
        if not isinstance(exc, harness.CheckFailed):
            raise
        return None, f"{label}: {exc}\n\nartifacts: {where}\ntimings: {drv.timings}"


# ---------------------------------------------------------------------------------------------------- test


@pytest.mark.browser
@pytest.mark.parametrize("case", [_param(c) for c in NOTEBOOKS])
def test_notebook_widget_in_browser(case: BrowserCase, browser, jupyter_servers, artifacts_dir):
    assert case.file.exists(), f"{case.file} does not exist"
    before_bytes = case.file.read_bytes()
    server = jupyter_servers(case.root)
    context = browser.new_context(viewport=harness.VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(30_000)
    drv = harness.LabDriver(page, server, case)
    t0 = time.monotonic()

    def checks():
        drv.open_notebook()
        report = drv.run_all()
        drv.assert_clean(report)
        fig0 = drv.wait_figure_rendered()
        drv.assert_traces_complete("after Run All")
        fig1 = drv.move_slider_and_wait_change(fig0)
        drv.assert_traces_complete("after the slider moved")
        drv.assert_no_new_errors(report)
        return fig0, fig1

    try:
        figs, failure = _run_checks(drv, artifacts_dir, case.path, checks)
    finally:
        context.close()
        server.shutdown_all_kernels()
    if failure:
        pytest.fail(failure, pytrace=False)
    fig0, fig1 = figs
    print(f"\n{case.path}: {time.monotonic() - t0:.1f}s {drv.timings}; figure {fig0['hash']} -> {fig1['hash']}")
    assert case.file.read_bytes() == before_bytes, f"the browser session modified {case.file}"


# ------------------------------------------------------------------------- a front end without FigureWidget support

# The kernel checks itself: anywidget is absent and gpulab chose the static figure path.
_KERNEL_PROBE = """
try:
    import anywidget
    print("anywidget imported")
except ModuleNotFoundError:
    print("anywidget absent")
import gpulab.figures.widgets
print("figure path", gpulab.figures.widgets.FIGURE_PATH)
"""
_JS_WIDGET_FIGURE_IN_OUTPUT = """
([widgetSel, nth, figureSel]) => {
  const box = document.querySelectorAll(widgetSel)[nth];
  const fig = box && box.querySelector(figureSel);
  return !!fig && fig.closest('.widget-output') !== null;
}
"""


def _assert_every_figure_has_data(figures: list[dict], when: str) -> None:
    """Each figure in the notebook has traces, and each trace as many y values as x values, at least one."""
    bad = [f"cell {f['cell']}: no traces" for f in figures if not f["traces"]]
    bad += [
        f"cell {f['cell']}, trace {t['name']!r}: {t['nx']} x and {t['ny']} y values"
        for f in figures
        for t in f["traces"]
        if not t["nx"] or t["nx"] != t["ny"]
    ]
    if not figures or bad:
        raise harness.CheckFailed(f"{when}: figures without data: " + ("; ".join(bad) or "no figure at all"))


NO_ANYWIDGET = BrowserCase(path="01_roofline.ipynb", timeout_s=120, id="01_roofline-no-anywidget")


@pytest.mark.browser
@pytest.mark.slow
def test_static_fallback_without_anywidget(browser, artifacts_dir):
    """A lesson in a kernel where ``import anywidget`` fails (no plotly FigureWidget, as on a front end without
    FigureWidget support): it runs clean, every figure it shows has data, and the lesson widget's static figure,
    re-shown in an ipywidgets Output, is redrawn when its slider moves."""
    case = NO_ANYWIDGET
    before_bytes = case.file.read_bytes()
    context = browser.new_context(viewport=harness.VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(30_000)
    with harness.JupyterLabServer(case.root, python=sys.executable, block_imports=("anywidget",)) as server:
        drv = harness.LabDriver(page, server, case)

        def checks():
            drv.open_notebook()
            report = drv.run_all()
            drv.assert_clean(report)
            probe = drv.kernel_execute(_KERNEL_PROBE)
            if probe.split("\n")[:2] != ["anywidget absent", "figure path static"]:
                raise harness.CheckFailed(f"the kernel was meant to lack anywidget and draw static figures: {probe!r}")
            fig0 = drv.wait_figure_rendered()
            _assert_every_figure_has_data(drv.all_figures(), "after Run All")
            if not page.evaluate(_JS_WIDGET_FIGURE_IN_OUTPUT, [case.widget, case.nth, case.figure]):
                raise harness.CheckFailed("the lesson widget's figure is not a static figure inside an Output")
            drv.move_slider_and_wait_change(fig0)
            _assert_every_figure_has_data(drv.all_figures(), "after the slider moved")
            drv.assert_no_new_errors(report)

        try:
            _, failure = _run_checks(drv, artifacts_dir, f"{case.path} without anywidget", checks)
        finally:
            context.close()
    if failure:
        pytest.fail(failure, pytrace=False)
    assert case.file.read_bytes() == before_bytes, f"the browser session modified {case.file}"
