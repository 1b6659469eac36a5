"""Every lesson figure (tests/figure_catalogue.py: each explorer at both ends of every slider, and the exercises'
race figures) drawn by plotly.js in headless Chromium and measured (tests/browser/figure_geometry.py): no two
texts overlap or run together, none leaves the figure, is cut by its plot area's edge or is drawn too small, no
tick label is turned on its side (the labels did not fit across), no title, legend entry or tick label lies on a
plot area, the plot area is not squeezed by its legend, no marker or line hides another series' unless the figure
says so, no two legend entries are drawn alike, every numeric axis shows a scale.

- ``test_lesson_figures_in_chromium``: each figure as a notebook first draws it, at plotly's default 700 px and then
  widened to the cell (``widgets.LiveFigure._fit_width``), in a narrow notebook column (570 px: JupyterLab at
  1000 px with its file browser open) and a wide one (1400 px);
- ``test_lesson_figures_drawn_directly`` (slow): each drawn at those widths directly, and at 366 px, a figure's
  width on the static site on a 412 px phone.

``KNOWN`` (per lesson, in a notebook column) and ``KNOWN_SITE`` (on the phone) would hold, by figure and kind of
problem, what a figure cannot show at that width, and why (the site should then say so): those are let pass, and
an entry that no longer occurs fails its test, so the lists only shrink. Both are empty: every figure passes at
every width. A hand-made figure with each fault shows that each is caught.

Run: ``python -m pytest tests/test_figures_geometry.py -m browser`` (needs /usr/bin/chromium or GPULAB_CHROMIUM).
"""

import functools

import plotly.graph_objects as go
import pytest

from gpulab.figures import plots
from tests.browser.figure_geometry import FigurePage, problems, stale, unknown
from tests.figure_catalogue import LESSONS, lesson_figures

pytestmark = pytest.mark.browser

WIDTHS = (570, 1400)  # px: a narrow notebook column and a wide one
FIRST = 700  # px: plotly.js's default width, at which a notebook's FigureWidget draws before it is on the page
SITE = 366  # px: the site's figure on a 412 px phone

#: Per lesson: (figure name prefix, words of the problem) -> why it is let pass.
KNOWN: dict[str, dict[tuple[str, str], str]] = {}
#: The figures at the site's 366 px: (figure name prefix, words of the problem) -> why a phone cannot show it.
KNOWN_SITE: dict[tuple[str, str], str] = {}


@functools.cache
def _figures(lesson: str) -> tuple:
    return tuple(lesson_figures([lesson]))


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
    crowded = go.Figure(
        go.Scatter(x=[1e-3, 1e3], y=[1, 2]), layout=dict(xaxis=dict(type="log", tickvals=plots.LOG_TICKS))
    )
    assert "turned on its side" in "\n".join(problems(page.measure(crowded, 300), "crowded"))  # 19 labels in 200 px
    clean = go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 4, 9], mode="markers"), layout=dict(title="fine"))
    assert problems(page.measure(clean, 1000), "clean") == []


def _lines(**over) -> go.Figure:
    """Two lines of four points that lie on one another from the second point on, and a third apart."""
    x = [1, 2, 3, 4]
    a = dict(x=x, y=[1, 5, 6, 7], mode="lines", name="H2D pinned")
    b = dict(x=x, y=[3, 5, 6, 7], mode="lines", name="D2H pinned")
    c = dict(x=x, y=[9, 9, 9, 9], mode="lines", name="apart", line_color="#999")
    a, b = {**a, **over.get("a", {})}, {**b, **over.get("b", {})}
    return go.Figure([go.Scatter(**a), go.Scatter(**b), go.Scatter(**c)], layout=over.get("layout", {}))


def test_hidden_series_are_caught_unless_the_figure_says_so_or_both_show(page):
    found = "\n".join(problems(page.measure(_lines(), 800), "made"))
    assert "lines 'H2D pinned' and 'D2H pinned' lie on one another" in found and "'apart'" not in found
    named = _lines(layout=dict(annotations=[dict(text="H2D and D2H pinned coincide", x=2, y=8, showarrow=False)]))
    assert problems(page.measure(named, 800), "named") == []
    wide_under = _lines(a=dict(line_width=5), b=dict(line_width=2))  # the first drawn is under: its edges show
    assert problems(page.measure(wide_under, 800), "wide under thin") == []
    dots = dict(mode="lines+markers", marker=dict(symbol="circle", size=6))
    same_marks = _lines(a=dots, b=dots)  # markers on markers hide each other as lines do
    assert "lie on one another" in "\n".join(problems(page.measure(same_marks, 800), "dots on dots"))
    ringed = _lines(a=dots, b=dict(mode="lines+markers", marker=dict(symbol="circle-open", size=12)))
    assert problems(page.measure(ringed, 800), "rings around dots") == []


