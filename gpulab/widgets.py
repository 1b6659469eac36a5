"""Slider-driven figures for the lessons (ipywidgets + plotly).

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

import math
import os
import sys

import ipywidgets as W
import plotly.graph_objects as go

from . import hardware, plots, roofline
from .settings import SETTINGS


ON_COLAB: bool = "google.colab" in sys.modules  # Colab's kernel imports google.colab before any cell runs


def _anywidget_figures() -> bool:
    """True if plotly's FigureWidget is an anywidget here: plotly >= 6 with anywidget importable."""
    import plotly

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

    def _draw(self) -> None:
        self.widget.clear_output(wait=True)
        with self.widget:
            if FIGURE_PATH == "colab":  # plotly.js inline: a <script src> in an Output loads after its caller
                from IPython.display import HTML, display

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


class InteractiveRoofline:
    """Lesson 01's explorer: pick a machine (C, B) and a kernel (F, D); see the bound update.

    Presets are the GPUs of ``gpulab.hardware`` (their dense bf16 tensor-core peak, or fp32 where there is
    none) and the seed lecture's accelerator. Sliders are logarithmic: C in TFLOP/s, B in TB/s, F in FLOPs,
    D in bytes. ``.widget`` is the container to display; ``.bound`` is the current ``roofline.Bound``.
    """

    F_RANGE, D_RANGE = (1e6, 1e15), (1e6, 1e12)  # slider ranges: FLOPs and bytes

    def __init__(self, preset: str = "Seed accelerator", flops: float = 1e12, bytes_moved: float = 100e9):
        if preset not in hardware.GPUS:
            raise ValueError(f"preset must be one of {list(hardware.GPUS)}, got {preset!r}")
        for name, v, (lo, hi) in (("flops", flops, self.F_RANGE), ("bytes_moved", bytes_moved, self.D_RANGE)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
                raise ValueError(f"{name} must be a number in [{lo:g}, {hi:g}] (the slider's range), got {v!r}")
        self.preset = W.Dropdown(options=list(hardware.GPUS), value=preset, description="machine")
        self.c = slider(W.FloatLogSlider, base=10, min=0, max=3.5, step=0.01, description="C peak (TFLOP/s)",
                        readout_format=".3g")
        self.b = slider(W.FloatLogSlider, base=10, min=-1, max=1, step=0.01, description="B bandwidth (TB/s)",
                        readout_format=".3g")
        self.f = slider(W.FloatLogSlider, value=flops, base=10, min=6, max=15, step=0.05,
                        description="F work (FLOPs)", readout_format=".3g")
        self.d = slider(W.FloatLogSlider, value=bytes_moved, base=10, min=6, max=12, step=0.05,
                        description="D traffic (bytes)", readout_format=".3g")
        self.readout = W.HTML()
        self._apply_preset()
        fig = self._figure()
        self._change()(fig)  # the first state goes into the figure before it becomes a widget
        self.live = LiveFigure(fig)
        for w in (self.c, self.b, self.f, self.d):
            w.observe(lambda _: self.refresh(), names="value")
        self.preset.observe(lambda _: (self._apply_preset(), self.refresh()), names="value")
        self.widget = container(self.preset, self.c, self.b, self.f, self.d, self.readout, self.live.widget)
        self._update_readout()

    def _apply_preset(self) -> None:
        spec = hardware.get(self.preset.value)
        peak = spec.peak_tflops["bf16"] or spec.peak_tflops["fp16"] or spec.peak_tflops["fp32"]
        self.c.value, self.b.value = peak, spec.hbm_tbps

    @property
    def bound(self) -> roofline.Bound:
        return roofline.bound(self.f.value, self.d.value, self.c.value, self.b.value)

    def _figure(self) -> go.Figure:
        fig = plots.roofline_figure([dict(label="roof", peak_tflops=self.c.value, hbm_tbps=self.b.value)],
                                    title="", height=420)
        fig.add_scatter(x=[1.0], y=[1.0], mode="markers", name="your kernel (at the bound)",
                        marker=dict(size=14, color="black", symbol="star"))
        fig.add_scatter(x=[1.0, 1.0], y=[1e-3, 1e4], mode="lines", name="ridge point",
                        line=dict(color="gray", dash="dot"))
        fig.update_yaxes(range=[-2, 3.6])
        return fig

    @staticmethod
    def _x_range(*intensities) -> list:
        """Log10 x-range: the usual 1e-2..1e4, widened to keep every point on the plot."""
        import math

        logs = [math.log10(i) for i in intensities if i > 0]
        return [min([-2.0] + [v - 0.5 for v in logs]), max([4.0] + [v + 0.5 for v in logs])]

    def _change(self):
        """A function that brings a figure up to the current slider values."""
        b = self.bound
        rate = roofline.attainable_tflops(b.intensity, self.c.value, self.b.value)
        x_range = self._x_range(b.intensity, b.ridge)
        x, y = plots.roof_xy(self.c.value, self.b.value, log_range=x_range)

        def change(fig):
            fig.data[0].x, fig.data[0].y = x.tolist(), y.tolist()  # lists: see gpulab.plots
            fig.data[0].name = f"roof: C={self.c.value:.3g} TFLOP/s, B={self.b.value:.3g} TB/s"
            fig.data[1].x, fig.data[1].y = [b.intensity], [rate]
            fig.data[2].x = [b.ridge, b.ridge]
            fig.layout.xaxis.range = x_range
            fig.layout.yaxis.range = [min(-2.0, math.log10(rate) - 0.5), max(3.6, math.log10(self.c.value) + 0.3)]
            fig.layout.title = (f"I = {b.intensity:.3g} FLOP/B, ridge {b.ridge:.3g}: "
                                f"{b.limiter}-bound, t >= {b.time_ms:.4g} ms")

        return change

    def _update_readout(self) -> None:
        b = self.bound
        rate = roofline.attainable_tflops(b.intensity, self.c.value, self.b.value)
        self.readout.value = (f"<b>compute</b> F/C = {b.compute_ms:.4g} ms &nbsp; <b>memory</b> D/B = "
                              f"{b.memory_ms:.4g} ms &nbsp; &rarr; <b>{b.limiter}-bound</b>, t &ge; "
                              f"{b.time_ms:.4g} ms; attainable {rate:.3g} TFLOP/s")

    def refresh(self) -> None:
        """Redraw the figure and the readout for the current slider values."""
        self.live.update(self._change())
        self._update_readout()
