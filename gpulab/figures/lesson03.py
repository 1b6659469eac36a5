"""Lesson 03's figures (precision): quantization error against storage bits, and the block-size explorer.

Models: ``gpulab.models.formats`` (the block-scaled formats), ``gpulab.models.precision``. Figures hold plain lists.
"""

from __future__ import annotations

import math

import ipywidgets as W
import plotly.graph_objects as go

from ..models import formats, precision
from . import plots, widgets


def _format_label(r: dict) -> str:
    block = f", block {r['block']}" if r["block"] else ""
    return f"{r['format']}{block}: {float(r['bits_per_value']):.3g} bits"


def error_vs_bits_figure(
    rows: list[dict],
    title: str = "Quantization error against storage bits",
    height: int = 420,
    kind: str = "mean",
    sub: str = "",
):
    """Plotly figure (``plotly.graph_objects.Figure``) of ``error_vs_bits`` rows as a dot plot: one row per
    format, sorted by bits per value (scales included) and labelled with them; x = relative error (log axis,
    powers of ten); one trace per data set, each drawn a little above or below the row's centre so that
    equal errors do not hide each other. kind: names the error on the x-axis ("mean" or "norm", as passed
    to error_vs_bits); sub: a note under the title in small type. Traces hold plain lists."""
    formats_ = sorted(
        dict.fromkeys(r["format"] for r in rows),
        key=lambda f: min(float(r["bits_per_value"]) for r in rows if r["format"] == f),
    )
    names = list(dict.fromkeys(r["data"] for r in rows))
    fig = go.Figure()
    for j, name in enumerate(names):
        rs = sorted((r for r in rows if r["data"] == name), key=lambda r: formats_.index(r["format"]))
        shift = (j - (len(names) - 1) / 2) * 0.25
        fig.add_scatter(
            x=[float(r["rel_error"]) for r in rs],
            y=[formats_.index(r["format"]) + shift for r in rs],
            mode="markers",
            name=name,
            customdata=[_format_label(r) for r in rs],
            marker=dict(size=11, symbol=["circle", "diamond", "square"][j % 3]),
            hovertemplate="%{customdata}<br>error %{x:.3g}<extra>" + name + "</extra>",
        )
    first = {f: next(r for r in rows if r["format"] == f) for f in formats_}
    errs = [float(r["rel_error"]) for r in rows if r["rel_error"] > 0]
    lo, hi = (math.log10(min(errs)), math.log10(max(errs))) if errs else (-4, 0)
    fig.update_layout(
        title=plots.title(title, sub),
        height=height,
        template="plotly_white",
        legend=plots.LEGEND_BELOW,
        margin=dict(l=10, r=20, t=30, b=30),
        yaxis=dict(
            tickvals=list(range(len(formats_))),
            ticktext=[_format_label(first[f]) for f in formats_],
            range=[-0.6, len(formats_) - 0.4],
            automargin=True,
        ),
        xaxis=dict(
            type="log",
            exponentformat="power",
            dtick=1,
            range=[lo - 0.25, hi + 0.25],
            title="mean |q(x) − x| / |x|" if kind == "mean" else "relative error ‖q(x) − x‖ / ‖x‖",
        ),
    )
    return fig


