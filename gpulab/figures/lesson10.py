"""Lesson 10's figures: collectives measured against message size beside the α-β ring model (sliders for p, α
and β), the host-device link against size (measured on a GPU or recorded; where nothing is recorded the figure
says so), the links across generations beside HBM with their ridge points, the per-GPU memory of ZeRO's stages
and FSDP (a slider for the GPU count), and the tensor-parallel MLP's intensity against the links' ridges. Each
is one call; the models are ``gpulab.models.comm``.
"""

from __future__ import annotations

import math

import ipywidgets as W
import plotly.graph_objects as go

from ..core import hardware
from ..measure import live
from ..models import comm
from . import plots, widgets

NO_LINK_RECORDING = "no recording of lesson 10's host-device link exists yet (python -m gpulab.bench --only lesson10)"
NO_MULTI_GPU = "no recording of NCCL collectives on several GPUs exists yet: gloo on this CPU only"
COLL_COLORS = dict(zip(comm.COLLECTIVES, plots.COLORS))


#: Each collective's measured marker, nested so that points on one spot all show: an open ring around a smaller
#: open mark around a dot (``plots``' figure checks: a ring 3 px wider shows around another).
COLL_MARKERS = dict(
    all_reduce=dict(symbol="circle-open", size=16, line_width=2),
    reduce_scatter=dict(symbol="square-open", size=12, line_width=2),
    all_gather=dict(symbol="diamond-open", size=9, line_width=2),
    broadcast=dict(symbol="circle", size=5),
)
#: Each collective's model line, narrower in drawing order, so a line on another shows with the wider one's
#: edges around it: reduce_scatter's ring model is all_gather's, and the four meet at small or large S.
COLL_WIDTHS = dict(all_reduce=7, reduce_scatter=5, all_gather=3, broadcast=1)
SAME_MODEL = "reduce_scatter's model is all_gather's (p - 1 steps of S/p bytes each)"


def _log_layout(fig, xt, yt, height=440):
    fig.update_layout(
        template="plotly_white",
        height=height,
        xaxis=dict(type="log", title=xt),
        yaxis=dict(type="log", title=yt),
        legend=plots.LEGEND_BELOW,
        margin=dict(t=30, b=30, r=20),
    )
    return fig


def _length(d: int) -> str:
    """A model width as a reader says it: 256 -> "256", 4096 -> "4k"."""
    return f"{d // 1024}k" if d >= 1024 and d % 1024 == 0 else str(d)


