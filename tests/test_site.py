"""The static site (`make site`, tools/build_site.py): widgets flattened for a page without a kernel, and, in headless
Chromium, built pages that load with data in every figure.

The browser test builds two lessons (the warp-divergence page with figures and slider explorers, and the builder-test page
with its model-size explorer) into a temporary directory, opens the index and each page from disk (file://, no
server, no network), and checks: no script error, every figure the page holds drawn by plotly.js, every figure with
a visible trace with points, the explorers' controls shown with their values. Run:
``python -m pytest tests/test_site.py -v`` (the browser test needs /usr/bin/chromium or ``GPULAB_CHROMIUM``).
"""

from __future__ import annotations

import contextlib
import datetime
import html
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import build_site  # noqa: E402  (tools/ is not a package: on the path only from here)
import sync_links  # noqa: E402

pytestmark = pytest.mark.cpu_same  # pages built in the interpreter (build_site.KERNEL_ENV)

# A page with figures shown directly and two slider explorers; the newest lesson, with dropdowns in its explorer.
SITE_LESSONS = ["02_warp_divergence.ipynb", "09_builder_test.ipynb"]


# ------------------------------------------------------------------------------------- flattening (no kernel)


def _model(name: str, **state) -> dict:
    return {
        "model_name": name,
        "model_module": "@jupyter-widgets/controls",
        "model_module_version": "2.0.0",
        "state": state,
    }


FIGURE = {
    "data": [{"type": "scatter", "x": [1, 2, 3], "y": [4.0, 5.0, 6.0], "name": "measured"}],
    "layout": {"title": {"text": "a figure"}},
}
STATE = {
    "box": _model("VBoxModel", children=["IPY_MODEL_rung", "IPY_MODEL_layers", "IPY_MODEL_readout", "IPY_MODEL_out"]),
    "rung": _model("DropdownModel", description="rung", index=1, _options_labels=["fp32 eager", "+ bf16 autocast"]),
    "layers": _model("IntSliderModel", description="layers", value=12, min=1, max=48),
    "readout": _model("HTMLModel", value="predicted step: <b>7 ms</b>"),
    "out": {
        "model_name": "OutputModel",
        "model_module": "@jupyter-widgets/output",
        "model_module_version": "1.0.0",
        "state": {
            "outputs": [
                {
                    "output_type": "display_data",
                    "metadata": {},
                    "data": {"application/vnd.plotly.v1+json": FIGURE, "text/plain": "Figure"},
                }
            ]
        },
    },
}


def _view(model_id: str) -> dict:
    return {
        "output_type": "display_data",
        "metadata": {},
        "data": {
            "application/vnd.jupyter.widget-view+json": {"model_id": model_id, "version_major": 2, "version_minor": 0},
            "text/plain": "VBox(...)",
        },
    }


def _html(outputs: list[dict]) -> list[str]:
    assert all(set(o["data"]) == {"text/html"} for o in outputs), [list(o["data"]) for o in outputs]
    return [o["data"]["text/html"] for o in outputs]


def test_explorer_flattens_to_controls_readout_and_figure():
    texts = _html(build_site.flatten_outputs([_view("box")], STATE))
    assert len(texts) == 3, texts  # the controls line, the readout, the figure
    controls, readout, figure = texts
    assert "<b>rung</b> + bf16 autocast" in controls and "<b>layers</b> 12" in controls, controls
    assert "starting values" in controls  # the note that says the page does not move them
    assert readout == "predicted step: <b>7 ms</b>"
    assert 'class="plotly-graph-div"' in figure and '"y":[4.0,5.0,6.0]' in figure, figure[:400]
    assert "<script" in figure and "Plotly.newPlot" in figure


def test_plain_outputs_kept_and_plotly_json_drawn():
    text = {"output_type": "stream", "name": "stdout", "text": "hello\n"}
    flat = build_site.flatten_outputs(
        [
            text,
            {
                "output_type": "execute_result",
                "execution_count": 3,
                "metadata": {},
                "data": {"application/vnd.plotly.v1+json": FIGURE},
            },
        ],
        {},
    )
    assert flat[0] == text
    assert "Plotly.newPlot" in flat[1]["data"]["text/html"]


