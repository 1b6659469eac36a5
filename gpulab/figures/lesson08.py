"""Lesson 08's figures (FlashAttention): one row walked tile by tile (online softmax), and naive against flash
attention's memory and time at a length chosen by slider.

Models: ``gpulab.models.online_softmax``, ``gpulab.models.attention``. Figures hold plain lists.
"""

from __future__ import annotations

import math

import ipywidgets as W
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..core import dtypes
from ..models import attention
from ..models import online_softmax as osm
from . import plots, widgets


class RowWalkExplorer:
    """Lesson 08's online-softmax slider: choose the tile width; see the row's scores coloured by tile, each
    masked score (-inf, no bar) as a grey cross on the zero line and each skipped tile (all masked) shaded grey,
    and the running m, l and output u/l after each tile, with the exact softmax-weighted sum as a dashed line.
    ``.widget`` is the container, ``.live.fig`` the figure, ``.tile`` the slider, ``.steps`` the current walk."""

    def __init__(self, scores=None, values=None, tile: int = 4):
        if scores is None:
            scores, values = osm.default_row()
        self.scores, self.values = osm._as_row(scores, values)
        if self.values.shape[1] != 1:
            raise ValueError("the explorer shows scalar values: values must have shape (n,)")
        n = len(self.scores)
        p = osm.softmax_online(self.scores, n)
        self.exact = float(p @ self.values[:, 0])
        self.tile = widgets.slider(W.IntSlider, value=min(tile, n), min=1, max=n, step=1, description="tile width")
        fig = make_subplots(
            rows=2,
            cols=1,
            shared_xaxes=True,
            vertical_spacing=0.12,
            subplot_titles=("scores s_j (x: masked, -inf; shaded: a skipped tile)", "running state after each tile"),
        )
        plots.panel_titles(fig)
        finite = [float(s) if s > osm.NEG_INF else None for s in self.scores]
        fig.add_bar(x=list(range(n)), y=finite, name="score", marker_color=["#9e9e9e"] * n, row=1, col=1)
        for name, color in (
            ("m (running max)", "#d62728"),
            ("l (running sum)", "#2ca02c"),
            ("u / l (output so far)", "#1f77b4"),
        ):
            fig.add_scatter(
                x=[], y=[], mode="lines+markers", line_shape="hv", name=name, line=dict(color=color), row=2, col=1
            )
        fig.add_scatter(
            x=[-0.5, n - 0.5],
            y=[self.exact, self.exact],
            mode="lines",
            name="exact softmax · v",
            line=dict(color="#1f77b4", dash="dash"),
            row=2,
            col=1,
        )
        masked = [j for j, v in enumerate(finite) if v is None]
        if masked:  # last, so data[1:4] stay m, l, u/l; -inf has no bar: a cross on the zero line stands for it
            fig.add_scatter(
                x=masked,
                y=[0.0] * len(masked),
                mode="markers",
                name="masked score (-inf)",
                marker=dict(symbol="x-thin", size=10, line=dict(width=2, color="#757575")),
                row=1,
                col=1,
            )
        fig.update_layout(
            height=560,
            template="plotly_white",
            margin=dict(t=30, b=30),
            xaxis2=dict(title="key index j"),
            legend=plots.LEGEND_BELOW,
        )
        self._change()(fig)
        self.live = widgets.LiveFigure(fig)
        self.tile.observe(lambda _: self.live.update(self._change()), names="value")
        self.widget = widgets.container(self.tile, self.live.widget)

    def _change(self):
        t = int(self.tile.value)
        self.steps = osm.walk_row(self.scores, self.values, t)
        palette = ["#1f77b4", "#ff7f0e"]
        colors = []
        for i, st in enumerate(self.steps):
            colors += ["#9e9e9e" if st.skipped else palette[i % 2]] * (st.stop - st.start)
        live = [st for st in self.steps if not st.skipped]
        xs = [st.stop - 1 for st in live]
        out = self.steps[-1].state.output()[0]

        shaded = [
            dict(
                type="rect",
                xref="x",
                yref="y domain",
                x0=st.start - 0.5,
                x1=st.stop - 0.5,
                y0=0,
                y1=1,
                fillcolor="#9e9e9e",
                opacity=0.2,
                line_width=0,
                layer="below",
            )
            for st in self.steps
            if st.skipped
        ]

        def change(fig):
            fig.data[0].marker.color = colors
            fig.data[1].x, fig.data[1].y = xs, [st.state.m for st in live]
            fig.data[2].x, fig.data[2].y = xs, [st.state.l for st in live]
            fig.data[3].x, fig.data[3].y = xs, [float(st.state.output()[0]) for st in live]
            fig.layout.shapes = shaded
            skipped = sum(st.skipped for st in self.steps)
            fig.layout.title = plots.title(
                f"tile width {t}: {len(self.steps)} tiles ({skipped} skipped), output {out:.6f}; exact {self.exact:.6f}",
                gap=34,  # above the first panel's title
            )

        return change


