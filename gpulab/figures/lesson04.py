"""Lesson 04's figures (fusion): measured time against n beside the launch-overhead model (two views, picked by
a dropdown), the launch-model explorer with sliders, and resource pressure against BLOCK.

Models: ``gpulab.models.fusion``. Figures hold plain lists.
"""

from __future__ import annotations

import math

import ipywidgets as W
import plotly.graph_objects as go

from ..models.fusion import bytes_moved, model_ms
from . import plots, widgets

#: Every lesson 04 legend: rows under the plot, its bottom on the figure's bottom edge (``yref="container"``), so
#: plotly's automargin lifts the plot until the x axis title clears it, at any width and on every draw. A legend
#: at a paper y under the plot (``y=-0.2``) hangs a fraction of the plot's height below the axis, a height that
#: depends on the margin the legend pushes; plotly.js keeps the push of a first draw made at 700 px, before a
#: notebook cell's width is known, and a legend placed so lands on the x title once the figure is widened.
LEGEND_BELOW = dict(orientation="h", x=0, xanchor="left", yref="container", y=0, yanchor="bottom")


class LaunchModelExplorer:
    """Model time per implementation against n, with open rings at the slider's n.

    Sliders: log2 n (moves the rings and the readout), launch overhead in µs, bandwidth in TB/s (move the
    model lines). ``measured`` is an optional list of sweep rows (``{"n", "method", "ms"}``) drawn as
    markers joined by a thin line. ``title`` heads the figure; ``where`` (where the inputs come from:
    ``live.Shown.where``) and the slider's readout are the small lines under it, each wrapped to fit a phone's
    figure. ``.widget`` is the container to display; ``layout()`` the layout that its first draw and every slider
    move set.
    """

    METHODS = (("unfused (5 kernels)", False), ("fused (1 kernel)", True))

    def __init__(
        self,
        overhead_us: float,
        bandwidth_tbps: float,
        dtype: str = "fp32",
        measured=None,
        title: str = "",
        log2_n: int = 16,
        where: str = "",
    ):
        self.dtype, self.title, self.where, self.measured = dtype, title, where, list(measured or [])
        self.log2_n = widgets.slider(W.IntSlider, value=log2_n, min=10, max=28, step=1, description="log2 n")
        self.overhead = widgets.slider(
            W.FloatLogSlider,
            value=overhead_us,
            base=10,
            min=-1,
            max=2,
            step=0.01,
            description="launch overhead (µs)",
            readout_format=".3g",
        )
        self.bandwidth = widgets.slider(
            W.FloatSlider, value=round(bandwidth_tbps, 2), min=0.5, max=8, step=0.05, description="bandwidth (TB/s)"
        )
        self.readout = W.HTML()
        self.ns = [2**e for e in range(10, 29)]
        fig = go.Figure()
        for name, _ in self.METHODS:
            fig.add_scatter(x=self.ns, y=[0.0] * len(self.ns), mode="lines", name=f"model: {name}")
        # the slider's n: open rings joined by a dotted line, so a measured point under a ring still shows
        fig.add_scatter(
            x=[0],
            y=[0],
            mode="lines+markers",
            name="slider n",
            marker=dict(symbol="circle-open", size=14, color="black", line_width=2),
            line=dict(color="black", width=1, dash="dot"),
        )
        for method in sorted({r["method"] for r in self.measured}):
            rs = sorted((r for r in self.measured if r["method"] == method), key=lambda r: r["n"])
            fig.add_scatter(
                x=[r["n"] for r in rs],
                y=[r["ms"] for r in rs],
                mode="markers+lines",
                line_width=1,
                name=f"measured {method}",
            )
        self._apply(fig)  # the first state, layout included, goes into the figure before it becomes a widget
        self.live = widgets.LiveFigure(fig)
        for w in (self.log2_n, self.overhead, self.bandwidth):
            w.observe(lambda _: self.refresh(), names="value")
        self.widget = widgets.container(self.log2_n, self.overhead, self.bandwidth, self.readout, self.live.widget)

    def times(self, n: int) -> dict:
        """Model ms per method at n for the current sliders."""
        return {
            name: model_ms(n, self.dtype, fused, self.overhead.value, self.bandwidth.value)
            for name, fused in self.METHODS
        }

    def layout(self) -> dict:
        """The whole layout at the current sliders (axes, legend, margins and the title's readout): the first
        draw and every slider move set this one dict, so no draw differs from another but in the readout."""
        t = self.times(2**self.log2_n.value)
        u, f = t[self.METHODS[0][0]], t[self.METHODS[1][0]]
        readout = f"n = 2^{self.log2_n.value}: unfused {u * 1e3:.3g} µs, fused {f * 1e3:.3g} µs, "
        readout += f"fused is {u / f:.2f}x faster (model)"
        return dict(
            title=plots.title(self.title, f"{self.where}<br>{readout}" if self.where else readout),
            xaxis=dict(type="log", dtick=1, title="n (elements)"),
            yaxis=dict(type="log", dtick=1, title="time (ms)"),
            legend=LEGEND_BELOW,
            template="plotly_white",
            height=480,
            margin=dict(t=30),
        )

    def _apply(self, fig) -> None:
        n = 2**self.log2_n.value
        for i, (_, fused) in enumerate(self.METHODS):
            fig.data[i].y = [model_ms(m, self.dtype, fused, self.overhead.value, self.bandwidth.value) for m in self.ns]
        t = self.times(n)
        fig.data[len(self.METHODS)].x = [n, n]
        fig.data[len(self.METHODS)].y = list(t.values())
        fig.update_layout(self.layout())
        self.readout.value = (
            f"n = {n:,}: bytes unfused {bytes_moved(n, self.dtype, False):,}, fused "
            f"{bytes_moved(n, self.dtype, True):,}; launches 5 vs 1"
        )

    def refresh(self) -> None:
        self.live.update(self._apply)


