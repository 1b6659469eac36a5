#!/usr/bin/env python3
"""Build the lessons as a static site: every notebook executed, with its outputs, as one HTML page.

    python tools/build_site.py [--out site] [--jobs 2] [NOTEBOOK ...]     (what `make site` runs)

Each notebook in notebooks/ is executed by nbclient in Triton's interpreter (``GPULAB_MODE=interpreter``), so the
timing figures draw the reference measurements in gpulab/data, labelled as such, on any machine, GPU or not.
``GPULAB_STATIC_FIGURES=1`` makes every figure a plain plotly figure; widgets are then flattened for a page without a
kernel: an ``ipywidgets.Output`` becomes the outputs it holds, a box its children, a slider or dropdown one line with
its value. plotly figures become divs drawn by one local copy of plotly.js (``plotly.min.js`` beside the pages), so
they zoom and hover in the page with no network. Math is rendered when the page is built, as MathML (latex2mathml),
so the pages load no MathJax and read offline. A control's value is written as its readout shows it (the widget's
``readout_format``, a d3-format spec). Text outputs and tables keep their lines and scroll sideways on a narrow
screen. Colab's install cell (``sync_links.INSTALL_MARK``) is left out of the pages. The pages come from nbconvert's
HTML exporter (the ``lab`` template), and ``index.html`` lists the lessons, with links to run them on Binder.
The notebooks themselves are only read: they stay without outputs.

A notebook that raises (outside cells tagged ``raises-exception``), or that cannot be read (not JSON, not a notebook),
is reported by name, on the terminal and in the index, and the build exits 1, after building the others. An ``--out``
that is not a directory (a file of that name) is refused with exit 2, before anything runs. The out directory holds only what this script writes, and is replaced page by page.
"""

from __future__ import annotations

import argparse
import datetime
import decimal
import html
import json
import math
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
sys.path.insert(0, str(ROOT / "tools"))
import sync_links  # noqa: E402  (tools/ is not a package: the links and the install cell's mark live there)

PLOTLY_JS = "plotly.min.js"

# The kernel's environment: the interpreter with the recorded data, static figures, plotly's JSON output only.
KERNEL_ENV = {"GPULAB_MODE": "interpreter", "GPULAB_STATIC_FIGURES": "1", "PLOTLY_RENDERER": "plotly_mimetype"}
CELL_TIMEOUT_S = 600

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
PLOTLY_MIME = "application/vnd.plotly.v1+json"

CONTROLS_NOTE = (
    "<p class='gpulab-static-note'>In JupyterLab or Colab these controls redraw the figure below; "
    "this page shows it at their starting values.</p>"
)


# ---------------------------------------------------------------------------------------- widgets, flattened


# ipywidgets' readout formats where a model's state names none (the traits' defaults)
DEFAULT_READOUT = {"FloatSliderModel": ".2f", "FloatLogSliderModel": ".3g", "FloatRangeSliderModel": ".2f"}


def _js(x: float, spec: str) -> str:
    """``x`` formatted by ``spec`` (``.3f``, ``.2e``) as JavaScript rounds: a tie goes away from zero (toFixed,
    toPrecision and toExponential pick the larger integer), on the exact binary value."""
    with decimal.localcontext(rounding=decimal.ROUND_HALF_UP):
        return format(decimal.Decimal(x), spec)


def _js_precision(x: float, p: int) -> str:
    """JavaScript's ``x.toPrecision(p)``: fixed notation unless the exponent is below -6 or at least p."""
    if x == 0 or not math.isfinite(x):
        return f"{x:.{max(p - 1, 0)}f}"
    e = int(_js(x, f".{p - 1}e").split("e")[1])  # the exponent after rounding to p digits
    if e < -6 or e >= p:
        return _js_exponential(x, p - 1)
    return _js(x, f".{max(p - 1 - e, 0)}f")


def _js_exponential(x: float, p: int) -> str:
    """JavaScript's ``x.toExponential(p)``: the exponent without leading zeros (1.00e+12, 2.5e-7)."""
    if not math.isfinite(x):
        return str(x)
    mantissa, exp = _js(x, f".{p}e").split("e")
    return f"{mantissa}e{exp[0] if exp[0] in '+-' else '+'}{int(exp.lstrip('+-'))}"


