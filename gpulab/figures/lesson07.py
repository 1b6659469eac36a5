"""Lesson 07's figures (tiling and waves): tile size against intensity and footprint, and tiles in waves.

Models: ``gpulab.tiling``, ``gpulab.waves``. Figures hold plain lists.
"""
from __future__ import annotations

import ipywidgets as W
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import hardware, widgets
from ..bench import lesson07
from ..tiling import fits, footprint_bytes, input_loads, shared_memory_bytes, tile_intensity
from ..waves import SEED_SMS, SEED_TILE, WavePlan, plan, sweep


class TileExplorer:
    """Tile size ``T`` against intensity ``T / s`` and footprint ``2 T^2 s`` (times stages), with one SM's
    shared memory as a line. Sliders: log2 T, pipeline stages; dropdowns: dtype, GPU. ``.widget`` to display."""

    def __init__(self, T: int = 32, dtype: str = "fp32", gpu: str = "H200", stages: int = 1, n: int = 4096):
        self.n = n
        self.log2_t = widgets.slider(W.IntSlider, value=T.bit_length() - 1, min=0, max=9, description="log2 T")
        self.stages = widgets.slider(W.IntSlider, value=stages, min=1, max=6, description="pipeline stages")
        self.dtype = W.Dropdown(options=["fp32", "bf16", "fp16", "fp8"], value=dtype, description="dtype")
        self.gpu = W.Dropdown(options=[g for g, s in hardware.GPUS.items() if s.smem_per_sm_kib], value=gpu,
                              description="GPU")
        self.readout = W.HTML()
        self.ts = [2**e for e in range(0, 10)]
        fig = go.Figure()
        fig.add_scatter(x=self.ts, y=[0.0] * len(self.ts), mode="lines+markers", name="footprint (KiB)")
        fig.add_scatter(x=self.ts, y=[0.0] * len(self.ts), mode="lines", name="shared memory per SM (KiB)",
                        line=dict(dash="dash", color="gray"))
        fig.add_scatter(x=self.ts, y=[0.0] * len(self.ts), mode="lines+markers", name="intensity T/s (FLOP/B)",
                        yaxis="y2")
        fig.add_scatter(x=[1], y=[1.0], mode="markers", name="slider T", marker=dict(size=14, color="black"))
        fig.update_layout(template="plotly_white", height=420, margin=dict(t=90),
                          xaxis=dict(type="log", title="T (square tile side)"),
                          yaxis=dict(type="log", title="footprint of the input tiles (KiB)"),
                          yaxis2=dict(type="log", overlaying="y", side="right", title="FLOP/byte"))
        self._apply(fig)
        self.live = widgets.LiveFigure(fig)
        for w in (self.log2_t, self.stages, self.dtype, self.gpu):
            w.observe(lambda _: self.refresh(), names="value")
        self.widget = widgets.container(self.log2_t, self.stages, self.dtype, self.gpu, self.readout,
                                        self.live.widget)

    def _apply(self, fig) -> None:
        T, d, st, gpu = 2**self.log2_t.value, self.dtype.value, self.stages.value, self.gpu.value
        smem_kib = shared_memory_bytes(gpu) / 1024
        fig.data[0].y = [footprint_bytes(t, d, stages=st) / 1024 for t in self.ts]
        fig.data[1].y = [smem_kib] * len(self.ts)
        fig.data[2].y = [tile_intensity(t, d) for t in self.ts]
        fp = footprint_bytes(T, d, stages=st)
        fig.data[3].x, fig.data[3].y = [T], [fp / 1024]
        verdict = "fits" if fits(fp, gpu) else "does NOT fit"
        fig.update_layout(title=dict(text=f"T = {T}, {d}, {st} stage(s): input tiles {fp / 1024:.3g} KiB, {verdict} "
                                          f"in {smem_kib:.0f} KiB of shared memory on {gpu}", font_size=13))
        n = self.n
        self.readout.value = (f"intensity T/s = {tile_intensity(T, d):.3g} FLOP/B; loads of a {n}^3 product: "
                              f"{input_loads(n, tile=T):.3e} tiled against {input_loads(n):.3e} with no reuse "
                              f"({input_loads(n) / input_loads(n, tile=T):.0f}x fewer)")

    def refresh(self) -> None:
        self.live.update(self._apply)


