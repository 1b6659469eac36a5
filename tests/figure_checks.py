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


# ------------------------------------------------------------------------------ layout, estimated from the spec
# What plotly.js will draw, estimated without drawing it (tests/browser/figure_geometry.py measures it in Chromium):
# the plot area from the figure's width, margins and axis domains; positions from the axis ranges (or the data's
# extent where plotly picks the range); a text's width from its characters (CHAR_EM of its font size each).
MARKER_PX, CLOUD, MIN_NOTE_PX, CHAR_EM, RING_PX = 3.0, 50, 11, 0.6, 3.0  # px, markers, px, em, px
_MARGIN = dict(l=80, r=80, t=100, b=80)  # plotly's defaults


def _axis_span(fig, letter: str, ref: str, width: float) -> float:
    """Pixels along axis ``ref`` of the plot area: the figure's size less margins (and a legend at the right)."""
    return _axis_px(fig, letter, ref, width)[1]


def _axis_px(fig, letter: str, ref: str, width: float) -> tuple[float, float]:
    """(start, length) in px of axis ``ref`` inside the plot area (the figure less margins and a right legend)."""
    m = {k: (getattr(fig.layout.margin, k, None) if fig.layout.margin else None) for k in _MARGIN}
    m = {k: _MARGIN[k] if v is None else v for k, v in m.items()}
    legend = fig.layout.legend
    if letter == "x" and (legend is None or legend.orientation != "h") and fig.layout.showlegend is not False:
        names = [str(tr.name or "") for tr in fig.data if tr.showlegend is not False]
        if len(names) > 1:
            m["r"] = max(m["r"], 50 + 7 * max(map(len, names)))
    size = width - m["l"] - m["r"] if letter == "x" else (fig.layout.height or 450) - m["t"] - m["b"]
    dom = fig.layout[letter + "axis" + ref[1:]].domain or (0, 1)
    return max(size, 1.0) * dom[0], max(size, 1.0) * (dom[1] - dom[0])


def _to_axis(lay, v):
    """A data value in axis units (log10 on a log axis), or None where it is not drawn."""
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        return None
    if lay.type == "log":
        return math.log10(v) if v > 0 else None
    return float(v)


def _axis_range(fig, letter: str, ref: str) -> tuple[float, float] | None:
    """The drawn range in axis units: the set one, else the data's extent padded 5% each side (plotly's autorange
    pads by about that much)."""
    lay = fig.layout[letter + "axis" + ref[1:]]
    if lay.range is not None:
        return tuple(sorted(lay.range))
    vals = [
        u
        for tr in fig.data
        if _ref(tr, letter) == ref and tr.type in ("scatter", "bar")
        for u in (_to_axis(lay, v) for v in (getattr(tr, letter, None) or ()))
        if u is not None
    ]
    if not vals:
        return None
    lo, hi = min(vals), max(vals)
    pad = 0.05 * (hi - lo) if hi > lo else 0.5
    return lo - pad, hi + pad


def _markers(fig, width: float) -> list[tuple[int, bool, float, float]]:
    """(trace index, drawn alone (no line through it), x px, y px) of every marker on a numeric axis pair."""
    out, ranges = [], {}
    for i, tr in enumerate(fig.data):
        mode = tr.mode or ("lines+markers" if len(tr.x or ()) < 20 else "lines") if tr.type == "scatter" else ""
        if tr.type != "scatter" or "markers" not in mode or tr.visible is False or len(tr.x or ()) > CLOUD:
            continue  # a cloud of markers is read as a whole
        xr, yr = _ref(tr, "x"), _ref(tr, "y")
        xl, yl = fig.layout["xaxis" + xr[1:]], fig.layout["yaxis" + yr[1:]]
        if "category" in (xl.type, yl.type):
            continue
        for key in (("x", xr), ("y", yr)):
            if key not in ranges:
                ranges[key] = _axis_range(fig, *key)
        rx, ry = ranges["x", xr], ranges["y", yr]
        if rx is None or ry is None or rx[1] == rx[0] or ry[1] == ry[0]:
            continue
        (ox, sx), (oy, sy) = _axis_px(fig, "x", xr, width), _axis_px(fig, "y", yr, width)
        for x, y in zip(tr.x or (), tr.y or ()):
            u, v = _to_axis(xl, x), _to_axis(yl, y)
            if u is not None and v is not None:
                px = ox + (u - rx[0]) / (rx[1] - rx[0]) * sx
                py = oy + (v - ry[0]) / (ry[1] - ry[0]) * sy
                out.append((i, "lines" not in mode, px, py))
    return out


def _ring(fig, i: int, j: int) -> bool:
    """Markers of traces ``i`` and ``j`` on one spot both show: the larger is an open symbol at least ``RING_PX``
    wider, a ring around the other (plotly's default marker: a 6 px filled circle)."""
    (si, zi), (sj, zj) = [
        (str(fig.data[k].marker.symbol or "circle"), fig.data[k].marker.size or 6) for k in (i, j)
    ]  # fmt: skip
    if not all(isinstance(z, (int, float)) for z in (zi, zj)):
        return False  # sizes by point: not a ring throughout
    big, small = ((si, zi), (sj, zj)) if zi >= zj else ((sj, zj), (si, zi))
    return "open" in big[0] and big[1] - small[1] >= RING_PX


