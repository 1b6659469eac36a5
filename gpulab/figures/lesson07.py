"""Lesson 07's figures (tiling and waves): tile size against intensity and footprint, and tiles in waves.

Models: ``gpulab.models.tiling``, ``gpulab.models.waves``, the teaching kernels' counts (``kernels.matmul_steps``). Figures hold
plain lists.
"""

from __future__ import annotations

import math

import ipywidgets as W
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..core import dtypes, hardware
from ..kernels import matmul_steps
from ..kernels.matmul import counts
from ..kernels.matmul_steps import BUILD_DTYPE
from ..models import waves
from ..models.tiling import fits, footprint_bytes, input_loads, shared_memory_bytes, tile_intensity
from ..models.waves import SEED_SMS, SEED_TILE, WavePlan, sweep, wave_plan
from . import plots, widgets
from .plots import roof_xy


class TileExplorer:
    """Tile size ``T`` against the footprint ``2 T^2 s`` (times stages) with one SM's shared memory as a line
    (left), and against the intensity ``T / s`` (right); the slider's T is the black dot on each curve. Sliders:
    T (1 to 512, powers of two), pipeline stages; dropdowns: dtype, GPU. ``.widget`` to display."""

    TS = tuple(2**e for e in range(0, 10))  # the slider's tile sides

    def __init__(self, T: int = 32, dtype: str = "fp32", gpu: str = "H200", stages: int = 1, n: int = 4096):
        if T not in self.TS:
            raise ValueError(f"T must be one of {list(self.TS)}, got {T!r}")
        self.n = n
        self.T = widgets.slider(W.SelectionSlider, options=list(self.TS), value=T, description="T")
        self.stages = widgets.slider(W.IntSlider, value=stages, min=1, max=6, description="pipeline stages")
        self.dtype = W.Dropdown(options=["fp32", "bf16", "fp16", "fp8"], value=dtype, description="dtype")
        self.gpu = W.Dropdown(
            options=[g for g, s in hardware.GPUS.items() if s.smem_per_sm_kib], value=gpu, description="GPU"
        )
        self.readout = W.HTML()
        self.ts = list(self.TS)
        fig = make_subplots(
            rows=1,
            cols=2,
            horizontal_spacing=0.12,
            subplot_titles=("footprint 2T²s x stages (KiB)", "intensity T/s (FLOP/byte)"),
        )
        curves = (
            ("footprint of the input tiles", dict(color="#1f77b4"), 1),
            ("shared memory per SM", dict(dash="dash", color="gray"), 1),
            ("intensity T/s", dict(color="#d62728"), 2),
        )
        for name, line, col in curves:  # lines: the slider's dot is the one marker on them
            fig.add_scatter(x=self.ts, y=[1.0] * len(self.ts), mode="lines", name=name, line=line, row=1, col=col)
        for col in (1, 2):
            fig.add_scatter(
                x=[1],
                y=[1.0],
                mode="markers",
                name="slider T",
                showlegend=col == 1,
                marker=dict(size=14, color="black"),
                row=1,
                col=col,
            )
        # every T ticked, every other one labelled: ten labels do not fit a half-width panel unrotated
        ticks = dict(
            type="log",
            tickvals=self.ts,
            ticktext=[str(t) if i % 2 == 0 else "" for i, t in enumerate(self.ts)],
            tickangle=0,
            title_text="T (square tile side)",
        )
        fig.update_xaxes(**ticks, row=1, col=1)
        fig.update_xaxes(**ticks, row=1, col=2)
        # no y titles: each panel's title names its unit, and on a phone (366 px) the right panel's title lay on the
        # left panel
        fig.update_yaxes(type="log", dtick=1)
        plots.panel_titles(fig)
        fig.update_layout(template="plotly_white", height=460, margin=dict(t=30, l=60, r=20), legend=plots.LEGEND_BELOW)
        self._apply(fig)
        self.live = widgets.LiveFigure(fig)
        for w in (self.T, self.stages, self.dtype, self.gpu):
            w.observe(lambda _: self.refresh(), names="value")
        self.widget = widgets.container(self.T, self.stages, self.dtype, self.gpu, self.readout, self.live.widget)

    def _apply(self, fig) -> None:
        T, d, st, gpu = self.T.value, self.dtype.value, self.stages.value, self.gpu.value
        smem_kib = shared_memory_bytes(gpu) / 1024
        fig.data[0].y = [footprint_bytes(t, d, stages=st) / 1024 for t in self.ts]
        fig.data[1].y = [smem_kib] * len(self.ts)
        fig.data[2].y = [tile_intensity(t, d) for t in self.ts]
        fp = footprint_bytes(T, d, stages=st)
        fig.data[3].x, fig.data[3].y = [T], [fp / 1024]
        fig.data[4].x, fig.data[4].y = [T], [tile_intensity(T, d)]
        verdict = "fits" if fits(fp, gpu) else "does NOT fit"
        size = f"{fp / 2**20:.3g} MiB" if fp >= 2**20 else f"{fp / 1024:.3g} KiB"  # not "2.05e+03 KiB"
        fig.layout.title = plots.title(  # the verdict starts its own line: wrapped, "does NOT" ended a line
            f"T = {T}, {d}, {st} stage(s): input tiles {size},<br>{verdict} in {smem_kib:.0f} KiB "
            f"of shared memory on {gpu}",
            gap=34,  # above the panels' titles
        )
        n = self.n
        self.readout.value = (
            f"intensity T/s = {tile_intensity(T, d):.3g} FLOP/B; loads of a {n}^3 product: "
            f"{input_loads(n, tile=T):.3e} tiled against {input_loads(n):.3e} with no reuse "
            f"({input_loads(n) / input_loads(n, tile=T):.0f}x fewer)"
        )

    def refresh(self) -> None:
        self.live.update(self._apply)


