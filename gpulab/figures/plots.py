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
#: 1-3 ticks from 0.001 to 3000, about half a decade apart: 1-2-5 labels a third of a decade apart turn upright
#: on a log axis of more than two decades in a phone's plot (the site's figure is 366 px wide)
HALF_DECADE_TICKS = [k * 10.0**e for e in range(-3, 4) for k in (1, 3)]
DTYPE_COLORS = {"fp32": "#1f77b4", "tf32": "#17becf", "bf16": "#d62728", "fp16": "#ff7f0e", "fp8": "#9467bd"}


#: A title line's characters at 13 px, and a subtitle's (``<sup>``, about 0.7 of the size): both fit a 380 px
#: figure (a 412 px phone's page), so no title is cut in a narrow notebook column either.
TITLE_CHARS, SUB_CHARS = 56, 80
#: A legend in rows under the plot, its bottom on the figure's bottom edge (``yref="container"``): plotly's
#: automargin lifts the plot until the x axis title clears it, at any width and on every draw. A legend at a
#: paper y under the plot (``y=-0.2``) hangs a fraction of the plot's height below the axis, a height that depends
#: on the margin the legend pushes; plotly.js keeps the push of a first draw made at 700 px, before a notebook
#: cell's width is known, and a legend placed so lands on the x title once the figure is widened.
LEGEND_BELOW = dict(orientation="h", x=0, xanchor="left", yref="container", y=0, yanchor="bottom")


def wrap(text: str, width: int = 90) -> str:
    """``text`` (plotly's HTML, lines split at ``<br>``) with every line longer than ``width`` characters broken
    at spaces into lines of at most ``width``, joined by ``<br>``: a subtitle that a narrow figure does not cut."""
    return "<br>".join(
        "<br>".join(textwrap.wrap(line, width, break_long_words=False) or [""]) for line in text.split("<br>")
    )


def title(text: str, sub: str = "", size: int = 13, gap: int = 12) -> dict:
    """A figure's ``layout.title``: ``text`` wrapped at ``TITLE_CHARS``, then ``sub`` (the data's source, a
    note) in small type wrapped at ``SUB_CHARS``, from the figure's left edge; both widths for 13 px type, fewer
    characters at a larger ``size``. It sits ``gap`` px above the plot area (``yref="paper"``, anchored at its
    bottom; room for subplot titles there) and pushes the top margin to hold every line (``automargin``), so a
    title of more lines lowers the plot instead of leaving the figure. ``size`` in px."""
    chars, sub_chars = (int(n * 13 / max(size, 13)) for n in (TITLE_CHARS, SUB_CHARS))
    lines = [wrap(text, chars)] + [f"<sup>{line}</sup>" for line in wrap(sub, sub_chars).split("<br>") if sub]
    body = "<br>".join(lines)  # a <sup> a line: plotly spaces a <br> inside one as a full-size line
    return dict(
        text=body,
        font_size=size,
        automargin=True,
        xref="container",
        x=0,
        xanchor="left",
        yref="paper",
        y=1,
        yanchor="bottom",
        pad=dict(l=10, b=gap),
    )


def panel_titles(fig: go.Figure, size: int = 13) -> go.Figure:
    """``fig``'s subplot titles (``make_subplots``' annotations, its only ones when called) at ``size`` px: at
    plotly's 16 px the titles of two side-by-side panels run into each other in a narrow figure."""
    fig.update_annotations(font_size=size)
    return fig


def coincide(a: dict, b: dict, tol: float = 0.05) -> list[tuple]:
    """Where two series lie on one another: ``(first x, last x)`` of each run of two or more consecutive shared
    x (sorted) at which the values of ``a`` and ``b`` (dicts x -> y) differ by less than ``tol``, a fraction of
    the larger. On a log axis 5% is 0.02 decade, a pixel or two of a figure's few decades: one line covers the
    other there. Raises ValueError if ``tol`` is not in (0, 1)."""
    if not 0 < tol < 1:
        raise ValueError(f"tol must be a fraction in (0, 1), got {tol!r}")
    runs, run = [], []
    for x in sorted(a.keys() & b.keys()) + [None]:  # None: the end, closing the last run
        if x is not None and abs(a[x] - b[x]) < tol * max(abs(a[x]), abs(b[x])):
            run.append(x)
            continue
        if len(run) >= 2:
            runs.append((run[0], run[-1]))
        run = []
    return runs


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