def test_layout_faults_are_caught(page):
    x, y = [1, 2, 3], [1, 2, 3]
    alike = go.Figure(
        [go.Scatter(x=x, y=[v + k for v in y], mode="lines", name=f"PCIe {k}", line_color="#999") for k in (3, 4)]
    )
    assert "'PCIe 3' and 'PCIe 4' are drawn alike" in "\n".join(problems(page.measure(alike, 800), "alike"))
    labelled = go.Figure(alike)
    for k in (3, 4):
        labelled.add_annotation(x=1, y=1 + k, text=f"PCIe {k}", showarrow=False, yanchor="bottom", xanchor="left")
    assert problems(page.measure(labelled, 800), "labelled") == []
    inside = go.Figure(go.Scatter(x=x, y=y, name="a"), layout=dict(showlegend=True, legend=dict(x=0.4, y=0.5)))
    assert "legendtext 'a' lies on the plot area" in "\n".join(problems(page.measure(inside, 800), "legend inside"))
    many = go.Figure(
        [go.Scatter(x=x, y=y, name=f"a long legend entry number {k}") for k in range(12)],
        layout=dict(height=420, legend=plots.LEGEND_BELOW),
    )
    assert "squeezed" in "\n".join(problems(page.measure(many, 570), "twelve legend rows"))
    edge = go.Figure(go.Scatter(x=x, y=y, mode="markers+text", text=["", "", "a label past the edge"]))
    assert "cut by the plot area's edge" in "\n".join(problems(page.measure(edge, 800), "label"))


def _legend_under_at(y_legend) -> go.Figure:
    """Lesson 10's collectives explorer as it was: eight legend rows under a log plot, placed by ``y_legend``."""
    fig = go.Figure(
        [go.Scatter(x=[1e3, 1e6], y=[1e-4 * 2**k, 1e-2], mode="lines", name=f"collective {k} model") for k in range(8)]
    )
    fig.update_layout(height=420, xaxis=dict(type="log", title="message size S (bytes)"), yaxis_type="log")
    fig.update_layout(legend=y_legend, margin=dict(b=110))
    return fig


def test_a_first_draw_at_700_px_then_widened_is_what_is_measured(page):
    """A legend hung at a paper y under the plot keeps the margin of its first draw at 700 px: widened to 1400 px
    it lies on the x axis title (plotly.js); drawn at 1400 px at once it does not. Pinned to the figure's bottom
    (``plots.LEGEND_BELOW``), it is clear either way."""
    old = _legend_under_at(dict(orientation="h", yanchor="top", y=-0.2, x=0))
    assert problems(page.measure(old, 1400), "direct") == []
    assert "g-xtitle 'message size S (bytes)'" in "\n".join(problems(page.measure(old, 1400, FIRST), "widened"))
    assert problems(page.measure(_legend_under_at(plots.LEGEND_BELOW), 1400, FIRST), "pinned") == []


def _param(lesson, **kw):
    return pytest.param(lesson, id=f"lesson{lesson}" if lesson[0].isdigit() else lesson, **kw)


@pytest.mark.parametrize("lesson", [_param(k) for k in LESSONS])
def test_lesson_figures_in_chromium(page, lesson):
    found = []
    for name, fig in _figures(lesson):
        for width in WIDTHS:
            found += problems(page.measure(fig, width, FIRST), f"{name} at {width} px, first drawn at {FIRST}")
    known = KNOWN.get(lesson, {})
    left = unknown(found, known) + stale(found, known)
    assert not left, "\n".join(left)


@pytest.mark.slow
@pytest.mark.parametrize("lesson", [_param(k) for k in LESSONS])
def test_lesson_figures_drawn_directly(page, lesson):
    found, site = [], []
    for name, fig in _figures(lesson):
        for width in WIDTHS:
            found += problems(page.measure(fig, width), f"{name} at {width} px")
        site += problems(page.measure(fig, SITE), f"{name} at {SITE} px")
    names = [name for name, _ in _figures(lesson)]
    site_known = {k: why for k, why in KNOWN_SITE.items() if any(n.startswith(k[0]) for n in names)}  # this lesson's
    left = unknown(found, KNOWN.get(lesson, {})) + unknown(site, {**KNOWN.get(lesson, {}), **site_known})
    left += stale(site, site_known)
    assert not left, "\n".join(left)