def test_missing_widget_state_is_said_not_raised():
    (text,) = _html(build_site.flatten_outputs([_view("gone")], STATE))
    assert "no stored state" in text


def test_flatten_notebook_drops_the_widget_state():
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("explorer.widget", outputs=[nbformat.from_dict(_view("box"))]))
    nb.metadata["widgets"] = {build_site.WIDGET_STATE: {"state": STATE, "version_major": 2, "version_minor": 0}}
    build_site.flatten_notebook(nb)
    assert "widgets" not in nb.metadata
    assert len(nb.cells[0].outputs) == 3
    nbformat.validate(nb)


def test_title_is_the_first_heading():
    import nbformat

    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell("[badge](x)\n\n# 07 · Tiling and waves\n\ntext")]
    )
    assert build_site.title_of(nb, "fallback") == "07 · Tiling and waves"
    assert build_site.title_of(nbformat.v4.new_notebook(), "fallback") == "fallback"


@pytest.mark.parametrize(
    "spec, value, shown",
    [
        (".3g", 1e12, "1.00e+12"),
        (".3g", 3162.2776601683795, "3.16e+3"),
        (".3g", 0.5, "0.500"),
        (".3g", 123.456, "123"),
        (".3g", 1e-7, "1.00e-7"),
        (".3g", -2.5, "\u22122.50"),
        (".2f", 1.0, "1.00"),
        ("d", 12, "12"),
        (",d", 1234567, "1,234,567"),
        (".1%", 0.123, "12.3%"),
        (".2e", 12345.0, "1.23e+4"),
        ("~g", 100.0, "100"),
        (".0g", 1234.5678, "1e+3"),  # d3 clamps a precision of 0 to 1 significant digit
        (".0~g", 0.000123, "0.0001"),
        (".0r", 1234.5678, "1000"),
        (".4r", 1e12, "1000000000000"),  # r: significant digits, never an exponent
        (".3", 0.5, "0.5"),  # no type is ~g
        ("", 0.1 + 0.2, "0.3"),
        (".0f", 2.5, "3"),  # a tie rounds away from zero, as JavaScript's toFixed does
        (".1f", -0.25, "\u22120.3"),
        (".2f", -0.0004, "0.00"),  # a negative value that rounds to zero has no sign
    ],
)
def test_d3_format_writes_what_the_slider_readout_shows(spec, value, shown):
    """Each expected value is what d3-format 3.1 writes (``format(spec)(value)`` in node)."""
    assert build_site.d3_format(spec, value) == shown


def test_slider_values_shown_as_their_readout():
    state = {
        "box": _model("VBoxModel", children=["IPY_MODEL_f", "IPY_MODEL_b", "IPY_MODEL_n", "IPY_MODEL_out"]),
        "f": _model("FloatLogSliderModel", description="F work (FLOPs)", value=1e12, readout_format=".3g"),
        "b": _model("FloatSliderModel", description="B (TB/s)", value=3.35),  # no format stored: the default, .2f
        "n": _model("IntSliderModel", description="layers", value=12, readout_format="d"),
        "out": STATE["out"],
    }
    controls = _html(build_site.flatten_outputs([_view("box")], state))[0]
    assert "<b>F work (FLOPs)</b> 1.00e+12" in controls, controls
    assert "<b>B (TB/s)</b> 3.35" in controls and "<b>layers</b> 12" in controls, controls
    assert "1000000000000.0" not in controls


def _page(*cells) -> str:
    import nbformat

    nb = nbformat.v4.new_notebook(cells=list(cells))
    return build_site.render_page(nb, "lesson", ["lesson"])