def check_markers_apart(fig, what: str = "figure", width: float = 1000) -> None:
    """No marker of one trace within ``MARKER_PX`` of a marker of another, at ``width`` px, where one of them is
    drawn alone (a line through a marker still shows it), neither trace is a cloud of over ``CLOUD`` markers and
    neither is a ring around the other (``_ring``)."""
    ms = _markers(fig, width)
    count: dict = {}
    for m in ms:
        count[m[0]] = count.get(m[0], 0) + 1
    ms = [m for m in ms if count[m[0]] <= CLOUD]
    for k, a in enumerate(ms):
        for b in ms[k + 1 :]:
            near = math.hypot(a[2] - b[2], a[3] - b[3]) < MARKER_PX
            if a[0] != b[0] and (a[1] or b[1]) and near and not _ring(fig, a[0], b[0]):
                names = fig.data[a[0]].name, fig.data[b[0]].name
                raise AssertionError(f"{what}: markers of {names[0]!r} and {names[1]!r} sit on one spot")


def check_ticks(fig, what: str = "figure") -> None:
    """Every log axis with data that sets its ticks (``dtick`` 1 or ``tickvals``) labels at least two of them in
    its range, and explicit ticks are spread evenly: no gap between neighbours over 3x the median gap (an axis
    whose stretch between two ticks is mostly empty)."""
    refs = {(letter, _ref(tr, letter)) for tr in fig.data for letter in "xy"}
    for letter, ref in sorted(refs):
        name = letter + "axis" + ref[1:]
        lay = fig.layout[name]
        rng = _axis_range(fig, letter, ref)
        if rng is None or lay.type == "category":
            continue
        if lay.tickvals is not None:
            text = list(lay.ticktext) if lay.ticktext is not None else [str(t) for t in lay.tickvals]
            ticks = [u for t, s in zip(lay.tickvals, text) if (u := _to_axis(lay, t)) is not None]
            shown = [u for u, s in zip(ticks, text) if s != "" and rng[0] - 1e-9 <= u <= rng[1] + 1e-9]
            inside = sorted(u for u in ticks if rng[0] - 1e-9 <= u <= rng[1] + 1e-9)
            gaps = [b - a for a, b in zip(inside, inside[1:])]
            if len(gaps) >= 2:
                med = sorted(gaps)[len(gaps) // 2]
                assert max(gaps) <= 3 * med + 1e-9, (
                    f"{what}: {name} ticks {list(lay.tickvals)} leave one stretch {max(gaps) / med:.1f}x the others"
                )
        elif lay.type == "log" and lay.dtick in (1, "1"):
            shown = [k for k in range(math.floor(rng[0]), math.ceil(rng[1]) + 1) if rng[0] <= k <= rng[1]]
        else:
            continue
        if lay.type == "log":
            assert len(shown) >= 2, f"{what}: {name} (log) labels {len(shown)} tick(s) in its range: no scale to read"


def _plain(text: str) -> list[tuple[str, float]]:
    """The lines of plotly HTML text with their size relative to the font (0.7 inside <sup>)."""
    import re

    out = []
    for line in re.split(r"<br\s*/?>", text or ""):
        scale = 0.7 if "<sup>" in line or (out and out[-1][1] == 0.7 and "</sup>" in line) else 1.0
        out.append((re.sub(r"<[^>]+>", "", line), scale))
    return out


def check_text_fits(fig, what: str = "figure", width: float = 1000) -> None:
    """At ``width`` px each line of the title fits the figure's width, and every note (an annotation other than
    a subplot's title) is drawn at ``MIN_NOTE_PX`` or more. Labels on bars are left to the browser check: how
    plotly fits them to their bars is not reliably estimated from the spec."""
    title = fig.layout.title
    if title is not None and title.text:
        size = (title.font.size if title.font and title.font.size else None) or 17
        for line, scale in _plain(title.text):
            est = len(line) * CHAR_EM * 0.9 * size * scale  # titles: a narrower average character than numbers
            assert est <= 0.93 * width, f"{what}: title line {line[:50]!r}... is about {est:.0f} px of {width} px"
    for a in fig.layout.annotations or ():
        panel_title = a.xref == "paper" and a.yref == "paper" and a.yanchor == "bottom" and a.showarrow is False
        size = a.font.size if a.font and a.font.size else 12
        assert panel_title or size >= MIN_NOTE_PX, f"{what}: note {a.text[:40]!r} drawn at {size} px"


def check_layout(fig, what: str = "figure", width: float = 1000) -> None:
    """The layout checks at ``width`` px: ``check_markers_apart``, ``check_ticks``, ``check_text_fits``."""
    check_markers_apart(fig, what, width)
    check_ticks(fig, what)
    check_text_fits(fig, what, width)
