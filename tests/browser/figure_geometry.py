"""Plotly figures drawn by plotly.js in headless Chromium, and what a reader would see as broken in them.

``FigurePage(browser)`` opens one page with plotly.js (the copy the plotly package ships, no network) and draws
figures into a div of a given width. ``measure(fig, width)`` returns the drawn geometry: every visible text
(tick labels, titles, annotations, legend entries, bar and point labels) with its box and font size, every
marker with its centre and trace, and the tick labels of each numeric axis. ``problems(geometry, what)`` lists:

- two texts whose boxes overlap (by more than ``OVERLAP_PX`` both ways) or, on one line, sit closer than
  ``GAP_PX`` ("0.0625 GiB0.0625 GiB");
- a text that leaves the figure (a title cut off at the right edge) or is drawn smaller than ``MIN_FONT_PX``;
- markers of two different traces whose centres are less than ``MARKER_PX`` apart (one hides the other), where
  one of them is drawn alone (no line through it, which would still show it) and neither trace is a cloud of
  more than ``CLOUD`` markers (a sweep of thousands of points is read as a whole, not point by point);
- a numeric axis with data that shows fewer than two tick labels (no scale can be read off it).

``screenshot(fig, width, path)`` saves what was drawn.
"""

from __future__ import annotations

import json
from pathlib import Path

OVERLAP_PX, GAP_PX, MIN_FONT_PX, MARKER_PX, CLOUD = 1.0, 2.0, 9.0, 3.0, 50

_PLOTLY_JS = Path(__import__("plotly").__file__).parent / "package_data" / "plotly.min.js"

# JS: the geometry of the figure drawn in #fig, relative to the figure's own box.
_MEASURE = r"""
() => {
  const gd = document.getElementById('fig');
  const box = gd.getBoundingClientRect();
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
    const s = (t.textContent || '').trim();
    if (!s || hidden(t)) continue;
    const r = t.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    let kind = 'text';
    for (const k of KINDS) if (t.classList.contains(k) || t.closest('.' + k)) { kind = k; break; }
    const m = (t.getAttribute('transform') || '').match(/scale\(([0-9.e-]+)/);
    const scale = m ? parseFloat(m[1]) : 1;  // plotly shrinks a bar's label to the bar's width by scale()
    texts.push({text: s, kind, ...rel(r), font_px: parseFloat(getComputedStyle(t).fontSize) * scale});
  }
  const markers = [];
  for (const tr of gd.querySelectorAll('.scatterlayer .trace')) {
    const cd = tr.__data__ && tr.__data__[0] && tr.__data__[0].trace;
    if (!cd || hidden(tr)) continue;
    for (const p of tr.querySelectorAll('.points path.point')) {
      if (hidden(p)) continue;
      const r = rel(p.getBoundingClientRect());
      if (r.x1 - r.x0 === 0) continue;
      markers.push({trace: cd.index, name: String(cd.name), alone: !String(cd.mode || '').includes('lines'),
                    x: (r.x0 + r.x1) / 2, y: (r.y0 + r.y1) / 2});
    }
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
  return {width: box.width, height: box.height, texts, markers, axes};
}
"""


class FigurePage:
    """One Chromium page that draws plotly figures at a chosen width (px) and reads back their geometry."""

    def __init__(self, browser, height: int = 1000):
        self.page = browser.new_page(viewport={"width": 1600, "height": height})
        self.page.set_content("<html><body style='margin:0'><div id='fig'></div></body></html>")
        self.page.add_script_tag(path=str(_PLOTLY_JS))

    def draw(self, fig, width: int) -> None:
        spec = json.loads(fig.to_json())
        self.page.evaluate(
            """([spec, width]) => {
                 const old = document.getElementById('fig'); Plotly.purge(old); old.remove();
                 const gd = document.createElement('div'); gd.id = 'fig'; gd.style.width = width + 'px';
                 document.body.appendChild(gd);
                 return Plotly.newPlot(gd, spec.data, spec.layout, {responsive: false});
               }""",
            [spec, width],
        )

    def measure(self, fig, width: int) -> dict:
        self.draw(fig, width)
        return self.page.evaluate(_MEASURE)

    def screenshot(self, fig, width: int, path) -> None:
        self.draw(fig, width)
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
            if near and a["trace"] != b["trace"] and (a["alone"] or b["alone"]):
                key = (a["trace"], b["trace"])
                if key not in seen:
                    seen.add(key)
                    out.append(f"{what}: markers of {a['name']!r} and {b['name']!r} sit on one spot")
    for ax in g["axes"]:
        if ax["has_data"] and ax["labels"] < 2:
            out.append(f"{what}: {ax['name']} ({ax['type']}) shows {ax['labels']} tick label(s): no scale to read")
    return out
