"""Lesson 02's figures (warp divergence): one warp's lanes x issue steps, a slider for the branch boundary, the
loop model against the fraction of expensive elements, the suite's variants beside their predictions, and the
CUDA ``if (lane < b)`` kernel's time and active lanes against b beside the lane-mask model.

Models: ``gpulab.models.simt``; records: ``gpulab.bench.lesson02``. Figures hold plain lists (see ``gpulab.figures.plots``).
"""

from __future__ import annotations

import ipywidgets as W
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..core import validate
from ..kernels import divergence
from ..models import simt
from ..models.simt import IDLE, PATH_A, PATH_B, WARP_SIZE, BranchTrace, branch
from . import plots, widgets

_COLORS = [
    [0.0, "#eeeeee"],
    [0.33, "#eeeeee"],
    [0.34, "#1f77b4"],
    [0.66, "#1f77b4"],
    [0.67, "#ff7f0e"],
    [1.0, "#ff7f0e"],
]


def _heatmap_kwargs(trace: BranchTrace) -> dict:
    """Column form (one x, y, z per cell, equal lengths): plotly draws the same heatmap, and every trace has
    as many x as y values, which the browser test's trace check expects."""
    grid = trace.grid() or [[IDLE] * trace.warp_size]  # a trace with no steps draws one idle row
    cells = [(lane, step, v) for step, row in enumerate(grid) for lane, v in enumerate(row)]
    return dict(
        x=[c[0] for c in cells],
        y=[c[1] for c in cells],
        z=[c[2] for c in cells],
        text=["A" if c[2] == PATH_A else "B" if c[2] == PATH_B else "masked" for c in cells],
        zmin=0,
        zmax=2,
    )


def _title(trace: BranchTrace, what: str) -> dict:
    """``plots.title``: ``what`` and the steps paid, then the useful lane-steps in small type."""
    useful = (
        f"{trace.useful_lane_steps}/{trace.steps_paid * trace.warp_size} lane-steps useful ({trace.efficiency:.0%})"
    )
    return plots.title(f"{what}: {trace.steps_paid} steps paid", useful)


def branch_figure(trace: BranchTrace, title: str = "a branch in one warp", height: int = 320):
    """A plotly heatmap of a ``BranchTrace``: lanes on x, issue steps on y (time runs down); blue = path A
    active, orange = path B active, grey = masked off."""
    fig = go.Figure(
        go.Heatmap(
            **_heatmap_kwargs(trace),
            colorscale=_COLORS,
            showscale=False,
            xgap=1,
            ygap=1,
            hovertemplate="lane %{x}, step %{y}: %{text}<extra></extra>",
        )
    )
    fig.update_layout(
        title=_title(trace, title),
        height=height,
        template="plotly_white",
        xaxis=dict(title="lane (thread id in the warp)", dtick=4),
        yaxis=dict(title="issue step (time runs down)", autorange="reversed", dtick=1, tick0=0),
        margin=dict(t=30, b=40),
    )
    return fig