class WaveExplorer:
    """Wave efficiency against N, with the slider's N marked, and the busy SMs of each of its waves.

    Sliders: N (the square output's side; moves the marker, the bars and the title), tile rows and columns
    (log2), SMs. ``.widget`` is the container to display; ``.plan`` is the current ``WavePlan``.
    """

    def __init__(self, n: int = 1793, tile=SEED_TILE, sms: int = SEED_SMS, n_range=(1024, 4352), title: str = ""):
        self.title = title
        self.n = widgets.slider(W.IntSlider, value=n, min=n_range[0], max=n_range[1], step=1, description="N")
        self.tile_m = widgets.slider(W.IntSlider, value=tile[0].bit_length() - 1, min=4, max=9,
                                     description="log2 tile rows")
        self.tile_n = widgets.slider(W.IntSlider, value=tile[1].bit_length() - 1, min=4, max=9,
                                     description="log2 tile columns")
        self.sms = widgets.slider(W.IntSlider, value=sms, min=1, max=200, description="SMs")
        self.readout = W.HTML()
        self.ns = list(range(n_range[0], n_range[1] + 1, 1))
        fig = make_subplots(rows=1, cols=2, column_widths=[0.65, 0.35],
                            subplot_titles=("model efficiency against N", "busy SMs in each wave"))
        fig.add_scatter(x=self.ns, y=[0.0] * len(self.ns), mode="lines", name="wave efficiency", row=1, col=1)
        fig.add_scatter(x=self.ns, y=[0.0] * len(self.ns), mode="lines", name="tile x wave efficiency",
                        line=dict(dash="dot"), row=1, col=1)
        fig.add_scatter(x=[0], y=[0], mode="markers", name="slider N", marker=dict(size=12, color="black"),
                        row=1, col=1)
        fig.add_bar(x=[1], y=[0], name="busy SMs", marker_color="#1f77b4", row=1, col=2)
        fig.add_bar(x=[1], y=[0], name="idle SMs", marker_color="#dddddd", row=1, col=2)
        fig.update_layout(barmode="stack", template="plotly_white", height=440, margin=dict(t=100))
        fig.update_xaxes(title_text="N (output is N x N)", row=1, col=1)
        fig.update_yaxes(title_text="efficiency", range=[0, 1.05], row=1, col=1)
        fig.update_xaxes(title_text="wave", dtick=1, row=1, col=2)
        fig.update_yaxes(title_text="SMs", row=1, col=2)
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
        return plan(self.n.value, self.n.value, self.tile, sms=self.sms.value)

    def _apply(self, fig) -> None:
        p, tile, sms = self.plan, self.tile, self.sms.value
        fig.data[0].y = sweep(self.ns, tile, sms=sms, what="wave_efficiency")
        fig.data[1].y = sweep(self.ns, tile, sms=sms)
        fig.data[2].x, fig.data[2].y = [p.M], [p.wave_efficiency]
        waves = list(range(1, p.waves + 1))
        busy = p.busy_per_wave()
        fig.data[3].x, fig.data[3].y = waves, busy
        fig.data[4].x, fig.data[4].y = waves, [p.slots - b for b in busy]
        fig.update_layout(title=dict(text=f"{self.title}<br><sup>N = {p.M}, {tile[0]} x {tile[1]} tiles: "
                                          f"{p.tiles_m} x {p.tiles_n} = {p.tiles} tiles on {sms} SMs, {p.waves} "
                                          f"wave(s), last {p.last_wave_tiles} busy</sup>", font_size=13))
        self.readout.value = (f"wave efficiency {p.wave_efficiency:.1%}, tile efficiency {p.tile_efficiency:.1%}, "
                              f"both {p.efficiency:.1%}; last-wave occupancy {p.last_wave_occupancy:.1%}")

    def refresh(self) -> None:
        self.live.update(self._apply)


