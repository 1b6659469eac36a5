"""Lesson 00's figures: this GPU's measured ceilings beside the datasheet, its memory hierarchy, the measured staircase, latency hiding and the ridge point
across generations. Each is one call; each is drawn from the numbers (``gpulab.core.hardware``, ``gpulab.models.memory``
and a lesson00 record from ``python -m gpulab.bench --only lesson00``), never from an image.

``data`` is a lesson00 record (``gpulab.bench.lesson00.run``) or None; with None the staircase and latency
figures draw the model alone and say in their title that no recording exists yet.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..core import hardware
from ..models import memory
from . import plots
from .plots import COLORS

LEVEL_COLORS = {"registers": "#2ca02c", "L1/shared": "#1f77b4", "L2": "#9467bd", "HBM": "#d62728"}
NO_RECORDING = "no recording on a GPU yet: run python -m gpulab.bench --only lesson00 --record"


def _bytes(b: float) -> str:
    for unit, scale in (("GB", 1e9), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.0f} B"


def _log_range(lo: float, hi: float, pad: float = 0.15) -> list[float]:
    return [math.log10(lo) - pad, math.log10(hi) + pad]


def _byte_ticks(lo: float, hi: float) -> dict:
    """Tick values and labels for a log axis of bytes from ``lo`` to ``hi``: one per decade, in decimal units
    ("1 MB", not plotly's "1M", and never "1B", which reads as one byte)."""
    names = {0: "B", 3: "kB", 6: "MB", 9: "GB", 12: "TB"}
    vals = [10.0**k for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]
    text = [
        f"{10 ** (k % 3)} {names[k - k % 3]}" for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    ]
    return dict(tickvals=vals, ticktext=text)


def _layout(fig: go.Figure, title: str, height: int = 430, sub: str = "") -> go.Figure:
    """The lesson's layout: ``plots.title`` (``title`` and its small ``sub`` line, wrapped, never cut), the legend
    in rows under the plot (``plots.LEGEND_BELOW``); the margins grow to hold both at any width."""
    fig.update_layout(
        title=plots.title(title, sub),
        template="plotly_white",
        height=height,
        margin=dict(l=70, r=30, t=30, b=30),
        legend={**plots.LEGEND_BELOW, "font": dict(size=11)},
    )
    return fig


def hierarchy_figure(spec: hardware.GPUSpec, data: dict | None = None) -> go.Figure:
    """Registers -> L1/shared -> L2 -> HBM for ``spec``: one bar per level, its length the level's capacity on
    the whole GPU (log scale), labelled with the capacity per SM where the level sits in each SM, and the
    bandwidth where known (the datasheet's HBM; the measured plateaus when ``data``, a lesson00 record, is
    given). Raises ValueError for a GPU without a hierarchy in the table."""
    levels = memory.hierarchy(spec)
    measured = memory.fit_record(data, spec)["plateaus"] or {} if data and data.get("staircase") else {}
    labels = []
    for lv in levels:
        if lv.scope == "per SM":
            where = f"{_bytes(lv.capacity)} per SM<br>x {spec.sms} SMs = {_bytes(lv.device_bytes)}"
        else:
            where = f"{_bytes(lv.device_bytes)} " + ("on the chip" if lv.name == "L2" else "off the chip")
        bw = [f"{lv.tbps:.3g} TB/s datasheet"] if lv.tbps else []
        bw += [f"{measured[lv.name]:.3g} TB/s measured"] if measured.get(lv.name) else []
        labels.append(where + "<br>" + (", ".join(bw) or "TB/s: not recorded"))
    sizes = [lv.device_bytes for lv in levels]
    fig = go.Figure()
    fig.add_bar(
        y=[lv.name for lv in levels],
        x=sizes,
        orientation="h",
        marker_color=[LEVEL_COLORS[lv.name] for lv in levels],
        text=labels,
        textposition="inside",
        insidetextanchor="start",
        textfont=dict(color="white", size=12),
        hovertemplate="%{y}: %{text}<extra></extra>",
        showlegend=False,
    )
    # bars start at the left edge: leave them room for their lines of text (18 characters at most: on a phone
    # the shortest bar is about 105 px long, and plotly shrinks a longer line's text to fit it)
    lo = 10 ** (math.log10(min(sizes)) - 2.5)
    fig.update_xaxes(
        type="log",
        title="capacity on the whole GPU (bytes; log scale)",
        range=[math.log10(lo), math.log10(max(sizes)) + 0.2],
        **_byte_ticks(lo, max(sizes)),
    )
    fig.update_yaxes(autorange="reversed", title=None)  # nearest the compute units on top
    return _layout(
        fig, f"{spec.name}: the memory hierarchy, small and fast at the top, large and slow at the bottom", height=400
    )


def staircase_figure(data: dict | None, spec: hardware.GPUSpec, where: str = "") -> go.Figure:
    """Read bandwidth (TB/s) against working-set size (bytes, log) from a lesson00 record, with the 20th-80th
    percentile band, the capacities of one SM's L1 and of the L2 as vertical lines, each level's plateau as
    the staircase model, and the datasheet HBM bandwidth. With ``data`` None: the capacities and the
    datasheet line only, and a title that says no recording exists. ``where``: the data's source ("measured
    now on ...", or the recording's label), printed under the title."""
    fig = go.Figure()
    l1, l2, _ = memory.staircase_levels(spec)
    if data and data.get("staircase"):
        st = data["staircase"]
        ws = [r["working_set"] for r in st]
        lo_ws, hi_ws = min(ws), max(ws)
        for shared, name, color in (
            (False, "measured: every SM reads the whole set", COLORS[0]),
            (True, "measured: each SM reads its own share, past its L1", COLORS[2]),
        ):
            rs = [r for r in st if r["l2_only"] == shared]
            if not rs:
                continue
            up = [r["bytes_read"] / (r["p20_ms"] * 1e9) - r["tbps"] for r in rs]  # the 20th percentile time: faster
            down = [r["tbps"] - r["bytes_read"] / (r["p80_ms"] * 1e9) for r in rs]
            fig.add_scatter(
                x=[r["working_set"] for r in rs],
                y=[r["tbps"] for r in rs],
                mode="lines+markers",
                name=name,
                line=dict(color=color),
                error_y=dict(type="data", symmetric=False, array=up, arrayminus=down),
                hovertemplate="%{x:.3s}B: %{y:.3g} TB/s<extra></extra>",
            )
        plateaus = memory.fit_record(data, spec)["plateaus"]
        model = [memory.expected_tbps(w, spec, plateaus) for w in ws]
        fig.add_scatter(
            x=ws,
            y=model,
            mode="lines",
            name="model: each level's plateau",
            line=dict(shape="hv", dash="dot", color="#444"),
        )
        ymax = max(r["tbps"] for r in st)
        title, sub = f"{spec.name}: read bandwidth against working set (fp32, {data['device']['name']})", where
    else:
        lo_ws, hi_ws = 4096, 4 * 2**30
        ymax = spec.hbm_tbps
        title, sub = f"{spec.name}: read bandwidth against working set: model only", NO_RECORDING
    fig.add_scatter(
        x=[lo_ws, hi_ws],
        y=[spec.hbm_tbps] * 2,
        mode="lines",
        name=f"datasheet HBM {spec.hbm_tbps:g} TB/s",
        line=dict(color=LEVEL_COLORS["HBM"], dash="dash", width=4),
        opacity=0.6,
        legendrank=1001,  # listed last, drawn first (below)
    )
    # the datasheet line under the model's steps, wider: the HBM step lies on it on a narrow figure, both show
    fig.data = (fig.data[-1], *fig.data[:-1])
    ytop = 1.15 * max(ymax, spec.hbm_tbps)
    for lv, label in ((l1, f"L1 of one SM: {_bytes(l1.capacity)}"), (l2, f"L2: {_bytes(l2.capacity)}")):
        if lo_ws <= lv.capacity <= hi_ws:
            fig.add_scatter(
                x=[lv.capacity] * 2,
                y=[0, ytop],
                mode="lines",
                name=label,
                line=dict(color=LEVEL_COLORS[lv.name], width=1.5),
            )
    fig.update_xaxes(
        type="log", title="working set (bytes)", range=_log_range(lo_ws, hi_ws), **_byte_ticks(lo_ws, hi_ws)
    )
    fig.update_yaxes(title="read bandwidth (TB/s)", range=[0, ytop])
    return _layout(fig, title, height=500, sub=sub)  # six legend rows under the plot in a narrow column


def little_figure(
    data: dict | None, spec: hardware.GPUSpec, example_latency_ns: float = 500.0, where: str = ""
) -> go.Figure:
    """Copy bandwidth (TB/s, read + write) against warps in flight (log) from a lesson00 record, with Little's
    law fitted to it: min(peak, warps x bytes per warp / latency). With ``data`` None: the law drawn for
    ``example_latency_ns`` (an example, not a measurement) up to the datasheet HBM bandwidth, and a title that
    says no recording exists. ``where``: the data's source, printed under the title."""
    fig = go.Figure()
    if data and data.get("latency", {}).get("rows"):
        rows, b = data["latency"]["rows"], data["latency"]["bytes_per_warp"]
        warps = [r["warps"] for r in rows]
        latency, peak = memory.fit_little(warps, [r["tbps"] for r in rows], b)
        fig.add_scatter(
            x=warps,
            y=[r["tbps"] for r in rows],
            mode="markers+lines",
            name="measured (median)",
            line=dict(color=COLORS[0]),
            hovertemplate="%{x} warps: %{y:.3g} TB/s<extra></extra>",
        )
        title, sub = (
            (
                f"{spec.name}: latency hiding, copy on a limited grid (Little's law fit: {latency:.0f} ns, "
                f"{peak:.2f} TB/s, {memory.bytes_in_flight(peak, latency) / 2**20:.2f} MiB in flight)"
            ),
            where,
        )
        ymax = max(r["tbps"] for r in rows)
        lo, hi = min(warps), max(warps)
    else:
        b, latency, peak = 2048, example_latency_ns, spec.hbm_tbps
        lo, hi = 4, 4 * 4096
        ymax = peak
        title, sub = (
            f"{spec.name}: Little's law with an example latency of {latency:g} ns (2 KiB per warp): model only",
            NO_RECORDING,
        )
    xs = sorted(
        {
            lo,
            hi,
            *[round(lo * (hi / lo) ** (i / 60)) for i in range(61)],
            max(lo, min(hi, round(memory.warps_to_saturate(peak, latency, b)))),
        }
    )
    fig.add_scatter(
        x=xs,
        y=memory.little_tbps(xs, b, latency, peak),
        mode="lines",
        name="Little's law: min(peak, warps x bytes per warp / latency)",
        line=dict(color="#444", dash="dot"),
        showlegend=True,
    )
    fig.update_xaxes(type="log", title="warps in flight (programs x 4)", range=_log_range(lo, hi), dtick=1)
    fig.update_yaxes(title="copy bandwidth (TB/s, read + write)", range=[0, 1.15 * ymax])
    return _layout(fig, title, sub=sub)


def ridge_generations_figure() -> go.Figure:
    """The ridge point C / B (FLOP/byte, log x) of every GPU and TPU in ``gpulab.core.hardware``
    (``memory.ridge_points``: dense 16-bit tensor/MXU peak over HBM bandwidth), one row each, named with the year
    it was announced, oldest at the top (ties by ridge), with the lecture's imaginary accelerator (100 FLOP/byte)
    as a reference line. A row a product: its name is a tick label, so no two names share a spot at any width."""
    rows = sorted(memory.ridge_points(), key=lambda r: (r["year"], r["ridge"]))
    names = [f"{r['name']} ({r['year']})" for r in rows]
    fig = go.Figure()
    for kind, symbol, color in (("GPU", "circle", COLORS[0]), ("TPU", "diamond", COLORS[1])):
        rs = [(n, r) for n, r in zip(names, rows) if r["kind"] == kind]
        fig.add_scatter(
            x=[r["ridge"] for _, r in rs],
            y=[n for n, _ in rs],
            mode="markers+text",
            name=f"{kind}s",
            text=[f"{r['ridge']:.0f}" for _, r in rs],
            textposition="middle right",
            textfont=dict(size=10),
            marker=dict(symbol=symbol, size=10, color=color),
            customdata=[[r["dtype"], r["peak_tflops"], r["hbm_tbps"]] for _, r in rs],
            hovertemplate="%{y}: %{x:.0f} FLOP/B<br>%{customdata[0]} %{customdata[1]:g} TFLOP/s / "
            "%{customdata[2]:.3g} TB/s<extra></extra>",
        )
    fig.add_scatter(
        x=[100, 100],
        y=[names[0], names[-1]],
        mode="lines",
        name="the lecture's imaginary accelerator: 100 FLOP/B",
        line=dict(color="#888", dash="dash"),
    )
    ridges = [r["ridge"] for r in rows] + [100]
    fig.update_xaxes(
        type="log",
        title="ridge point (FLOP per byte of HBM)",
        range=[math.log10(min(ridges)) - 0.05, math.log10(max(ridges)) + 0.15],  # room for the largest's number
        tickvals=[v for v in (50, 100, 150, 200, 300, 500, 700, 1000, 1500, 2000) if min(ridges) / 1.2 <= v],
    )
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=names, autorange="reversed", title=None)
    return _layout(
        fig,
        "Compute grew faster than memory bandwidth: the ridge point of each generation "
        "(16-bit tensor/MXU peak / HBM bandwidth)",
        height=560,
    )


