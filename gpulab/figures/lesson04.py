"""Lesson 04's figures (fusion): the launch-overhead model against n, with sliders.

Models: ``gpulab.fusion``. Figures hold plain lists.
"""
from __future__ import annotations

import ipywidgets as W
import plotly.graph_objects as go

from .. import widgets
from ..fusion import bytes_moved, model_ms


class LaunchModelExplorer:
    """Model time per implementation against n, with a marker at the slider's n.

    Sliders: log2 n (moves the marker and the readout), launch overhead in µs, bandwidth in TB/s (move the
    model lines). ``measured`` is an optional list of sweep rows (``{"n", "method", "ms"}``) drawn as
    markers. ``.widget`` is the container to display.
    """

    METHODS = (("unfused (5 kernels)", False), ("fused (1 kernel)", True))

    def __init__(self, overhead_us: float, bandwidth_tbps: float, dtype: str = "fp32", measured=None,
                 title: str = "", log2_n: int = 16):
        self.dtype, self.title, self.measured = dtype, title, list(measured or [])
        self.log2_n = widgets.slider(W.IntSlider, value=log2_n, min=10, max=28, step=1, description="log2 n")
        self.overhead = widgets.slider(W.FloatLogSlider, value=overhead_us, base=10, min=-1, max=2, step=0.01,
                                       description="launch overhead (µs)", readout_format=".3g")
        self.bandwidth = widgets.slider(W.FloatSlider, value=round(bandwidth_tbps, 2), min=0.5, max=8, step=0.05,
                                        description="bandwidth (TB/s)")
        self.readout = W.HTML()
        self.ns = [2**e for e in range(10, 29)]
        fig = go.Figure()
        for name, _ in self.METHODS:
            fig.add_scatter(x=self.ns, y=[0.0] * len(self.ns), mode="lines", name=f"model: {name}")
        fig.add_scatter(x=[0], y=[0], mode="markers", name="slider n", marker=dict(size=12, color="black"))
        for method in sorted({r["method"] for r in self.measured}):
            rs = [r for r in self.measured if r["method"] == method]
            fig.add_scatter(x=[r["n"] for r in rs], y=[r["ms"] for r in rs], mode="markers", name=f"measured {method}")
        fig.update_layout(xaxis=dict(type="log", title="n (elements)"), yaxis=dict(type="log", title="time (ms)"),
                          template="plotly_white", height=440, margin=dict(t=90))
        self._apply(fig)  # the first state goes into the figure before it becomes a widget
        self.live = widgets.LiveFigure(fig)
        for w in (self.log2_n, self.overhead, self.bandwidth):
            w.observe(lambda _: self.refresh(), names="value")
        self.widget = widgets.container(self.log2_n, self.overhead, self.bandwidth, self.readout, self.live.widget)

    def times(self, n: int) -> dict:
        """Model ms per method at n for the current sliders."""
        return {name: model_ms(n, self.dtype, fused, self.overhead.value, self.bandwidth.value)
                for name, fused in self.METHODS}

    def _apply(self, fig) -> None:
        n = 2**self.log2_n.value
        for i, (name, fused) in enumerate(self.METHODS):
            fig.data[i].y = [model_ms(m, self.dtype, fused, self.overhead.value, self.bandwidth.value) for m in self.ns]
        t = self.times(n)
        fig.data[len(self.METHODS)].x = [n, n]
        fig.data[len(self.METHODS)].y = list(t.values())
        u, f = t[self.METHODS[0][0]], t[self.METHODS[1][0]]
        fig.update_layout(title=dict(text=f"{self.title}<br><sup>n = 2^{self.log2_n.value}: unfused {u * 1e3:.3g} µs, "
                                          f"fused {f * 1e3:.3g} µs, fused is {u / f:.2f}x faster (model)</sup>",
                                     font_size=13))
        self.readout.value = (f"n = {n:,}: bytes unfused {bytes_moved(n, self.dtype, False):,}, fused "
                              f"{bytes_moved(n, self.dtype, True):,}; launches 5 vs 1")

    def refresh(self) -> None:
        self.live.update(self._apply)
