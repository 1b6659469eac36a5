"""Lesson 01's figures (roofline): the roofline explorer (a machine and a kernel chosen by slider), and this
GPU's roofline with the lessons' kernels on it.

Models: ``gpulab.models.roofline``, ``gpulab.core.hardware``; the roofline figure itself is ``gpulab.figures.plots``.
"""

from __future__ import annotations

import math

import ipywidgets as W
import plotly.graph_objects as go

from ..core import hardware
from ..models import roofline
from . import plots, widgets

#: A legend laid out in rows under the plot, so it never takes width from the plot (1000 px windows).
LEGEND_BELOW = dict(orientation="h", yanchor="top", y=-0.2, xanchor="left", x=0, font=dict(size=10))


def _readable_axes(fig: go.Figure, y_values) -> None:
    """Decade ticks with their labels set off from the axes, and a y range reaching 0.4 decade below the
    data: the lowest y label then sits well above the lowest x label, never on it at the origin."""
    ys = [math.log10(v) for v in y_values if v > 0]
    fig.update_xaxes(dtick=1, ticklabelstandoff=6)
    fig.update_yaxes(dtick=1, ticklabelstandoff=6, range=[min(ys) - 0.4, max(ys) + 0.3])


def measured_roofline_figure(profile: dict, points, where: str = ""):
    """The measured roofline of ``profile`` (a device-profile dict: ``gpu``, ``copy_tbps``, ``matmul_tflops``;
    fp32 and bf16 roofs), the datasheet's dashed beside it when ``gpulab.core.hardware`` knows the GPU, and
    ``points`` (``roofline.KernelPoint``s) on it. ``where`` names the source (the title)."""
    spec = hardware.find(profile["gpu"])  # None if the datasheet table does not know this GPU
    datasheet = plots.ceilings_from_spec(spec) if spec else []
    fig = plots.roofline_figure(
        plots.ceilings_from_profile(profile) + datasheet, points, title=f"Roofline, {where}", height=560
    )
    fig.update_layout(title_font_size=12, legend=LEGEND_BELOW, margin=dict(b=150))
    _readable_axes(fig, [y for tr in fig.data for y in tr.y])
    return fig


