"""Lesson 09's figures: the step's operations on the roofline, where the step's time goes, the ladder, and a
model-size explorer. Each is one call; predictions come from the counts (``gpulab.capstone``), measurements
from this GPU's suite run or the recorded reference data (``gpulab.core.reference``, key ``lesson09``), labelled;
where nothing is recorded the figure says so.
"""

from __future__ import annotations

import dataclasses
import math

import ipywidgets as W
import plotly.graph_objects as go

from ..capstone import ladder, placement, recorder
from ..capstone.gpt import GPT2_SMALL, GPTConfig
from ..core import hardware, reference
from ..measure import live
from . import plots, widgets
from .lesson01 import shared_roofs

GROUP_COLORS = dict(zip(recorder.GROUPS, plots.COLORS))
KIND_COLORS = {"compute": "#d62728", "memory": "#1f77b4", "overhead": "#7f7f7f"}
NO_RECORDING = "no recording of lesson 09 exists yet: predictions only"
#: A legend in rows under the plot, pinned to the figure's bottom (``plots.LEGEND_BELOW``: clear of the x title
#: at any width and on a first draw at 700 px widened); it takes no width from the plot.
LEGEND_BELOW = {**plots.LEGEND_BELOW, "font": dict(size=11)}


def recorded(gpu: str = reference.DEFAULT_GPU) -> live.Shown:
    """Lesson 09's recording: ``data`` the suite's record or None, ``where`` whose recording or ``NO_RECORDING``."""
    data = reference.load(gpu) if gpu in reference.available() else {}
    if "lesson09" not in data:
        return live.Shown(None, NO_RECORDING, False)
    return live.Shown(data["lesson09"], reference.label(data, "lesson09"), False)


def _spec(spec) -> hardware.GPUSpec:
    return hardware.get(spec) if isinstance(spec, str) else spec


def _elements(r) -> int:
    """Elements an operation reads or writes, whichever are more (its inputs' and outputs' shapes)."""
    return max(sum(math.prod(s) for s, _ in r.inputs), sum(math.prod(s) for s, _ in r.outputs))


def op_roofline(
    records, spec="H200", title: str | None = None, overhead_us: float = placement.LAUNCH_OVERHEAD_US
) -> go.Figure:
    """Every kernel of ``records`` (``OpRecord``s) at its bound on ``spec``'s roofline: x = FLOP/byte, y = the
    rate at the bound, one color per group, marker area by share of the predicted step time. Operations
    without matmul FLOPs are drawn at one FLOP per element read or written, whichever are more (a floor on
    their elementwise work: a sum adds every element it reads, an in-place update touches every element it
    writes back) and marked as such on hover; their bound is their bytes either way. Both axes span every
    kernel drawn; the subtitle says where two roofs lie on one another (``lesson01.shared_roofs``: fp32's and
    bf16's share their slope). ``spec``: a GPU name or a ``GPUSpec`` (``explain.ceilings()``: the measured ceilings);
    ``overhead_us``: the launch cost that classes a kernel overhead-bound."""
    spec = _spec(spec)
    ps = placement.place(records, spec, overhead_us=overhead_us)
    kernels = [r for r in records if r.is_kernel and r.bytes > 0]
    total = placement.step_ms(ps, overhead_us=overhead_us)
    ceilings = plots.ceilings_from_spec(spec)
    title = title or f"{len(ps)} kernels of one training step on the {spec.name} roofline (predicted)"
    fig = plots.roofline_figure(ceilings, title=title)
    for g in recorder.GROUPS:
        pts = [(r, p) for r, p in zip(kernels, ps) if p.group == g]
        if not pts:
            continue
        xs, ys, sizes, text = [], [], [], []
        for r, p in pts:
            f = p.flops or _elements(r)  # the elementwise floor: 1 FLOP per element
            t = max(p.time_ms, 1e-9)
            xs.append(f / p.bytes)
            ys.append(f / (t * 1e-3) / 1e12)
            sizes.append(7 + 36 * math.sqrt(max(p.time_ms, overhead_us * 1e-3) / total))
            text.append(
                f"{r.name.removeprefix('aten.')} ({r.phase})<br>{p.kind}-bound, {p.time_ms * 1e3:.3g} µs"
                + ("" if p.flops else "<br>no matmul FLOPs: x at 1 FLOP/element")
            )
        fig.add_scatter(
            x=xs,
            y=ys,
            mode="markers",
            name=g,
            text=text,
            marker=dict(size=sizes, color=GROUP_COLORS[g], opacity=0.6, line=dict(width=0.5, color="white")),
            hovertemplate="%{text}<br>I=%{x:.3g} FLOP/B<extra>" + g + "</extra>",
        )
    rates = [y for tr in fig.data if tr.name in recorder.GROUPS for y in tr.y if y > 0]  # the kernels, not the roofs
    top = math.log10(spec.peak("bf16") or spec.peak("fp32")) + 0.3
    fig.update_yaxes(range=[math.log10(min(rates)) - 0.5 if rates else top - 4, top], dtick=1, exponentformat="power")
    fig.update_xaxes(dtick=1, exponentformat="power")
    # legend symbols one size (the smallest kernels' would be dots); 7 px markers with a white rim stay apart
    fig.update_layout(
        legend=dict(LEGEND_BELOW, itemsizing="constant"),
        height=560,
        margin=dict(t=30),
        title=plots.title(title, "; ".join(shared_roofs(ceilings)), size=14),  # and where two roofs coincide
    )
    return fig


