#!/usr/bin/env python3
"""Build the lessons as a static site: every notebook executed, with its outputs, as one HTML page.

    python tools/build_site.py [--out site] [--jobs 2] [NOTEBOOK ...]     (what `make site` runs)

Each notebook in notebooks/ is executed by nbclient in Triton's interpreter (``GPULAB_MODE=interpreter``), so the
timing figures draw the reference measurements in gpulab/data, labelled as such, on any machine, GPU or not.
``GPULAB_STATIC_FIGURES=1`` makes every figure a plain plotly figure; widgets are then flattened for a page without a
kernel: an ``ipywidgets.Output`` becomes the outputs it holds, a box its children, a slider or dropdown one line with
its value. plotly figures become divs drawn by one local copy of plotly.js (``plotly.min.js`` beside the pages), so
they zoom and hover in the page with no network. The pages come from nbconvert's HTML exporter (the ``lab``
template), and ``index.html`` lists the lessons. The notebooks themselves are only read: they stay without outputs.

A notebook that raises (outside cells tagged ``raises-exception``) is reported by name and the build exits 1, after
building the others. The out directory holds only what this script writes, and is replaced page by page.
"""

from __future__ import annotations

import argparse
import html
import os
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
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


def _control_line(model: dict) -> str | None:
    """One line for a slider, dropdown, checkbox or toggle: its description and current value; None for others."""
    s = model["state"]
    if "_options_labels" in s and s.get("index") is not None:
        value = s["_options_labels"][s["index"]]
    elif "value" in s and model["model_name"] not in ("HTMLModel", "HTMLMathModel", "LabelModel", "TextareaModel"):
        value = s["value"]
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
{%- block extra_css -%}
<style>
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
    return "<nav class='gpulab-nav'>" + "".join(links) + "</nav>"


def render_page(nb, stem: str, stems: list[str]) -> str:
    import jinja2
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(
        template_name="lab",
        template_file="gpulab_site.html.j2",
        extra_loaders=[jinja2.DictLoader({"gpulab_site.html.j2": PAGE_TEMPLATE})],
    )
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": stem}, "gpulab_nav": _nav(stem, stems)})
    return body


def write_index(out: Path, lessons: list[dict]) -> None:
    rows = "\n".join(
        f"<li><a href='{html.escape(l['stem'])}.html'>{html.escape(l['title'])}</a>"
        f" <span class='file'>{html.escape(l['stem'])}.ipynb</span></li>"
        if l["ok"]
        else f"<li>{html.escape(l['title'])} <span class='file'>{html.escape(l['stem'])}.ipynb: not built</span></li>"
        for l in lessons
    )
    (out / "index.html").write_text(f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>gpulab: the lessons</title>
<style>
  body {{ font: 16px/1.5 system-ui, sans-serif; max-width: 46em; margin: 2em auto; padding: 0 1em; }}
  li {{ margin: 0.5em 0; }} .file {{ color: #777; font-size: 0.85em; }}
</style></head>
<body>
<h1>gpulab: the lessons</h1>
<p>GPU performance taught with real Triton kernels. Each page is a lesson run top to bottom in Triton's interpreter
on a CPU: its timing figures draw measurements recorded on an H200 (labelled as such), its figures zoom and hover,
and its sliders are shown at their starting values. To run a lesson and move its sliders, open the notebook in
JupyterLab, Colab or Binder.</p>
<ol class="lessons">
{rows}
</ol>
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


def build_one(path: str, out: str, stems: list[str], timeout_s: float) -> dict:
    """Execute one notebook and write its page. Returns {stem, title, ok, seconds, error}."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    os.environ.update(KERNEL_ENV)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    src, stem, t0 = Path(path), Path(path).stem, time.monotonic()
    nb = nbformat.read(src, as_version=4)
    result = {"stem": stem, "title": title_of(nb, stem), "ok": False, "error": None}
    client = NotebookClient(
        nb,
        timeout=timeout_s,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(src.parent)}},
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
        (Path(out) / f"{stem}.html").write_text(render_page(nb, stem, stems))
        result["ok"] = True
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
    out.mkdir(parents=True, exist_ok=True)
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
            for f in futures:
                r = f.result()
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