class InteractiveRoofline:
    """Lesson 01's explorer: pick a machine (C, B) and a kernel (F, D); see the bound update.

    Presets are the GPUs of ``gpulab.core.hardware`` (their dense bf16 tensor-core peak, or fp32 where there is
    none) and the seed lecture's accelerator. Sliders are logarithmic: C in TFLOP/s, B in TB/s, F in FLOPs,
    D in bytes. ``.widget`` is the container to display; ``.bound`` is the current ``roofline.Bound``.
    """

    F_RANGE, D_RANGE = (1e6, 1e15), (1e6, 1e12)  # slider ranges: FLOPs and bytes

    def __init__(self, preset: str = "Seed accelerator", flops: float = 1e12, bytes_moved: float = 100e9):
        if preset not in hardware.GPUS:
            raise ValueError(f"preset must be one of {list(hardware.GPUS)}, got {preset!r}")
        for name, v, (lo, hi) in (("flops", flops, self.F_RANGE), ("bytes_moved", bytes_moved, self.D_RANGE)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
                raise ValueError(f"{name} must be a number in [{lo:g}, {hi:g}] (the slider's range), got {v!r}")
        self.preset = W.Dropdown(options=list(hardware.GPUS), value=preset, description="machine")
        self.c = widgets.slider(
            W.FloatLogSlider, base=10, min=0, max=3.5, step=0.01, description="C peak (TFLOP/s)", readout_format=".3g"
        )
        self.b = widgets.slider(
            W.FloatLogSlider, base=10, min=-1, max=1, step=0.01, description="B bandwidth (TB/s)", readout_format=".3g"
        )
        self.f = widgets.slider(
            W.FloatLogSlider,
            value=flops,
            base=10,
            min=6,
            max=15,
            step=0.05,
            description="F work (FLOPs)",
            readout_format=".3g",
        )
        self.d = widgets.slider(
            W.FloatLogSlider,
            value=bytes_moved,
            base=10,
            min=6,
            max=12,
            step=0.05,
            description="D traffic (bytes)",
            readout_format=".3g",
        )
        self.readout = W.HTML()
        self._apply_preset()
        fig = self._figure()
        self._change()(fig)  # the first state goes into the figure before it becomes a widget
        self.live = widgets.LiveFigure(fig)
        for w in (self.c, self.b, self.f, self.d):
            w.observe(lambda _: self.refresh(), names="value")
        self.preset.observe(lambda _: (self._apply_preset(), self.refresh()), names="value")
        self.widget = widgets.container(self.preset, self.c, self.b, self.f, self.d, self.readout, self.live.widget)
        self._update_readout()

    def _apply_preset(self) -> None:
        spec = hardware.get(self.preset.value)
        peak = spec.peak_tflops["bf16"] or spec.peak_tflops["fp16"] or spec.peak_tflops["fp32"]
        self.c.value, self.b.value = peak, spec.hbm_tbps

    @property
    def bound(self) -> roofline.Bound:
        return roofline.bound(self.f.value, self.d.value, self.c.value, self.b.value)

    def _figure(self) -> go.Figure:
        fig = plots.roofline_figure(
            [dict(label="roof", peak_tflops=self.c.value, hbm_tbps=self.b.value)], title="", height=420
        )
        fig.add_scatter(
            x=[1.0],
            y=[1.0],
            mode="markers",
            name="your kernel (at the bound)",
            marker=dict(size=14, color="black", symbol="star"),
        )
        fig.add_scatter(
            x=[1.0, 1.0], y=[1e-3, 1e4], mode="lines", name="ridge point", line=dict(color="gray", dash="dot")
        )
        fig.update_layout(
            legend={**LEGEND_BELOW, "y": -0.25},
            margin=dict(t=50, b=120),
            title_x=0,
            title_xanchor="left",
            title_font_size=13,
        )
        # powers of ten: at the sliders' ends the axes reach 1e-6 and 1e6, which SI prefixes print as 1µ and 1M
        fig.update_xaxes(dtick=1, ticklabelstandoff=6, exponentformat="power")
        fig.update_yaxes(dtick=1, ticklabelstandoff=6, exponentformat="power")
        return fig

    @staticmethod
    def _x_range(*intensities) -> list:
        """Log10 x-range: the usual 1e-2..1e4, widened to keep every point on the plot."""
        logs = [math.log10(i) for i in intensities if i > 0]
        return [min([-2.0] + [v - 0.5 for v in logs]), max([4.0] + [v + 0.5 for v in logs])]

    def _change(self):
        """A function that brings a figure up to the current slider values."""
        b = self.bound
        rate = roofline.attainable_tflops(b.intensity, self.c.value, self.b.value)
        x_range = self._x_range(b.intensity, b.ridge)
        x, y = plots.roof_xy(self.c.value, self.b.value, log_range=x_range)
        y_range = [math.log10(min(y[0], rate)) - 0.3, math.log10(self.c.value) + 0.3]  # the roof and the star

        def change(fig):
            fig.data[0].x, fig.data[0].y = x.tolist(), y.tolist()  # lists: see gpulab.figures.plots
            fig.data[0].name = f"roof: C={self.c.value:.3g} TFLOP/s, B={self.b.value:.3g} TB/s"
            fig.data[1].x, fig.data[1].y = [b.intensity], [rate]
            fig.data[2].x = [b.ridge, b.ridge]
            fig.data[2].y = [10 ** y_range[0], 10 ** y_range[1]]
            fig.layout.xaxis.range = x_range
            fig.layout.yaxis.range = y_range
            fig.layout.title.text = (
                f"{b.limiter}-bound: t >= {b.time_ms:.4g} ms (I = {b.intensity:.3g}, ridge {b.ridge:.3g} FLOP/B)"
            )

        return change

    def _update_readout(self) -> None:
        b = self.bound
        rate = roofline.attainable_tflops(b.intensity, self.c.value, self.b.value)
        self.readout.value = (
            f"<b>compute</b> F/C = {b.compute_ms:.4g} ms &nbsp; <b>memory</b> D/B = "
            f"{b.memory_ms:.4g} ms &nbsp; &rarr; <b>{b.limiter}-bound</b>, t &ge; "
            f"{b.time_ms:.4g} ms; attainable {rate:.3g} TFLOP/s"
        )

    def refresh(self) -> None:
        """Redraw the figure and the readout for the current slider values."""
        self.live.update(self._change())
        self._update_readout()
