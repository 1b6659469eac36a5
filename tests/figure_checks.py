"""A check shared by the figure tests: a figure has data in every trace, and no axis with a set range cuts its
data or reaches far past it (a panel mostly empty, or a range left over from another slider position)."""
import math

#: How far a set range may reach past the data: decades on a log axis, a fraction of the data's span on a
#: linear one (plus half a cell on a heatmap's axes, where each value is drawn as a cell around it).
LOG_SLACK, LINEAR_SLACK = 1.0, 1 / 3


def _numbers(values) -> list[float]:
    return [float(v) for v in (values or []) if isinstance(v, (int, float)) and v is not None and math.isfinite(v)]


def _has_data(values) -> bool:
    """Some value drawn: a finite number, or a category (a bar's name)."""
    return any(isinstance(v, str) or (isinstance(v, (int, float)) and math.isfinite(v)) for v in values)


def _axis_data(fig, axis: str) -> tuple[list[float], float]:
    """The values drawn along ``axis`` ("x" or "y") and the padding a cell adds around them."""
    vals, pad = [], 0.0
    for tr in fig.data:
        v = _numbers(getattr(tr, axis, None))
        if tr.type == "bar" and (tr.orientation == "h") == (axis == "x"):
            v.append(0.0)  # a bar is drawn from 0 to its value
        if tr.type == "heatmap":
            pad = 0.5
        vals += v
    return vals, pad


def check_figure(fig, what: str = "figure") -> None:
    """Raise AssertionError naming ``what`` if a trace is empty or an axis range cuts or far exceeds its data."""
    assert fig.data, f"{what}: no traces"
    for tr in fig.data:
        x, y = getattr(tr, "x", None), getattr(tr, "y", None)
        given = [v for v in (x, y, tr.z if tr.type == "heatmap" else None) if v is not None]
        assert given and all(_has_data(v) for v in given), \
            f"{what}: trace {tr.name!r} has no finite data (an empty panel)"
        if x is not None and y is not None:
            assert len(x) == len(y), f"{what}: trace {tr.name!r} has {len(x)} x and {len(y)} y values"
    for axis in ("x", "y"):
        lay = fig.layout[f"{axis}axis"]
        vals, pad = _axis_data(fig, axis)
        if lay.range is None or not vals:
            continue
        lo, hi = sorted(lay.range)
        if lay.type == "log":
            logs = [math.log10(v) for v in vals if v > 0]
            dlo, dhi, slack = min(logs), max(logs), LOG_SLACK
        else:
            dlo, dhi = min(vals) - pad, max(vals) + pad
            slack = LINEAR_SLACK * max(dhi - dlo, 1e-12)
        assert lo <= dlo + 1e-9 and hi >= dhi - 1e-9, \
            f"{what}: {axis} range {lay.range} cuts the data [{dlo:.3g}, {dhi:.3g}]"
        assert dlo - lo <= slack + 1e-9 and hi - dhi <= slack + 1e-9, \
            f"{what}: {axis} range {lay.range} reaches far past the data [{dlo:.3g}, {dhi:.3g}]"