#: The time figure's views (its dropdown): a title and the measured methods each shows, with its model lines.
TIME_VIEWS = (
    ("five launches against one", ("unfused", "eager", "fused")),
    ("the fused kernels", ("fused", "fused shared", "fused fast", "compile")),
)
_METHOD_LABELS = {
    "unfused": "5 Triton kernels",
    "eager": "torch eager (5 kernels)",
    "fused": "fused (1 Triton kernel)",
    "fused shared": "fused, shared range reduction",
    "fused fast": "fused, fast sin/cos",
    "compile": "torch.compile (1 kernel)",
}
#: Each measured method's marker and line, told apart where two lie on one another: an open ring around a small
#: filled mark, a wide line under a thin one (a later trace is drawn on top).
_METHOD_STYLE = {
    "unfused": dict(marker=dict(symbol="circle-open", size=12, line_width=2), line_width=4),
    "eager": dict(marker=dict(symbol="diamond", size=7), line_width=1.5),
    "fused": dict(marker=dict(symbol="circle", size=7)),
    "fused shared": dict(marker=dict(symbol="square-open", size=10, line_width=2), line_width=4),
    "fused fast": dict(marker=dict(symbol="diamond-open", size=13, line_width=2), line_width=1.5),
    "compile": dict(marker=dict(symbol="x", size=8)),
}
#: Two measured times "coincide" where they differ by less than this fraction: 3% is 0.013 decade, about one pixel
#: of the time figure's log axis (some 4 decades over 300 px), so one line covers the other there.
COINCIDE = 0.03
#: Two methods whose marks do not nest (``_nested``) are named from this fraction apart: 10% is about two pixels
#: of the fused view's steep lines in a 570 px column (the fused kernel and torch.compile from n = 2^20 to 2^26
#: on the H200), where neither mark shows beside the other.
NEAR = 0.10
#: A coincidence note's line, in characters (about 150 px at 11 px): on a phone (a 366 px figure, a plot about
#: 200 px wide) the note runs from 50 px left of its point into the right margin, and a longer line left the figure.
NOTE_CHARS = 30


def coincide(a: list[dict], b: list[dict], tol: float = COINCIDE) -> list[tuple[int, int]]:
    """The stretches of n over which two methods' sweep rows (``{"n", "ms"}``) coincide: ``(first n, last n)`` of
    each run of two or more consecutive shared sizes whose times differ by less than ``tol`` (a fraction of the
    larger), smallest n first (``plots.coincide``). Raises ValueError if ``tol`` is not in (0, 1)."""
    return plots.coincide({r["n"]: r["ms"] for r in a}, {r["n"]: r["ms"] for r in b}, tol)


