"""Plotly figures shared by the lessons: the roofline with ceilings and kernel points.

Figures hold plain lists, not NumPy arrays: a ``FigureWidget`` made from a figure with NumPy arrays raised
"truth value of an array is ambiguous" in plotly 7.1 when the browser sent its trace deltas back.
"""

from __future__ import annotations

import textwrap

import numpy as np
import plotly.graph_objects as go

from ..models.roofline import KernelPoint

INTENSITY_RANGE = (1e-2, 1e4)  # FLOP/byte, the x-axis of every roofline
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]
#: 1-2-5 ticks from 0.001 to 5000 for a log axis: plotly's own on a short range label 0.3 .. 0.9 as bare "3 .. 9"
LOG_TICKS = [k * 10.0**e for e in range(-3, 4) for k in (1, 2, 5)]
DTYPE_COLORS = {"fp32": "#1f77b4", "tf32": "#17becf", "bf16": "#d62728", "fp16": "#ff7f0e", "fp8": "#9467bd"}


def wrap(text: str, width: int = 90) -> str:
    """``text`` (plotly's HTML, lines split at ``<br>``) with every line longer than ``width`` characters broken
    at spaces into lines of at most ``width``, joined by ``<br>``: a subtitle that a narrow figure does not cut."""
    return "<br>".join(
        "<br>".join(textwrap.wrap(line, width, break_long_words=False) or [""]) for line in text.split("<br>")
    )


def roof_xy(peak_tflops: float, hbm_tbps: float, n: int = 200, log_range=None):
    """x (FLOP/byte, log-spaced over ``log_range``, default ``INTENSITY_RANGE``) and y = min(C, B * I)."""
    lo, hi = log_range or np.log10(INTENSITY_RANGE)
    x = np.logspace(lo, hi, n)
    return x, np.minimum(peak_tflops, hbm_tbps * x)


def roofline_figure(
    ceilings: list[dict], points: list[KernelPoint] = (), title: str = "Roofline", height: int = 480
) -> go.Figure:
    """A log-log roofline.

    ceilings: dicts with ``label``, ``peak_tflops`` (TFLOP/s), ``hbm_tbps`` (TB/s) and optional ``dash``
    ("solid" for measured, "dash" for datasheet). points: kernels placed at (intensity, achieved TFLOP/s),
    grouped by name without its last word (the size); markers grow with size, and hovering shows it.
    """
    fig = go.Figure()
    for i, c in enumerate(ceilings):
        x, y = roof_xy(c["peak_tflops"], c["hbm_tbps"])
        fig.add_scatter(
            x=x.tolist(),
            y=y.tolist(),
            mode="lines",
            name=c["label"],
            line=dict(color=c.get("color", COLORS[i % len(COLORS)]), dash=c.get("dash", "solid")),
        )
    groups: dict[str, list[KernelPoint]] = {}
    for p in points:
        groups.setdefault(p.name.rsplit(" ", 1)[0], []).append(p)  # "relu fp32 n=2^20" -> "relu fp32"
    for j, (g, ps) in enumerate(groups.items()):
        fig.add_scatter(
            x=[p.intensity for p in ps],
            y=[p.tflops for p in ps],
            mode="markers",
            name=g,
            text=[p.name.split(" ")[-1] for p in ps],  # the size, shown on hover
            marker=dict(size=[7 + 2 * k for k in range(len(ps))], symbol=["circle", "square", "diamond", "x"][j % 4]),
            hovertemplate="%{text}<br>I=%{x:.3g} FLOP/B<br>%{y:.3g} TFLOP/s<extra>" + g + "</extra>",
        )
    fig.update_layout(
        title=title,
        height=height,
        template="plotly_white",
        xaxis=dict(type="log", title="arithmetic intensity (FLOP/byte)", range=np.log10(INTENSITY_RANGE).tolist()),
        yaxis=dict(type="log", title="rate (TFLOP/s)"),
        legend=dict(font=dict(size=10)),
    )
    return fig


def ceilings_from_profile(profile: dict, dtypes=("fp32", "bf16"), label: str = "measured") -> list[dict]:
    """Measured rooflines (one per dtype) from a device-profile dict."""
    return [
        dict(
            label=f"{label} {d}: {profile['matmul_tflops'][d]:.0f} TFLOP/s, {profile['copy_tbps']:.2f} TB/s",
            peak_tflops=profile["matmul_tflops"][d],
            hbm_tbps=profile["copy_tbps"],
            dash="solid",
            color=DTYPE_COLORS[d],
        )
        for d in dtypes
        if profile["matmul_tflops"].get(d)
    ]


def ceilings_from_spec(spec, dtypes=("fp32", "bf16")) -> list[dict]:
    """Rooflines for a ``hardware.GPUSpec``: a datasheet's dashed and labelled "datasheet"; one made from a
    measured device profile (``capstone.placement.spec_from_profile``, source "device-profile") solid and
    labelled "measured"."""
    measured = "device-profile" in (spec.sources or ())
    kind, name = ("measured" if measured else "datasheet"), spec.name.removesuffix(" (measured)")
    return [
        dict(
            label=f"{kind} {name} {d}: {spec.peak_tflops[d]:.4g} TFLOP/s, {spec.hbm_tbps:.2f} TB/s",
            peak_tflops=spec.peak_tflops[d],
            hbm_tbps=spec.hbm_tbps,
            dash="solid" if measured else "dash",
            color=DTYPE_COLORS[d],
        )
        for d in dtypes
        if spec.peak_tflops.get(d)
    ]