class BoundaryExplorer:
    """``if thread_id < boundary: A else: B`` in one warp, with a slider for ``boundary`` (0..32).

    ``.widget`` is the container to display (class ``gpulab-widget``; the slider has ``gpulab-slider``);
    ``.trace`` is the current ``BranchTrace``; ``.live.fig`` the figure. At boundary 0 or 32 the branch is
    uniform and the warp pays one path; anywhere between, it pays both.
    """

    def __init__(self, boundary: int = 4, cost_a: int = 3, cost_b: int = 2):
        boundary = validate.integer("boundary", boundary, low=0, high=WARP_SIZE)
        self.cost_a, self.cost_b = validate.integer("cost_a", cost_a), validate.integer("cost_b", cost_b)
        self.boundary = widgets.slider(
            W.IntSlider, value=boundary, min=0, max=WARP_SIZE, step=1, description="boundary: lanes < b take A"
        )
        self.readout = W.HTML()
        fig = branch_figure(self.trace, title=f"if thread_id < {boundary}", height=360)
        fig.update_yaxes(range=[self.trace.steps_paid - 0.5, -0.5], autorange=False)
        self.live = widgets.LiveFigure(fig)
        self.boundary.observe(lambda _: self.refresh(), names="value")
        self.widget = widgets.container(self.boundary, self.readout, self.live.widget)
        self._update_readout()

    @property
    def trace(self) -> BranchTrace:
        b = self.boundary.value
        return branch(lambda tid: tid < b, self.cost_a, self.cost_b)

    def _update_readout(self) -> None:
        self.readout.value = str(self.trace)

    def refresh(self) -> None:
        trace = self.trace
        kw = _heatmap_kwargs(trace)

        def change(fig):
            fig.data[0].x, fig.data[0].y, fig.data[0].z, fig.data[0].text = kw["x"], kw["y"], kw["z"], kw["text"]
            fig.layout.yaxis.range = [trace.steps_paid - 0.5, -0.5]  # the rows paid: fewer when uniform
            fig.layout.title = _title(trace, f"if thread_id < {self.boundary.value}")

        self.live.update(change)
        self._update_readout()


class LoopSweepExplorer:
    """The loop model's efficiency (useful / paid lane-steps, ``simt.loop``) against the fraction of elements
    with 64 trips (the rest 4), interleaved at random and sorted by cost (``simt.group_by_cost``), for a group
    of lanes that step together chosen by slider (``GROUPS``: 32, a warp, up to 1024, a Triton block).
    ``measured`` (a ``gpulab.bench.lesson02`` record, or None) adds the model for kernel (c)'s cases as
    crosses. ``.widget`` is the container, ``.group`` the slider (its value is the group size), ``.live.fig``
    the figure; ``curves(group)`` the two lines for one group size."""

    FRACS = tuple(2.0**-k for k in range(10, 0, -1))
    N = 2**16  # elements per case
    GROUPS = tuple(2**k for k in range(5, 11))
    LAYOUTS = (("interleaved", "#d62728"), ("sorted", "#2ca02c"))

    def __init__(self, measured: dict | None = None, group: int = 32):
        if group not in self.GROUPS:
            raise ValueError(f"group must be one of {self.GROUPS}, got {group!r}")
        self.group = widgets.slider(
            W.SelectionSlider, options=list(self.GROUPS), value=group, description="group: lanes that step together"
        )
        fig = go.Figure()
        for name, color in self.LAYOUTS:
            fig.add_scatter(
                x=list(self.FRACS),
                y=[0.0] * len(self.FRACS),
                mode="lines",  # a line: kernel (c)'s crosses sit on it, and no marker of its own hides them
                name=f"model, {name}",
                line=dict(color=color),
            )
        if measured is not None:
            for layout, color in self.LAYOUTS:
                rs = [r for r in measured["loop"]["rows"] if r["layout"] == layout]
                fig.add_scatter(
                    x=[r["frac_expensive"] for r in rs],
                    y=[r["efficiency"] for r in rs],
                    mode="markers",
                    name=f"kernel (c)'s cases, {layout} (block {measured['block']})",
                    marker=dict(color=color, symbol="x", size=11),
                )
        fig.update_layout(
            # labels set off from the axes: the first x label and the y axis's 0 meet at the origin otherwise
            xaxis=dict(
                type="log",
                title="fraction of elements with 64 trips (the rest 4)",
                tickvals=plots.HALF_DECADE_TICKS,  # each labelled in full: not plotly's bare minor digits
                ticklabelstandoff=6,
            ),
            yaxis=dict(title="efficiency = useful / paid lane-steps", range=[0, 1.05], ticklabelstandoff=6),
            template="plotly_white",
            height=460,
            margin=dict(t=30, b=30),
            legend={**plots.LEGEND_BELOW, "font": dict(size=11)},
        )
        self._change(self.group.value)(fig)  # the first state goes in before the figure becomes a widget
        self.live = widgets.LiveFigure(fig)
        self.group.observe(lambda _: self.live.update(self._change(self.group.value)), names="value")
        self.widget = widgets.container(self.group, self.live.widget)

    def curves(self, group: int) -> dict:
        """{"interleaved": [...], "sorted": [...]}: the loop model's efficiency at each of ``FRACS``."""
        eff = {"interleaved": [], "sorted": []}
        for p in self.FRACS:
            t = divergence.mixed_trips(self.N, p, 4, 64, seed=1)
            eff["interleaved"].append(simt.loop(t, group).efficiency)
            eff["sorted"].append(simt.loop(t[simt.group_by_cost(t)], group).efficiency)
        return eff

    def _change(self, group: int):
        eff = self.curves(group)

        def change(fig):
            fig.data[0].y, fig.data[1].y = eff["interleaved"], eff["sorted"]
            fig.layout.title = plots.title(f"loop model, groups of {group} lanes")

        return change