def test_page_renders_math_without_mathjax_or_any_remote_script():
    import nbformat

    page = _page(nbformat.v4.new_markdown_cell("# L\n\n$$t \\ge \\max\\left(\\frac{F}{C}, \\frac{D}{B}\\right).$$"))
    assert '<math display="block"' in page and "<mfrac>" in page, "math rendered as MathML when the page is built"
    assert "$$" not in page
    assert "mathjax" not in page.lower(), "the page reads offline: no MathJax from a CDN"
    remote = re.findall(r"<script[^>]+src=[\"'](?:https?:)?//[^\"']+", page)
    assert not remote, remote


def test_tex_that_does_not_parse_stays_readable():
    assert build_site.tex_to_mathml("\\frac{1}{", display=True).startswith("<code")


def test_text_outputs_and_tables_scroll_sideways_instead_of_wrapping():
    import nbformat

    wide = (
        "| "
        + " | ".join(f"column {i}" for i in range(12))
        + " |\n|"
        + "---|" * 12
        + "\n| "
        + " | ".join("1" * 12)
        + " |"
    )
    cell = nbformat.v4.new_code_cell("print(table)")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="a  b  c\n" + "x" * 200 + "\n")]
    page = _page(nbformat.v4.new_markdown_cell(wide), cell)
    # the page's own style block, its selectors outranking nbconvert's
    (css,) = re.findall(r"<style id=.gpulab-site.>(.*?)</style>", page, flags=re.DOTALL)
    rules = {
        sel.strip(): body
        for sel, body in re.findall(r"([^{}]+)\{([^{}]*)\}", re.sub(r"/\*.*?\*/", "", css, flags=re.DOTALL))
    }
    pre = rules["body .jp-OutputArea-output pre"]
    assert "white-space: pre;" in pre and "overflow-x: auto" in pre and "word-break: normal" in pre, pre
    table = rules["body .jp-RenderedHTMLCommon table"]
    assert "overflow-x: auto" in table and "display: block" in table, table


def test_page_leaves_out_colabs_install_cell():
    import nbformat

    install = sync_links.install_cell(sync_links.expected(sync_links.repo_url())[1])
    page = _page(nbformat.v4.new_code_cell(install), nbformat.v4.new_code_cell("kept_cell = 1"))
    assert "kept_cell" in page
    assert "Colab only" not in page and "google.colab" not in page, "Colab's install cell is not for a reader"


def test_page_shows_no_image_from_the_web():
    """Offline, an image from the web shows as broken alt text: the badge line goes (the top bar links to Binder and
    Colab), any other web image becomes its alt text."""
    import nbformat

    badges = sync_links.badges(sync_links.repo_url(), "lesson.ipynb")
    page = _page(
        nbformat.v4.new_markdown_cell(
            f"{badges}\n\n# 04 · A lesson\n\nSee <img src='https://x.org/a.png' alt='a chart'>."
        ),
        nbformat.v4.new_markdown_cell("And ![the roofline](https://x.org/r.svg) here; ![local](figure.png) stays."),
    )
    assert not re.findall(r"<img[^>]+src=.https?:", page), "no image the page would fetch from the web"
    assert "See a chart." in page and "And the roofline here" in page
    assert 'src="figure.png"' in page, "an image beside the page is kept"
    assert re.search(r"<h1[^>]*>04 · A lesson", page) and "gpulab-colab" in page and "gpulab-binder" in page


def test_index_lists_the_lessons_unnumbered(tmp_path):
    """The titles carry the lessons' ids ("07b · Waves"): a numbered list put "10." beside "07b"."""
    lessons = [{"stem": s, "title": t, "ok": True} for s, t in (("07_t", "07 · Tiling"), ("07b_w", "07b · Waves"))]
    build_site.write_index(tmp_path, lessons)
    index = (tmp_path / "index.html").read_text()
    assert "<ol" not in index and '<ul class="lessons">' in index
    assert re.search(r"\.lessons \{[^}]*list-style: none", index), "no bullets either"


