"""Lesson 08's figures (FlashAttention): one row walked tile by tile (online softmax), and naive against flash
attention's memory and time at a length chosen by slider.

Models: ``gpulab.online_softmax``, ``gpulab.attention``. Figures hold plain lists.
"""
from __future__ import annotations

import ipywidgets as W
from plotly.subplots import make_subplots

from .. import attention, dtypes, plots, widgets
from .. import online_softmax as osm


class RowWalkExplorer:
    """Lesson 08's online-softmax slider: choose the tile width; see the row's scores coloured by tile (grey:
    skipped, fully masked) and the running m, l and output u/l after each tile, with the exact
    softmax-weighted sum as a dashed line. ``.widget`` is the container, ``.live.fig`` the figure, ``.tile``
    the slider, ``.steps`` the current walk."""

    def __init__(self, scores=None, values=None, tile: int = 4):
        if scores is None:
            scores, values = osm.default_row()
        self.scores, self.values = osm._as_row(scores, values)
        if self.values.shape[1] != 1:
            raise ValueError("the explorer shows scalar values: values must have shape (n,)")
        n = len(self.scores)
        p = osm.softmax_online(self.scores, n)
        self.exact = float(p @ self.values[:, 0])
        self.tile = widgets.slider(W.IntSlider, value=min(tile, n), min=1, max=n, step=1, description="tile width")
        fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12,
                            subplot_titles=("scores s_j (grey: masked, in a skipped tile)",
                                            "running state after each tile"))
        finite = [float(s) if s > osm.NEG_INF else None for s in self.scores]
        fig.add_bar(x=list(range(n)), y=finite, name="score", marker_color=["#9e9e9e"] * n, row=1, col=1)
        for name, color in (("m (running max)", "#d62728"), ("l (running sum)", "#2ca02c"),
                            ("u / l (output so far)", "#1f77b4")):
            fig.add_scatter(x=[], y=[], mode="lines+markers", line_shape="hv", name=name, line=dict(color=color),
                            row=2, col=1)
        fig.add_scatter(x=[-0.5, n - 0.5], y=[self.exact, self.exact], mode="lines", name="exact softmax · v",
                        line=dict(color="#1f77b4", dash="dash"), row=2, col=1)
        fig.update_layout(height=520, template="plotly_white", margin=dict(t=90), title_font_size=13,
                          xaxis2=dict(title="key index j"))
        self._change()(fig)
        self.live = widgets.LiveFigure(fig)
        self.tile.observe(lambda _: self.live.update(self._change()), names="value")
        self.widget = widgets.container(self.tile, self.live.widget)

    def _change(self):
        t = int(self.tile.value)
        self.steps = osm.walk_row(self.scores, self.values, t)
        palette = ["#1f77b4", "#ff7f0e"]
        colors = []
        for i, st in enumerate(self.steps):
            colors += ["#9e9e9e" if st.skipped else palette[i % 2]] * (st.stop - st.start)
        live = [st for st in self.steps if not st.skipped]
        xs = [st.stop - 1 for st in live]
        out = self.steps[-1].state.output()[0]

        def change(fig):
            fig.data[0].marker.color = colors
            fig.data[1].x, fig.data[1].y = xs, [st.state.m for st in live]
            fig.data[2].x, fig.data[2].y = xs, [st.state.l for st in live]
            fig.data[3].x, fig.data[3].y = xs, [float(st.state.output()[0]) for st in live]
            skipped = sum(st.skipped for st in self.steps)
            fig.layout.title = (f"tile width {t}: {len(self.steps)} tiles ({skipped} skipped), "
                                f"output {out:.6f}; exact {self.exact:.6f}")

        return change


def gib(b) -> float | None:
    return None if b is None else b / 2**30


class NaiveVsFlashExplorer:
    """Lesson 08's sweep slider: pick L = 2**k; see the extra memory of naive and flash attention (the model,
    and the measurement where ``data`` has one) and their forward times (measured or recorded only), for the
    suite's sweep shape. ``data``: the ``sweep`` record of ``gpulab.bench.lesson08.run`` (None: model only).
    ``.widget`` is the container, ``.live.fig`` the figure, ``.k`` the slider."""

    METHODS = ("naive", "flash")

    def __init__(self, data: dict | None, where: str = "", log2_l: int = 12, B: int = 1, H: int = 16, d: int = 128,
                 itemsize: int = 2):
        self.data, self.where = data, where
        if data:
            B, H, d, itemsize = data["B"], data["H"], data["d"], dtypes.itemsize(data["dtype"])
        self.B, self.H, self.d, self.itemsize = B, H, d, itemsize
        self.k = widgets.slider(W.IntSlider, value=log2_l, min=8, max=17, step=1, description="L = 2**k, k")
        fig = make_subplots(rows=1, cols=2, subplot_titles=("extra memory above q, k, v (GiB)", "forward time (ms)"))
        fig.add_bar(x=list(self.METHODS), y=[0.0, 0.0], name="model (by hand)", marker_color="#9e9e9e", row=1, col=1)
        fig.add_bar(x=list(self.METHODS), y=[0.0, 0.0], name="measured peak", marker_color="#1f77b4", row=1, col=1)
        fig.add_bar(x=list(self.METHODS), y=[0.0, 0.0], name="measured time", marker_color="#d62728", row=1, col=2)
        fig.update_layout(height=420, template="plotly_white", barmode="group", margin=dict(t=100), title_font_size=12)
        self._change()(fig)
        self.live = widgets.LiveFigure(fig)
        self.k.observe(lambda _: self.live.update(self._change()), names="value")
        self.widget = widgets.container(self.k, self.live.widget)

    def rows_at(self, L: int) -> dict:
        """The measured rows of ``data`` at length L, by method ({} if none)."""
        if not self.data:
            return {}
        return {r["method"]: r for r in self.data["rows"] if r["L"] == L}

    def _change(self):
        L = 2**self.k.value
        model = [gib(attention.memory_model(self.B, self.H, L, self.d, self.itemsize, m)["peak_bytes"]) for m in self.METHODS]
        rows = self.rows_at(L)
        peak = [gib(rows[m]["peak_bytes"]) if m in rows else None for m in self.METHODS]
        ms = [rows[m]["ms"] if m in rows else None for m in self.METHODS]
        ooms = [m for m in self.METHODS if rows.get(m, {}).get("oom")]
        if ooms:
            note = f"{', '.join(ooms)}: out of memory at this L (caught, not a crash); {self.where}"
        elif rows:
            note = self.where
        else:
            note = "no measurement at this L; model only"

        def change(fig):
            fig.data[0].y, fig.data[1].y, fig.data[2].y = model, peak, ms
            fig.layout.title = (f"L = 2**{self.k.value} = {L:,}; B={self.B}, H={self.H}, d={self.d}, "
                                f"{self.itemsize}-byte elements<br><sup>{note}</sup>")

        return change