class WaveExplorer:
    """Wave efficiency against N, with the slider's N marked, and the busy SMs of each of its waves.

    Sliders: N (the square output's side; moves the marker, the bars and the title), tile rows and columns
    (log2), SMs. ``.widget`` is the container to display; ``.plan`` is the current ``WavePlan``.
    """

    MAX_BARS = 24  # more waves than this: the full ones share one bar

    def __init__(self, n: int = 1793, tile=SEED_TILE, sms: int = SEED_SMS, n_range=(1024, 4352), title: str = ""):
        self.title = title
        self.n = widgets.slider(W.IntSlider, value=n, min=n_range[0], max=n_range[1], step=1, description="N")
        self.tile_m = widgets.slider(
            W.IntSlider, value=tile[0].bit_length() - 1, min=4, max=9, description="log2 tile rows"
        )
        self.tile_n = widgets.slider(
            W.IntSlider, value=tile[1].bit_length() - 1, min=4, max=9, description="log2 tile columns"
        )
        self.sms = widgets.slider(W.IntSlider, value=sms, min=1, max=200, description="SMs")
        self.readout = W.HTML()
        self.ns = list(range(n_range[0], n_range[1] + 1, 1))
        # one panel above the other: side by side on a phone (366 px) their titles ran into each other
        fig = make_subplots(
            rows=2,
            cols=1,
            row_heights=[0.6, 0.4],
            vertical_spacing=0.2,
            subplot_titles=("model efficiency against N", "busy SMs in each wave"),
        )
        fig.add_scatter(x=self.ns, y=[0.0] * len(self.ns), mode="lines", name="wave efficiency", row=1, col=1)
        fig.add_scatter(
            x=self.ns,
            y=[0.0] * len(self.ns),
            mode="lines",
            name="tile x wave efficiency",
            line=dict(dash="dot"),
            row=1,
            col=1,
        )
        fig.add_scatter(
            x=[0], y=[0], mode="markers", name="slider N", marker=dict(size=12, color="black"), row=1, col=1
        )
        fig.add_bar(x=[1], y=[0], name="busy SMs", marker_color="#1f77b4", row=2, col=1)
        fig.add_bar(x=[1], y=[0], name="idle SMs", marker_color="#dddddd", row=2, col=1)
        plots.panel_titles(fig)
        fig.update_layout(
            barmode="stack", template="plotly_white", height=640, margin=dict(t=30), legend=plots.LEGEND_BELOW
        )
        fig.update_xaxes(title_text="N (output is N x N)", row=1, col=1)
        fig.update_yaxes(title_text="efficiency", row=1, col=1)
        fig.update_xaxes(title_text="wave", type="category", row=2, col=1)  # the panel's title names the unit: SMs
        self._apply(fig)  # the first state goes into the figure before it becomes a widget
        self.live = widgets.LiveFigure(fig)
        for w in (self.n, self.tile_m, self.tile_n, self.sms):
            w.observe(lambda _: self.refresh(), names="value")
        self.widget = widgets.container(self.n, self.tile_m, self.tile_n, self.sms, self.readout, self.live.widget)

    @property
    def tile(self) -> tuple[int, int]:
        return 2**self.tile_m.value, 2**self.tile_n.value

    @property
    def plan(self) -> WavePlan:
        return wave_plan(self.n.value, self.n.value, self.tile, sms=self.sms.value)

    def _apply(self, fig) -> None:
        p, tile, sms = self.plan, self.tile, self.sms.value
        wave_eff, both = sweep(self.ns, tile, sms=sms, what="wave_efficiency"), sweep(self.ns, tile, sms=sms)
        fig.data[0].y, fig.data[1].y = wave_eff, both
        low, high = min(min(wave_eff), min(both)), max(wave_eff)
        fig.update_yaxes(
            range=[max(0.0, math.floor((low - 0.05) * 10) / 10), min(1.02, high + 0.05)], row=1, col=1
        )  # the band the data fills, within [0, 1]
        fig.data[2].x, fig.data[2].y = [p.M], [p.wave_efficiency]
        busy = p.busy_per_wave()
        if p.waves <= self.MAX_BARS:  # one bar per wave
            waves = [str(w) for w in range(1, p.waves + 1)]
        else:  # too many to draw one by one: every full wave looks alike, so one bar stands for them all
            waves, busy = [f"1-{p.waves - 1}<br>(each)", str(p.waves)], [busy[0], busy[-1]]
        fig.data[3].x, fig.data[3].y = waves, busy
        fig.data[4].x, fig.data[4].y = waves, [p.slots - b for b in busy]
        fig.layout.title = plots.title(
            self.title,
            f"N = {p.M}, {tile[0]} x {tile[1]} tiles: {p.tiles_m} x {p.tiles_n} = {p.tiles} tiles on {sms} SMs, "
            f"{p.waves} wave(s), last {p.last_wave_tiles} busy",
            gap=34,  # above the panels' titles
        )
        self.readout.value = (
            f"wave efficiency {p.wave_efficiency:.1%}, tile efficiency {p.tile_efficiency:.1%}, "
            f"both {p.efficiency:.1%}; last-wave occupancy {p.last_wave_occupancy:.1%}"
        )

    def refresh(self) -> None:
        self.live.update(self._apply)


