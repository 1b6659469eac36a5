"""Checks a built plotly figure for what a reader would see as broken: a panel with no data (in every view of
its dropdown, if it has one) and an axis range set far beyond the data drawn on it."""
import math


def _axis_names(fig):
    """The layout's axis names present in the figure, e.g. ["xaxis", "yaxis", "yaxis2"]."""
    names = {"xaxis", "yaxis"}
    for tr in fig.data:
        for key in ("xaxis", "yaxis"):
            ref = getattr(tr, key, None) or key[0]
            names.add(key[0] + "axis" + ref[1:])
    return sorted(names)


def _values(tr, letter):
    vals = getattr(tr, letter, None)
    if vals is None:
        return []
    return [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]


def _views(fig):
    """One list of visible flags per view: each dropdown button's, or the figure's own visibility."""
    views = []
    for menu in fig.layout.updatemenus or ():
        for b in menu.buttons:
            vis = (b.args[0] or {}).get("visible") if b.args else None
            if vis is not None:
                views.append(list(vis))
    return views or [[tr.visible is not False for tr in fig.data]]


def assert_no_empty_panel(fig):
    """Every panel (x/y axis pair a trace names, subplots included) has a visible trace with data, in every
    view of the figure's dropdown."""
    assert fig.data, "the figure has no traces"
    panels = {((tr.xaxis or "x"), (tr.yaxis or "y")) for tr in fig.data}
    for i, vis in enumerate(_views(fig)):
        for px, py in panels:
            shown = [tr for tr, v in zip(fig.data, vis) if v and (tr.xaxis or "x") == px and (tr.yaxis or "y") == py
                     and (_values(tr, "y") or _values(tr, "x"))]
            assert shown, f"view {i}: panel ({px}, {py}) has no visible data"


def assert_axes_fit_data(fig, log_slack: float = 1.0, lin_slack: float = 0.5):
    """Every axis whose range the figure sets spans its data with at most ``log_slack`` decades (log axes) or
    ``lin_slack`` x the data's span (linear axes) of empty room on either side, and covers the data."""
    for name in _axis_names(fig):
        axis = fig.layout[name]
        if axis is None or axis.range is None:
            continue
        letter, ref = name[0], name[0] + name[5:]
        vals = [v for tr in fig.data if (getattr(tr, letter + "axis") or letter) == ref for v in _values(tr, letter)]
        if not vals:
            continue
        lo, hi = min(vals), max(vals)
        r0, r1 = axis.range
        if axis.type == "log":
            assert lo > 0, f"{name}: log axis with non-positive data {lo}"
            lo, hi, slack = math.log10(lo), math.log10(hi), log_slack
        else:
            slack = lin_slack * max(hi - lo, abs(hi), 1e-300)
        assert r0 <= lo and r1 >= hi, f"{name}: range {axis.range} cuts the data [{lo:.3g}, {hi:.3g}]"
        assert r0 >= lo - slack and r1 <= hi + slack, \
            f"{name}: range {axis.range} far beyond the data [{lo:.3g}, {hi:.3g}]"


def assert_readable(fig):
    """Both checks above."""
    assert_no_empty_panel(fig)
    assert_axes_fit_data(fig)
