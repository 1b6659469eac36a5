"""The check shared by the figure tests: what a reader would see as broken in a built plotly figure.

``check_figure(fig, what)`` raises AssertionError, naming ``what``, when
- the figure has no traces, a trace has no finite data (an empty panel), or a trace's x and y differ in length;
- a panel (an x/y axis pair, subplots included) shows no data in some view of the figure's dropdown;
- an axis with a set range cuts its data, or reaches far past it (a panel mostly empty, or a range left over
  from another slider position): more than ``LOG_SLACK`` decades on a log axis, more than ``LINEAR_SLACK`` of
  the data's span on a linear one (of ``FLAT`` x its magnitude where the data is nearly flat, so a range
  fixed across a slider's positions may frame values that barely move). Reversed ranges count as their sorted ends; a bar is drawn from 0, so 0
  counts as its data; a heatmap draws each value as a cell around it, so its axes get half a cell more.
"""

import math

LOG_SLACK, LINEAR_SLACK, FLAT = 1.0, 1 / 2, 0.25


def _numbers(values) -> list[float]:
    return [
        float(v)
        for v in (values if values is not None else ())
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    ]


def _has_data(values) -> bool:
    """Some value drawn: a finite number, or a category (a bar's name); a heatmap's z is a list of rows."""
    return any(
        _has_data(v)
        if isinstance(v, (list, tuple))
        else isinstance(v, str) or (isinstance(v, (int, float)) and math.isfinite(v))
        for v in values
    )


def _ref(tr, letter: str) -> str:
    """The axis a trace is drawn on: "x", "x2", ... (plotly's default is "x" / "y")."""
    return getattr(tr, letter + "axis", None) or letter


def _views(fig) -> list[list[bool]]:
    """One list of visible flags per view: each dropdown button's, or the figure's own visibility."""
    views = []
    for menu in fig.layout.updatemenus or ():
        for b in menu.buttons:
            vis = (b.args[0] or {}).get("visible") if b.args else None
            if vis is not None:
                views.append(list(vis))
    return views or [[tr.visible is not False for tr in fig.data]]


def _axis_data(fig, letter: str, ref: str) -> tuple[list[float], float]:
    """The values drawn along axis ``ref`` ("x", "y2", ...) and the padding a heatmap cell adds around them."""
    vals, pad = [], 0.0
    for tr in fig.data:
        if _ref(tr, letter) != ref:
            continue
        v = _numbers(getattr(tr, letter, None))
        if tr.type == "bar" and v and (tr.orientation == "h") == (letter == "x"):
            v.append(0.0)  # a bar is drawn from 0 to its value
        if tr.type == "heatmap":
            pad = 0.5
        vals += v
    return vals, pad


def check_traces(fig, what: str = "figure") -> None:
    """Every trace has finite data and matching x and y lengths; every panel shows data in every view."""
    assert fig.data, f"{what}: no traces"
    for tr in fig.data:
        x, y = getattr(tr, "x", None), getattr(tr, "y", None)
        given = [v for v in (x, y, tr.z if tr.type == "heatmap" else None) if v is not None]
        assert given and all(_has_data(v) for v in given), (
            f"{what}: trace {tr.name!r} has no finite data (an empty panel)"
        )
        if x is not None and y is not None:
            assert len(x) == len(y), f"{what}: trace {tr.name!r} has {len(x)} x and {len(y)} y values"
    panels = {(_ref(tr, "x"), _ref(tr, "y")) for tr in fig.data}
    for i, vis in enumerate(_views(fig)):
        for px, py in sorted(panels):
            shown = [tr for tr, v in zip(fig.data, vis) if v and (_ref(tr, "x"), _ref(tr, "y")) == (px, py)]
            assert shown, f"{what}: view {i} of the dropdown: panel ({px}, {py}) shows no trace"


def check_axes(fig, what: str = "figure", *, log_slack: float = LOG_SLACK, lin_slack: float = LINEAR_SLACK) -> None:
    """Every axis whose range the figure sets (subplots' axes included) covers its data and reaches at most
    ``log_slack`` decades (log) or ``lin_slack`` of the data's span, at least ``FLAT`` x its magnitude (linear)."""
    refs = {(letter, _ref(tr, letter)) for tr in fig.data for letter in "xy"} | {("x", "x"), ("y", "y")}
    for letter, ref in sorted(refs):
        name = letter + "axis" + ref[1:]
        lay = fig.layout[name]
        vals, pad = _axis_data(fig, letter, ref)
        if lay is None or lay.range is None or not vals:
            continue
        lo, hi = sorted(lay.range)
        if lay.type == "log":
            logs = [math.log10(v) for v in vals if v > 0]
            assert logs, f"{what}: {name} is a log axis with no positive data"
            dlo, dhi, slack = min(logs), max(logs), log_slack
        else:
            dlo, dhi = min(vals) - pad, max(vals) + pad
            slack = lin_slack * max(dhi - dlo, FLAT * max(abs(dlo), abs(dhi)), 1e-12)
        assert lo <= dlo + 1e-9 and hi >= dhi - 1e-9, (
            f"{what}: {name} range {lay.range} cuts the data [{dlo:.3g}, {dhi:.3g}]"
        )
        assert dlo - lo <= slack + 1e-9 and hi - dhi <= slack + 1e-9, (
            f"{what}: {name} range {lay.range} reaches far past the data [{dlo:.3g}, {dhi:.3g}]"
        )


def check_figure(fig, what: str = "figure") -> None:
    """Both checks: ``check_traces`` and ``check_axes`` (see the module docstring)."""
    check_traces(fig, what)
    check_axes(fig, what)


# The names the figure tests used before the two checkers were merged.
assert_readable = check_figure
assert_no_empty_panel = check_traces
assert_axes_fit_data = check_axes
