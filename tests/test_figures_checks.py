"""The figure checker itself (tests/figure_checks.py) on hand-made figures: each broken one is caught with a
message naming the fault, and each sound one (reversed range, bar from 0, heatmap cells, subplots) passes."""

import plotly.graph_objects as go
import pytest
from plotly.subplots import make_subplots

from tests.figure_checks import check_figure, check_layout


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


# ------------------------------------------------------------------------------------- the layout checks


def _layout_raises(fig, match, width=1000):
    with pytest.raises(AssertionError, match=match):
        check_layout(fig, "made", width)


def test_coincident_markers_of_two_series_fail_and_apart_or_under_a_line_pass():
    a = go.Scatter(x=[64], y=[290.6], mode="markers", name="tiled")
    b = go.Scatter(x=[64], y=[289.1], mode="markers", name="grouped")  # 0.2% apart on axes of 4 decades
    axes = dict(yaxis=dict(type="log", range=[0, 3]), xaxis=dict(type="log", range=[-1, 3]))
    _layout_raises(go.Figure([a, b], layout=axes), "'tiled' and 'grouped'")
    apart = go.Scatter(x=[64 * 1.3], y=[289.1], mode="markers", name="grouped")  # 0.11 decade: about 80 px
    check_layout(go.Figure([a, apart], layout=axes))
    # a marker on a line of markers: the line still shows where it is hidden; two lines of markers likewise
    line = go.Scatter(x=[1, 2, 3], y=[1, 2, 3], mode="lines+markers", name="curve")
    check_layout(go.Figure([line, go.Scatter(x=[1, 2, 3], y=[1, 2, 3], mode="lines+markers", name="again")]))
    _layout_raises(go.Figure([line, go.Scatter(x=[2], y=[2], mode="markers", name="dot")]), "'curve' and 'dot'")
    # a cloud of markers (a dense sweep) is read as a whole: two clouds may touch
    xs = list(range(60))
    check_layout(go.Figure([go.Scatter(x=xs, y=xs, mode="markers"), go.Scatter(x=xs, y=xs, mode="markers")]))
    # subplots: the same data values in two panels are far apart on the page
    fig = make_subplots(rows=1, cols=2)
    fig.add_scatter(x=[1], y=[1], mode="markers", row=1, col=1)
    fig.add_scatter(x=[1], y=[1], mode="markers", row=1, col=2)
    fig.add_scatter(x=[0], y=[0], mode="markers", row=1, col=1)
    check_layout(fig)


def test_log_axis_with_one_label_and_uneven_ticks_fail():
    bars = go.Bar(x=["naive", "flash"], y=[0.0625, 0.004])  # under two decades: dtick=1 labels only 0.01
    _layout_raises(go.Figure(bars, layout=dict(yaxis=dict(type="log", dtick=1))), "yaxis .log. labels 1 tick")
    check_layout(go.Figure(bars, layout=dict(yaxis=dict(type="log", tickvals=[0.005, 0.01, 0.02, 0.05]))))
    pts = go.Scatter(x=[1, 16, 32, 64], y=[1, 2, 3, 4], mode="lines")  # T = 1, then 16, 32, 64
    _layout_raises(go.Figure(pts, layout=dict(xaxis=dict(type="log", tickvals=[1, 16, 32, 64]))), "one stretch 4")
    even = go.Scatter(x=[8, 16, 32, 64], y=[1, 2, 3, 4], mode="lines")
    check_layout(go.Figure(even, layout=dict(xaxis=dict(type="log", tickvals=[8, 16, 32, 64]))))


def test_title_too_wide_and_small_note_fail():
    data = go.Scatter(x=[1, 2], y=[1, 2])
    long = "naive: out of memory at this L (caught, not a crash); " * 3
    _layout_raises(go.Figure(data, layout=dict(title=f"t<br><sup>{long}</sup>")), "title line")
    check_layout(go.Figure(data, layout=dict(title=f"t<br><sup>{long[:100]}</sup>")))
    _layout_raises(go.Figure(data).add_annotation(x=1, y=1, text="T=256: not run", font_size=10), "note")
    check_layout(go.Figure(data).add_annotation(x=1, y=1, text="T=256: not run", font_size=12))