def _rounded(x: float, p: int) -> str:
    """d3-format's type r: ``x`` rounded to ``p`` significant digits, in decimal notation (never an exponent)."""
    if x == 0:
        return "0"  # at any precision, as d3 writes it
    mantissa, exp = _js(abs(x), f".{p - 1}e").split("e")
    digits, e = mantissa.replace(".", ""), int(exp)
    if e < 0:
        text = "0." + "0" * (-e - 1) + digits
    elif len(digits) > e + 1:
        text = digits[: e + 1] + "." + digits[e + 1 :]
    else:
        text = digits + "0" * (e + 1 - len(digits))
    return ("-" if x < 0 else "") + text


def d3_format(spec: str, value) -> str:
    """``value`` as d3-format's ``format(spec)`` writes it, as a slider's readout does, for the specs sliders use:
    ``[,][.precision][~][type]`` with type d, f, e, g, r, % or none. Any other spec gives ``str(value)``. As d3
    does, a precision is clamped to 1-21 significant digits for g, r and no type (``.0g`` is ``.1g``) and to 0-20
    decimals for the others, no type is ``~g`` (12 digits where no precision is given), and a tie rounds away from
    zero."""
    m = re.fullmatch(r"(,)?(?:\.(\d+))?(~)?([defgr%]?)", spec or "")
    if m is None or isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    comma, digits, trim, kind = m.groups()
    significant = kind in ("g", "r", "")
    if digits is None:
        p = 12 if kind == "" else 6
    else:
        p = max(1, min(21, int(digits))) if significant else min(20, int(digits))
    x = float(value)
    if kind == "d":
        text = _js(x, ".0f") if math.isfinite(x) else str(x)
    elif kind == "f":
        text = _js(x, f".{p}f") if math.isfinite(x) else str(x)
    elif kind == "%":
        text = _js(x * 100, f".{p}f") if math.isfinite(x) else str(x)
    elif kind == "e":
        text = _js_exponential(x, p)
    elif kind == "r":
        text = _rounded(x, p) if math.isfinite(x) else str(x)
    else:  # g, or no type: ~g
        text = _js_precision(x, p)
        trim = trim or kind == ""
    if trim and kind not in ("d",):
        mantissa, sep, exp = text.partition("e")
        if "." in mantissa:
            mantissa = mantissa.rstrip("0").rstrip(".")
        text = mantissa + sep + exp
    if comma:
        head, dot, tail = text.partition(".")
        sign = "-" if head.startswith("-") else ""
        digits = head.lstrip("-")
        if digits.isdigit():
            text = sign + f"{int(digits):,}" + dot + tail
    if kind == "%":
        text += "%"
    if text.startswith("-") and not re.search(r"[1-9]", text.partition("e")[0]):
        text = text[1:]  # a negative value that rounds to zero is written without its sign
    return text.replace("-", "\u2212", 1) if text.startswith("-") else text  # d3 writes a minus sign, not a hyphen


def _control_line(model: dict) -> str | None:
    """One line for a slider, dropdown, checkbox or toggle: its description and its value as the widget shows it
    (a slider's readout format applied); None for others."""
    s = model["state"]
    if "_options_labels" in s and s.get("index") is not None:
        value = s["_options_labels"][s["index"]]
    elif "value" in s and model["model_name"] not in ("HTMLModel", "HTMLMathModel", "LabelModel", "TextareaModel"):
        value = s["value"]
        spec = s.get("readout_format", DEFAULT_READOUT.get(model["model_name"]))
        if spec and isinstance(value, int | float) and not isinstance(value, bool):
            value = d3_format(spec, value)
        elif isinstance(value, list) and spec:  # a range slider: both ends
            value = " – ".join(d3_format(spec, v) for v in value)
    else:
        return None
    label = s.get("description") or ""
    return f"<span class='gpulab-static-control'><b>{html.escape(str(label))}</b> {html.escape(str(value))}</span>"