def gib(b) -> float | None:
    return None if b is None else b / 2**30


class NaiveVsFlashExplorer:
    """Lesson 08's sweep slider: pick L = 2**k; see the extra memory of naive and flash attention (the model,
    and the measurement where ``data`` has one) and their forward times (measured or recorded only), for the
    suite's sweep shape. ``data``: the ``sweep`` record of ``gpulab.bench.lesson08.run`` (None: model only); at a
    length whose rows are marked ``recorded`` (``lesson08.sweep_shown``) the title says ``recorded_where``.
    ``.widget`` is the container, ``.live.fig`` the figure, ``.k`` the slider."""

    METHODS = ("naive", "flash")
    MODEL_K = range(10, 17)  # the slider's k without a recording: the suite's lengths 2**10 .. 2**16

    def __init__(
        self,
        data: dict | None,
        where: str = "",
        log2_l: int = 12,
        B: int = 1,
        H: int = 16,
        d: int = 128,
        itemsize: int = 2,
    ):
        self.data, self.where = data, where
        if data:
            B, H, d, itemsize = data["B"], data["H"], data["d"], dtypes.itemsize(data["dtype"])
        self.B, self.H, self.d, self.itemsize = B, H, d, itemsize
        ks = sorted({r["L"].bit_length() - 1 for r in data["rows"]}) if data else list(self.MODEL_K)
        lo, hi = ks[0], ks[-1]  # the slider spans the measured lengths: no end without a measurement
        self.k = widgets.slider(
            W.IntSlider, value=min(max(log2_l, lo), hi), min=lo, max=hi, step=1, description="L = 2**k, k"
        )
        titles = (
            ("extra memory above q, k, v (GiB)", "forward time (ms)")
            if data
            else ("extra memory above q, k, v (GiB), model only",)
        )
        # one panel above the other: side by side on a phone (366 px) two bars' labels ran together in panels
        # about 120 px wide, and naive's two-line name lay on the time panel's axis
        fig = plots.panel_titles(make_subplots(rows=len(titles), cols=1, subplot_titles=titles, vertical_spacing=0.2))
        fig.add_bar(x=list(self.METHODS), y=[0.0, 0.0], name="model (by hand)", marker_color="#9e9e9e", row=1, col=1)
        if data:
            fig.add_bar(x=list(self.METHODS), y=[0.0, 0.0], name="measured peak", marker_color="#1f77b4", row=1, col=1)
            fig.add_bar(x=list(self.METHODS), y=[0.0, 0.0], name="measured time", marker_color="#d62728", row=2, col=1)
        fig.update_layout(
            height=680 if data else 460,
            template="plotly_white",
            barmode="group",
            bargap=0.15,
            margin=dict(t=30, b=30, l=60, r=20),
            legend=plots.LEGEND_BELOW,
        )
        # naive's L^2 and flash's L differ by orders of magnitude: a log axis, labelled 1-2-5 so that a range of
        # under two decades (L = 1024) still reads
        fig.update_yaxes(type="log", tickvals=plots.LOG_TICKS, row=1, col=1)
        # the values in the labels, the units in the panel titles: two labels fit side by side on narrow bars
        fig.update_traces(textposition="outside", cliponaxis=False, textfont_size=11, constraintext="none")
        self._change()(fig)
        self.live = widgets.LiveFigure(fig)
        self.k.observe(lambda _: self.live.update(self._change()), names="value")
        self.widget = widgets.container(self.k, self.live.widget)

    def rows_at(self, L: int) -> dict:
        """The measured rows of ``data`` at length L, by method ({} if none)."""
        if not self.data:
            return {}
        return {r["method"]: r for r in self.data["rows"] if r["L"] == L}

    def _change(self):
        L = 2**self.k.value
        model = [
            gib(attention.memory_model(self.B, self.H, L, self.d, self.itemsize, m)["peak_bytes"]) for m in self.METHODS
        ]
        rows = self.rows_at(L)
        peak = [gib(rows[m]["peak_bytes"]) if m in rows else None for m in self.METHODS]
        ms = [rows[m]["ms"] if m in rows else None for m in self.METHODS]
        ooms = [m for m in self.METHODS if rows.get(m, {}).get("oom")]
        where = (
            self.data.get("recorded_where", self.where) if any(r.get("recorded") for r in rows.values()) else self.where
        )
        if ooms:
            note = f"{', '.join(ooms)}: out of memory at this L (caught, not a crash)<br>{where}"
        elif rows:
            note = where
        else:
            note = "no recording yet: the model only"

        def label(values, unit):  # the unit is in the panel's title
            return [f"{v:.3g}" if v is not None else "" for v in values]

        names = [f"{m}<br>(out of memory)" if m in ooms else m for m in self.METHODS]  # no bare empty slot

        def change(fig):
            for tr in fig.data:
                tr.x = names
            fig.data[0].y, fig.data[0].text = model, label(model, "GiB")
            if self.data:
                fig.data[1].y, fig.data[1].text = peak, label(peak, "GiB")
                fig.data[2].y, fig.data[2].text = ms, label(ms, "ms")
            fig.layout.title = plots.title(
                f"L = 2**{self.k.value} = {L:,}; B={self.B}, H={self.H}, d={self.d}, {self.itemsize}-byte elements",
                note,
                gap=34,  # above the panels' titles
            )

        return change