def naive_flash_figure(sweep: dict | None, where: str = "", lengths=tuple(2**e for e in range(10, 17))):
    """Naive against flash attention, forward: extra peak memory (GiB, the model dotted; measured points;
    out-of-memory crosses at the model's value) and time (ms) against L, both log axes. ``sweep``: the
    ``sweep`` record of ``gpulab.bench.lesson08`` (None: the model alone, for B=1, H=16, d=128, bf16)."""
    sw = sweep or {"B": 1, "H": 16, "d": 128}
    lengths = list(lengths)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("extra peak memory (GiB)", "forward time (ms)"))
    for i, m in enumerate(("naive", "flash")):
        c = plots.COLORS[i]
        fig.add_scatter(x=lengths, y=[attention.memory_model(sw["B"], sw["H"], L, sw["d"], 2, m)["peak_bytes"] / 2**30
                                      for L in lengths],
                        mode="lines", name=f"{m}, model", line=dict(color=c, dash="dot"), row=1, col=1)
        if sweep:
            rows = [r for r in sw["rows"] if r["method"] == m]
            ok = [r for r in rows if not r["oom"]]
            fig.add_scatter(x=[r["L"] for r in ok], y=[r["peak_bytes"] / 2**30 for r in ok], mode="markers",
                            name=f"{m}, measured", marker=dict(color=c), row=1, col=1)
            fig.add_scatter(x=[r["L"] for r in ok], y=[r["ms"] for r in ok], mode="lines+markers",
                            name=f"{m}, time", line=dict(color=c), row=1, col=2)
            oom = [r for r in rows if r["oom"]]
            fig.add_scatter(x=[r["L"] for r in oom], y=[r["model_peak_bytes"] / 2**30 for r in oom], mode="markers",
                            name=f"{m}: out of memory", marker=dict(color=c, symbol="x", size=12), row=1, col=1)
    fig.update_xaxes(type="log", title="L (tokens)")
    fig.update_yaxes(type="log")
    note = where if sweep else "model only: no measurement recorded yet"
    fig.update_layout(title=dict(text=f"naive against flash, B={sw['B']}, H={sw['H']}, d={sw['d']}, bf16<br><sup>{note}</sup>",
                                 font_size=13), height=430, template="plotly_white", margin=dict(t=90))
    return fig


def headline_figure(headline: list[dict], where: str = ""):
    """Forward and backward TFLOP/s of gpulab's Triton kernel, SDPA flash and SDPA cuDNN for each setting of the
    ``headline`` rows of a ``gpulab.bench.lesson08`` record (bars; a backend that did not run is left empty)."""
    labels = [f"d={r['d']} L={r['L']}{' causal' if r['causal'] else ''}" for r in headline]
    fig = make_subplots(rows=2, cols=1, subplot_titles=("forward (TFLOP/s)", "backward (TFLOP/s)"), vertical_spacing=0.18)
    for j, pas in enumerate(("fwd", "bwd")):
        for i, (name, label) in enumerate((("ours", "gpulab Triton"), ("flash", "SDPA flash"), ("cudnn", "SDPA cuDNN"))):
            fig.add_bar(x=labels, y=[r.get(name, {}).get(f"{pas}_tflops") for r in headline], name=label,
                        marker_color=plots.COLORS[i], showlegend=j == 0, row=j + 1, col=1)
    fig.update_layout(barmode="group", height=600, template="plotly_white", margin=dict(t=90),
                      title=dict(text=f"attention, bf16, B*L = 16384, H*d = 2048<br><sup>{where}</sup>", font_size=13))
    return fig


def roofline_figure(points, profile: dict, where: str = ""):
    """Attention's forward kernels (``points``: ``roofline.KernelPoint``s, e.g. from
    ``gpulab.bench.lesson08.roofline_points``) on the bf16 roofline measured in ``profile``."""
    return plots.roofline_figure(plots.ceilings_from_profile(profile, dtypes=("bf16",)), points,
                                 title=f"attention on the roofline<br><sup>{where}</sup>")