def _size(n: float) -> str:
    """Bytes in binary units, as the sizes are powers of two: 1024 -> "1 KiB", 4194304 -> "4 MiB"."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


def _log_ticks(lo: float, hi: float) -> dict:
    """Ticks for a log axis from ``lo`` to ``hi``: each decade where it spans more than two, else 1-2-5 in each
    (never plotly's bare minor digits "2 3 4 5 6 7 8 9", which pile up on a short axis)."""
    if math.log10(hi / lo) > 2:
        return dict(tickmode="linear", tick0=0, dtick=1)
    e0, e1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    vals = [k * 10.0**e for e in range(e0, e1 + 1) for k in (1, 2, 5) if lo <= k * 10.0**e <= hi]
    return dict(tickmode="array", tickvals=vals)


class CollectiveExplorer:
    """Measured collective times against message size (``rows`` of ``bench.lesson10.collectives``) and the ring
    model t = steps · α + bytes_per_rank / β drawn over them; sliders for p, α (µs) and β (GB/s), starting at
    the least-squares fit of the all-reduce at the first p measured. ``.widget``; ``.fig``; ``.fit``: (α s,
    β B/s), or None where the times do not grow with the size (``comm.fit_alpha_beta`` refuses them; the figure
    says so). ``shown``: the ``live.Shown`` that ``collectives`` returns (its ``data["rows"]`` and ``where``);
    ``multi_gpu``: the NCCL record on several GPUs (``bench.lesson10.multi_gpu``), or None (the figure says none
    exists). One legend entry a collective (its marker; its model line toggles with it); the subtitle says which
    model lines are one (``SAME_MODEL``), and the lines are nested in width so each shows (``COLL_WIDTHS``)."""

    def __init__(self, shown: live.Shown, multi_gpu: live.Shown | None = None):
        self.rows, self.where = shown.data["rows"], shown.where
        ps = sorted({r["p"] for r in self.rows})
        ar = [r for r in self.rows if r["collective"] == "all_reduce" and r["p"] == ps[0]]
        try:
            self.fit = comm.fit_alpha_beta([r["n_bytes"] for r in ar], [r["t_s"] for r in ar], "all_reduce", ps[0])
            a_us, b_gbps, unfit = min(max(self.fit[0] * 1e6, 1.0), 1e4), min(max(self.fit[1] / 1e9, 0.01), 1e3), ""
        except ValueError as e:  # times that do not grow with the size: the sliders start at 10 µs and 10 GB/s
            self.fit, a_us, b_gbps, unfit = None, 10.0, 10.0, f"; no α-β fit: {str(e).split(':')[0]}"
        self.p = widgets.slider(W.IntSlider, value=ps[0], min=2, max=8, description="p (ranks)")
        self.alpha = widgets.slider(W.FloatLogSlider, value=a_us, base=10, min=0, max=4, description="α (µs)")
        self.beta = widgets.slider(W.FloatLogSlider, value=b_gbps, base=10, min=-2, max=3, description="β (GB/s)")
        self.sizes = sorted({r["n_bytes"] for r in self.rows})
        self.note = (NO_MULTI_GPU if multi_gpu is None else f"NCCL: {multi_gpu.where}") + unfit
        fig = go.Figure()
        for c in comm.COLLECTIVES:
            fig.add_scatter(x=[], y=[], mode="markers", name=c, legendgroup=c,
                            marker=dict(color=COLL_COLORS[c], **COLL_MARKERS[c]))  # fmt: skip
            fig.add_scatter(x=[], y=[], mode="lines", name=f"{c} model", legendgroup=c, showlegend=False,
                            line=dict(color=COLL_COLORS[c], width=COLL_WIDTHS[c]), opacity=0.6)  # fmt: skip
        _log_layout(fig, "message size S (bytes)", "time per call (s)")
        step = 2 if len(self.sizes) > 5 else 1  # a label every other size: seven fit a narrow figure as four
        fig.update_xaxes(tickmode="array", tickvals=self.sizes[::step], ticktext=[_size(s) for s in self.sizes[::step]])
        self._change()(fig)  # the first state, layout included, goes into the figure before it becomes a widget
        self.live = widgets.LiveFigure(fig)
        self.fig = self.live.fig
        for w in (self.p, self.alpha, self.beta):
            w.observe(lambda _: self.live.update(self._change()), names="value")
        self.widget = widgets.container(self.p, self.alpha, self.beta, self.live.widget)

    def _change(self):
        p, a, b = self.p.value, self.alpha.value * 1e-6, self.beta.value * 1e9
        measured = sorted({r["p"] for r in self.rows})
        q = min(measured, key=lambda m: (abs(m - p), m))  # the measured p nearest the slider's
        meas = [r for r in self.rows if r["p"] == q]
        model = {c: [comm.ring_time_s(c, p, s, a, b) for s in self.sizes] for c in comm.COLLECTIVES}
        ys = [r["t_s"] for r in meas] + [t for ts in model.values() for t in ts]
        lo, hi = min(ys) / 1.5, max(ys) * 1.5
        what = self.where if q == p else f"no measurement at p = {p}: the points are p = {q}'s"
        sub = f"{what}; {self.note}<br>markers: measured at p = {q}; lines: the ring model; {SAME_MODEL}"

        def change(fig):
            for i, c in enumerate(comm.COLLECTIVES):
                pts = [r for r in meas if r["collective"] == c]
                fig.data[2 * i].x = [r["n_bytes"] for r in pts]
                fig.data[2 * i].y = [r["t_s"] for r in pts]
                fig.data[2 * i + 1].x = list(self.sizes)
                fig.data[2 * i + 1].y = model[c]
            fig.layout.title = plots.title(f"p = {p}, α = {a * 1e6:.3g} µs, β = {b / 1e9:.3g} GB/s", sub)
            fig.update_yaxes(range=[math.log10(lo), math.log10(hi)], **_log_ticks(lo, hi))

        return change


#: The host-device link's series: a colour per direction, solid from pinned memory and dashed from pageable; D2H's
#: open rings around H2D's dots, so that where the two directions coincide (pinned copies, from 64 KiB up on the
#: H200) both show.
LINK_STYLE = {
    "H2D": dict(color=plots.COLORS[0], marker=dict(symbol="circle", size=6)),
    "D2H": dict(color=plots.COLORS[1], marker=dict(symbol="circle-open", size=12, line_width=2)),
}
PCIE_DASH = ("dot", "dash", "solid")  # PCIe 3, 4 and 5: each its own line, named on the plot


def link_figure(record: dict | None, label: str) -> go.Figure:
    """Host-to-device and device-to-host bandwidth (GB/s) against copy size, pinned and pageable, from a record
    of ``bench.lesson10.run`` (its ``link`` rows), beside the PCIe generations each way (grey, each named at its
    left end); without a record the datasheet lines alone and ``label`` saying none exists. Where the two
    directions coincide (``plots.coincide``, within 5%) the subtitle says so, and the rings stay visible around
    the dots (``LINK_STYLE``)."""
    fig = go.Figure()
    sizes = [2**10, 2**30]
    notes = []
    for k, link in enumerate(comm.LINKS[:3]):  # first: under the measurements
        fig.add_scatter(x=[sizes[0], sizes[-1]], y=[link.gbps_each_way] * 2, mode="lines", name=link.name,
                        line=dict(color="#999", width=1, dash=PCIE_DASH[k]), showlegend=False)  # fmt: skip
    if record:
        sizes = sorted({r["n_bytes"] for r in record["link"]})
        series = {}
        for direction in ("H2D", "D2H"):
            for pinned in (True, False):
                pts = sorted((r for r in record["link"] if r["direction"] == direction and r["pinned"] == pinned),
                             key=lambda r: r["n_bytes"])  # fmt: skip
                kind = "pinned" if pinned else "pageable"
                series[direction, kind] = {r["n_bytes"]: r["gbps"] for r in pts}
                st = LINK_STYLE[direction]
                fig.add_scatter(x=[r["n_bytes"] for r in pts], y=[r["gbps"] for r in pts], mode="lines+markers",
                                name=f"{direction} {kind}", marker=dict(color=st["color"], **st["marker"]),
                                line=dict(color=st["color"], dash="solid" if pinned else "dash"))  # fmt: skip
        for kind in ("pinned", "pageable"):
            for lo, hi in plots.coincide(series["H2D", kind], series["D2H", kind]):
                span = "up" if hi == sizes[-1] else f"to {_size(hi)}"
                notes.append(f"H2D and D2H {kind} coincide from {_size(lo)} {span} (within 5%; D2H the rings)")
        for tr in fig.data[:3]:
            tr.x = [sizes[0], sizes[-1]]
    for link in comm.LINKS[:3]:
        fig.add_annotation(x=math.log10(sizes[0]), y=math.log10(link.gbps_each_way), text=f"{link.name}",
                           showarrow=False, xanchor="left", yanchor="bottom", font=dict(size=11, color="#666"))  # fmt: skip
    _log_layout(fig, "bytes copied", "GB/s")
    step = max(1, math.ceil(len(sizes) / 6))  # at most six labels: they fit a narrow figure
    fig.update_xaxes(tickmode="array", tickvals=sizes[::step], ticktext=[_size(s) for s in sizes[::step]])
    ys = [y for tr in fig.data for y in tr.y]
    lo, hi = min(ys) / 1.5, max(ys) * 2  # room above PCIe 5's name
    fig.update_yaxes(range=[math.log10(lo), math.log10(hi)], **_log_ticks(lo, hi))
    fig.update_layout(title=plots.title("host-device copies", "<br>".join([label, *notes])))
    return fig


def links_figure() -> go.Figure:
    """Each link of ``gpulab.models.comm.LINKS`` by year: its bandwidth each way beside its GPU's HBM (GB/s), and the
    ridge point (FLOP per byte) of link and HBM against the GPU's bf16 peak (fp16 on V100)."""
    rows = comm.link_rows()
    fig = go.Figure()
    for kind, sym in (("PCIe", "circle"), ("NVLink", "diamond")):
        pts = [r for r in rows if r["link"].startswith(kind)]
        fig.add_scatter(x=[r["year"] for r in pts], y=[r["link_ridge"] for r in pts], mode="markers+lines",
                        name=f"{kind} ridge (FLOP per byte crossing it)", marker_symbol=sym,
                        text=[r["link"] for r in pts])  # fmt: skip
    hbm = sorted({(r["year"], r["hbm_ridge"], r["gpu"]) for r in rows if r["link"].startswith("NVLink")})
    fig.add_scatter(x=[h[0] for h in hbm], y=[h[1] for h in hbm], mode="markers+lines", name="HBM ridge",
                    text=[h[2] for h in hbm])  # fmt: skip
    fig.update_layout(title=plots.title("ridge points: a link needs many more FLOPs per byte than HBM"),
                      template="plotly_white", height=440, yaxis=dict(type="log", title="FLOP per byte"),
                      xaxis_title="year", legend=plots.LEGEND_BELOW, margin=dict(t=30, b=30, r=20))  # fmt: skip
    ys = [y for tr in fig.data for y in tr.y]
    lo, hi = min(ys) / 1.4, max(ys) * 1.4
    fig.update_yaxes(range=[math.log10(lo), math.log10(hi)], **_log_ticks(lo, hi))
    return fig


class ZeroExplorer:
    """Per-GPU memory (GB) of each ZeRO stage and FSDP (``comm.zero_memory_bytes``) for a model of ``n_params``
    with ``activation_bytes`` per GPU, stacked by parameters, gradients, optimizer states and activations: one
    horizontal bar a stage, named at its left in two lines, so the names never turn or run into the legend; a
    slider for the GPU count. ``.widget``; ``.rows``."""

    PARTS = ("params", "grads", "optim", "activations")

    def __init__(self, n_params: int, activation_bytes: float = 0.0, p: int = 8):
        self.n, self.act = n_params, activation_bytes
        self.p = widgets.slider(W.IntSlider, value=p, min=1, max=64, description="GPUs")
        fig = go.Figure()
        stages = list(comm.ZERO_STAGES)
        names = [st.replace(" (", "<br>(") for st in stages]  # "ZeRO-1<br>(optimizer states)"
        for part, color in zip(self.PARTS, plots.COLORS):
            fig.add_bar(name=part, y=names, x=[0.0] * len(stages), orientation="h", marker_color=color)
        fig.update_layout(barmode="stack", template="plotly_white", height=440, xaxis_title="GB per GPU",
                          yaxis=dict(autorange="reversed"), legend={**plots.LEGEND_BELOW, "traceorder": "normal"},
                          margin=dict(t=30, b=30, r=20))  # fmt: skip
        self._change()(fig)
        self.live = widgets.LiveFigure(fig)
        self.fig = self.live.fig
        self.p.observe(lambda _: self.live.update(self._change()), names="value")
        self.widget = widgets.container(self.p, self.live.widget)

    def _change(self):
        self.rows = comm.zero_memory_bytes(self.n, self.p.value, activation_bytes=self.act)

        def change(fig):
            for i, part in enumerate(self.PARTS):
                fig.data[i].x = [r[part] / 1e9 for r in self.rows]
            fig.layout.title = plots.title(
                f"{self.n / 1e9:.3g}B parameters on {self.p.value} GPUs: {self.rows[0]['total'] / 1e9:.3g} GB (DDP) "
                f"to {self.rows[-1]['total'] / 1e9:.3g} GB (ZeRO-3); activations are not sharded"
            )

        return change


class TensorParallelExplorer:
    """The tensor-parallel MLP's FLOPs per communicated byte (``comm.tp_mlp_counts``) against d_model, beside
    the ridge C/β of NVLink 4 and PCIe 5 for the H200's bf16 peak; a slider for the tensor-parallel degree t.
    ``.widget``; ``.fig``."""

    D_MODELS = [2**k for k in range(8, 15)]

    def __init__(self, t: int = 8, gpu: str = "H200"):
        self.peak = hardware.get(gpu).peak_tflops["bf16"] * 1e12
        self.t = widgets.slider(W.IntSlider, value=t, min=2, max=16, description="t (GPUs)")
        fig = go.Figure()
        fig.add_scatter(x=self.D_MODELS, y=[1.0] * len(self.D_MODELS), mode="lines+markers", name="TP MLP, bf16")
        for name in ("NVLink 4", "PCIe 5"):
            r = comm.ridge(self.peak, comm.get_link(name).gbps_each_way * 1e9)
            fig.add_scatter(x=[self.D_MODELS[0], self.D_MODELS[-1]], y=[r, r], mode="lines", name=f"{name} ridge",
                            line=dict(dash="dot"))  # fmt: skip
        _log_layout(fig, "d_model", "FLOP per byte communicated")
        fig.update_xaxes(tickmode="array", tickvals=self.D_MODELS, ticktext=[_length(d) for d in self.D_MODELS])
        self._change()(fig)
        self.live = widgets.LiveFigure(fig)
        self.fig = self.live.fig
        self.t.observe(lambda _: self.live.update(self._change()), names="value")
        self.widget = widgets.container(self.t, self.live.widget)

    def _change(self):
        t = self.t.value
        ys = [comm.tp_mlp_counts(1, d, t)["intensity"] for d in self.D_MODELS]
        nv = comm.ridge(self.peak, comm.get_link("NVLink 4").gbps_each_way * 1e9)
        cross = next((d for d, y in zip(self.D_MODELS, ys) if y >= nv), None)

        def change(fig):
            fig.data[0].y = ys
            fig.layout.title = plots.title(
                f"t = {t}: 8d / ((t-1)·2) FLOP/B; "
                + (
                    f"above NVLink 4's ridge from d_model {cross}"
                    if cross
                    else "below NVLink 4's ridge at every d_model"
                )
            )
            lo, hi = min(min(ys), nv / 10) / 1.6, max(max(ys), fig.data[2].y[0]) * 1.6
            fig.update_yaxes(range=[math.log10(lo), math.log10(hi)], **_log_ticks(lo, hi))

        return change