def ceilings_figure(profile: dict, spec=None, where: str = ""):
    """Two panels: HBM copy bandwidth (TB/s) and the matmul rate per dtype (TFLOP/s, log axis), measured
    (``profile``: a device-profile dict with ``copy_tbps`` and ``matmul_tflops``) beside the datasheet
    (``spec``: a ``hardware.GPUSpec``, or None when the table does not know this GPU), each datasheet bar
    labelled with the fraction of it that was measured. ``where`` names the source (the title)."""
    fig = make_subplots(
        rows=1, cols=2, column_widths=[0.25, 0.75], subplot_titles=("HBM copy (TB/s)", "matmul (TFLOP/s)")
    )
    plots.panel_titles(fig)
    dtypes = [d for d, r in profile["matmul_tflops"].items() if r]
    fig.add_bar(
        x=["copy"],
        y=[profile["copy_tbps"]],
        name="measured",
        marker_color="#1f77b4",
        row=1,
        col=1,
        text=[f"{profile['copy_tbps']:.2f}"],
    )
    fig.add_bar(
        x=dtypes,
        y=[profile["matmul_tflops"][d] for d in dtypes],
        name="measured",
        marker_color="#1f77b4",
        showlegend=False,
        row=1,
        col=2,
    )
    if spec is not None:
        fig.add_bar(
            x=["copy"],
            y=[spec.hbm_tbps],
            name=f"datasheet {spec.name}",
            marker_color="#bbbbbb",
            row=1,
            col=1,
            text=[f"{profile['copy_tbps'] / spec.hbm_tbps:.0%}"],
        )
        fig.add_bar(
            x=dtypes,
            y=[spec.peak_tflops[d] for d in dtypes],
            marker_color="#bbbbbb",
            showlegend=False,
            text=[f"{profile['matmul_tflops'][d] / spec.peak_tflops[d]:.0%}" for d in dtypes],
            row=1,
            col=2,
        )
    rates = [profile["matmul_tflops"][d] for d in dtypes] + ([spec.peak_tflops[d] for d in dtypes] if spec else [])
    # fp32 on the CUDA cores is ~20x below fp8 on the tensor cores: a log axis, labelled at 1, 2, 5 x 10^k, with
    # room above the tallest bar for its label
    ticks = [m * 10.0**k for k in range(0, 5) for m in (1, 2, 5)]
    fig.update_yaxes(type="log", row=1, col=2, range=_log_range(min(rates), max(rates), 0.12), tickvals=ticks)
    copy_top = max(profile["copy_tbps"], spec.hbm_tbps if spec else 0)
    fig.update_yaxes(row=1, col=1, range=[0, 1.15 * copy_top])
    # the labels keep their size over narrow bars (plotly shrinks them to the bar's width otherwise)
    fig.update_traces(textposition="outside", cliponaxis=False, textfont_size=11, constraintext="none")
    fig.update_layout(
        title=plots.title("Measured beside the datasheet", where, gap=34),  # above the panels' titles
        barmode="group",
        template="plotly_white",
        height=440,
        margin=dict(l=60, r=30, t=30, b=30),
        legend={**plots.LEGEND_BELOW, "font": dict(size=11)},
    )
    return fig