def variants_figure(data: dict, title: str):
    """Horizontal bars: measured median time (with 20th-80th percentile whiskers) and the model's prediction
    for each variant. Plain lists in the traces (see gpulab.figures.plots)."""
    rs = simt.measured_rows(data)[::-1]  # plotly draws the first bar at the bottom
    names = [r["name"] for r in rs]
    fig = go.Figure()
    fig.add_bar(
        y=names,
        x=[r["measured_ms"] for r in rs],
        orientation="h",
        name="measured (median)",
        error_x=dict(
            type="data",
            symmetric=False,
            array=[r["p80_ms"] - r["measured_ms"] for r in rs],
            arrayminus=[r["measured_ms"] - r["p20_ms"] for r in rs],
        ),
        marker_color="#1f77b4",
    )
    fig.add_bar(
        y=names,
        x=[r["predicted_ms"] if r["predicted_ms"] is not None else 0.0 for r in rs],
        orientation="h",
        name="model (paths alone; for (c) the all-0 and all-64 runs)",
        marker_color="#ff7f0e",
    )
    fig.update_layout(
        title=plots.title(title),  # wrapped: the notebook's title carries the recording's provenance
        barmode="group",
        height=200 + 26 * len(rs),
        template="plotly_white",
        xaxis_title="time (ms)",
        yaxis_ticklabelstandoff=4,
        margin=dict(l=10, r=20, t=30, b=30),  # the names' margin grows to hold them (automargin)
        legend=plots.LEGEND_BELOW,
    )
    return fig


def summary(data: dict) -> str:
    """A short digest (at most 12 lines) of a ``gpulab.bench.lesson02`` record: each variant's measured
    times beside the model's; ``gpulab.bench.lesson02.report(data)`` prints every row."""
    rs = simt.measured_rows(data)
    t_a, t_b = data["path_a"]["median_ms"], data["path_b"]["median_ms"]
    where = [r for r in rs if r["name"].startswith("(a)")]
    uniform = [r for r in rs if r["name"].startswith("(b)")]
    ratio = [r["measured_ms"] / r["predicted_ms"] for r in uniform]
    lines = [
        f"n = {data['n']:,} float32, block {data['block']}: path A alone {t_a:.4g} ms, path B alone {t_b:.4g} ms",
        f"(a) tl.where, 0-100% taking A: {min(r['measured_ms'] for r in where):.4g}-"
        f"{max(r['measured_ms'] for r in where):.4g} ms; model t_A + t_B = {t_a + t_b:.4g} ms",
        f"(b) uniform if: {uniform[0]['measured_ms']:.4g} ms (no block takes A) to {uniform[-1]['measured_ms']:.4g} "
        f"ms (all do); measured / model {min(ratio):.2f}-{max(ratio):.2f}",
        f"(c) loop, trips {data['loop']['cheap']} or {data['loop']['expensive']}; "
        f"torch.sort of the trips {data['loop']['sort_ms']:.4g} ms (not in the sorted times)",
        "    expensive | interleaved: ms (model)  eff | sorted: ms (model)  eff",
    ]
    loop = {(r["frac_expensive"], r["layout"]): r for r in data["loop"]["rows"]}
    named = {(r["frac_expensive"], r["layout"]): r for r in rs if "frac_expensive" in r}
    for frac in sorted({f for f, _ in loop}):
        cells = []
        for layout in ("interleaved", "sorted"):
            r = named[frac, layout]
            cells.append(f"{r['measured_ms']:.4f} ({r['predicted_ms']:.4f}) {loop[frac, layout]['efficiency']:4.0%}")
        lines.append(f"    {frac:9.2%} |       " + " |   ".join(cells))
    return "\n".join(lines)


