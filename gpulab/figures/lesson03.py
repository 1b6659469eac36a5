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
    rows: list[dict], title: str = "Quantization error against storage bits", height: int = 420, kind: str = "mean"
):
    """Plotly figure (``plotly.graph_objects.Figure``) of ``error_vs_bits`` rows as a dot plot: one row per
    format, sorted by bits per value (scales included) and labelled with them; x = relative error (log axis,
    powers of ten); one trace per data set, each drawn a little above or below the row's centre so that
    equal errors do not hide each other. kind: names the error on the x-axis ("mean" or "norm", as passed
    to error_vs_bits). Traces hold plain lists."""
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
        title=dict(text=title, font_size=12),
        height=height,
        template="plotly_white",
        legend=dict(orientation="h", y=-0.22, x=0),
        margin=dict(l=10, r=20),
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
        fig = error_vs_bits_figure(self.rows, title=self._title(), height=440)
        self.live = widgets.LiveFigure(fig)
        for s in (self.mx, self.nv):
            s.observe(lambda _: self.refresh(), names="value")
        self.widget = widgets.container(self.mx, self.nv, self.live.widget)

    def _rows(self) -> list[dict]:
        return formats.error_vs_bits(self.datasets, mx_block=self.mx.value, nv_block=self.nv.value)

    def _title(self) -> str:
        bits = {r["format"]: r["bits_per_value"] for r in self.rows if r["data"] == "gaussian"}
        return (
            f"MXFP8 block {self.mx.value}: {bits['mxfp8']:.4g} bits/value; NVFP4 block {self.nv.value}: "
            f"{bits['nvfp4']:.4g} bits/value<br><sup>(NVFP4 tensor scale amortised over {self.datasets['gaussian'].numel()} values)</sup>"
        )

    def refresh(self) -> None:
        """Recompute the rows for the current block sizes and redraw the figure."""
        self.rows = self._rows()
        new = error_vs_bits_figure(self.rows, title=self._title(), height=440)

        def change(fig):
            for old, tr in zip(fig.data, new.data):
                old.x, old.y, old.customdata = list(tr.x), list(tr.y), list(tr.customdata)
            fig.layout.title = self._title()
            fig.layout.yaxis.ticktext = list(new.layout.yaxis.ticktext)
            fig.layout.xaxis.range = list(new.layout.xaxis.range)

        self.live.update(change)


def relu_sweep_figure(rows: list[dict], copy_tbps: float, where: str = ""):
    """ReLU bandwidth (GB/s, 2n * itemsize bytes / time) against n, gpulab's kernel and torch.relu per dtype, with
    the copy bandwidth (``copy_tbps``, TB/s) as the model line. ``rows``: ``gpulab.bench.lesson03.relu_rates``
    rows over several n (the suite's ``relu_sweep``)."""
    fig = go.Figure()
    for d in dict.fromkeys(r["dtype"] for r in rows):
        rs = [r for r in rows if r["dtype"] == d]
        fig.add_scatter(
            x=[r["n"] for r in rs],
            y=[r["gpulab_gbps"] for r in rs],
            mode="lines+markers",
            name=f"gpulab {d}",
            line=dict(color=plots.DTYPE_COLORS[d]),
        )
        fig.add_scatter(
            x=[r["n"] for r in rs],
            y=[r["torch_gbps"] for r in rs],
            mode="lines",
            name=f"torch {d}",
            line=dict(color=plots.DTYPE_COLORS[d], dash="dot"),
        )
    xs = [r["n"] for r in rows]
    fig.add_scatter(
        x=[min(xs), max(xs)],
        y=[copy_tbps * 1e3] * 2,
        mode="lines",
        name="model: copy bandwidth",
        line=dict(color="gray", dash="dash"),
    )
    fig.update_layout(
        title=dict(text=f"ReLU bandwidth against n<br><sup>{where}</sup>", font_size=12),
        height=440,
        template="plotly_white",
        margin=dict(t=70),
        legend=dict(orientation="h", y=-0.2, x=0),
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
        title=dict(
            text=f"matmul rate against error<br><sup>rates: {rate_where}<br>errors: {errors['how']}</sup>", font_size=13
        ),
        margin=dict(t=110),
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
        title=dict(
            text=f"accumulation error against K ({acc['m']}×{acc['m']} output, {acc['inputs']} inputs, {where})",
            font_size=12,
        ),
        height=400,
        template="plotly_white",
        legend=dict(orientation="h", y=-0.2, x=0),
        xaxis=dict(type="log", dtick=1, title="K (products summed)"),
        yaxis=dict(type="log", exponentformat="power", title="relative error vs float64"),
    )
    return fig