def widget_outputs(model_id: str, state: dict) -> list[dict]:
    """The outputs that stand for widget ``model_id`` on a page without a kernel (see the module docstring).

    state: the notebook's widget state (``metadata.widgets[WIDGET_STATE]["state"]``, model id -> model). A model
    missing from it (state not stored) gives a line saying so, never an error."""
    model = state.get(model_id)
    if model is None:
        return [_html_output(f"<p class='gpulab-static-note'>(widget {html.escape(model_id)}: no stored state)</p>")]
    name, s = model["model_name"], model["state"]
    if name == "OutputModel":
        return flatten_outputs(s.get("outputs", []), state)
    if "children" in s:
        outs: list[dict] = []
        controls = [
            c for c in (_control_line(state.get(_ref(c), {"model_name": "", "state": {}})) for c in s["children"]) if c
        ]
        if controls:
            outs.append(
                _html_output(
                    "<div class='gpulab-static-controls'>" + " &nbsp; ".join(controls) + "</div>" + CONTROLS_NOTE
                )
            )
        for child in s["children"]:
            child_model = state.get(_ref(child))
            if child_model is None or _control_line(child_model) is None:
                outs.extend(widget_outputs(_ref(child), state))
        return outs
    if name in ("HTMLModel", "HTMLMathModel"):
        return [_html_output(s.get("value", ""))]
    if name == "LabelModel":
        return [_html_output(f"<p>{html.escape(s.get('value', ''))}</p>")]
    if "_data" in s and "_layout" in s:  # plotly's FigureWidget (an anywidget in plotly >= 6)
        return [_plotly_output({"data": s["_data"], "layout": s["_layout"]})]
    line = _control_line(model)
    return [_html_output(f"<div class='gpulab-static-controls'>{line}</div>")] if line else []


def _ref(child: str) -> str:
    return child.removeprefix("IPY_MODEL_")


def _html_output(text: str) -> dict:
    return {"output_type": "display_data", "data": {"text/html": text}, "metadata": {}}


_figure_count = 0


def _plotly_output(fig: dict) -> dict:
    """A plotly figure (plotly's JSON: data, layout) as a div that the page's plotly.js draws."""
    import plotly.io as pio

    global _figure_count
    _figure_count += 1
    # no fixed width: the figure fills the page's width (a phone's too) and follows it
    fig = {**fig, "layout": {k: v for k, v in fig.get("layout", {}).items() if k not in ("width", "autosize")}}
    div = pio.to_html(
        fig,
        include_plotlyjs=False,
        full_html=False,
        validate=False,
        default_height="450px",
        div_id=f"gpulab-figure-{_figure_count}",
        config={"responsive": True},
    )
    return _html_output(div)


def flatten_outputs(outputs: list[dict], state: dict) -> list[dict]:
    """Outputs for a page without a kernel: widget views replaced by what they show, plotly JSON by a drawn div."""
    flat: list[dict] = []
    for out in outputs:
        data = out.get("data", {})
        if WIDGET_VIEW in data:
            flat.extend(widget_outputs(data[WIDGET_VIEW]["model_id"], state))
        elif PLOTLY_MIME in data:
            flat.append(_plotly_output(data[PLOTLY_MIME]))
        else:
            flat.append(out)
    return flat


def flatten_notebook(nb) -> None:
    """In place: every cell's outputs flattened (``flatten_outputs``); the widget state dropped from the metadata,
    so the page loads no widget manager."""
    import nbformat

    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.from_dict(o) for o in flatten_outputs(cell.outputs, state)]
    nb.metadata.pop("widgets", None)


# ------------------------------------------------------------------------------------------------- pages

PAGE_TEMPLATE = r"""
{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}
<script src="plotly.min.js"></script>
{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}
{%- endblock html_head_js_mathjax -%}
{%- block extra_css -%}
<style id="gpulab-site">
  /* text outputs and tables keep their lines: on a narrow screen they scroll sideways, the page does not.
     "body" outranks nbconvert's own rules, which come after this block */
  body .jp-OutputArea-output pre { white-space: pre; word-break: normal; overflow-wrap: normal; overflow-x: auto; }
  body .jp-RenderedHTMLCommon table { display: block; max-width: 100%; overflow-x: auto; }
  math[display="block"] { overflow-x: auto; overflow-y: hidden; max-width: 100%; padding: 0.3em 0; }
  .gpulab-nav { font: 14px/1.5 system-ui, sans-serif; padding: 8px 16px; border-bottom: 1px solid #ddd;
                display: flex; gap: 16px; flex-wrap: wrap; }
  .gpulab-static-controls { font: 13px system-ui, sans-serif; margin: 4px 0; }
  .gpulab-static-note { font: italic 12px system-ui, sans-serif; color: #666; margin: 2px 0 6px; }
</style>
{%- endblock extra_css -%}
{%- block body_header -%}
{{ super() }}
{{ resources.gpulab_nav }}
{%- endblock body_header -%}
"""