class FormatsExplorer:
    """Error against bits per value for MXFP8, NVFP4, per-tensor FP8, bf16 and fp16 on Gaussian data and on
    data with outliers (``gpulab.models.formats``), with sliders for the MXFP8 and NVFP4 block sizes.

    ``.widget`` is the container to display; ``.rows`` the current ``formats.error_vs_bits`` rows;
    ``.live.fig`` the figure. Moving a slider recomputes the rows and redraws (title, points).
    """

    BLOCKS = (4, 8, 16, 32, 64, 128, 256)

    def __init__(self, mx_block: int = 32, nv_block: int = 16, n: int = 4096):
        for name, v in (("mx_block", mx_block), ("nv_block", nv_block)):
            if v not in self.BLOCKS:
                raise ValueError(f"{name} must be one of {self.BLOCKS}, got {v!r}")
        self.datasets = {"gaussian": formats.gaussian_data(n), "outliers": formats.outlier_data(n)}
        self.mx = widgets.slider(
            W.SelectionSlider,
            options=list(self.BLOCKS),
            value=mx_block,
            description="MXFP8 block (values per E8M0 scale)",
        )
        self.nv = widgets.slider(
            W.SelectionSlider,
            options=list(self.BLOCKS),
            value=nv_block,
            description="NVFP4 block (values per E4M3 scale)",
        )
        self.rows = self._rows()
        fig = error_vs_bits_figure(self.rows, height=440, **self._title())
        self.live = widgets.LiveFigure(fig)
        for s in (self.mx, self.nv):
            s.observe(lambda _: self.refresh(), names="value")
        self.widget = widgets.container(self.mx, self.nv, self.live.widget)

    def _rows(self) -> list[dict]:
        return formats.error_vs_bits(self.datasets, mx_block=self.mx.value, nv_block=self.nv.value)

    def _title(self) -> dict:
        """The figure's title and note: each block size with its bits per value, a line each."""
        bits = {r["format"]: r["bits_per_value"] for r in self.rows if r["data"] == "gaussian"}
        return dict(
            title=f"MXFP8 block {self.mx.value}: {bits['mxfp8']:.4g} bits/value<br>"
            f"NVFP4 block {self.nv.value}: {bits['nvfp4']:.4g} bits/value",
            sub=f"NVFP4's tensor scale amortised over {self.datasets['gaussian'].numel()} values",
        )

    def refresh(self) -> None:
        """Recompute the rows for the current block sizes and redraw the figure."""
        self.rows = self._rows()
        new = error_vs_bits_figure(self.rows, height=440, **self._title())

        def change(fig):
            for old, tr in zip(fig.data, new.data):
                old.x, old.y, old.customdata = list(tr.x), list(tr.y), list(tr.customdata)
            fig.layout.title = new.layout.title
            fig.layout.yaxis.ticktext = list(new.layout.yaxis.ticktext)
            fig.layout.xaxis.range = list(new.layout.xaxis.range)

        self.live.update(change)


#: The ReLU sweep's marks, per dtype: gpulab's markers nested (an open ring around a smaller ring around a dot)
#: and torch's bands narrower in drawing order, so that where two dtypes run at one rate (fp16 and bf16 move the
#: same bytes) or every line meets the copy bandwidth at large n, each stays visible.
RELU_MARKS = {
    "fp32": (dict(symbol="circle-open", size=14), 11),
    "fp16": (dict(symbol="circle-open", size=9), 8),
    "bf16": (dict(symbol="circle", size=5), 5),
}


def relu_sweep_figure(rows: list[dict], copy_tbps: float, where: str = ""):
    """ReLU bandwidth (GB/s, 2n * itemsize bytes / time) against n, gpulab's kernel and torch.relu per dtype, with
    the copy bandwidth (``copy_tbps``, TB/s) as the model line. ``rows``: ``gpulab.bench.lesson03.relu_rates``
    rows over several n (the suite's ``relu_sweep``).

    gpulab's kernel is a thin line with markers (``RELU_MARKS``, nested), torch's a wide pale band under it (each
    dtype's band narrower than the one before, the model's dashed line narrower still, on top), so a gpulab point
    on its band reads as torch's rate; the subtitle says so."""
    fig = go.Figure()
    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    rate = {}  # (kernel, dtype) -> {n: GB/s}
    for d in dtypes:
        rs = [r for r in rows if r["dtype"] == d]
        rate["gpulab", d] = {r["n"]: r["gpulab_gbps"] for r in rs}
        rate["torch", d] = {r["n"]: r["torch_gbps"] for r in rs}
    for d in dtypes:  # the bands first: under every gpulab line
        width = RELU_MARKS.get(d, (None, 5))[1]
        n = sorted(rate["torch", d])
        fig.add_scatter(
            x=n,
            y=[rate["torch", d][k] for k in n],
            mode="lines",
            name=f"torch {d}",
            line=dict(color=plots.DTYPE_COLORS[d], width=width),
            opacity=0.35,
        )
    for d in dtypes:
        n = sorted(rate["gpulab", d])
        fig.add_scatter(
            x=n,
            y=[rate["gpulab", d][k] for k in n],
            mode="lines+markers",
            name=f"gpulab {d}",
            line=dict(color=plots.DTYPE_COLORS[d], width=1.5),
            marker=dict(color=plots.DTYPE_COLORS[d], **RELU_MARKS.get(d, (dict(symbol="x", size=8), 0))[0]),
        )
    xs = [r["n"] for r in rows]
    fig.add_scatter(
        x=[min(xs), max(xs)],
        y=[copy_tbps * 1e3] * 2,
        mode="lines",
        name="model: copy bandwidth",
        line=dict(color="gray", dash="dash", width=2),
    )
    key = "gpulab: a line with marks; torch: the pale band under it"
    fig.update_layout(
        title=plots.title("ReLU bandwidth against n", f"{where}<br>{key}" if where else key),
        height=520,
        template="plotly_white",
        margin=dict(t=30, b=30),
        legend=plots.LEGEND_BELOW,
        xaxis=dict(type="log", exponentformat="power", dtick=1, title="n (elements)"),
        yaxis=dict(type="log", exponentformat="power", dtick=1, title="GB/s (2n·itemsize bytes / time)"),
    )
    return fig


