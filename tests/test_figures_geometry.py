"""Every lesson figure (tests/figure_catalogue.py: each explorer at both ends of every slider) drawn by plotly.js in
headless Chromium at 1400 and 1000 px wide, and measured (tests/browser/figure_geometry.py): no two texts overlap
or run together, none leaves the figure or is drawn too small, no marker sits on another series' marker, every
numeric axis shows a scale. A hand-made figure with each fault shows that each is caught.

Run: ``python -m pytest tests/test_figures_geometry.py -m browser`` (needs /usr/bin/chromium or GPULAB_CHROMIUM).
"""

import plotly.graph_objects as go
import pytest

from tests.browser.figure_geometry import FigurePage, problems
from tests.figure_catalogue import LESSONS
from tests.test_figures_layout import KNOWN, WIDTHS, _figures

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def page(browser):
    p = FigurePage(browser)
    yield p
    p.close()


def test_each_fault_is_caught(page):
    fig = go.Figure(
        [
            go.Scatter(x=[64], y=[290], mode="markers", name="tiled"),
            go.Scatter(x=[64], y=[289], mode="markers", name="grouped"),
            go.Bar(x=["a", "b"], y=[0.0625, 0.004], text=["0.0625 GiB"] * 2, yaxis="y2", xaxis="x2", name="bars"),
        ],
        layout=dict(
            title="a title far too long for its figure " * 6,
            xaxis=dict(domain=[0, 0.45], type="log", range=[0, 3]),
            yaxis=dict(type="log", range=[0, 3]),
            xaxis2=dict(domain=[0.55, 1], anchor="y2"),
            yaxis2=dict(type="log", dtick=1, anchor="x2"),
            annotations=[
                dict(x=1, y=1, text="one note", showarrow=False),
                dict(x=1, y=1, text="another", showarrow=False),
            ],
        ),
    )
    found = "\n".join(problems(page.measure(fig, 300), "made"))
    assert "leaves the figure" in found  # the title
    assert "markers of 'tiled' and 'grouped' sit on one spot" in found
    assert "'one note' and annotation 'another' overlap" in found
    assert "yaxis2 (log) shows 1 tick label" in found
    assert "0.0625 GiB" in found  # shrunk to its narrow bar, or run into its neighbour
    clean = go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 4, 9], mode="markers"), layout=dict(title="fine"))
    assert problems(page.measure(clean, 1000), "clean") == []


@pytest.mark.parametrize(
    "lesson",
    [
        pytest.param(k, id=f"lesson{k}", marks=[pytest.mark.xfail(reason=KNOWN[k], strict=True)] if k in KNOWN else [])
        for k in LESSONS
    ],
)
def test_lesson_figures_in_chromium(page, lesson):
    found = []
    for name, fig in _figures(lesson):
        for width in WIDTHS:
            found += problems(page.measure(fig, width), f"{name} at {width} px")
    assert not found, "\n".join(found)