def test_measured_now_is_said_as_built():
    """On a page, "measured now" is when the page was built, on the machine that built it, not the reader's."""
    import nbformat

    where = "measured now on this machine: gloo on 2, 4 CPU processes"
    cell = nbformat.v4.new_code_cell("coll")
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text=where + "\n"),
        nbformat.v4.new_output("display_data", data={"text/html": f'<div>{{"title": "p = 2 ({where})"}}</div>'}),
        nbformat.v4.new_output("stream", name="stdout", text="measured now: NCCL on 2 GPUs\nof this machine\n"),
        nbformat.v4.new_output(
            "stream", name="stdout", text="measured now: gloo on 2, 4 CPU processes of this machine"
        ),
    ]
    nb = nbformat.v4.new_notebook(cells=[cell])
    build_site.as_built(nb, "a CPU, 2 cores, 2026-12-07")
    said = json.dumps(nb.cells[0].outputs)
    assert "measured now" not in said and said.count("this machine") == 1, "one line's phrase, not across lines"
    assert said.count("measured on the machine that built this page (a CPU, 2 cores, 2026-12-07): gloo") == 2
    assert "measured when this page was built (a CPU, 2 cores, 2026-12-07): NCCL" in said
    assert "built: gloo on 2, 4 CPU processes of the machine that built it (a CPU, 2 cores, 2026-12-07)" in said
    nbformat.validate(nb)
    assert build_site.build_machine().endswith(f"cores, {datetime.date.today().isoformat()}")


def test_site_kernel_talks_over_unix_sockets_without_the_tcp_warning(tmp_path):
    """`make site` starts one kernel per lesson: over localhost TCP each printed ipykernel's warning that the traffic
    is not encrypted; on Unix sockets it prints none. The page says "measured now" as built."""
    import nbformat

    code = (
        "from ipykernel.connect import get_connection_info\n"
        "print('transport:', get_connection_info(unpack=True)['transport'])\n"
        "print('measured ' + 'now on this machine: gloo on 2 CPU processes')  # the phrase in the output only"
    )
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 00 · T"), nbformat.v4.new_code_cell(code)])
    nbformat.write(nb, tmp_path / "00_t.ipynb")
    built = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_site.py"), str(tmp_path / "00_t.ipynb"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert "without encryption" not in built.stdout + built.stderr, built.stderr
    page = (tmp_path / "00_t.html").read_text()
    expected = "ipc" if sys.platform != "win32" else "tcp"
    assert f"transport: {expected}" in page
    assert "measured on the machine that built this page" in page and "measured now" not in page


def test_pages_and_index_link_to_binder(tmp_path):
    binder = sync_links.binder_url(sync_links.repo_url(), "lesson.ipynb")
    assert html.escape(binder) in _page()
    build_site.write_index(tmp_path, [{"stem": "00_the_machine", "title": "00", "ok": True}])
    index = (tmp_path / "index.html").read_text()
    assert html.escape(sync_links.binder_url(sync_links.repo_url())) in index


# ------------------------------------------------------------------------------------------ built, in Chromium

# JS: every figure on the page: whether plotly.js drew it, its traces and the points in each.
_JS_FIGURES = r"""
() => Array.from(document.querySelectorAll('.plotly-graph-div')).map(gd => ({
  id: gd.id,
  drawn: gd.classList.contains('js-plotly-plot') && !!gd.querySelector('.main-svg'),
  traces: (gd.data || []).map(t => ({
    name: String(t.name), type: t.type, visible: t.visible !== false,
    points: Math.max(0, ...['x', 'y', 'z', 'values', 'r', 'lat'].map(k => (t[k] && t[k].length) || 0)),
  })),
}))
"""


# JS: line breaks inside a word in the page's text (not in figures, which plotly lays out): where a character is on a
# lower line than the one before it, neither is a space and the one before is no hyphen, dash or slash ("torch 2.11." /
# "0+cu130")
_JS_MID_WORD_BREAKS = r"""
() => {
  const out = [], range = document.createRange();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!n.parentElement || n.parentElement.closest('svg, script, style, math') || !/\S{8}/.test(n.data)) continue;
    let top = null;
    for (let i = 0; i < n.data.length; i++) {
      range.setStart(n, i);
      range.setEnd(n, i + 1);
      const r = range.getClientRects()[0];
      if (!r) continue;
      if (top !== null && r.top > top + 1 && !/[\s\-\u2013\u2014\/]/.test(n.data[i - 1]) && !/\s/.test(n.data[i]))
        out.push(n.data.slice(Math.max(0, i - 20), i) + '|' + n.data.slice(i, i + 12));
      top = r.top;
    }
  }
  return out;
}
"""