def title_of(nb, fallback: str) -> str:
    """The first markdown heading of the notebook, without its '#'s; ``fallback`` if it has none."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            m = re.search(r"^#+\s+(.+)$", cell.source, re.MULTILINE)
            if m:
                return m.group(1).strip()
    return fallback


def _nav(stem: str, stems: list[str]) -> str:
    i = stems.index(stem)
    links = ["<a href='index.html'>all lessons</a>"]
    if i > 0:
        links.append(f"<a href='{stems[i - 1]}.html'>previous: {stems[i - 1]}</a>")
    if i + 1 < len(stems):
        links.append(f"<a href='{stems[i + 1]}.html'>next: {stems[i + 1]}</a>")
    links.append(_run_links(f"{stem}.ipynb"))
    return "<nav class='gpulab-nav'>" + "".join(links) + "</nav>"


def tex_to_mathml(tex: str, display: bool) -> str:
    """TeX as MathML, rendered now (no script on the page); TeX that latex2mathml cannot read stays as code."""
    from latex2mathml.converter import convert

    try:
        return convert(tex, display="block" if display else "inline")
    except Exception:  # noqa: BLE001 -- any parse failure: the page shows the TeX itself
        return f"<code class='gpulab-tex'>{html.escape(tex)}</code>"


def _site_exporter_class():
    """nbconvert's HTML exporter, its markdown math written as MathML (``tex_to_mathml``) instead of left for
    MathJax."""
    import jinja2
    from nbconvert import HTMLExporter
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    class MathMLRenderer(IPythonRenderer):
        def block_math(self, body: str) -> str:
            return tex_to_mathml(body, display=True)

        def inline_math(self, body: str) -> str:
            return tex_to_mathml(body, display=False)

        def latex_environment(self, name: str, body: str) -> str:
            return tex_to_mathml(f"\\begin{{{name}}}{body}\\end{{{name}}}", display=True)

    class SiteExporter(HTMLExporter):
        @jinja2.pass_context
        def markdown2html(self, context, source):
            cell = context.get("cell", {})
            renderer = MathMLRenderer(
                escape=False,
                attachments=cell.get("attachments", {}),
                embed_images=self.embed_images,
                path=context.get("resources", {}).get("metadata", {}).get("path", ""),
                anchor_link_text=self.anchor_link_text,
                exclude_anchor_links=self.exclude_anchor_links,
            )
            return MarkdownWithMath(renderer=renderer).render(source)

    return SiteExporter


def drop_colab_install_cell(nb) -> None:
    """In place: Colab's install cell (it starts with ``sync_links.INSTALL_MARK``) removed; a page needs no install."""
    nb.cells = [c for c in nb.cells if not (c.cell_type == "code" and c.source.startswith(sync_links.INSTALL_MARK))]


# a line of markdown made only of linked images from the web: the Colab and Binder badges
_BADGE_LINE = re.compile(r"^(?:\s*<a\s[^>]*>\s*<img\s[^>]*src=[\"']https?://[^>]*>\s*</a>)+\s*$\n?", re.MULTILINE)
_REMOTE_IMG = re.compile(r"<img\s[^>]*src=[\"']https?://[^>]*>|!\[([^\]]*)\]\(https?://[^)]*\)")


def drop_remote_images(nb) -> None:
    """In place: markdown without images from the web, which a page read offline shows as broken alt text. A line
    of linked images only (the Colab and Binder badges: the page's top bar links to both) is removed; any other such
    image becomes its alt text."""

    def alt(m: re.Match) -> str:
        if m.group(1) is not None:
            return m.group(1)
        found = re.search(r"\balt=[\"']([^\"']*)[\"']", m.group(0))
        return found.group(1) if found else ""

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = _REMOTE_IMG.sub(alt, _BADGE_LINE.sub("", cell.source))


