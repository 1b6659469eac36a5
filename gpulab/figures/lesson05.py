"""Lesson 05's figures (recomputation): live memory step by step for the three ways, their memory and time at
a size chosen by slider, and the time against n beside the byte model.

Models: ``gpulab.models.recompute``. Figures hold plain lists.
"""

from __future__ import annotations

import ipywidgets as W
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..models.recompute import WAYS, memory_model
from . import plots, widgets

#: What is alive, above x, after each step of forward + backward in the training setting (loss = y.sum(), y
#: not kept: ``recompute.memory_model(way, n, s, "loss")``), in tensors of n elements. A step is
#: (phase, what runs, the tensors alive once it has run); a tensor is freed at the first step after its last
#: use. Its largest count is the model's peak, its count after "loss = y.sum()" what is held between passes.
MEMORY_STEPS = {
    "eager": [
        ("forward", "s1 = s(x)", ["s1"]),
        ("forward", "s2 = s(s1)", ["s1", "s2"]),
        ("forward", "s3 = y = s(s2)", ["s1", "s2", "s3"]),
        ("forward", "loss = y.sum()", ["s1", "s2", "s3"]),
        ("backward", "g2 = dy·s3(1-s3)", ["s1", "s2", "s3", "g2"]),
        ("backward", "g1 = g2·s2(1-s2)", ["s1", "s2", "g2", "g1"]),
        ("backward", "dx = g1·s1(1-s1)", ["s1", "g1", "dx"]),
        ("backward", "done", ["dx"]),
    ],
    "checkpoint": [
        ("forward", "s1 = s(x)", ["s1"]),
        ("forward", "s2 = s(s1)", ["s1", "s2"]),
        ("forward", "s3 = y = s(s2)", ["s2", "s3"]),
        ("forward", "loss = y.sum()", []),
        ("backward", "rerun s1", ["s1"]),
        ("backward", "rerun s2", ["s1", "s2"]),
        ("backward", "rerun s3", ["s1", "s2", "s3"]),
        ("backward", "g2 = dy·s3(1-s3)", ["s1", "s2", "s3", "g2"]),
        ("backward", "g1 = g2·s2(1-s2)", ["s1", "s2", "g2", "g1"]),
        ("backward", "dx = g1·s1(1-s1)", ["s1", "g1", "dx"]),
        ("backward", "done", ["dx"]),
    ],
    "fused": [
        ("forward", "y = s(s(s(x)))", ["y"]),
        ("forward", "loss = y.sum()", []),
        ("backward", "dx, s1..s3 in registers", ["dx"]),
        ("backward", "done", ["dx"]),
    ],
}
PHASE_COLORS = {"forward": "#1f77b4", "backward": "#ff7f0e"}


def memory_steps_figure(n: int = 2**28, itemsize: int = 4):
    """Live memory above x (GiB) after each step of forward + backward, one panel per way (``MEMORY_STEPS``), one
    bar a step read down the panel, labelled with the tensors alive; the panel titles give the model's held and
    peak tensor counts (``recompute.memory_model``, "loss" setting) for n elements of ``itemsize`` bytes, short
    enough for a phone's 366 px figure (their unit is in the subtitle). The bars lie across, so that each step's
    name is one line beside its bar at any width (eleven names under eleven upright bars ran into each other in
    a 570 px column)."""
    gib = n * itemsize / 2**30
    titles = []
    for way in WAYS:
        m = memory_model(way, n, itemsize, "loss")
        titles.append(f"{way}: held between passes {m['held_tensors']}, peak {m['peak_tensors']}")
    counts = [len(MEMORY_STEPS[w]) for w in WAYS]
    fig = make_subplots(rows=3, cols=1, subplot_titles=titles, vertical_spacing=0.09, row_heights=counts)
    peak = max(len(live) for w in WAYS for *_, live in MEMORY_STEPS[w]) * gib
    for row, way in enumerate(WAYS, start=1):
        steps = MEMORY_STEPS[way]
        for phase, color in PHASE_COLORS.items():
            idx = [i for i, s in enumerate(steps) if s[0] == phase]
            fig.add_bar(
                y=[steps[i][1] for i in idx],
                x=[len(steps[i][2]) * gib for i in idx],
                orientation="h",
                text=[" ".join(steps[i][2]) or "nothing" for i in idx],
                textposition="outside",
                cliponaxis=False,
                marker_color=color,
                name=phase,
                legendgroup=phase,
                showlegend=row == 1,
                row=row,
                col=1,
            )
        fig.update_yaxes(
            type="category",
            categoryorder="array",
            categoryarray=[s[1] for s in steps],
            autorange="reversed",  # the first step at the top: time runs down
            tickfont_size=11,
            ticklabelstandoff=4,
            row=row,
            col=1,
        )
    # one scale for the three panels (the ways compare by length), with room for the longest label past 4 GiB
    fig.update_xaxes(range=[0, peak * 1.45], row=1, col=1)
    for row in (2, 3):
        fig.update_xaxes(matches="x", row=row, col=1)
    fig.update_xaxes(title_text="GiB alive above x", row=3, col=1)
    fig.update_layout(
        title=plots.title(
            "live memory above x, step by step",
            f"loss = y.sum(), n = {n:,} elements of {itemsize} B, each tensor {gib:.3g} GiB<br>"
            "held and peak in tensors of n; model by hand (gpulab.models.recompute)",
            gap=34,  # above the first panel's title
        ),
        height=820,
        template="plotly_white",
        margin=dict(t=30, b=30, r=20),
        bargap=0.3,
        uniformtext=dict(minsize=11, mode="show"),
        legend=plots.LEGEND_BELOW,
    )
    plots.panel_titles(fig, 12)
    return fig