@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    sources = {name: (ROOT / "notebooks" / name).read_bytes() for name in SITE_LESSONS}
    rc = build_site.main([str(ROOT / "notebooks" / n) for n in SITE_LESSONS] + ["--out", str(out)])
    assert rc == 0, "tools/build_site.py failed (its output above names the notebook and the cell)"
    for name, before in sources.items():
        assert (ROOT / "notebooks" / name).read_bytes() == before, f"building the site modified {name}"
    return out


@pytest.fixture(scope="module")
def page(built_site, browser):
    context = browser.new_context(viewport={"width": 412, "height": 915})  # a phone's screen
    # the pages need no network: anything but a file is refused
    context.route(lambda url: not url.startswith("file:"), lambda route: route.abort())
    yield context.new_page()
    context.close()


@pytest.mark.browser
@pytest.mark.slow
def test_index_lists_the_lessons(built_site, page):
    page.goto((built_site / "index.html").as_uri())
    links = page.eval_on_selector_all("ul.lessons a", "els => els.map(a => a.getAttribute('href'))")
    assert links == [Path(n).stem + ".html" for n in SITE_LESSONS], links


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("lesson", [Path(n).stem for n in SITE_LESSONS])
def test_page_loads_with_data_in_every_figure(built_site, page, lesson):
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    html_text = (built_site / f"{lesson}.html").read_text()
    expected = html_text.count('class="plotly-graph-div"')
    assert expected > 0, f"{lesson}.html holds no figure"
    page.goto((built_site / f"{lesson}.html").as_uri(), wait_until="load")
    # on a timeout the checks below say which figures were not drawn
    with contextlib.suppress(Exception):
        page.wait_for_function(
            f"() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= {expected}", timeout=30_000
        )
    figures = page.evaluate(_JS_FIGURES)
    assert not errors, f"{lesson}: script errors: {errors}"
    undrawn = [f["id"] for f in figures if not f["drawn"]]
    assert len(figures) == expected and not undrawn, (
        f"{lesson}: {len(figures)} of {expected} figures, not drawn: {undrawn}"
    )
    # a trace may be empty on purpose (the out-of-memory markers of a sweep that fits); a figure may not
    empty = [
        f"{f['id']}: {[t['name'] for t in f['traces']]}"
        for f in figures
        if not any(t["points"] for t in f["traces"] if t["visible"])
    ]
    assert not empty, f"{lesson}: figures without a visible trace with points: {empty}"
    assert "application/vnd.jupyter.widget-view+json" not in html_text, f"{lesson}: a widget left unflattened"
    wide = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert wide <= 1, f"{lesson}: the page is {wide} px wider than a 412 px screen (a wide output should scroll alone)"
    wrapping = page.evaluate(
        "() => Array.from(document.querySelectorAll('.jp-OutputArea-output pre'))"
        ".filter(p => getComputedStyle(p).whiteSpace !== 'pre').length"
    )
    assert wrapping == 0, f"{lesson}: {wrapping} text outputs wrap their lines (a printed table then reads as a mess)"
    if "gpulab-static-controls" in html_text:  # an explorer: its controls shown as text with their values
        assert page.locator(".gpulab-static-control").count() > 0
    broken = page.evaluate(
        "() => Array.from(document.images).filter(i => !i.complete || !i.naturalWidth).map(i => i.alt || i.src)"
    )
    assert not broken, f"{lesson}: images that do not load offline, shown as their alt text: {broken}"
    split = page.evaluate(_JS_MID_WORD_BREAKS)
    assert not split, f"{lesson}: lines broken inside a word on a 412 px screen: {split[:5]}"