def build_machine() -> str:
    """This machine, for the few numbers a page measures as it is built: CPU model, core count and the date."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {datetime.date.today().isoformat()}"


def as_built(nb, machine: str) -> None:
    """In place: outputs that say "measured now" (lesson 10's collectives, gloo on this CPU) say instead that they were
    measured when the page was built, and on which machine (``build_machine``): a reader's machine measured nothing."""
    import nbformat

    def said(text: str) -> str:
        text = text.replace("measured now on this machine", f"measured on the machine that built this page ({machine})")
        text = re.sub(  # "measured now: gloo on 4 CPU processes of this machine"
            r"\bmeasured now([^\\\"<]*?)\b(of|on) this machine",  # within a line: JSON escapes \n, \"
            lambda m: f"measured when this page was built{m[1]}{m[2]} the machine that built it ({machine})",
            text,
        )
        return re.sub(r"\bmeasured now\b", f"measured when this page was built ({machine})", text)

    for cell in nb.cells:
        if cell.cell_type == "code" and cell.outputs:
            cell.outputs = [nbformat.from_dict(o) for o in json.loads(said(json.dumps(cell.outputs)))]


def render_page(nb, stem: str, stems: list[str]) -> str:
    """The page for an executed, flattened notebook, without Colab's install cell and images from the web."""
    import jinja2

    drop_colab_install_cell(nb)
    drop_remote_images(nb)

    exporter = _site_exporter_class()(
        template_name="lab",
        template_file="gpulab_site.html.j2",
        extra_loaders=[jinja2.DictLoader({"gpulab_site.html.j2": PAGE_TEMPLATE})],
    )
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": stem}, "gpulab_nav": _nav(stem, stems)})
    return body


def _run_links(notebook: str) -> str:
    """Links that run ``notebook``: Binder (JupyterLab, CPU) and Colab (a GPU). Text, not badge images: the page
    reads offline."""
    url = sync_links.repo_url()
    colab, _ = sync_links.expected(url)
    return (
        f"<span class='gpulab-run'>run it: <a class='gpulab-binder' href='{html.escape(sync_links.binder_url(url, notebook))}'>"
        f"Binder</a> · <a class='gpulab-colab' href='{html.escape(colab + notebook)}'>Colab</a></span>"
    )


def _first_line(error: str | None) -> str:
    """The first non-empty line of a build error, shortened for the index; "failed" when there is none."""
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    return (lines[0][:200] if lines else "failed") or "failed"


def write_index(out: Path, lessons: list[dict]) -> None:
    """``out/index.html``: each lesson linked to its page, or named with ``not built`` and the first line of its
    error. lessons: dicts with stem, title, ok and (when not ok) error, as ``build_one`` returns."""
    rows = "\n".join(
        f"<li><a href='{html.escape(l['stem'])}.html'>{html.escape(l['title'])}</a>"
        f" <span class='file'>{html.escape(l['stem'])}.ipynb</span></li>"
        if l["ok"]
        else f"<li>{html.escape(l['title'])} <span class='file'>{html.escape(l['stem'])}.ipynb: not built</span>"
        f" <span class='gpulab-build-error'>({html.escape(_first_line(l.get('error')))})</span></li>"
        for l in lessons
    )
    (out / "index.html").write_text(f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>gpulab: the lessons</title>
<style>
  body {{ font: 16px/1.5 system-ui, sans-serif; max-width: 46em; margin: 2em auto; padding: 0 1em; }}
  li {{ margin: 0.5em 0; }} .file {{ color: #777; font-size: 0.85em; }}
  .lessons {{ list-style: none; padding-left: 0; }}
</style></head>
<body>
<h1>gpulab: the lessons</h1>
<p>GPU performance taught with real Triton kernels. Each page is a lesson run top to bottom in Triton's interpreter
on a CPU: its timing figures draw measurements recorded on an H200 (labelled as such; the few measured on the CPU
that built the pages say so), its figures zoom and hover,
and its sliders are shown at their starting values. To run a lesson and move its sliders, open the notebook in
JupyterLab, Colab or Binder.</p>
<p class="gpulab-launch"><a class="gpulab-binder" href="{html.escape(sync_links.binder_url(sync_links.repo_url()))}">Launch
lesson 00 on Binder</a> (JupyterLab in your browser, CPU only, nothing to install; the first launch takes a few
minutes) · on a GPU, each notebook's Colab badge.</p>
<ul class="lessons">
{rows}
</ul>
</body></html>
""")


# ---------------------------------------------------------------------------------------------- execution


def _output_widget_class():
    """nbclient's stand-in for an ``ipywidgets.Output``, minus one thing: it does not send each captured output back
    to the kernel. nbclient sends that on the shell channel while it waits on the same channel for the cell's reply,
    and the cell then hangs until its timeout now and then (jupyter/nbclient#312). The page needs only the outputs
    nbclient keeps for the notebook's widget state; the kernel's copy is never read."""
    from nbclient.output_widget import OutputWidget

    class OutputWidgetNoEcho(OutputWidget):
        def sync_state(self) -> None:
            pass

    return OutputWidgetNoEcho


def kernel_config(sockets: Path):
    """nbclient's config: the kernel talks over Unix sockets named ``sockets/kernel-N`` (IPC transport), where
    ipykernel on localhost TCP warns at every start that the traffic is not encrypted; TCP where Unix sockets are
    missing (Windows). ``sockets``: a private directory with a short path (a socket's path holds 107 bytes)."""
    from traitlets.config import Config

    if os.name != "posix":
        return Config()
    return Config({"KernelManager": {"transport": "ipc", "ip": str(sockets / "kernel")}})


def build_one(path: str, out: str, stems: list[str], timeout_s: float) -> dict:
    """Execute one notebook and write its page. Returns {stem, title, ok, seconds, error}."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    os.environ.update(KERNEL_ENV)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    src, stem, t0 = Path(path), Path(path).stem, time.monotonic()
    result = {"stem": stem, "title": stem, "ok": False, "error": None}
    try:
        nb = nbformat.read(src, as_version=4)
    except Exception as e:  # noqa: BLE001 -- not JSON, not a notebook, not readable: reported, the others built
        result["error"] = f"unreadable notebook {src}: {type(e).__name__}: {e}"[-3000:]
        result["seconds"] = round(time.monotonic() - t0, 1)
        return result
    result["title"] = title_of(nb, stem)
    sockets = tempfile.mkdtemp(prefix="gpulab-kernel-")  # the kernel's Unix sockets, removed with it
    client = NotebookClient(
        nb,
        timeout=timeout_s,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(src.parent)}},
        config=kernel_config(Path(sockets)),
    )
    client.widget_registry["@jupyter-widgets/output"]["OutputModel"] = _output_widget_class()
    try:
        client.execute()
    except CellExecutionError as e:
        result["error"] = re.sub(r"\x1b\[[0-9;]*m", "", str(e))[-3000:]
    except Exception as e:  # noqa: BLE001 -- a dead kernel or a timeout: report it with the notebook's name
        result["error"] = f"{type(e).__name__}: {e}"[-3000:]
    else:
        flatten_notebook(nb)
        as_built(nb, build_machine())
        (Path(out) / f"{stem}.html").write_text(render_page(nb, stem, stems))
        result["ok"] = True
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
    result["seconds"] = round(time.monotonic() - t0, 1)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebooks", nargs="*", help="notebooks to build (default: every notebooks/*.ipynb)")
    ap.add_argument("--out", default=str(ROOT / "site"), help="output directory (default: site/)")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="notebooks run at once")
    ap.add_argument("--timeout", type=float, default=CELL_TIMEOUT_S, help="seconds one cell may run")
    args = ap.parse_args(argv)

    paths = [Path(p).resolve() for p in args.notebooks] or sorted(NOTEBOOKS.glob("[0-9]*.ipynb"))
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"no such notebook: {', '.join(missing)}", file=sys.stderr)
        return 2
    out = Path(args.out).resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        print(f"--out {args.out}: not a directory (a file has that name, or a parent of it is a file)", file=sys.stderr)
        return 2
    import plotly

    shutil.copy(Path(plotly.__file__).parent / "package_data" / PLOTLY_JS, out / PLOTLY_JS)
    (out / ".nojekyll").touch()  # GitHub Pages: serve the files as they are

    stems = [p.stem for p in paths]
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpulab-site-") as ipython_dir:
        os.environ["IPYTHONDIR"] = ipython_dir  # no ~/.ipython startup files in the kernels
        with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(build_one, str(p), str(out), stems, args.timeout) for p in paths]
            results = []
            for p, f in zip(paths, futures, strict=True):
                try:
                    r = f.result()
                except Exception as e:  # noqa: BLE001 -- a worker that died: this notebook fails, the others are built
                    r = {
                        "stem": p.stem,
                        "title": p.stem,
                        "ok": False,
                        "seconds": 0.0,
                        "error": f"{type(e).__name__}: {e}",
                    }
                results.append(r)
                print(f"{r['stem']}: {'ok' if r['ok'] else 'FAILED'} in {r['seconds']}s", flush=True)
    write_index(out, results)
    failed = [r for r in results if not r["ok"]]
    print(
        f"site: {len(results) - len(failed)} of {len(results)} lessons in {out} "
        f"({time.monotonic() - t0:.0f}s); open {out / 'index.html'}"
    )
    for r in failed:
        print(f"\n{r['stem']} failed:\n{r['error']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