def _padded(values, pad: float = 0.1) -> list[float]:
    """[lo, hi] around ``values`` with ``pad`` of their span (at least 0.05) on each side."""
    lo, hi = min(values), max(values)
    m = pad * max(hi - lo, 0.5)
    return [lo - m, hi + m]


def lane_branch_figure(lane: dict | None, where: str = "", trips: int = 256):
    """The CUDA ``if (lane < b)`` kernel against b = 0..32, in two panels: the warp execution efficiency (active
    threads per warp instruction / 32) and the time against b = 0, the lane-mask model
    (``simt.boundary_sweep``) as lines, the measured points of ``lane`` (a lesson02 ``lane_branch`` record) as
    crosses. ``lane`` None draws the model alone with the note "no recording yet on this GPU". ``where``: the
    record's provenance, shown under the title beside a record; ``trips``: the model's path length when there is no record."""
    steps = max(lane["trips"] if lane is not None else trips, 1)
    model = simt.boundary_sweep(steps, steps)
    bs = [r["b"] for r in model]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1)
    fig.add_scatter(
        x=bs,
        y=[r["efficiency"] for r in model],
        mode="lines",
        name="model: efficiency",
        line=dict(color="#1f77b4"),
        row=1,
        col=1,
    )
    fig.add_scatter(
        x=bs,
        y=[r["time_ratio"] for r in model],
        mode="lines",
        name="model: time / time at b = 0",
        line=dict(color="#ff7f0e"),
        row=2,
        col=1,
    )
    y_eff, y_time = [r["efficiency"] for r in model], [r["time_ratio"] for r in model]
    if lane is not None:
        pts = simt.lane_branch_points(lane)
        eff = pts["efficiency"]
        if eff:
            fig.add_scatter(
                x=sorted(eff),
                y=[eff[b] for b in sorted(eff)],
                mode="markers",
                name="measured: Nsight Compute",
                marker=dict(color="#1f77b4", symbol="x", size=9),
                row=1,
                col=1,
            )
        fig.add_scatter(
            x=pts["b"],
            y=pts["time_ratio"],
            mode="markers",
            name="measured: median time",
            marker=dict(color="#ff7f0e", symbol="x", size=9),
            row=2,
            col=1,
        )
        y_time += pts["time_ratio"]
        y_eff += list(eff.values())
        note = lane.get("counters_note", "") if not eff else ""
    else:
        note = "no recording yet on this GPU: the model alone"
    fig.update_xaxes(dtick=4)  # both panels: the top one's grid lines at the b the bottom one labels
    fig.update_xaxes(title_text="b in if (lane < b): lanes 0..b-1 take path A", row=2, col=1)
    fig.update_yaxes(title_text="active lanes / 32", range=_padded(y_eff), dtick=0.1, row=1, col=1)
    fig.update_yaxes(title_text="time / time at b = 0", range=_padded(y_time), row=2, col=1)
    title = "CUDA if (lane < b): both paths paid for every 0 < b < 32"
    fig.update_layout(
        title=plots.title(title, where if lane is not None else ""),
        template="plotly_white",
        height=560,
        margin=dict(t=30, b=30),
        legend={**plots.LEGEND_BELOW, "font": dict(size=11)},
    )
    if note:
        fig.add_annotation(
            text=note,
            xref="paper",
            yref="paper",
            x=0.5,
            y=0.5,
            showarrow=False,
            font=dict(size=13),
            bgcolor="rgba(255,255,255,0.8)",
        )
    return fig