def tiles_figure(data: dict, where: str = ""):
    """The tile study of a ``gpulab.bench.lesson07`` record: measured TFLOP/s against the square tile side T per
    dtype (left axis), the model intensity T/s (FLOP/B, right axis, dashed), one note per tile side too big to
    run, and the no-reuse kernel (no tile) as a dotted level across the plot: the x axis spans the tiles run."""
    fig = go.Figure()
    skipped: dict = {}
    half = next((r["dtype"] for r in data["tiles"] if r["dtype"] != "fp32"), "bf16")  # fp16 on a T4's plan
    for d, color in (("fp32", "#1f77b4"), (half, "#d62728")):
        rows = [r for r in data["tiles"] if r["dtype"] == d]
        ran = [r for r in rows if "tflops" in r]
        fig.add_scatter(
            x=[r["T"] for r in ran],
            y=[r["tflops"] for r in ran],
            mode="markers+lines",
            name=f"{d} measured (TFLOP/s)",
            marker=dict(color=color, size=9),
        )
        fig.add_scatter(
            x=[r["T"] for r in rows],
            y=[r["intensity"] for r in rows],
            mode="lines",
            yaxis="y2",
            name=f"{d} model intensity T/s (FLOP/B)",
            line=dict(color=color, dash="dash"),
        )
        for r in rows:
            if "tflops" not in r:
                skipped.setdefault(r["T"], []).append(f"{d} {r['footprint_bytes'] // 1024} KiB")
    for T, what in skipped.items():  # on a log axis plotly places annotations in log10 units
        fig.add_annotation(
            x=math.log10(T),
            y=0.03,
            yref="paper",
            xanchor="right",
            yanchor="bottom",
            showarrow=False,
            align="right",
            text=f"T={T}: not run,<br>2T²s too big:<br>" + "<br>".join(what),
            font=dict(size=12),
            bgcolor="rgba(255,255,255,0.8)",
        )
    ts = sorted({r["T"] for r in data["tiles"]})
    nr = data["noreuse"]
    fig.add_scatter(
        x=[ts[0], ts[-1]],
        y=[nr["tflops"]] * 2,
        mode="lines",
        line=dict(color="black", dash="dot"),
        name=f"no reuse (no tile), fp32 {nr['n']}³ (TFLOP/s)",
    )
    n = data["tiles"][0]["n"]
    pad = 0.08  # decades of room beyond the first and last tile side
    fig.update_layout(
        title=plots.title(f"tiled matmul against tile size T, {n}³", where),
        template="plotly_white",
        height=500,
        margin=dict(t=30),
        legend=plots.LEGEND_BELOW,
        xaxis=dict(
            type="log",
            title="T (tile side)",
            tickvals=ts,
            range=[math.log10(ts[0]) - pad, math.log10(ts[-1]) + pad],
        ),
        yaxis=dict(type="log", dtick=1, title="TFLOP/s"),
        yaxis2=dict(type="log", dtick=1, overlaying="y", side="right", title="FLOP/byte", showgrid=False),
    )
    return fig