def breakdown(
    cfg: GPTConfig = GPT2_SMALL, spec="H200", rung: int = 0, overhead_us: float = placement.LAUNCH_OVERHEAD_US
) -> go.Figure:
    """Where the step's time goes, by group: predicted ms on ``spec`` (split into compute-, memory- and
    overhead-bound), beside the measured profiler times per group where lesson 09 is recorded (the
    baseline rung and the last eager one); otherwise the title says no recording exists yet. The bars read
    across, one row a group (its name beside it, first at the top)."""
    spec = _spec(spec)
    r = ladder.RUNGS[rung]
    p = ladder.predict(cfg, r.options, spec, overhead_us=overhead_us)
    groups = list(p["groups"])
    fig = go.Figure()
    for k in placement.KINDS:
        fig.add_bar(
            name=f"predicted, {k}-bound",
            y=groups,
            x=[p["groups"][g][f"{k}_ms"] for g in groups],
            orientation="h",
            marker_color=KIND_COLORS[k],
            offsetgroup="predicted",
        )
    rec = recorded()
    data = rec.data
    measured = ladder.measured_ops(data).get(r.name)
    if measured:
        source = rec.where
    elif data:  # recorded, but the profiler ran on other rungs only
        step = next((x["ms"] for x in data["ladder"] if x["rung"] == r.name), None)
        source = f"{rec.where}; this rung not profiled by group" + (f" (measured step {step:.1f} ms)" if step else "")
    else:
        source = NO_RECORDING
    if measured:
        fig.add_bar(
            name="measured (torch.profiler)",
            y=groups,
            x=[measured.get(g, 0.0) for g in groups],
            orientation="h",
            marker_color="black",
            offsetgroup="measured",
        )
    fig.update_layout(
        barmode="stack",
        template="plotly_white",
        height=480,
        xaxis_title="ms per step",
        yaxis=dict(autorange="reversed"),
        legend={**LEGEND_BELOW, "traceorder": "normal"},  # in the bars' order (a stack lists its top first)
        margin=dict(t=30),
        title=plots.title(f"{r.name}: predicted {p['ms']:.1f} ms on {spec.name}", source, size=14),
    )
    return fig


def ladder_figure(
    cfg: GPTConfig = GPT2_SMALL, spec="H200", overhead_us: float = placement.LAUNCH_OVERHEAD_US
) -> go.Figure:
    """The ladder: each rung's predicted step time on ``spec`` (with ``overhead_us`` a kernel) beside its
    measured time and, where the record has it, its GPU-busy time (lesson 09 recorded; else the title says no
    recording exists yet), with the lesson each rung comes from. The bars read across on a log axis, one row a
    rung (its name and lesson beside it), the ladder's first rung at the top."""
    spec = _spec(spec)
    rows = ladder.predict_ladder(spec, cfg, overhead_us=overhead_us)
    names = [f"{r['rung']}<br>(lesson {r['lesson']})" for r in rows]
    fig = go.Figure()
    bar = dict(y=names, orientation="h")
    fig.add_bar(name=f"predicted ({spec.name})", x=[r["predicted_ms"] for r in rows], marker_color="#1f77b4", **bar)
    rec = recorded()
    data = rec.data
    values = [r["predicted_ms"] for r in rows]
    if data:
        fig.add_bar(name="measured", x=[r["ms"] for r in data["ladder"]], marker_color="#d62728", **bar)
        values += [r["ms"] for r in data["ladder"]]
        busy = [r.get("gpu_busy_ms") for r in data["ladder"]]
        if any(b is not None for b in busy):
            fig.add_bar(name="GPU busy (torch.profiler)", x=busy, marker_color="#7f7f7f", **bar)
            values += [b for b in busy if b]
    # bars on a log axis rise from its start: half a decade under the shortest keeps every bar in sight
    x_range = [math.log10(min(values)) - 0.5, math.log10(max(values)) + 0.15]
    fig.update_layout(
        barmode="group",
        template="plotly_white",
        height=600,
        legend=LEGEND_BELOW,
        margin=dict(t=30),
        xaxis=dict(title="ms per step", type="log", tickvals=plots.HALF_DECADE_TICKS, range=x_range),
        yaxis=dict(autorange="reversed"),  # the ladder's first rung at the top
        title=plots.title("The ladder of habits, GPT-2 small", rec.where, size=14),
    )
    return fig


