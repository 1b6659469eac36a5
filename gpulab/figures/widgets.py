"""The shared pieces of the lessons' slider-driven figures (ipywidgets + plotly); the figures and explorers
themselves are in ``gpulab.figures``, one module per lesson.

Every interactive widget is a container with CSS class ``gpulab-widget``; its sliders carry
``gpulab-slider`` (the browser test finds them by these classes). ``figure_path`` picks how a figure is shown,
once per process:

- ``"widget"``: a plotly ``FigureWidget`` updated in place (JupyterLab, with plotly >= 6, whose FigureWidget
  is an anywidget, and anywidget installed);
- ``"colab"``: on Colab (detected once: ``"google.colab" in sys.modules``), a static figure redrawn into an
  ``ipywidgets.Output`` as HTML that carries plotly.js inline. Colab's FigureWidget support is not
  established (googlecolab/colab-cdn-widget-manager#51 is open) and plotly's own Colab renderer inside an
  Output widget fails with "Plotly is not defined" (googlecolab/colabtools#5889); docs/colab.md has the
  sources;
- ``"static"``: elsewhere without FigureWidget support, or with ``GPULAB_STATIC_FIGURES=1``: a static figure
  re-shown with ``fig.show()`` into an Output on every change.
"""

from __future__ import annotations

import sys

import ipywidgets as W
import plotly.graph_objects as go

from ..core.settings import SETTINGS

ON_COLAB: bool = "google.colab" in sys.modules  # Colab's kernel imports google.colab before any cell runs


def _anywidget_figures() -> bool:
    """True if plotly's FigureWidget is an anywidget here: plotly >= 6 with anywidget importable."""
    import plotly  # only to read its version, when a figure is first made

    try:
        import anywidget  # noqa: F401
    except ImportError:
        return False
    return int(plotly.__version__.split(".")[0]) >= 6


def figure_path(on_colab: bool, static: bool, anywidget_figures: bool) -> str:
    """How figures are shown: "widget", "colab" or "static" (see the module docstring). Pure: the
    arguments are ``ON_COLAB``, ``SETTINGS.static_figures`` and ``_anywidget_figures()``."""
    if on_colab:
        return "colab"
    return "widget" if anywidget_figures and not static else "static"


FIGURE_PATH: str = figure_path(ON_COLAB, SETTINGS.static_figures, _anywidget_figures())


def _figurewidget_ok() -> bool:
    return FIGURE_PATH == "widget"


class LiveFigure:
    """A figure that updates in place: a ``go.FigureWidget`` or, as a fallback, an Output redrawn.

    ``update(fn)`` calls ``fn(fig)`` to change traces and layout, then shows the result. ``fig`` is the
    current figure (for tests and assert cells). Give it plain lists, not NumPy arrays: with NumPy arrays in
    a FigureWidget, plotly 7.1 raised on the browser's trace deltas and the roofline lost its traces there.
    """

    def __init__(self, fig: go.Figure):
        self.static = not _figurewidget_ok()
        if self.static:
            self.fig = fig
            self.widget = W.Output()
            self._draw()
        else:
            self.fig = go.FigureWidget(fig)
            self.widget = self.fig
            self._fitted = False
            self.fig.observe(self._fit_width, names="_js2py_traceDeltas")

    def _fit_width(self, change) -> None:
        """The first trace deltas say a view has drawn the figure (plotly 7's view sends them after its first
        draw; its layout delta goes to a trait name the Python side lacks). plotly.js drew it before the view
        was on the page, at its default 700 px, and never looks again (plotly/plotly.py#5208); setting
        ``autosize`` sends a relayout after which plotly.js takes the cell's width."""
        if change["new"] is None or self._fitted:
            return
        self._fitted = True
        self.fig.layout.autosize = True

    def _draw(self) -> None:
        self.widget.clear_output(wait=True)
        with self.widget:
            if FIGURE_PATH == "colab":  # plotly.js inline: a <script src> in an Output loads after its caller
                from IPython.display import HTML, display  # IPython only where a figure is shown

                display(HTML(self.fig.to_html(include_plotlyjs=True, full_html=False)))
            else:
                self.fig.show()

    def update(self, fn) -> None:
        if self.static:
            fn(self.fig)
            self._draw()
        else:
            with self.fig.batch_update():
                fn(self.fig)


def slider(cls=W.FloatSlider, **kw):
    """An ipywidgets slider tagged ``gpulab-slider``, updating only on release."""
    kw.setdefault("continuous_update", False)
    kw.setdefault("style", {"description_width": "initial"})
    kw.setdefault("layout", W.Layout(width="460px"))
    s = cls(**kw)
    s.add_class("gpulab-slider")
    return s


def container(*children, cls=W.VBox):
    box = cls(list(children))
    box.add_class("gpulab-widget")
    return box