def naive_flash_figure(sweep: dict | None, where: str = "", lengths=tuple(2**e for e in range(10, 17))):
    """Naive against flash attention, forward: extra peak memory (GiB, the model dotted; measured points;
    out-of-memory crosses at the model's value) and time (ms) against L, both log axes. ``sweep``: the
    ``sweep`` record of ``gpulab.bench.lesson08`` (None: the memory model alone, one panel, for B=1, H=16,
    d=128, bf16); rows marked ``recorded`` (``lesson08.sweep_shown``: lengths taken from the recording) are open
    markers and dashed lines, labelled with the sweep's ``recorded_where``."""
    sw = sweep or {"B": 1, "H": 16, "d": 128}
    lengths = list(lengths)
    titles = ("extra peak memory, GiB", "forward time, ms")[: 2 if sweep else 1]  # no time without a measurement
    fig = plots.panel_titles(make_subplots(rows=1, cols=len(titles), subplot_titles=titles, horizontal_spacing=0.14))
    for i, m in enumerate(("naive", "flash")):
        c = plots.COLORS[i]
        fig.add_scatter(
            x=lengths,
            y=[attention.memory_model(sw["B"], sw["H"], L, sw["d"], 2, m)["peak_bytes"] / 2**30 for L in lengths],
            mode="lines",
            name=f"{m}, model",
            line=dict(color=c, dash="dot"),
            row=1,
            col=1,
        )
        if sweep:
            rows = [r for r in sw["rows"] if r["method"] == m]
            for recorded in (False, True):  # measured with the sweep; added from the recording (open markers)
                ok = [r for r in rows if not r["oom"] and bool(r.get("recorded")) == recorded]
                if recorded and not ok:
                    continue
                how = "recorded" if recorded else "measured"
                marker = dict(color=c, symbol="circle-open" if recorded else "circle", size=9 if recorded else 7)
                fig.add_scatter(
                    x=[r["L"] for r in ok],
                    y=[r["peak_bytes"] / 2**30 for r in ok],
                    mode="markers",
                    name=f"{m}, {how}",
                    marker=marker,
                    row=1,
                    col=1,
                )
                fig.add_scatter(
                    x=[r["L"] for r in ok],
                    y=[r["ms"] for r in ok],
                    mode="lines+markers",
                    name=f"{m}, time" + (", recorded" if recorded else ""),
                    line=dict(color=c, dash="dash" if recorded else "solid"),
                    marker=marker,
                    row=1,
                    col=2,
                )
            oom = [r for r in rows if r["oom"]]
            if oom:
                fig.add_scatter(
                    x=[r["L"] for r in oom],
                    y=[r["model_peak_bytes"] / 2**30 for r in oom],
                    mode="markers",
                    name=f"{m}: out of memory",
                    marker=dict(color=c, symbol="x", size=12),
                    row=1,
                    col=1,
                )
    # one labelled tick a length, a decade a tick up the side: plotly's minor labels ("2 3 4 5") read as values
    # every other length labelled: seven labels run together in a phone's half-figure panel
    shown = lengths[:: 2 if len(lengths) > 4 else 1]
    fig.update_xaxes(type="log", title="L (tokens)", tickvals=shown, ticktext=[_length(L) for L in shown])
    fig.update_yaxes(type="log", dtick=1)
    note = where if sweep else "model only: no measurement recorded yet"
    if sweep and sweep.get("recorded_where"):
        note += f"<br>open markers: {sweep['recorded_where']}"
    dtype = sw.get("dtype", "bf16")
    fig.update_layout(
        title=plots.title(f"naive against flash, B={sw['B']}, H={sw['H']}, d={sw['d']}, {dtype}", note, gap=34),
        height=500,
        template="plotly_white",
        margin=dict(t=30, b=30, l=55, r=20),
        legend=plots.LEGEND_BELOW,
    )
    return fig