def _nested(a: str, b: str) -> bool:
    """Whether two methods' marks (``_METHOD_STYLE``) nest: one an open symbol at least 3 px wider than the other,
    a ring around it, so both show where their points meet."""
    ma, mb = (_METHOD_STYLE.get(m, {}).get("marker", {}) for m in (a, b))
    big, small = (ma, mb) if ma.get("size", 6) >= mb.get("size", 6) else (mb, ma)
    return "open" in big.get("symbol", "") and big.get("size", 6) - small.get("size", 6) >= 3


def _coincide_notes(rows: dict, methods, last_n: int) -> list[dict]:
    """An arrow and a note at the first point of every stretch where two of ``methods`` coincide: within
    ``COINCIDE`` (one line covers the other), or within ``NEAR`` where their marks do not nest (``_nested``):
    the figure says so."""
    notes = []
    ms = [m for m in methods if rows.get(m)]
    for i, a in enumerate(ms):
        for b in ms[i + 1 :]:
            tol = COINCIDE if _nested(a, b) else NEAR
            for lo, hi in coincide(rows[a], rows[b], tol):
                span = "up" if hi == last_n else f"to 2^{hi.bit_length() - 1}"
                ms_lo = next(r["ms"] for r in rows[b] if r["n"] == lo)
                notes.append(
                    dict(
                        x=math.log10(lo),  # a log axis places annotations in decades
                        y=math.log10(ms_lo),
                        text=plots.wrap(
                            f"{_METHOD_LABELS.get(a, a)} and {_METHOD_LABELS.get(b, b)} coincide "
                            f"from n = 2^{lo.bit_length() - 1} {span} (within {tol:.0%})",
                            NOTE_CHARS,
                        ),
                        showarrow=True,
                        arrowhead=2,
                        ax=-50,
                        ay=-60,
                        xanchor="left",  # the note runs right from its arrow's tail
                        font_size=11,
                        align="left",
                        bgcolor="rgba(255,255,255,0.8)",
                    )
                )
    return notes


