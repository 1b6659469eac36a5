"""Lesson 02's figures (warp divergence): one warp's lanes x issue steps, and a slider for the branch boundary.

Models: ``gpulab.simt``. Figures hold plain lists (see ``gpulab.plots``).
"""
from __future__ import annotations

import ipywidgets as W
import plotly.graph_objects as go

from .. import validate, widgets
from ..simt import IDLE, PATH_A, PATH_B, WARP_SIZE, BranchTrace, branch

_COLORS = [[0.0, "#eeeeee"], [0.33, "#eeeeee"], [0.34, "#1f77b4"], [0.66, "#1f77b4"], [0.67, "#ff7f0e"],
           [1.0, "#ff7f0e"]]


def _heatmap_kwargs(trace: BranchTrace) -> dict:
    """Column form (one x, y, z per cell, equal lengths): plotly draws the same heatmap, and every trace has
    as many x as y values, which the browser test's trace check expects."""
    grid = trace.grid() or [[IDLE] * trace.warp_size]  # a trace with no steps draws one idle row
    cells = [(lane, step, v) for step, row in enumerate(grid) for lane, v in enumerate(row)]
    return dict(x=[c[0] for c in cells], y=[c[1] for c in cells], z=[c[2] for c in cells],
                text=["A" if c[2] == PATH_A else "B" if c[2] == PATH_B else "masked" for c in cells], zmin=0, zmax=2)


def _title(trace: BranchTrace, what: str) -> str:
    return (f"{what}: {trace.steps_paid} steps paid, {trace.useful_lane_steps}/{trace.steps_paid * trace.warp_size} "
            f"lane-steps useful ({trace.efficiency:.0%})")


def branch_figure(trace: BranchTrace, title: str = "a branch in one warp", height: int = 320):
    """A plotly heatmap of a ``BranchTrace``: lanes on x, issue steps on y (time runs down); blue = path A
    active, orange = path B active, grey = masked off."""
    fig = go.Figure(go.Heatmap(**_heatmap_kwargs(trace), colorscale=_COLORS, showscale=False, xgap=1, ygap=1,
                               hovertemplate="lane %{x}, step %{y}: %{text}<extra></extra>"))
    fig.update_layout(title=_title(trace, title), height=height, template="plotly_white",
                      xaxis=dict(title="lane (thread id in the warp)", dtick=4),
                      yaxis=dict(title="issue step (time runs down)", autorange="reversed"),
                      margin=dict(t=50, b=40))
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
        self.boundary = widgets.slider(W.IntSlider, value=boundary, min=0, max=WARP_SIZE, step=1,
                                       description="boundary: lanes < b take A")
        self.readout = W.HTML()
        fig = branch_figure(self.trace, title=f"if thread_id < {boundary}", height=360)
        fig.update_yaxes(range=[self.cost_a + self.cost_b - 0.5, -0.5], autorange=False)  # room for both paths
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
            fig.layout.title = _title(trace, f"if thread_id < {self.boundary.value}")

        self.live.update(change)
        self._update_readout()
