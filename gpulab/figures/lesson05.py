"""Lesson 05's figures (recomputation): memory and time of the three ways at a size chosen by slider.

Models: ``gpulab.recompute``. Figures hold plain lists.
"""
from __future__ import annotations

import ipywidgets as W
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import plots, widgets
from ..recompute import WAYS, memory_model


def _gib(b: float) -> float:
    return b / 2**30


class SizeExplorer:
    """Lesson 05's slider: pick n = 2**k; see the extra memory of the three ways (the model, by hand, and the
    measurement where ``data`` has one at that size) and their forward + backward times (from ``data`` only:
    a suite record of ``gpulab.bench.lesson05.run``, measured now or recorded). ``data`` may be None (nothing
    recorded yet): then only the model is drawn. ``.widget`` is the container; ``.live.fig`` the figure."""

    def __init__(self, data: dict | None, where: str = "", log2_n: int = 28, itemsize: int = 4):
        self.data, self.where, self.itemsize = data, where, itemsize
        self.k = widgets.slider(W.IntSlider, value=log2_n, min=10, max=30, step=1, description="n = 2**k, k")
        fig = make_subplots(rows=1, cols=2, subplot_titles=("extra peak memory, loss = y.sum() (GiB)",
                                                            "forward + backward time (ms)"))
        colors = {"model": "#9e9e9e", "measured": "#1f77b4"}
        fig.add_bar(x=list(WAYS), y=[0.0] * 3, name="peak, model (by hand)", marker_color=colors["model"], row=1, col=1)
        fig.add_bar(x=list(WAYS), y=[0.0] * 3, name="peak, measured", marker_color=colors["measured"], row=1, col=1)
        fig.add_bar(x=list(WAYS), y=[0.0] * 3, name="time, measured", marker_color="#d62728", row=1, col=2)
        fig.update_layout(height=400, template="plotly_white", barmode="group", title_font_size=12,
                          margin=dict(t=90))
        self._change()(fig)  # the first state goes into the figure before it becomes a widget
        self.live = widgets.LiveFigure(fig)
        self.k.observe(lambda _: self.live.update(self._change()), names="value")
        self.widget = widgets.container(self.k, self.live.widget)

    def rows_at(self, n: int) -> dict:
        """The measured rows of ``data`` at size n, by way ({} if none)."""
        if not self.data:
            return {}
        return {r["way"]: r for r in self.data["rows"] if r["n"] == n}

    def _change(self):
        n = 2**self.k.value
        model = [_gib(memory_model(w, n, self.itemsize)["peak_bytes"]) for w in WAYS]
        rows = self.rows_at(n)
        measured = [_gib(rows[w]["peak_bytes"]) if w in rows else None for w in WAYS]
        times = [rows[w]["ms"] if w in rows else None for w in WAYS]
        if rows:
            note = self.where
        elif self.data:
            sizes = ", ".join(f"2**{s.bit_length() - 1}" for s in self.data["sizes"])
            note = f"no measurement at this n (measured sizes: {sizes}); model only"
        else:
            note = "no measurements; model only"

        def change(fig):
            fig.data[0].y, fig.data[1].y, fig.data[2].y = model, measured, times
            fig.layout.title = f"n = 2**{self.k.value} = {n:,} elements of {self.itemsize} bytes<br><sup>{note}</sup>"

        return change


def time_figure(data: dict, copy_tbps: float, where: str = ""):
    """Forward + backward time (ms) against n for each way, measured (a ``gpulab.bench.lesson05`` record), beside
    the model: the bytes counted by hand over the copy bandwidth ``copy_tbps`` (TB/s)."""
    fig = go.Figure()
    for i, way in enumerate(WAYS):
        rs = [r for r in data["rows"] if r["way"] == way]
        color = plots.COLORS[i]
        fig.add_scatter(x=[r["n"] for r in rs], y=[r["ms"] for r in rs], mode="lines+markers", name=f"{way}, measured",
                        line=dict(color=color))
        fig.add_scatter(x=[r["n"] for r in rs], y=[r["bytes_moved"] / (copy_tbps * 1e12) * 1e3 for r in rs],
                        mode="lines", name=f"{way}, model: bytes / copy bandwidth", line=dict(color=color, dash="dot"))
    fig.update_layout(title=dict(text=f"forward + backward time, fp32<br><sup>{where}</sup>", font_size=13),
                      height=430, template="plotly_white", margin=dict(t=90),
                      xaxis=dict(type="log", title="n (elements)"), yaxis=dict(type="log", title="ms"))
    return fig
