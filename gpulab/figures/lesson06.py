"""Lesson 06's figures (coalescing): one warp request drawn lanes -> addresses -> sectors, and its explorer.

Models: ``gpulab.models.sectors``. Figures hold plain lists.
"""

from __future__ import annotations

import math

import ipywidgets as W
import plotly.graph_objects as go

from ..models.sectors import (
    ITEMSIZES,
    LINE_BYTES,
    WarpRequest,
    predicted_tbps,
    stride_model_rows,
    strided_copy_efficiency,
    warp_request,
)
from ..models.waves import cdiv
from . import plots, widgets
from .plots import LOG_TICKS


def _picture(req: WarpRequest) -> dict:
    """Trace data (plain lists) for ``request_figure``."""
    g = req.sector_bytes
    used = req.used_bytes_per_sector()
    lo = min(min(req.addresses) // LINE_BYTES * LINE_BYTES, req.sectors[0] * g)
    hi = max(req.sectors[-1] * g + g, max(req.addresses) + req.itemsize)
    hi = cdiv(hi, LINE_BYTES) * LINE_BYTES
    lanes = len(req.addresses)
    lane_x = [lo + (hi - lo) * (k + 0.5) / lanes for k in range(lanes)]
    centres = [a + req.itemsize / 2 for a in req.addresses]
    lx, ly = [], []
    for xl, xa in zip(lane_x, centres):
        lx += [xl, xa, None]
        ly += [0.92, 0.12, None]
    return dict(
        lo=lo,
        hi=hi,
        sector_base=[s * g for s in req.sectors],
        sector_len=[g] * req.n_sectors,
        sector_text=[f"sector {s}: {used.get(s, 0)} of {g} B used" for s in req.sectors],
        sector_color=[used.get(s, 0) / g for s in req.sectors],
        useful_base=list(req.addresses),
        useful_len=[req.itemsize] * lanes,
        link_x=lx,
        link_y=ly,
        lane_x=lane_x,
        lane_text=[f"lane {k} -> byte {a}" for k, a in enumerate(req.addresses)],
    )


def _title(req: WarpRequest, label: str) -> dict:
    return plots.title(
        f"{label}: {len(req.addresses)} lanes touch {req.n_sectors} sectors of {req.sector_bytes} B",
        f"{req.useful_bytes} useful bytes of {req.bytes_moved} moved: efficiency {req.efficiency:.1%}",
    )


def _apply_picture(fig, req: WarpRequest, label: str) -> None:
    p = _picture(req)
    fig.data[0].base, fig.data[0].x, fig.data[0].y = p["sector_base"], p["sector_len"], [0.0] * req.n_sectors
    fig.data[0].text, fig.data[0].marker.color = p["sector_text"], p["sector_color"]
    fig.data[1].base, fig.data[1].x = p["useful_base"], p["useful_len"]
    fig.data[1].y = [0.0] * len(p["useful_base"])
    fig.data[2].x, fig.data[2].y = p["link_x"], p["link_y"]
    fig.data[3].x, fig.data[3].y, fig.data[3].text = p["lane_x"], [1.0] * len(p["lane_x"]), p["lane_text"]
    fig.layout.xaxis.range = [p["lo"], p["hi"]]
    span = p["hi"] - p["lo"]
    fig.layout.xaxis.dtick = (
        req.sector_bytes if span <= 16 * req.sector_bytes else (LINE_BYTES if span <= 16 * LINE_BYTES else None)
    )
    fig.layout.title = _title(req, label)


def request_figure(req: WarpRequest, label: str = "warp request", height: int = 400):
    """A plotly figure of one warp request: lanes on top, a line from each lane to the bytes it reads, and the
    sectors those bytes fall in below (shaded by the fraction of their bytes used). Plain lists only. ``height``
    (px) holds the picture beside a legend of four rows, as a phone's 366 px figure stacks it (at 340 px the
    picture kept 135 px)."""
    fig = go.Figure()
    fig.add_bar(
        orientation="h",
        name="sector moved",
        width=0.34,
        base=[0],
        x=[1],
        y=[0.0],
        text=[""],
        hovertemplate="%{text}<extra></extra>",
        textposition="none",
        marker=dict(
            color=[1.0],
            colorscale=[[0, "#fde0c5"], [1, "#f28e2b"]],
            cmin=0,
            cmax=1,
            line=dict(color="#8c4a00", width=1),
        ),
    )
    fig.add_bar(
        orientation="h",
        name="bytes a lane asked for",
        width=0.16,
        base=[0],
        x=[1],
        y=[0.0],
        marker=dict(color="#1f3b73"),
        hoverinfo="skip",
    )
    fig.add_scatter(
        x=[0], y=[0], mode="lines", name="lane -> address", line=dict(color="#7f7f7f", width=1), hoverinfo="skip"
    )
    fig.add_scatter(
        x=[0],
        y=[1.0],
        mode="markers",
        name="lane",
        text=[""],
        hovertemplate="%{text}<extra></extra>",
        marker=dict(size=8, color="#1f77b4"),
    )
    fig.update_layout(
        barmode="overlay",
        template="plotly_white",
        height=height,
        margin=dict(t=30, l=70),
        xaxis=dict(title="byte address (from a 128-byte-aligned line)", showgrid=True),
        yaxis=dict(tickvals=[0, 1], ticktext=["memory", "lanes"], range=[-0.3, 1.2]),
        legend=plots.LEGEND_BELOW,
    )
    _apply_picture(fig, req, label)
    return fig


class SectorExplorer:
    """Lanes -> sectors for ``x[k * stride]``, with sliders for the stride (elements) and the offset
    (elements from a 128-byte-aligned base) and a choice of element size.

    ``.widget`` is the container to display (class ``gpulab-widget``; the stride slider is its first
    ``gpulab-slider``); ``.request`` is the current ``WarpRequest``; ``.live.fig`` the figure.
    """

    def __init__(self, stride: int = 1, offset: int = 0, itemsize: int = 4, copy_tbps: float | None = None):
        req = warp_request(itemsize, stride, offset * itemsize)  # validates the arguments
        self.copy_tbps = copy_tbps
        self.stride = widgets.slider(
            W.IntSlider, value=stride, min=1, max=64, step=1, description="stride (elements between lanes)"
        )
        self.offset = widgets.slider(
            W.IntSlider, value=offset, min=0, max=31, step=1, description="offset (elements from an aligned line)"
        )
        self.itemsize = W.Dropdown(
            options=list(ITEMSIZES),
            value=itemsize,
            description="bytes per element",
            style={"description_width": "initial"},
        )
        self.readout = W.HTML()
        fig = request_figure(req, self._label())
        self.live = widgets.LiveFigure(fig)
        for w in (self.stride, self.offset, self.itemsize):
            w.observe(lambda _: self.refresh(), names="value")
        self.widget = widgets.container(self.stride, self.offset, self.itemsize, self.readout, self.live.widget)
        self._update_readout()

    @property
    def request(self) -> WarpRequest:
        return warp_request(self.itemsize.value, self.stride.value, self.offset.value * self.itemsize.value)

    def _label(self) -> str:
        return (
            f"stride {self.stride.value} x {self.itemsize.value} B, offset {self.offset.value * self.itemsize.value} B"
        )

    def _update_readout(self) -> None:
        req, s = self.request, self.itemsize.value
        e = strided_copy_efficiency(self.stride.value, s, self.offset.value * s)
        text = (
            f"{req}. A copy <code>y[k] = x[k*stride]</code> (strided read, dense write) moves useful bytes at "
            f"{e:.1%} of what it moves"
        )
        if self.copy_tbps:
            text += f": model {self.copy_tbps * e:.3g} TB/s effective at {self.copy_tbps:.3g} TB/s copy bandwidth"
        self.readout.value = text + "."

    def refresh(self) -> None:
        req, label = self.request, self._label()
        self.live.update(lambda fig: _apply_picture(fig, req, label))
        self._update_readout()


#: The factor by which ``stride_figure`` sets gpulab's and torch's measured points apart on its log stride axis.
DODGE = 1.07
#: The model's granules (bytes) and how ``stride_figure`` draws each: (dash, colour, width px). Where the lines
#: coincide (small strides) each is drawn narrower than the one under it, so that all three stay visible.
GRANULE_LINES = {32: ("solid", "#c7c7c7", 7), 64: ("dash", "#8c8c8c", 4), 128: ("dot", "#333333", 2)}


def _coincide_note(strides, models: dict) -> str:
    """Where the model lines of neighbouring granules lie on one another (``plots.coincide``): "model lines on one
    another: 32-byte and 64-byte at strides 1 to 8; 64-byte and 128-byte at 1 to 16", or "" where none are.
    ``models``: granule -> [TB/s per stride]."""
    sizes = sorted(models)
    said = []
    for a, b in zip(sizes, sizes[1:]):
        for lo, hi in plots.coincide(dict(zip(strides, models[a])), dict(zip(strides, models[b]))):
            said.append(f"{a}-byte and {b}-byte at {'strides ' if not said else ''}{lo} to {hi}")
    return "model lines on one another: " + "; ".join(said) if said else ""


def stride_figure(strides, copy_tbps: float, data: dict | None = None, where: str = ""):
    """y[k] = x[k * stride] in fp32: the model's effective bandwidth (TB/s, useful bytes / time) against stride
    for 32-, 64- and 128-byte granules at copy bandwidth ``copy_tbps`` (drawn as ``GRANULE_LINES``; the subtitle
    says where they coincide), and, when ``data`` (a ``gpulab.bench.lesson06`` record) is given, gpulab's strided
    copy and torch's measured beside it (drawn ``DODGE`` left and right of their stride, so that equal rates stay
    two visible markers)."""
    strides = list(strides)
    fig = go.Figure()
    models = {g: [predicted_tbps(st, 4, copy_tbps, sector_bytes=g) for st in strides] for g in GRANULE_LINES}
    for g, (dash, color, width) in GRANULE_LINES.items():
        fig.add_scatter(
            x=strides,
            y=models[g],
            mode="lines",
            line=dict(dash=dash, color=color, width=width),
            name=f"model, {g}-byte granule",
        )
    if data:
        rows = data["stride"]["rows"]
        # gpulab's and torch's points sit side by side around their stride (a dodge on the log axis: both stay
        # visible where they coincide); the hover gives the stride itself
        for key, shift, name, marker, mode in (
            ("ours_tbps", 1 / DODGE, "gpulab strided_copy", dict(size=9), "markers+lines"),
            ("torch_tbps", DODGE, "torch y.copy_(x[::stride])", dict(symbol="x", size=9), "markers"),
        ):
            fig.add_scatter(
                x=[r["stride"] * shift for r in rows],
                y=[r[key] for r in rows],
                customdata=[r["stride"] for r in rows],
                hovertemplate="stride %{customdata}: %{y:.3f} TB/s",
                mode=mode,
                name=name,
                marker=marker,
            )
        for r in data["stride"].get("skipped", []):  # strides whose input does not fit this GPU's memory
            fig.add_vline(x=r["stride"], line=dict(color="firebrick", dash="dot"))
            fig.add_annotation(  # left of its line: the last stride's note stays inside the plot
                x=math.log10(r["stride"]),
                xanchor="right",
                yref="paper",
                y=0.95,
                text=f"stride {r['stride']}: out of memory, skipped",
                showarrow=False,
            )
    sub = "<br>".join(s for s in (where, _coincide_note(strides, models)) if s)
    fig.update_layout(
        title=plots.title("effective bandwidth of y[k] = x[k·stride], fp32", sub),
        xaxis=dict(type="log", title="stride (elements)", tickvals=strides),
        yaxis=dict(type="log", title="effective TB/s (useful bytes / time)", tickvals=LOG_TICKS),
        template="plotly_white",
        height=500,
        margin=dict(t=30),
        legend=plots.LEGEND_BELOW,
    )
    return fig


def traversal_figure(data: dict, bounds: dict, copy_tbps: float, where: str = ""):
    """16384 x 16384 fp32: measured effective bandwidth (TB/s) of each traversal and fp32 transpose of a
    ``gpulab.bench.lesson06`` record, as bars that read across (one row each, its name and value as the row's
    label), with the per-request sector model's bound (``bounds``: method -> (low, high) efficiency, low None
    where there is none) and perfect reuse (the copy, ``copy_tbps``)."""
    bars = [(r["method"], r["tbps"]) for r in data["traversal"]["rows"]] + [
        (f"transpose {r['method']}", r["tbps"]) for r in data["transpose"]["rows"] if r["dtype"] == "fp32"
    ]
    # the measured value goes into the bar's label, beside the axis: a model mark on the bar cannot cover it
    labels = [f"{name}<br>{tbps:.2f} TB/s" for name, tbps in bars]
    fig = go.Figure(go.Bar(y=labels, x=[b[1] for b in bars], orientation="h", name="measured"))
    lo_x, lo_y = [], []
    for (name, _), label in zip(bars, labels):
        key = name.replace("transpose ", "")
        if key in bounds and bounds[key][0]:
            lo_y.append(label)
            lo_x.append(bounds[key][0] * copy_tbps)
    fig.add_scatter(
        x=lo_x,
        y=lo_y,
        mode="markers",
        name="model: per-request sectors",
        marker=dict(symbol="line-ns", size=30, line=dict(width=3, color="crimson")),
    )
    fig.add_scatter(
        x=[copy_tbps] * len(bars),
        y=labels,
        mode="lines",
        name="model: perfect reuse (copy)",
        line=dict(dash="dash", color="gray"),
    )
    fig.update_layout(
        title=plots.title("16384 x 16384 fp32: effective bandwidth", where),
        xaxis_title="effective TB/s",
        yaxis=dict(autorange="reversed"),  # in the record's order, top to bottom
        template="plotly_white",
        height=520,
        margin=dict(t=30),
        legend=plots.LEGEND_BELOW,
    )
    return fig


def stride_table(data: dict) -> str:
    """The stride sweep of a ``gpulab.bench.lesson06`` record as a table (8 lines): gpulab's and torch's measured
    effective TB/s beside the sector model with 32-, 64- and 128-byte granules (from the run's copy bandwidth),
    and, for each measurement, the granule whose model line is nearest (by ratio)."""

    def nearest(tbps: float, model: dict) -> str:
        g = min(model, key=lambda g: abs(math.log(tbps / model[g])))
        which = "all" if max(model.values()) < 1.001 * min(model.values()) else f"{g} B"  # the lines coincide
        return f"{which} ({tbps / model[g]:.2f}x)"

    lines = [
        f"{'stride':>6} {'gpulab':>7} {'torch':>7} {'32 B':>6} {'64 B':>6} {'128 B':>6}   "
        f"{'gpulab nearest':<15} torch nearest"
    ]
    for r, m in zip(data["stride"]["rows"], stride_model_rows(data)):
        mt = m["model_tbps"]
        lines.append(
            f"{r['stride']:6} {r['ours_tbps']:7.3f} {r['torch_tbps']:7.3f} {mt[32]:6.3f} {mt[64]:6.3f} "
            f"{mt[128]:6.3f}   {nearest(r['ours_tbps'], mt):<15} {nearest(r['torch_tbps'], mt)}"
        )
    lines += [f"{r['stride']:6} out of memory, not run: {r['skipped']}" for r in data["stride"].get("skipped", [])]
    return "\n".join(lines)
