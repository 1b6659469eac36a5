"""The figure checker itself (tests/figure_checks.py) on hand-made figures: each broken one is caught with a
message naming the fault, and each sound one (reversed range, bar from 0, heatmap cells, subplots) passes."""

import plotly.graph_objects as go
import pytest
from plotly.subplots import make_subplots

from tests.figure_checks import check_figure


def _raises(fig, match):
    with pytest.raises(AssertionError, match=match):
        check_figure(fig, "made")


def test_sound_figures_pass():
    check_figure(go.Figure(go.Scatter(x=[1, 2, 3], y=[10, 20, 30]), layout=dict(yaxis_range=[35, 5])))  # reversed
    check_figure(go.Figure(go.Bar(x=["a", "b"], y=[5, 6]), layout=dict(yaxis_range=[0, 6.5])))  # bar from 0
    # heatmap of 3 columns at x = 0, 1, 2: cells span [-0.5, 2.5]
    check_figure(go.Figure(go.Heatmap(z=[[1, 2, 3]], x=[0, 1, 2]), layout=dict(xaxis_range=[-0.5, 2.5])))
    check_figure(go.Figure(go.Scatter(x=[1, 1e3], y=[1, 2]), layout=dict(xaxis_type="log", xaxis_range=[-0.5, 3.5])))


def test_empty_trace_and_ragged_trace():
    _raises(go.Figure(go.Scatter(x=[], y=[])), "no finite data")
    _raises(go.Figure(go.Scatter(x=[1, 2], y=[float("nan")] * 2)), "no finite data")
    _raises(go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 2])), "3 x and 2 y")
    _raises(go.Figure(go.Heatmap(z=[[float("nan"), float("nan")]])), "no finite data")


def test_ranges_that_cut_or_overshoot():
    data = go.Scatter(x=[1, 2, 3], y=[10, 20, 30])  # span 20: at most 10 of empty room on a side
    _raises(go.Figure(data, layout=dict(yaxis_range=[15, 30])), "yaxis range .* cuts")
    _raises(go.Figure(data, layout=dict(yaxis_range=[-1, 30])), "yaxis range .* reaches far past")  # 11 below
    check_figure(go.Figure(data, layout=dict(yaxis_range=[0, 35])))  # 10 below, 5 above
    _raises(go.Figure(data, layout=dict(yaxis_range=[45, -5])), "reaches far past")  # reversed too
    log = go.Scatter(x=[1, 1e3], y=[1, 2])
    _raises(go.Figure(log, layout=dict(xaxis_type="log", xaxis_range=[-1.5, 3])), "reaches far past")  # 1.5 decades
    _raises(go.Figure(go.Bar(x=["a"], y=[5]), layout=dict(yaxis_range=[4, 5])), "cuts")  # the bar starts at 0
    # nearly flat data may sit in a range fixed for a slider: room up to 1/2 x 0.25 x its magnitude (0.125 here)
    flat = go.Scatter(x=[1, 2], y=[0.95, 1.0])
    check_figure(go.Figure(flat, layout=dict(yaxis_range=[0.85, 1.02])))
    _raises(go.Figure(flat, layout=dict(yaxis_range=[0.5, 1.02])), "reaches far past")


def test_subplot_axis_and_dropdown_view():
    fig = make_subplots(rows=1, cols=2)
    fig.add_trace(go.Scatter(x=[1, 2], y=[1, 2]), 1, 1)
    fig.add_trace(go.Scatter(x=[1, 2], y=[1, 2]), 1, 2)
    check_figure(fig)
    fig.update_yaxes(range=[0, 100], row=1, col=2)
    _raises(fig, "yaxis2 range")
    two = go.Figure([go.Scatter(x=[1], y=[1]), go.Scatter(x=[1], y=[2])])
    two.update_layout(
        updatemenus=[
            dict(
                buttons=[
                    dict(label="a", method="update", args=[{"visible": [True, False]}]),
                    dict(label="none", method="update", args=[{"visible": [False, False]}]),
                ]
            )
        ]
    )
    _raises(two, "view 1 of the dropdown")