DODGE = 0.12  # decades between the points of one intensity on the build's roofline
#: The build's marker symbols as characters: a step's bar is named with the mark it has on the roofline.
GLYPHS = {"circle": "●", "square": "■", "diamond": "◆", "triangle-up": "▲", "star": "★", "x": "✖"}
#: px: the build's roofs, the measured (drawn first, under) wider than the L2 and datasheet roofs over it
ROOF_WIDTHS = (4, 2, 2)


def _side_by_side(xs: list[float]) -> list[float]:
    """Positions on a log axis for ``xs`` (> 0): equal values spread ``DODGE`` decades apart around their value,
    in order of appearance; the rest unchanged."""
    ties = {x: [i for i, y in enumerate(xs) if y == x] for x in xs}
    return [x * 10 ** (DODGE * (ties[x].index(i) - (len(ties[x]) - 1) / 2)) for i, x in enumerate(xs)]


def build_figure(data: dict | None, profile: dict | None = None, where: str = "", l2_tbps: float | None = None):
    """The lesson's build on the roofline: each step of a ``gpulab.bench.lesson07`` record's ``"build"`` at its
    model intensity (the record's ``intensity``: 2 N^3 FLOPs over the requested input bytes,
    ``matmul_steps.step_counts``; the fast path and torch at the least bytes, A and B read and C written once, at
    the itemsize of the record's dtype), measured TFLOP/s. Roofs: the measured tensor-core peak and
    copy bandwidth of ``profile`` (the device profile: the peak of the build's dtype, fp16 without a record), and the
    H200 datasheet's fp16 dashed; with ``l2_tbps`` (TB/s, lesson 00's L2 plateau) the L2 roof too, dotted. A
    step's bound is the roof at its intensity: the L2 roof for the steps (the bytes they request are re-reads
    that L2 serves: lesson 07's counters), the copy roof for the fast path and torch (their least bytes come
    from HBM). Without a build record the steps sit at their model bounds and the title says
    "no recording yet"; with one, the measured steps are drawn and the roofs give their bounds. Steps of one
    model intensity (tiled, grouped and pipelined; the fast path and torch) are drawn side by side, ``DODGE``
    decades apart, so that equal rates do not hide each other; hovering shows the exact intensity. The roofline
    and the bars are drawn one above the other (side by side, each was too narrow in a notebook column), and the
    measured roof is drawn under the others and wider (``ROOF_WIDTHS``): where the L2 roof takes its peak, or the
    datasheet's slope lies on its own, both show."""
    spec = hardware.get("H200")
    roofs = [("datasheet H200 fp16", spec.peak_tflops["fp16"], spec.hbm_tbps, "dash")]
    rows = (data or {}).get("build")
    if profile:
        # the roof of the build's own dtype where the profile measured it; else bf16, else fp16 (no bf16 cores)
        ran = rows[0]["dtype"] if rows else "fp16"
        half = next(d for d in (ran, "bf16", "fp16") if profile["matmul_tflops"].get(d))
        roofs.insert(
            0,
            (
                f"measured ({profile['gpu']}): {half} {profile['matmul_tflops'][half]:.0f} TFLOP/s, "
                f"{profile['copy_tbps']:.2f} TB/s",
                profile["matmul_tflops"][half],
                profile["copy_tbps"],
                "solid",
            ),
        )
    if l2_tbps:
        roofs.insert(1, (f"L2 (lesson 00), {l2_tbps:.2f} TB/s", roofs[0][1], l2_tbps, "dot"))
    n, s = (rows[0]["n"], dtypes.itemsize(rows[0]["dtype"])) if rows else (4096, dtypes.itemsize(BUILD_DTYPE))
    steps = list(matmul_steps.STEPS) + ["fast path", "torch"]
    intensity = {st: (lambda f, b: f / b)(*matmul_steps.step_counts(st, n, n, n, s)) for st in matmul_steps.STEPS}
    least = counts(n, n, n, s)  # the fast path and torch: A and B read, C written, once
    intensity.update({"fast path": least[0] / least[1], "torch": least[0] / least[1]})
    intensity.update({r["step"]: r["intensity"] for r in rows or () if "intensity" in r})  # the record's own
    lo, hi = min(intensity.values()) / 3, max(intensity.values()) * 3
    fig = make_subplots(
        rows=2,
        cols=1,
        row_heights=[0.6, 0.4],
        vertical_spacing=0.16,
        subplot_titles=(
            "on the roofline (equal intensities side by side)",
            "TFLOP/s per step" if rows else "model bound per step",
        ),
    )
    widths = ROOF_WIDTHS if profile else ROOF_WIDTHS[1:]  # without a profile the datasheet's roof is alone
    for (label, peak, bw, dash), color, width in zip(roofs, ("#444444", "#666666", "#999999"), widths):
        x, y = roof_xy(peak, bw, log_range=(math.log10(lo), math.log10(hi)))
        fig.add_scatter(
            x=x.tolist(),
            y=y.tolist(),
            mode="lines",
            name=label,
            line=dict(color=color, dash=dash, width=width),
            row=1,
            col=1,
        )
    peak, hbm = roofs[0][1], roofs[0][2]
    bw_of = {st: (l2_tbps or hbm) if st in matmul_steps.STEPS else hbm for st in steps}  # requested bytes: from L2
    bounds = [min(peak, bw_of[st] * intensity[st]) for st in steps]
    colors = dict(zip(steps, ("#7f7f7f", "#1f77b4", "#2ca02c", "#ff7f0e", "#d62728", "#9467bd")))
    symbols = dict(zip(steps, ("circle", "square", "diamond", "triangle-up", "star", "x")))
    hover = "%{customdata:.4g} FLOP/B, %{y:.3g} TFLOP/s"
    if not rows:
        fig.add_scatter(
            x=_side_by_side([intensity[st] for st in steps]),
            y=bounds,
            customdata=[intensity[st] for st in steps],
            hovertemplate=hover,
            mode="markers",
            # two lines: one ran past a phone's 366 px figure
            name="model bound of each step<br>(the roof at its intensity"
            + (": L2's for the steps)" if l2_tbps else ")"),
            marker=dict(symbol="circle-open", size=13, color="#444444"),
            row=1,
            col=1,
        )
    if rows:
        xs = _side_by_side([intensity[r["step"]] for r in rows])
        for r, x in zip(rows, xs):
            fig.add_scatter(
                x=[x],
                y=[r["tflops"]],
                customdata=[intensity[r["step"]]],
                hovertemplate=hover,
                mode="markers",
                name=r["step"],
                showlegend=False,  # named under its bar, by its mark in its colour
                marker=dict(size=12, color=colors[r["step"]], symbol=symbols[r["step"]]),
                row=1,
                col=1,
            )
        names, values = [r["step"] for r in rows], [r["tflops"] for r in rows]
        bar_colors = [colors[st] for st in names]
        ticktext = [f"<span style='color:{colors[st]}'>{GLYPHS[symbols[st]]}</span> {st}" for st in names]
        title = f"the build, {rows[0]['dtype']} {n}³"
    else:
        names, values, bar_colors, ticktext = steps, bounds, "#dddddd", steps
        title = f"the build, fp16 {n}³: no recording yet (the model's bounds alone)"
    # the bars read across, a step a row (its name one line beside its bar, the first at the top): six names
    # under six upright bars ran into each other in a phone's 366 px figure
    fig.add_bar(
        y=names,
        x=values,
        orientation="h",
        showlegend=False,
        marker_color=bar_colors,
        text=[f"{v:.3g}" for v in values],
        textposition="outside",
        cliponaxis=False,
        row=2,
        col=1,
    )
    fig.update_yaxes(
        type="category", tickvals=names, ticktext=ticktext, autorange="reversed", ticklabelstandoff=4, row=2, col=1
    )
    # log bars start at the axis' left edge: the shortest rises half a decade, and the longest leaves room for its label
    fig.update_xaxes(
        type="log",
        dtick=1,
        title_text="TFLOP/s",
        range=[math.log10(min(values)) - 0.5, math.log10(max(values)) + 0.45],
        row=2,
        col=1,
    )
    fig.update_xaxes(type="log", dtick=1, title_text="model intensity (FLOP per requested input byte)", row=1, col=1)
    fig.update_yaxes(type="log", dtick=1, title_text="TFLOP/s", row=1, col=1)
    plots.panel_titles(fig)
    fig.update_layout(
        title=plots.title(title, where, gap=34),  # above the first panel's title
        template="plotly_white",
        height=800,
        margin=dict(t=30),
        legend={**plots.LEGEND_BELOW, "font": dict(size=11)},
    )
    return fig