def tiles_figure(data: dict, where: str = ""):
    """The tile study of a ``gpulab.bench.lesson07`` record: measured TFLOP/s against the square tile side T per
    dtype, the model intensity T/s (FLOP/B, right axis), tiles too big to run annotated, and the no-reuse kernel
    at T = 1."""
    fig = go.Figure()
    for d, color in (("fp32", "#1f77b4"), ("bf16", "#d62728")):
        rows = [r for r in data["tiles"] if r["dtype"] == d]
        ran = [r for r in rows if "tflops" in r]
        fig.add_scatter(x=[r["T"] for r in ran], y=[r["tflops"] for r in ran], mode="markers+lines",
                        name=f"{d} measured (TFLOP/s)", marker=dict(color=color, size=9))
        fig.add_scatter(x=[r["T"] for r in rows], y=[r["intensity"] for r in rows], mode="lines", yaxis="y2",
                        name=f"{d} model intensity T/s (FLOP/B)", line=dict(color=color, dash="dash"))
        for r in rows:
            if "tflops" not in r:
                fig.add_annotation(x=r["T"], y=0.5, yref="paper", text=f"{d} T={r['T']}: not run<br>(2T²s too big)",
                                   showarrow=False, font=dict(size=10, color=color))
    nr = data["noreuse"]
    fig.add_scatter(x=[1], y=[nr["tflops"]], mode="markers", marker=dict(symbol="x", size=12, color="black"),
                    name=f"no reuse, fp32 {nr['n']}³ (TFLOP/s)")
    fig.update_layout(title=dict(text=f"tiled matmul against tile size T, {data['tiles'][0]['n']}³<br><sup>{where}</sup>",
                                 font_size=13), template="plotly_white", height=440, margin=dict(t=90),
                      xaxis=dict(type="log", title="T (tile side; 1 = no reuse)"),
                      yaxis=dict(type="log", title="TFLOP/s"),
                      yaxis2=dict(type="log", overlaying="y", side="right", title="FLOP/byte"))
    return fig


def sweep_figure(s: dict, where: str = ""):
    """The dense sweep of a ``gpulab.bench.lesson07`` record (``s = data["sweep"]``): bf16 TFLOP/s of torch and
    gpulab at every N, N % 8 == 0 apart from the rest, and the wave model (``lesson07.wave_model``) scaled to
    gpulab's best rate."""
    eff = lesson07.wave_model(s)
    fig = go.Figure()
    for method, color in (("torch", "#1f77b4"), ("gpulab", "#d62728")):
        rates = lesson07.sweep_rates(s, method)
        for aligned in (True, False):
            pts = [(n, r) for n, r in zip(s["ns"], rates) if r is not None and (n % 8 == 0) == aligned]
            fig.add_scatter(x=[n for n, _ in pts], y=[r for _, r in pts], mode="markers",
                            name=f"{method}, N {'%' if aligned else 'not %'} 8{' == 0' if aligned else ''}",
                            marker=dict(color=color, size=4 if aligned else 3,
                                        symbol="circle" if aligned else "circle-open"))
    best = max(r for r in lesson07.sweep_rates(s, "gpulab") if r is not None)
    fig.add_scatter(x=s["ns"], y=[best * e for e in eff], mode="lines", line=dict(color="gray", width=1),
                    name=f"wave model x best gpulab rate ({s['tile'][0]}x{s['tile'][1]} tiles, {s['sms']} SMs)")
    fig.update_layout(title=dict(text=f"bf16 matmul N x N x N: every N from {s['ns'][0]} to {s['ns'][-1]}<br><sup>{where}</sup>",
                                 font_size=13), template="plotly_white", height=520, margin=dict(t=90),
                      xaxis_title="N", yaxis_title="TFLOP/s")
    return fig


def wave_model_figure(ns, tile, gpu: str = "H200"):
    """The wave model's efficiency alone (``waves.sweep``) against N for ``tile`` on ``gpu``: what the sweep
    figure draws when nothing is recorded yet."""
    ns = list(ns)
    fig = go.Figure(go.Scatter(x=ns, y=sweep(ns, tile, gpu=gpu), mode="lines", name="model efficiency"))
    fig.update_layout(title=f"wave model only (no recorded data yet): {tile[0]}x{tile[1]} tiles on an {gpu}",
                      xaxis_title="N", yaxis_title="efficiency", template="plotly_white", height=420)
    return fig