def rate_vs_error_figure(errors: dict, rates: dict, rate_where: str = "", n_rate: int = 8192):
    """One point per dtype at (relative error, TFLOP/s), both log axes: ``errors`` from
    ``precision.matmul_errors`` (its ``how`` names the method), ``rates`` {dtype: TFLOP/s or None} of cuBLAS at
    ``n_rate``^3. Dtypes missing either number are left out."""
    shown = [d for d in precision.MATMUL_DTYPES if errors.get(d) is not None and rates.get(d)]
    fig = go.Figure()
    for d in shown:
        fig.add_scatter(
            x=[errors[d]],
            y=[rates[d]],
            mode="markers+text",
            text=[d],
            name=d,
            textposition="top center",
            marker=dict(size=14, color=plots.DTYPE_COLORS[d]),
        )
    fig.update_layout(
        title=plots.title("matmul rate against error", f"rates: {rate_where}<br>errors: {errors['how']}"),
        margin=dict(t=30),
        height=420,
        template="plotly_white",
        showlegend=False,
        xaxis=dict(
            type="log",
            exponentformat="power",
            dtick=1,
            title="relative error ‖C − C_ref‖ / ‖C_ref‖ (float64 reference)",
        ),
        yaxis=dict(
            type="log", tickvals=[10, 20, 50, 100, 200, 500, 1000, 2000, 5000], title=f"TFLOP/s (cuBLAS, {n_rate}³)"
        ),
    )
    if shown:
        top = [rates[d] for d in shown]
        fig.update_yaxes(range=[math.log10(min(top)) - 0.2, math.log10(max(top)) + 0.3])  # room for the labels
    return fig


def accumulation_figure(acc: dict, where: str = ""):
    """Relative error against K of fp16 products summed in an fp16 and in an fp32 accumulator: ``acc`` from
    ``gpulab.bench.lesson03.accumulation_errors``; ``where`` says where it was computed."""
    fig = go.Figure()
    for key in ("fp16", "fp32"):
        fig.add_scatter(
            x=acc["k"],
            y=acc[key],
            mode="lines+markers",
            name=f"fp16 products, {key} accumulator",
            line=dict(color=plots.DTYPE_COLORS[key]),
        )
    fig.update_layout(
        title=plots.title(
            "accumulation error against K", f"{acc['m']}×{acc['m']} output, {acc['inputs']} inputs, {where}"
        ),
        height=400,
        template="plotly_white",
        margin=dict(t=30, b=30),
        legend=plots.LEGEND_BELOW,
        xaxis=dict(type="log", dtick=1, title="K (products summed)"),
        yaxis=dict(type="log", exponentformat="power", title="relative error vs float64"),
    )
    return fig
