"""The shared pieces of the lessons' slider-driven figures (ipywidgets + plotly); the figures and explorers
themselves are in ``gpulab.figures``, one module per lesson.

Every interactive widget is a container with CSS class ``gpulab-widget``; its sliders carry
``gpulab-slider`` (the browser test finds them by these classes). Figures are plotly ``FigureWidget``s
where the front end can show them (JupyterLab with anywidget; Colab after its custom widget manager is
enabled, which importing this module does), and otherwise a static figure redrawn into an
``ipywidgets.Output`` on every change (``GPULAB_STATIC_FIGURES=1`` forces that fallback).
"""
from __future__ import annotations

import sys

import ipywidgets as W
import plotly.graph_objects as go

from .settings import SETTINGS


def _enable_colab() -> None:
    if "google.colab" in sys.modules:  # pragma: no cover - only in Colab
        from google.colab import output

        output.enable_custom_widget_manager()


_enable_colab()


def _figurewidget_ok() -> bool:
    if SETTINGS.static_figures:
        return False
    try:
        import anywidget  # noqa: F401  (plotly's FigureWidget is built on it)
    except ImportError:
        return False
    return True


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

    def _draw(self) -> None:
        self.widget.clear_output(wait=True)
        with self.widget:
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