def headline_figure(headline: list[dict], where: str = ""):
    """Forward and backward TFLOP/s of gpulab's Triton kernel, SDPA flash (FlashAttention-2) and SDPA cuDNN for
    each setting of the ``headline`` rows of a ``gpulab.bench.lesson08`` record: horizontal bars, forward in the
    left panel and backward in the right, one row a setting, named once at the left ("d=64, L=1k, causal"); a
    backend that did not run is left empty. Names read across, so none turns or runs into the next at any
    width."""
    labels = [f"d={r['d']}, L={_length(r['L'])}, {'causal' if r['causal'] else 'full'}" for r in headline]
    fig = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        horizontal_spacing=0.06,
        subplot_titles=("forward (TFLOP/s)", "backward (TFLOP/s)"),
    )
    plots.panel_titles(fig)
    for j, pass_ in enumerate(("fwd", "bwd")):
        for i, (name, label) in enumerate(
            (("ours", "gpulab Triton"), ("flash", "SDPA flash (FlashAttention-2)"), ("cudnn", "SDPA cuDNN"))
        ):
            fig.add_bar(
                y=labels,
                x=[r.get(name, {}).get(f"{pass_}_tflops") for r in headline],
                orientation="h",
                name=label,
                marker_color=plots.COLORS[i],
                showlegend=j == 0,
                row=1,
                col=j + 1,
            )
    fig.update_yaxes(autorange="reversed", tickfont_size=11)  # the first setting at the top
    fig.update_layout(
        barmode="group",
        bargap=0.25,
        height=120 + 34 * len(headline) + 110,  # three bars a row, 10 px each, and room for titles and legend
        template="plotly_white",
        margin=dict(t=30, b=30, r=20),
        legend=plots.LEGEND_BELOW,
        title=plots.title("attention, bf16, B*L = 16384, H*d = 2048", where, gap=34),
    )
    return fig


def _length(L: int) -> str:
    """A sequence length as a reader says it: 16384 -> "16k", 1000 -> "1000"."""
    return f"{L // 1024}k" if L >= 1024 and L % 1024 == 0 else str(L)


def _short_length(label: str) -> str:
    """A point's length label in thousands of 1024, as the headline names them: "L=16384" -> "L=16k" (on a
    phone's 366 px figure "L=16384" beside one point ran into the label of the next group's point)."""
    L = int(label.split("=", 1)[1])
    return f"L={L // 1024}k" if L % 1024 == 0 else label