def time_figure(data: dict, where: str = ""):
    """sin² + cos² in fp32: measured time against n per method (``gpulab.bench.lesson04`` record ``data``:
    its ``sweep`` rows, ``launch`` costs in µs and ``copy_tbps``) beside the launch-overhead model
    (``fusion.model_ms``), in two views picked by a dropdown (``TIME_VIEWS``): five launches against one
    (5 Triton launches + 44n B, 5 torch launches + 44n B, 1 Triton launch + 8n B, and 1 launch at Triton's CPU
    launch cost + 8n B), and the fused kernels against the copy bound (8n B at ``copy_tbps``). Each trace
    has ``meta`` = the index of its view. Each measured method has its own marker (``_METHOD_STYLE``), and where
    two of a view coincide (``coincide``: 5 Triton kernels and torch eager from n = 2^22 on the H200) an arrow
    and a note in that view say so."""
    ns = sorted({r["n"] for r in data["sweep"]})
    launch, bw = data["launch"], data["copy_tbps"]
    rows = {
        m: sorted((r for r in data["sweep"] if r["method"] == m), key=lambda r: r["n"])
        for m in {r["method"] for r in data["sweep"]}
    }
    notes = [_coincide_notes(rows, methods, ns[-1]) for _, methods in TIME_VIEWS]
    fig = go.Figure()
    # two models of the same bytes meet once the bytes outweigh the launches: the first drawn is wider, under the
    # other, so both show there
    models = (
        (
            ("model: 5 Triton launches + 44n B", False, launch["triton_us"], 4.0),
            ("model: 5 torch launches + 44n B", False, launch["torch_us"], 1.5),
            ("model: 1 Triton launch + 8n B", True, launch["triton_us"], 4.0),
            ("model: 1 launch at Triton's CPU cost + 8n B", True, launch["triton_cpu_us"], 1.5),
        ),
        (("copy bound: 8n B at copy bandwidth", True, 0.0, 1.5),),
    )
    for v, (_, methods) in enumerate(TIME_VIEWS):
        for method in methods:
            rs = rows.get(method)
            if rs:
                fig.add_scatter(
                    x=[r["n"] for r in rs],
                    y=[r["ms"] for r in rs],
                    mode="markers+lines",
                    meta=v,
                    name=_METHOD_LABELS.get(method, method),
                    visible=v == 0,
                    **_METHOD_STYLE.get(method, {}),
                )
        for label, fused, us, width in models[v]:
            fig.add_scatter(
                x=ns,
                y=[model_ms(m, "fp32", fused, us, bw) for m in ns],
                mode="lines",
                meta=v,
                line=dict(dash="dash", width=width),
                name=label,
                visible=v == 0,
            )
    views = [
        dict(
            label=label,
            method="update",
            args=[{"visible": [tr.meta == v for tr in fig.data]}, {**_view_y_axis(fig, v), "annotations": notes[v]}],
        )
        for v, (label, _) in enumerate(TIME_VIEWS)
    ]
    fig.update_layout(
        title=plots.title("sin² + cos², fp32: time against n", where, gap=34),  # above the views' dropdown
        xaxis=dict(  # the sizes' range, fixed: plotly's autorange widens it to hold a note's box, on a phone by decades
            type="log",
            exponentformat="power",
            dtick=1,
            title="n (elements)",
            range=[math.log10(ns[0]) - 0.2, math.log10(ns[-1]) + 0.2],
        ),
        yaxis=dict(type="log", exponentformat="power", dtick=1, title="time (ms)"),
        updatemenus=[
            dict(
                buttons=views,
                direction="down",
                x=0,
                xanchor="left",
                y=1.0,
                yanchor="bottom",
                showactive=True,
                pad=dict(b=4),
            )
        ],
        annotations=notes[0],
        legend=LEGEND_BELOW,
        template="plotly_white",
        height=520,
        margin=dict(t=30),
    )
    return fig


def _view_y_axis(fig: go.Figure, view: int) -> dict:
    """The y axis of one view of ``time_figure`` (a relayout dict for its dropdown button): autorange, unless a
    model line reaches more than a decade below the view's lowest measured time (the copy bound at small n,
    decades under any launch, would squash the measurements into a strip); then a log10 range from 0.3
    decade under the measurements to 0.2 above everything, and the model line leaves the plot below it."""
    measured = [y for tr in fig.data if tr.meta == view and tr.mode == "markers+lines" for y in tr.y if y > 0]
    every = [y for tr in fig.data if tr.meta == view for y in tr.y if y > 0]
    if not measured or math.log10(min(every)) >= math.log10(min(measured)) - 1:
        return {"yaxis.autorange": True}
    return {"yaxis.range": [math.log10(min(measured)) - 0.3, math.log10(max(every)) + 0.2]}


def pressure_figure(rows: list[dict], where: str = ""):
    """The fused kernel against BLOCK (4 warps): registers per thread and spills (bars) and time (ms, right
    axis), from the ``pressure`` rows of a ``gpulab.bench.lesson04`` record (study "block")."""
    blk = [r for r in rows if r["study"] == "block"]
    x = [str(r["block"]) for r in blk]
    fig = go.Figure()
    fig.add_bar(x=x, y=[r["n_regs"] for r in blk], name="registers / thread")
    fig.add_bar(x=x, y=[r["n_spills"] for r in blk], name="n_spills (local memory)")
    fig.add_scatter(x=x, y=[r["ms"] for r in blk], name="time (ms)", yaxis="y2", mode="lines+markers")
    fig.update_layout(
        title=plots.title("fused kernel against BLOCK (4 warps), n = 2^28", where),
        xaxis_title="BLOCK",
        yaxis_title="registers / thread; n_spills (local memory)",
        yaxis2=dict(
            overlaying="y",
            side="right",
            title="time (ms)",
            rangemode="tozero",
            tickmode="auto",
            nticks=6,
            showgrid=False,
        ),  # its own round ticks
        legend=LEGEND_BELOW,
        template="plotly_white",
        height=440,
        margin=dict(t=30),
    )
    return fig