def sweep_figure(s: dict, where: str = "", live: dict | None = None, live_where: str = ""):
    """The dense sweep of a ``gpulab.bench.lesson07`` record (``s = data["sweep"]``): bf16 TFLOP/s of torch and
    gpulab at every N, N % 8 == 0 apart from the rest, and the wave model (``waves.wave_model``) scaled to
    gpulab's best rate. ``live``: a sweep measured now at a few N (``lesson07.LIVE``), drawn over it as large
    diamonds; ``where`` labels ``s`` and ``live_where`` labels ``live``."""
    eff = waves.wave_model(s)
    fig = go.Figure()
    for method, color in (("torch", "#1f77b4"), ("gpulab", "#d62728")):
        rates = waves.sweep_rates(s, method)
        for aligned in (True, False):
            pts = [(n, r) for n, r in zip(s["ns"], rates) if r is not None and (n % 8 == 0) == aligned]
            fig.add_scatter(
                x=[n for n, _ in pts],
                y=[r for _, r in pts],
                mode="markers",
                name=f"{method}, N {'%' if aligned else 'not %'} 8{' == 0' if aligned else ''}",
                marker=dict(color=color, size=4 if aligned else 3, symbol="circle" if aligned else "circle-open"),
            )
    for method, color in (("torch", "#1f77b4"), ("gpulab", "#d62728")) if live else ():
        pts = [(n, r) for n, r in zip(live["ns"], waves.sweep_rates(live, method)) if r is not None]
        fig.add_scatter(
            x=[n for n, _ in pts],
            y=[r for _, r in pts],
            mode="markers",
            name=f"{method}, measured now",
            marker=dict(color=color, size=11, symbol="diamond", line=dict(color="black", width=1)),
        )
    best = max(r for r in waves.sweep_rates(s, "gpulab") if r is not None)
    fig.add_scatter(
        x=s["ns"],
        y=[best * e for e in eff],
        mode="lines",
        line=dict(color="gray", width=1),
        name=f"wave model x best gpulab rate ({s['tile'][0]}x{s['tile'][1]} tiles, {s['sms']} SMs)",
    )
    fig.update_layout(
        title=plots.title(
            f"{s.get('dtype', 'bf16')} matmul N x N x N, every N from {s['ns'][0]} to {s['ns'][-1]}, "
            f"{waves.sweep_timing(s)}",
            where + (f"<br>diamonds: N = {', '.join(map(str, live['ns']))}, {live_where}" if live else ""),
        ),
        template="plotly_white",
        height=560,
        margin=dict(t=30),
        legend=plots.LEGEND_BELOW,
        xaxis_title="N",
        yaxis_title="TFLOP/s",
    )
    return fig


def wave_model_figure(ns, tile, gpu: str = "H200"):
    """The wave model's efficiency alone (``waves.sweep``) against N for ``tile`` on ``gpu``: what the sweep
    figure draws when nothing is recorded yet."""
    ns = list(ns)
    fig = go.Figure(go.Scatter(x=ns, y=sweep(ns, tile, gpu=gpu), mode="lines", name="model efficiency"))
    fig.update_layout(
        title=plots.title(f"wave model only (no recorded data yet): {tile[0]}x{tile[1]} tiles on an {gpu}"),
        margin=dict(t=30),
        xaxis_title="N",
        yaxis_title="efficiency",
        template="plotly_white",
        height=420,
    )
    return fig
