"""Plotly figures drawn by plotly.js in headless Chromium, and what a reader would see as broken in them.

``FigurePage(browser)`` opens one page with plotly.js (the copy the plotly package ships, no network) and draws
figures into a div of a given width, or first at another width and then widened, as a notebook's FigureWidget
draws (``draw(fig, width, first)``). ``measure(fig, width, first)`` returns the drawn geometry: every visible text
(tick labels, titles, annotations, legend entries, bar and point labels) with its box and font size, every
marker with its centre, symbol and size, the tick labels of each numeric axis, each panel's plot area, each
line's points in px, and each legend entry's style. ``problems(geometry, what)`` lists:

- two texts whose boxes overlap (by more than ``OVERLAP_PX`` both ways) or, on one line, sit closer than
  ``GAP_PX`` ("0.0625 GiB0.0625 GiB");
- a text that leaves the figure (a title cut off at the right edge), a point's or bar's label cut by its plot
  area's edge, or a text drawn smaller than ``MIN_FONT_PX``;
- a tick label turned on its side (plotly turns an axis's labels when they do not fit across);
- a title, legend entry, tick label or menu on a plot area, and a plot area squeezed (by its legend) to under
  ``MIN_PLOT_PX`` or ``MIN_PLOT_SHARE`` of the figure's height;
- markers of two different traces whose centres are less than ``MARKER_PX`` apart (one hides the other), where
  one of them is drawn alone (no line through it, which would still show it), neither trace is a cloud of more
  than ``CLOUD`` markers (a sweep of thousands of points is read as a whole, not point by point) and neither is
  an open ring around the other (``RING_PX`` wider);
- two lines of one panel within ``LINE_PX`` of each other for ``HIDDEN_PX`` or more, unless both stay visible
  (markers on one only, rings around the other's markers, or the one drawn first ``UNDER_PX`` wider) or a text
  of the figure names both;
- two legend entries drawn alike (kind, mode, colour, dash, width, marker), unless each is named on the plot;
- a numeric axis with data that shows fewer than two tick labels (no scale can be read off it).

``screenshot(fig, width, path, first)`` saves what was drawn. ``unknown`` and ``stale`` hold a list of problems
against a list of known ones.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np

OVERLAP_PX, GAP_PX, MIN_FONT_PX, MARKER_PX, CLOUD = 1.0, 2.0, 9.0, 3.0, 50
MIN_PLOT_PX, MIN_PLOT_SHARE = 120, 0.4  # px, fraction of the figure's height: the plot area's least height
LINE_PX, HIDDEN_PX = 2.0, 20.0  # px: a line within LINE_PX of another for HIDDEN_PX along it is hidden there
LINE_POINTS = 200
RING_PX, UNDER_PX = 3.0, 2.0  # px: an open marker this much wider rings another; a line this much wider shows under
#: Texts that belong outside the plot area: titles, legend entries, tick labels, menus.
OUTSIDE_KINDS = ("gtitle", "legendtext", "g-xtitle", "g-ytitle", "xtick", "ytick", "updatemenu-item-text")

_PLOTLY_JS = Path(__import__("plotly").__file__).parent / "package_data" / "plotly.min.js"

# JS: the geometry of the figure drawn in #fig, relative to the figure's own box.
_MEASURE = r"""
(CLOUD) => {
  const gd = document.getElementById('fig');
  const box = (gd.querySelector('.svg-container') || gd).getBoundingClientRect();  // the figure, not its div
  const rel = (r) => ({x0: r.left - box.left, y0: r.top - box.top, x1: r.right - box.left, y1: r.bottom - box.top});
  const hidden = (el) => {
    for (let e = el; e && e !== gd; e = e.parentElement) {
      const cs = getComputedStyle(e);
      if (cs.display === 'none' || cs.visibility === 'hidden' || parseFloat(cs.opacity) === 0) return true;
    }
    return false;
  };
  const KINDS = ['gtitle', 'annotation', 'legendtext', 'xtick', 'ytick', 'g-xtitle', 'g-ytitle', 'bartext',
                 'textpoint', 'updatemenu-item-text'];
  const texts = [];
  for (const t of gd.querySelectorAll('svg text')) {
    const rows = t.querySelectorAll('tspan.line');  // a text of several lines: its words apart, not glued
    const s = (rows.length ? Array.from(rows, (r) => r.textContent).join(' ') : t.textContent || '').trim();
    if (!s || hidden(t)) continue;
    const r = t.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    let kind = 'text';
    for (const k of KINDS) if (t.classList.contains(k) || t.closest('.' + k)) { kind = k; break; }
    // a second axis's ticks and title (x2tick, g-y2title) are of the first axis's kind
    const cls = [t, t.parentElement].map((e) => (e && e.getAttribute('class')) || '').join(' ');
    const tick = cls.match(/\b([xy])\d*tick\b/), title = cls.match(/\b([xy])\d*title\b/);
    if (kind === 'text' && tick) kind = tick[1] + 'tick';
    if (kind === 'text' && title) kind = `g-${title[1]}title`;
    const m = (t.getAttribute('transform') || '').match(/scale\(([0-9.e-]+)/);
    const scale = m ? parseFloat(m[1]) : 1;  // plotly shrinks a bar's label to the bar's width by scale()
    const turned = /^[xy]tick$/.test(kind) && /rotate\(\s*-?[1-9]/.test(t.getAttribute('transform') || '');
    texts.push({text: s, kind, ...rel(r), font_px: parseFloat(getComputedStyle(t).fontSize) * scale, turned,
                clipped: ['textpoint', 'bartext'].includes(kind) && !!t.closest('[clip-path]')});  // drawn only
                                                                                        // inside its plot area
  }
  const markers = [];
  for (const tr of gd.querySelectorAll('.scatterlayer .trace')) {
    const cd = tr.__data__ && tr.__data__[0] && tr.__data__[0].trace;
    if (!cd || hidden(tr)) continue;
    const mk = cd.marker || {}, at = (v, i) => (Array.isArray(v) ? v[i] : v);
    const points = tr.querySelectorAll('.points path.point');
    if (points.length > CLOUD) continue;  // a cloud is read as a whole (and measuring it point by point is slow)
    points.forEach((p, i) => {
      if (hidden(p)) return;
      const r = rel(p.getBoundingClientRect());
      if (r.x1 - r.x0 === 0) return;
      markers.push({trace: cd.index, name: String(cd.name), alone: !String(cd.mode || '').includes('lines'),
                    x: (r.x0 + r.x1) / 2, y: (r.y0 + r.y1) / 2, symbol: String(at(mk.symbol, i)),
                    size: Number(at(mk.size, i))});
    });
  }
  const fl = gd._fullLayout, axes = [];
  for (const sp of fl._subplots.cartesian) {
    const [xa, ya] = sp.match(/^(x\d*)(y\d*)$/).slice(1);
    for (const [id, letter] of [[xa, 'x'], [ya, 'y']]) {
      const name = letter + 'axis' + id.slice(1), ax = fl[name];
      if (!ax || ax.visible === false || ax.type === 'category' || axes.some((a) => a.name === name)) continue;
      const layer = gd.querySelector(`.subplot.${sp} .${letter}axislayer-above`)
        || gd.querySelector(`.${letter}axislayer-above`);
      const hasData = gd.data.some((d) => (d[letter + 'axis'] || letter) === id
        && d.visible !== false && d.visible !== 'legendonly');
      const labels = ax._vals ? ax._vals.filter((v) => v.text !== undefined && v.text !== '').length : 0;
      axes.push({name, type: ax.type, labels, has_data: hasData, overlaying: ax.overlaying || null,
                 layer: !!layer});
    }
  }
  // each cartesian panel's plot area, and each visible line drawn in it, in px from the figure's corner
  const plots = [];
  for (const sp of fl._subplots.cartesian) {
    const pl = fl._plots[sp];
    if (!pl || !pl.xaxis || !pl.yaxis) continue;
    const xa = pl.xaxis, ya = pl.yaxis;
    plots.push({id: sp, x0: xa._offset, x1: xa._offset + xa._length, y0: ya._offset, y1: ya._offset + ya._length});
  }
  const lines = [], styles = [];
  (gd.calcdata || []).forEach((cd) => {
    const t = cd && cd[0] && cd[0].trace;
    if (!t || t.visible !== true) return;
    const mode = String(t.mode || '');
    if (t.showlegend !== false && (t.type === 'scatter' || t.type === 'bar')) {
      const ln = t.line || {}, mk = t.marker || {};
      styles.push({trace: t.index, name: String(t.name), type: t.type, mode, subplot: (t.xaxis || 'x') + (t.yaxis || 'y'),
                   key: JSON.stringify([t.type, mode.replace('+text', '').replace('text', ''), ln.color, ln.dash,
                                        ln.width, mk.symbol, String(mk.color), mk.size])});
    }
    if (t.type !== 'scatter' || !mode.includes('lines')) return;
    const xa = fl['xaxis' + (t.xaxis || 'x').slice(1)], ya = fl['yaxis' + (t.yaxis || 'y').slice(1)];
    if (!xa || !ya || xa.type === 'category' || ya.type === 'category') return;
    const pts = [];
    for (const d of cd) {
      const px = xa.c2p(d.x), py = ya.c2p(d.y);
      if (isFinite(px) && isFinite(py)) pts.push([xa._offset + px, ya._offset + py]);
    }
    const mk = mode.includes('markers') ? {symbol: String(t.marker.symbol), size: Number(t.marker.size)} : null;
    lines.push({trace: t.index, name: String(t.name), subplot: (t.xaxis || 'x') + (t.yaxis || 'y'), pts,
                width: Number((t.line || {}).width), marker: mk});
  });
  return {width: box.width, height: box.height, texts, markers, axes, plots, lines, styles};
}
"""


class FigurePage:
    """One Chromium page that draws plotly figures at a chosen width (px) and reads back their geometry."""

    def __init__(self, browser, height: int = 1000):
        self.page = browser.new_page(viewport={"width": 1600, "height": height})
        self.page.set_content("<!DOCTYPE html><html><body style='margin:0'><div id='fig'></div></body></html>")
        self.page.add_script_tag(path=str(_PLOTLY_JS))

    def draw(self, fig, width: int, first: int | None = None) -> None:
        """Draw ``fig`` into a div ``width`` px wide. With ``first``: drawn first ``first`` px wide, then the div
        widened to ``width`` and the figure told to fit it (``autosize``), as a notebook's FigureWidget is: its
        view draws before it is on the page, at plotly's default 700 px (``widgets.LiveFigure._fit_width``)."""
        spec = json.loads(fig.to_json())
        self.page.evaluate(
            """([spec, width, first]) => {
                 const old = document.getElementById('fig'); Plotly.purge(old); old.remove();
                 const gd = document.createElement('div'); gd.id = 'fig'; gd.style.width = (first || width) + 'px';
                 document.body.appendChild(gd);
                 const drawn = Plotly.newPlot(gd, spec.data, spec.layout, {responsive: false});
                 if (!first || first === width) return drawn;
                 return drawn.then(() => { gd.style.width = width + 'px'; return Plotly.relayout(gd, {autosize: true}); });
               }""",
            [spec, width, first],
        )

    def measure(self, fig, width: int, first: int | None = None) -> dict:
        self.draw(fig, width, first)
        return self.geometry()

    def geometry(self) -> dict:
        """The geometry of the figure drawn now (after any relayout or update since ``draw``)."""
        return self.page.evaluate(_MEASURE, CLOUD)

    def screenshot(self, fig, width: int, path, first: int | None = None) -> None:
        self.draw(fig, width, first)
        self.page.locator("#fig").screenshot(path=str(path))

    def close(self) -> None:
        self.page.close()


def _overlap(a: dict, b: dict) -> tuple[float, float]:
    return min(a["x1"], b["x1"]) - max(a["x0"], b["x0"]), min(a["y1"], b["y1"]) - max(a["y0"], b["y0"])


def problems(g: dict, what: str) -> list[str]:
    """What is broken in the geometry ``g`` of ``FigurePage.measure`` (see the module docstring); [] if nothing."""
    out = []
    texts = g["texts"]
    for i, a in enumerate(texts):
        if a["x0"] < -1 or a["y0"] < -1 or a["x1"] > g["width"] + 1 or a["y1"] > g["height"] + 1:
            out.append(f"{what}: {a['kind']} {a['text'][:60]!r} leaves the figure (cut off)")
        if a["font_px"] < MIN_FONT_PX:
            out.append(f"{what}: {a['kind']} {a['text'][:60]!r} drawn at {a['font_px']:.1f} px (too small to read)")
        if a.get("turned"):
            out.append(f"{what}: {a['kind']} {a['text'][:40]!r} turned on its side (the labels do not fit across)")
        for b in texts[i + 1 :]:
            dx, dy = _overlap(a, b)
            same_line = dy > 0.5 * min(a["y1"] - a["y0"], b["y1"] - b["y0"])
            if (dx > OVERLAP_PX and dy > OVERLAP_PX) or (same_line and -GAP_PX < dx <= OVERLAP_PX):
                out.append(f"{what}: {a['kind']} {a['text'][:40]!r} and {b['kind']} {b['text'][:40]!r} overlap")
    count: dict = {}
    for m in g["markers"]:
        count[m["trace"]] = count.get(m["trace"], 0) + 1
    ms = [m for m in g["markers"] if count[m["trace"]] <= CLOUD]
    seen = set()
    for i, a in enumerate(ms):
        for b in ms[i + 1 :]:
            near = (a["x"] - b["x"]) ** 2 + (a["y"] - b["y"]) ** 2 < MARKER_PX**2
            if near and a["trace"] != b["trace"] and (a["alone"] or b["alone"]) and not _ring(a, b):
                key = (a["trace"], b["trace"])
                if key not in seen:
                    seen.add(key)
                    out.append(f"{what}: markers of {a['name']!r} and {b['name']!r} sit on one spot")
    for ax in g["axes"]:
        if ax["has_data"] and ax["labels"] < 2:
            out.append(f"{what}: {ax['name']} ({ax['type']}) shows {ax['labels']} tick label(s): no scale to read")
    return out + _plot_area_problems(g, what) + _line_problems(g, what) + _alike_problems(g, what)


def _plot_area_problems(g: dict, what: str) -> list[str]:
    """Titles, legend entries, tick labels and menus drawn on a panel's plot area; a plot area squeezed to under
    ``MIN_PLOT_PX`` tall or ``MIN_PLOT_SHARE`` of the figure's height (all panels together)."""
    out = []
    for t in g["texts"]:
        inside = any(_overlap(t, pl) >= (t["x1"] - t["x0"] - 1, t["y1"] - t["y0"] - 1) for pl in g.get("plots", ()))
        if t.get("clipped") and not inside:
            out.append(f"{what}: {t['kind']} {t['text'][:40]!r} is cut by the plot area's edge")
        if t["kind"] not in OUTSIDE_KINDS:
            continue
        for pl in g.get("plots", ()):
            dx, dy = _overlap(t, pl)
            if dx > OVERLAP_PX and dy > OVERLAP_PX:
                out.append(f"{what}: {t['kind']} {t['text'][:40]!r} lies on the plot area of {pl['id']}")
    plots = g.get("plots") or []
    if plots:
        tall = max(p["y1"] for p in plots) - min(p["y0"] for p in plots)
        if tall < max(MIN_PLOT_PX, MIN_PLOT_SHARE * g["height"]):
            out.append(f"{what}: the plot area is {tall:.0f} px of the figure's {g['height']:.0f} px (squeezed)")
    return out


def _ring(a: dict | None, b: dict | None) -> bool:
    """Two markers (``symbol``, ``size`` px) on one spot that both stay visible: the larger is an open symbol at
    least ``RING_PX`` wider than the other, a ring around it."""
    if not a or not b:
        return False
    big, small = (a, b) if a["size"] >= b["size"] else (b, a)
    return "open" in str(big["symbol"]) and big["size"] - small["size"] >= RING_PX


def _both_show(a: dict, b: dict) -> bool:
    """Two lines on one another that both stay visible: markers on one line only (they show on the other's line),
    markers one a ring around the other's (``_ring``), or no markers and the line drawn first (under) at least
    ``UNDER_PX`` wider than the one over it."""
    if (a["marker"] is None) != (b["marker"] is None):
        return True
    if a["marker"] is not None:
        return _ring(a["marker"], b["marker"])
    under, over = (a, b) if a["trace"] < b["trace"] else (b, a)
    return under["width"] - over["width"] >= UNDER_PX


def _words(name: str) -> set[str]:
    return set(re.findall(r"[\w./-]+", name.lower()))


def _covered(a, b) -> list[bool]:
    """For each point of polyline ``a`` (px), whether it lies within ``LINE_PX`` of polyline ``b``."""
    pa, pb = np.asarray(a, float), np.asarray(b, float)
    if len(pb) == 1:
        return list(np.hypot(*(pa - pb[0]).T) < LINE_PX)
    s0, s1 = pb[:-1], pb[1:]
    d = s1 - s0
    n2 = np.maximum((d**2).sum(1), 1e-12)
    t = np.clip((((pa[:, None, :] - s0[None]) * d[None]).sum(2)) / n2[None], 0, 1)
    near = s0[None] + t[..., None] * d[None]
    return list(np.hypot(*(pa[:, None, :] - near).transpose(2, 0, 1)).min(1) < LINE_PX)


def _hidden_stretch(a, b) -> float:
    """The longest stretch (px along ``a``) of consecutive points of ``a`` that lie on ``b`` (of at most
    ``LINE_POINTS`` points of ``a``, evenly picked: a curve of thousands is walked in steps)."""
    a = a[:: -(-len(a) // LINE_POINTS)]
    cov, best, run = _covered(a, b), 0.0, 0.0
    for i in range(1, len(a)):
        run = run + math.dist(a[i - 1], a[i]) if cov[i - 1] and cov[i] else 0.0
        best = max(best, run)
    return best


def _line_problems(g: dict, what: str) -> list[str]:
    """Two lines of one panel that lie on one another for ``HIDDEN_PX`` or more (one hides the other there) where
    no text of the figure names both (a word of each name that the other lacks, in one annotation or legend
    entry)."""
    out = []
    lines = [ln for ln in g.get("lines", ()) if len(ln["pts"]) >= 2]
    said = [_words(t["text"]) for t in g["texts"] if t["kind"] not in ("xtick", "ytick")]
    for i, a in enumerate(lines):
        for b in lines[i + 1 :]:
            if a["subplot"] != b["subplot"]:
                continue
            if _both_show(a, b):
                continue
            stretch = max(_hidden_stretch(a["pts"], b["pts"]), _hidden_stretch(b["pts"], a["pts"]))
            if stretch < HIDDEN_PX:
                continue
            wa, wb = _words(a["name"]), _words(b["name"])
            own_a, own_b = (wa - wb) or wa, (wb - wa) or wb
            if not any(w & own_a and w & own_b for w in said):
                out.append(
                    f"{what}: lines {a['name']!r} and {b['name']!r} lie on one another for {stretch:.0f} px, and no "
                    "text says so"
                )
    return out


def _alike_problems(g: dict, what: str) -> list[str]:
    """Two legend entries drawn alike (same kind, mode, colour, dash, width and marker) that the reader cannot tell
    apart, unless each is also named on the plot (a text that is not a legend entry holds its name)."""
    out = []
    styles = g.get("styles", [])
    named = [t["text"].lower() for t in g["texts"] if t["kind"] not in ("legendtext", "xtick", "ytick")]
    for i, a in enumerate(styles):
        for b in styles[i + 1 :]:
            if a["key"] != b["key"] or a["name"] == b["name"]:
                continue
            if all(any(s["name"].lower() in t for t in named) for s in (a, b)):
                continue
            out.append(f"{what}: {a['name']!r} and {b['name']!r} are drawn alike (colour, dash, marker)")
    return out


def _matches(problem: str, key: tuple[str, str]) -> bool:
    prefix, words = key
    return problem.startswith(prefix) and words in problem


def unknown(found: list[str], known: dict) -> list[str]:
    """The problems of ``found`` that no ``known`` entry matches (its figure name prefix, then its words)."""
    return [p for p in found if not any(_matches(p, k) for k in known)]


def stale(found: list[str], known: dict) -> list[str]:
    """The ``known`` entries that match none of ``found``: fixed, to be taken out of the list."""
    return [f"KNOWN entry {k} occurs no more: remove it" for k in known if not any(_matches(p, k) for p in found)]