def roofline_figure(points, profile: dict, where: str = "", l2_tbps: float | None = None):
    """Attention's forward kernels (``points``: ``roofline.KernelPoint``s, e.g. from
    ``gpulab.bench.lesson08.roofline_points``) on the bf16 roofline measured in ``profile``: log axes whose ranges
    come from the points and the ridges, one series per kernel, boundary and head dimension, the shortest and
    longest L labelled, the longest alone where the two sit close (every point on hover). ``l2_tbps`` (TB/s,
    lesson 00's L2 plateau): a second memory roof, dashed, for the points whose bytes are counted at L2
    ("flash L2 ...")."""
    half = "bf16" if profile["matmul_tflops"].get("bf16") else "fp16"  # no bf16 tensor cores (a T4): fp16
    peak, bw = profile["matmul_tflops"][half], profile["copy_tbps"]
    ridge = peak / bw  # FLOP/byte where the two roofs meet
    ridges = [ridge] + ([peak / l2_tbps] if l2_tbps else [])
    xs, ys = [p.intensity for p in points] + ridges, [p.tflops for p in points] + [peak]
    if not points:  # the roofs alone: a decade each side of the ridge
        xs, ys = [ridge / 10, ridge * 10], [peak / 10, peak]
    x_lo, x_hi = min(xs) / 3, max(xs) * 1.5  # room left of the lowest points for their labels
    y_lo, y_hi = min(ys) / 1.5, max(ys) * 1.3
    x0 = max(x_lo, y_lo / bw)
    fig = go.Figure()
    fig.add_scatter(
        x=[x0, ridge, x_hi],
        y=[bw * x0, peak, peak],
        mode="lines",
        line=dict(color="#555"),
        name=f"measured {half} roof: {peak:.0f} TFLOP/s, HBM {bw:.2f} TB/s<br>(ridge {ridge:.0f} FLOP/B)",
    )
    if l2_tbps:
        x2 = max(x_lo, y_lo / l2_tbps)
        fig.add_scatter(
            x=[x2, peak / l2_tbps],
            y=[l2_tbps * x2, peak],
            mode="lines",
            line=dict(color="#555", dash="dash"),
            name=f"L2 roof: {l2_tbps:.2f} TB/s, lesson 00 (ridge {peak / l2_tbps:.0f} FLOP/B)",
        )
    groups: dict[str, list] = {}
    for p in points:
        groups.setdefault(p.name.rsplit(" ", 1)[0], []).append(p)  # "flash fwd d=64 L=1024" -> "flash fwd d=64"
    for j, (g, ps) in enumerate(groups.items()):
        ps = sorted(ps, key=lambda p: int(p.name.rsplit("=", 1)[1]))
        spread = ps[-1].intensity / ps[0].intensity if len(ps) > 1 else 1.0
        ends = (0, len(ps) - 1) if not 1 / 1.5 < spread < 1.5 else (len(ps) - 1,)  # close together: one label
        text = [_short_length(p.name.rsplit(" ", 1)[1]) if i in ends else "" for i, p in enumerate(ps)]
        fig.add_scatter(
            x=[p.intensity for p in ps],
            y=[p.tflops for p in ps],
            mode="markers+text",
            name=g,
            text=text,
            # the first left of its point, the others right, but left in the right quarter of the axis (room there);
            # a close group's one label left too where the group lies above the HBM roof's slope (nothing to its
            # left there): to the right, L2's d=64 label ran under d=128's points on a phone (366 px)
            textposition=[
                "middle left"
                if i == 0
                or (len(ends) == 1 and p.tflops > bw * p.intensity)
                or math.log10(x_hi / p.intensity) < 0.25 * math.log10(x_hi / x_lo)
                else "middle right"
                for i, p in enumerate(ps)
            ],
            textfont_size=10,
            customdata=[p.name for p in ps],
            marker=dict(
                color=plots.COLORS[j % len(plots.COLORS)], size=9, symbol="x" if g.startswith("naive") else "circle"
            ),
            hovertemplate="%{customdata}<br>I=%{x:.3g} FLOP/B<br>%{y:.3g} TFLOP/s<extra></extra>",
        )
    fig.update_layout(
        title=plots.title("attention on the roofline", where),
        height=560,
        template="plotly_white",
        margin=dict(t=30, b=30),
        showlegend=True,
        xaxis=dict(
            type="log",
            title="arithmetic intensity (FLOP/byte, counted by hand)",
            range=[math.log10(x_lo), math.log10(x_hi)],
        ),
        yaxis=dict(
            type="log",
            title="rate (TFLOP/s)",
            range=[math.log10(y_lo), math.log10(y_hi)],
            tickvals=[v for v in (10, 20, 50, 100, 200, 300, 500, 700, 1000, 2000) if y_lo <= v <= y_hi],
        ),
        legend={**plots.LEGEND_BELOW, "font_size": 11},
    )
    return fig