class SizeExplorer:
    """Lesson 05's slider: pick n = 2**k; see the extra peak memory of the three ways (the model, by hand, and
    the measurement) and their forward + backward times, from ``data`` (a suite record of
    ``gpulab.bench.lesson05.run``, measured now or recorded): the slider runs over the sizes measured there,
    from the smallest. ``data`` None (nothing recorded yet): the slider runs over 2**10..2**30 and only the
    memory model is drawn, the title saying so. ``.widget`` is the container; ``.live.fig`` the figure."""

    def __init__(self, data: dict | None, where: str = "", itemsize: int = 4):
        self.data, self.where, self.itemsize = data, where, itemsize
        if data:
            exps = sorted(s.bit_length() - 1 for s in data["sizes"])
            step = min((b - a for a, b in zip(exps, exps[1:])), default=1)
            self.k = widgets.slider(
                W.IntSlider, value=exps[0], min=exps[0], max=exps[-1], step=step, description="n = 2**k, k"
            )
            # one panel above the other: side by side on a phone (366 px) each was about 110 px wide, its three
            # names ran into each other and the time bars' labels shrank to their bars
            fig = make_subplots(
                rows=2, cols=1, vertical_spacing=0.2, subplot_titles=("extra peak memory", "forward + backward time")
            )
        else:
            self.k = widgets.slider(W.IntSlider, value=20, min=10, max=30, step=1, description="n = 2**k, k")
            fig = make_subplots(rows=1, cols=1, subplot_titles=("extra peak memory",))
        fig.add_bar(x=list(WAYS), y=[0.0] * 3, name="memory, model (by hand)", marker_color="#9e9e9e", row=1, col=1)
        if data:
            fig.add_bar(x=list(WAYS), y=[0.0] * 3, name="memory, measured", marker_color="#1f77b4", row=1, col=1)
            fig.add_bar(
                x=list(WAYS),
                y=[0.0] * 3,
                name="time, measured",
                marker_color="#d62728",
                row=2,
                col=1,
                text=[""] * 3,
                textposition="outside",
                cliponaxis=False,
            )
            fig.update_yaxes(title_text="ms", row=2, col=1)
        fig.update_layout(
            height=620 if data else 440,
            template="plotly_white",
            barmode="group",
            margin=dict(t=30, b=30),
            legend=plots.LEGEND_BELOW,
        )
        plots.panel_titles(fig, 12)
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
        unit, scale = ("GiB", 2**30) if n * self.itemsize >= 2**28 else ("MiB", 2**20)
        model = [memory_model(w, n, self.itemsize)["peak_bytes"] / scale for w in WAYS]
        rows = self.rows_at(n)
        if rows:
            measured = [rows[w]["peak_bytes"] / scale for w in WAYS]
            times = [rows[w]["ms"] for w in WAYS]
            fastest = min(WAYS, key=lambda w: rows[w]["ms"])
            note = f"fastest here: {fastest}; {self.where}"
        else:
            note = "no recording yet: the memory model only"

        def change(fig):
            fig.data[0].y = model
            fig.layout.yaxis.title.text = f"{unit} (loss = y.sum())"
            if rows:
                fig.data[1].y, fig.data[2].y = measured, times
                fig.data[2].text = [f"{t * 1e3:.0f} µs" if t < 1 else f"{t:.2f} ms" for t in times]
                fig.layout.yaxis2.range = [0, max(times) * 1.2]
            fig.layout.title = plots.title(
                f"n = 2**{self.k.value} = {n:,} elements of {self.itemsize} bytes", note, gap=34
            )

        return change


def time_figure(data: dict, copy_tbps: float, where: str = ""):
    """Forward + backward time (ms) against n for each way, measured (a ``gpulab.bench.lesson05`` record), beside
    the model: the bytes counted by hand over the copy bandwidth ``copy_tbps`` (TB/s)."""
    fig = go.Figure()
    for i, way in enumerate(WAYS):
        rs = [r for r in data["rows"] if r["way"] == way]
        color = plots.COLORS[i]
        fig.add_scatter(
            x=[r["n"] for r in rs],
            y=[r["ms"] for r in rs],
            mode="lines+markers",
            name=f"{way}, measured",
            line=dict(color=color),
        )
        fig.add_scatter(
            x=[r["n"] for r in rs],
            y=[r["bytes_moved"] / (copy_tbps * 1e12) * 1e3 for r in rs],
            mode="lines",
            name=f"{way}, model",
            line=dict(color=color, dash="dot"),
        )
    fig.update_layout(
        title=plots.title(
            "forward + backward time, fp32",
            f"{where}<br>dotted: the model, bytes counted by hand / the copy bandwidth ({copy_tbps:.3g} TB/s)",
        ),
        height=500,
        template="plotly_white",
        margin=dict(t=30, b=30),
        legend=plots.LEGEND_BELOW,
        # a label a decade: plotly's own put bare minor digits (2, 5) between them
        xaxis=dict(type="log", title="n (elements)", dtick=1, exponentformat="power"),
        yaxis=dict(type="log", title="ms", dtick=1),
    )
    return fig