class ModelSizeExplorer:
    """Layers, d_model and sequence length (sliders and a dropdown) and a rung (dropdown); the figure shows the
    predicted step time on ``spec`` split into compute-, memory- and overhead-bound time, per group (bars that
    read across, one row a group).
    ``.widget`` to display; ``.split`` is the current ``ladder.predict_split`` result."""

    D_MODELS = (256, 512, 768, 1024, 1280, 1600)

    def __init__(self, spec="H200", n_layer: int = 12, d_model: int = 768, seq_len: int = 1024, rung: int = 0):
        self.spec = _spec(spec)
        self.layers = widgets.slider(W.IntSlider, value=n_layer, min=1, max=48, description="layers")
        self.d_model = W.Dropdown(options=self.D_MODELS, value=d_model, description="d_model")
        self.seq = widgets.slider(
            W.IntSlider, value=seq_len, min=128, max=4096, step=128, description="sequence length"
        )
        self.rung = W.Dropdown(
            options=[(r.name, i) for i, r in enumerate(ladder.RUNGS)], value=rung, description="rung"
        )
        self.readout = W.HTML()
        fig = go.Figure()
        for k in placement.KINDS:
            fig.add_bar(
                name=f"{k}-bound",
                y=list(recorder.GROUPS),
                x=[0.0] * len(recorder.GROUPS),
                orientation="h",
                marker_color=KIND_COLORS[k],
            )
        fig.update_layout(
            barmode="stack",
            template="plotly_white",
            height=440,
            xaxis_title="ms per step (predicted)",
            yaxis=dict(autorange="reversed"),  # the groups in the breakdown's order, top to bottom
            legend={**LEGEND_BELOW, "traceorder": "normal"},
            margin=dict(t=30),
        )
        self._change()(fig)
        self.live = widgets.LiveFigure(fig)
        for w in (self.layers, self.d_model, self.seq, self.rung):
            w.observe(lambda _: self.refresh(), names="value")
        self.widget = widgets.container(self.rung, self.layers, self.d_model, self.seq, self.readout, self.live.widget)

    @property
    def cfg(self) -> GPTConfig:
        return GPTConfig(
            n_layer=self.layers.value,
            d_model=self.d_model.value,
            n_head=self.d_model.value // 64,
            seq_len=self.seq.value,
            batch=max(1, 8192 // self.seq.value),
        )

    def _change(self):
        cfg, opts = self.cfg, ladder.RUNGS[self.rung.value].options
        self.split = s = ladder.predict_split(cfg, opts, self.spec)
        by = self._group_kinds(cfg, opts)
        shares = {k: s["kinds"][k] / s["ms"] for k in placement.KINDS}

        def change(fig):
            for i, k in enumerate(placement.KINDS):
                fig.data[i].x = [by.get(g, {}).get(k, 0.0) for g in recorder.GROUPS]
            fig.layout.title = plots.title(
                f"{cfg.n_layer} layer{'s' * (cfg.n_layer != 1)}, d_model {cfg.d_model}, "
                f"{cfg.batch}x{cfg.seq_len} tokens: {s['ms']:.3g} ms",
                f"predicted on {self.spec.name}; bound by compute {shares['compute']:.0%}, memory "
                f"{shares['memory']:.0%}, overhead {shares['overhead']:.0%}",
                size=14,
            )

        self.readout.value = (
            f"predicted step on {self.spec.name}: <b>{s['ms']:.3g} ms</b>; compute-bound "
            f"{s['kinds']['compute']:.3g} ms, memory-bound {s['kinds']['memory']:.3g} ms, "
            f"overhead-bound {s['kinds']['overhead']:.3g} ms"
        )
        return change

    def _group_kinds(self, cfg, opts) -> dict:
        """ms per (group, class), extrapolated from one and two layers like ``ladder.predict_split``."""

        def table(n):
            p = ladder.predict(dataclasses.replace(cfg, n_layer=n), opts, self.spec)
            return {(g, k): v[f"{k}_ms"] for g, v in p["groups"].items() for k in placement.KINDS}

        n = cfg.n_layer
        if n <= 2:
            t = table(n)
        else:
            one, two = table(1), table(2)
            t = {key: one.get(key, 0.0) + (n - 1) * (two.get(key, 0.0) - one.get(key, 0.0)) for key in one | two}
        out: dict = {}
        for (g, k), v in t.items():
            out.setdefault(g, {})[k] = v
        return out

    def refresh(self) -> None:
        self.live.update(self._change())
