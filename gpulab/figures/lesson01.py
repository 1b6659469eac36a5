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

#: The legend in rows under the plot, pinned to the figure's bottom (``plots.LEGEND_BELOW``): it takes no width
#: from the plot, and a first draw at 700 px widened never puts it on the x title.
LEGEND_BELOW = {**plots.LEGEND_BELOW, "font": dict(size=10)}
#: px: a datasheet roof's width, drawn under the measured roof of its dtype (2 px): where the two slopes lie
#: within a pixel or two (a narrow figure), the wider dashed line still shows on both sides of the measured one.
DATASHEET_WIDTH = 4


def _readable_axes(fig: go.Figure, y_values) -> None:
    """Decade ticks with their labels set off from the axes, and a y range reaching 0.4 decade below the
    data: the lowest y label then sits well above the lowest x label, never on it at the origin."""
    ys = [math.log10(v) for v in y_values if v > 0]
    fig.update_xaxes(dtick=1, ticklabelstandoff=6)
    fig.update_yaxes(dtick=1, ticklabelstandoff=6, range=[min(ys) - 0.4, max(ys) + 0.3])


def shared_roofs(ceilings: list[dict]) -> list[str]:
    """One line for each pair of ``ceilings`` (``plots.ceilings_from_*`` dicts) whose roofs lie on one another
    over ``plots.INTENSITY_RANGE`` (``plots.coincide`` over the roofs' points, within 5%), saying which part:
    roofs of one bandwidth share their slope up to the lower roof's ridge, by design ("fp32 and bf16 (measured)
    share the 4.28 TB/s slope up to I = 11.9 FLOP/B"), roofs of one peak their flat part."""
    out = []
    lo_end, hi_end = (v * f for v, f in zip(plots.INTENSITY_RANGE, (1.001, 0.999)))
    for i, a in enumerate(ceilings):
        for b in ceilings[i + 1 :]:
            xa, ya = plots.roof_xy(a["peak_tflops"], a["hbm_tbps"])
            xb, yb = plots.roof_xy(b["peak_tflops"], b["hbm_tbps"])
            na, nb = a["label"].split(":")[0].split(), b["label"].split(":")[0].split()  # "measured bf16"
            kind = [w for w in na if w in nb]  # the words both names hold: "measured", "datasheet H200"
            who = " and ".join(" ".join(w for w in n if w not in kind) for n in (na, nb))
            who += f" ({' '.join(kind)})" if kind else ""
            for lo, hi in plots.coincide(dict(zip(xa.tolist(), ya.tolist())), dict(zip(xb.tolist(), yb.tolist()))):
                if lo <= lo_end and hi >= hi_end:
                    out.append(f"{who} lie on one another")
                elif a["hbm_tbps"] * (lo * hi) ** 0.5 < a["peak_tflops"]:  # the run's middle (log x) on the slope
                    span = f"up to I = {hi:.3g}" if lo <= lo_end else f"from I = {lo:.3g} to {hi:.3g}"
                    out.append(f"{who} share the {a['hbm_tbps']:.2f} TB/s slope {span} FLOP/B")
                else:
                    span = f"from I = {lo:.3g}" if hi >= hi_end else f"from I = {lo:.3g} to {hi:.3g}"
                    out.append(f"{who} share the {a['peak_tflops']:.4g} TFLOP/s roof {span} FLOP/B")
    return out


def measured_roofline_figure(profile: dict, points, where: str = ""):
    """The measured roofline of ``profile`` (a device-profile dict: ``gpu``, ``copy_tbps``, ``matmul_tflops``;
    fp32 and bf16 roofs), the datasheet's dashed beside it when ``gpulab.core.hardware`` knows the GPU, and
    ``points`` (``roofline.KernelPoint``s) on it. ``where`` names the source (the title's small line).

    The datasheet's roofs are drawn first and ``DATASHEET_WIDTH`` px wide, so the measured roofs (2 px) lie on
    them and both show where they meet; the fp32 and bf16 roofs of one bandwidth share their slope by design,
    and the subtitle says up to where (``shared_roofs``)."""
    spec = hardware.find(profile["gpu"])  # None if the datasheet table does not know this GPU
    datasheet = plots.ceilings_from_spec(spec) if spec else []
    measured = plots.ceilings_from_profile(profile)
    fig = plots.roofline_figure(datasheet + measured, points, title="", height=560)
    for tr in fig.data[: len(datasheet) + len(measured)]:  # the legend: measured roofs first, then the datasheet's
        wide = tr.line.dash == "dash"
        tr.update(line_width=DATASHEET_WIDTH if wide else 2, legendrank=2 if wide else 1)
    sub = "<br>".join([where, *shared_roofs(measured), *shared_roofs(datasheet)])
    fig.update_layout(title=plots.title("Roofline", sub), legend=LEGEND_BELOW, margin=dict(t=30, b=30))
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
        fig.update_layout(legend=LEGEND_BELOW, margin=dict(t=30, b=30))
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
            # every other power of ten past 8 decades: on a phone (366 px) ten labels a decade apart turned upright
            fig.layout.xaxis.dtick = 1 if x_range[1] - x_range[0] <= 8 else 2
            fig.layout.yaxis.range = y_range
            fig.layout.title = plots.title(
                f"{b.limiter}-bound: t >= {b.time_ms:.4g} ms",
                f"intensity I = {b.intensity:.3g} FLOP/B, ridge {b.ridge:.3g} FLOP/B",
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
