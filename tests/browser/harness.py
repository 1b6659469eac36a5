"""Drive JupyterLab in headless Chromium: open a notebook, run it, move a lesson slider, watch the figure.

The pieces, used by ``tests/test_browser.py``:

* :class:`BrowserCase` -- one row of the table of notebooks to check.
* :class:`JupyterLabServer` -- a throw-away JupyterLab on 127.0.0.1 (free port, random token, isolated
  runtime/config/data/settings/workspace dirs under a tmp dir, autosave off, checkpoints kept out of the repo).
* :func:`find_chromium`, ``CHROMIUM_ARGS`` -- the system Chromium (``/usr/bin/chromium`` or ``$GPULAB_CHROMIUM``).
* :class:`LabDriver` -- the steps of one check on a Playwright page, each one waiting on a condition.

Widget convention the lessons follow: an ipywidgets container with CSS class ``gpulab-widget`` holding a slider
with class ``gpulab-slider`` and a plotly figure (``go.FigureWidget``, or a static figure inside an
``ipywidgets.Output``); both render a ``.js-plotly-plot`` element.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures"

DEFAULT_CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
)
VIEWPORT = {"width": 1400, "height": 1000}


# --------------------------------------------------------------------------------------------- the table row


@dataclasses.dataclass(frozen=True)
class BrowserCase:
    """One notebook to check in the browser.

    path:      notebook path relative to ``root`` (also its URL under /lab/tree/).
    root:      the Jupyter server's root dir; lessons live in notebooks/, the harness self-tests in fixtures/.
    widget:    CSS selector of the lesson widget container; the ``nth`` match (0-based) is the one driven.
    slider:    CSS selector of the slider, inside that container.
    figure:    CSS selector of the figure, inside that container.
    timeout_s: how long "Run All Cells" may take (the notebook's own run time) before the test fails.
    update_timeout_s: how long the figure may take to change after the slider moved.
    keys:      how many ArrowRight presses move the slider (ArrowLeft is tried if the readout does not move).
    skip_if_missing: skip (with a reason) instead of failing when the notebook does not exist yet.
    marks:     extra pytest marks for this row, e.g. ``(pytest.mark.gpu,)``.
    """

    path: str
    root: Path = NOTEBOOKS_DIR
    widget: str = ".gpulab-widget"
    slider: str = ".gpulab-slider"
    figure: str = ".js-plotly-plot"
    nth: int = 0
    timeout_s: float = 120.0
    update_timeout_s: float = 20.0
    keys: int = 4
    skip_if_missing: bool = False
    marks: tuple = ()
    id: str | None = None

    @property
    def file(self) -> Path:
        return Path(self.root) / self.path

    @property
    def test_id(self) -> str:
        return self.id or self.path.removesuffix(".ipynb")


# ------------------------------------------------------------------------------------------------ chromium


def find_chromium() -> str | None:
    """Path of the Chromium executable to drive, or None. ``$GPULAB_CHROMIUM`` overrides /usr/bin/chromium."""
    cand = os.environ.get("GPULAB_CHROMIUM") or DEFAULT_CHROMIUM
    found = shutil.which(cand) if os.sep not in cand else (cand if os.access(cand, os.X_OK) else None)
    return found


CHROMIUM_MISSING = (
    "no Chromium for the browser tests: install Debian's with `apt-get install chromium` "
    "(gives /usr/bin/chromium) or point GPULAB_CHROMIUM at a Chromium/Chrome executable "
    "(do not use `playwright install`)"
)


# ------------------------------------------------------------------------------------------ jupyter server


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# JupyterLab user settings that make a scripted session deterministic and keep it from writing the notebooks.
LAB_SETTINGS: dict[str, dict[str, Any]] = {
    # never write outputs back into the repo's notebooks
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    # "none": every cell stays attached to the DOM (the default windowing can detach/skip off-screen cells,
    # hiding their outputs and errors from a DOM check); start the kernel without asking
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none", "autoStartDefaultKernel": True},
    # no "get notified about Jupyter news?" toast, no network calls
    "@jupyterlab/apputils-extension/notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
        "doNotDisturbMode": True,
    },
}


# Kernel start-up code that makes the named top-level modules absent: a meta-path finder, first in line, answers
# every import of them (and of their submodules) with ModuleNotFoundError, as if they were not installed.
_BLOCK_IMPORTS = """\
import sys
class _Blocked:
    names = frozenset({names!r})
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked by the browser test)", name=name)
        return None
sys.meta_path.insert(0, _Blocked())
import runpy
runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
"""


class JupyterLabServer:
    """A JupyterLab server for one root dir, isolated under its own tmp dir. Use as a context manager.

    ``block_imports``: top-level module names the kernel cannot import (``import anywidget`` raises
    ModuleNotFoundError there), e.g. to run a notebook as a front end without plotly FigureWidget support would.
    The server itself is unaffected.
    """

    def __init__(
        self,
        root_dir: Path,
        python: str = sys.executable,
        startup_timeout_s: float = 60.0,
        block_imports: tuple[str, ...] = (),
    ):
        self.root_dir = Path(root_dir).resolve()
        self.python = python
        self.block_imports = tuple(block_imports)
        self.startup_timeout_s = startup_timeout_s
        self.port = _free_port()
        self.token = secrets.token_hex(24)
        self.tmp = Path(tempfile.mkdtemp(prefix="gpulab-jlab-"))
        self.log_path = self.tmp / "server.log"
        self.proc: subprocess.Popen | None = None

    # -- urls
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def notebook_url(self, path: str) -> str:
        # ?reset drops any saved layout so exactly this notebook opens (the workspace dir is fresh anyway)
        return f"{self.base_url}/lab/tree/{urllib.parse.quote(path)}?reset&token={self.token}"

    # -- lifecycle
    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        for var in ("JUPYTER_PATH", "JUPYTER_PREFER_ENV_PATH", "JUPYTER_CONFIG_PATH"):
            env.pop(var, None)
        env.update(
            JUPYTER_RUNTIME_DIR=str(self.tmp / "runtime"),
            JUPYTER_CONFIG_DIR=str(self.tmp / "config"),  # no ~/.jupyter config leaks in
            JUPYTER_DATA_DIR=str(self.tmp / "data"),  # no ~/.local/share/jupyter kernels leak in
            JUPYTERLAB_SETTINGS_DIR=str(self.tmp / "settings"),
            JUPYTERLAB_WORKSPACES_DIR=str(self.tmp / "workspaces"),
            IPYTHONDIR=str(self.tmp / "ipython"),  # no ~/.ipython startup files
            JUPYTER_PLATFORM_DIRS="1",
            # the user data dir (above) before the environment's: its kernel spec wins over the venv's
            JUPYTER_PREFER_ENV_PATH="0",
            PYDEVD_DISABLE_FILE_VALIDATION="1",
        )
        # the kernel inherits this env: the interpreter's bin dir first, and the repo importable
        bindir = str(Path(self.python).parent)
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        return env

    def _write_isolated_config(self, env: dict[str, str]) -> None:
        # kernel "python3" = this very interpreter (the user data dir comes first on the kernelspec path,
        # JUPYTER_PREFER_ENV_PATH=0, so this spec wins over the venv's and any system one)
        kdir = Path(env["JUPYTER_DATA_DIR"]) / "kernels" / "python3"
        kdir.mkdir(parents=True, exist_ok=True)
        launch = ["-m", "ipykernel_launcher"]
        if self.block_imports:
            launch = ["-c", _BLOCK_IMPORTS.format(names=sorted(self.block_imports))]
        spec = {
            "argv": [self.python, *launch, "-f", "{connection_file}"],
            "display_name": "Python 3 (ipykernel)",
            "language": "python",
            "metadata": {"debugger": True},
        }
        (kdir / "kernel.json").write_text(json.dumps(spec, indent=1))
        for plugin, values in LAB_SETTINGS.items():
            f = Path(env["JUPYTERLAB_SETTINGS_DIR"]) / (plugin + ".jupyterlab-settings")
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(json.dumps(values, indent=1))
        for d in ("runtime", "config", "workspaces", "ipython", "checkpoints"):
            (self.tmp / d).mkdir(parents=True, exist_ok=True)

    def command(self) -> list[str]:
        cmd = [
            self.python,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={self.root_dir}",
            f"--IdentityProvider.token={self.token}",
            "--MappingKernelManager.default_kernel_name=python3",
            # JupyterLab writes a checkpoint when it opens a notebook: keep those out of the repo
            f"--FileCheckpoints.checkpoint_dir={self.tmp / 'checkpoints'}",
            "--NotebookNotary.db_file=:memory:",
            "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: run commands, read kernel status
            "--LabApp.extension_manager=readonly",  # no PyPI queries
            "--LabApp.news_url=None",  # no news feed fetch
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        return cmd

    def start(self) -> JupyterLabServer:
        env = self._env()
        self._write_isolated_config(env)
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            self.command(),
            cwd=self.root_dir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            # own session: a Ctrl-C in the pytest terminal reaches pytest, which then tears the server down
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                status = self.api("GET", "/api/status", timeout=2)
                if isinstance(status, dict) and "started" in status:
                    return self
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"JupyterLab did not answer within {self.startup_timeout_s}s:\n{self.log_tail()}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            # kernels run in sessions of their own (jupyter_client starts them so): shut them down by REST,
            # then SIGTERM lets the server shut down anything left before it exits
            self.shutdown_all_kernels()
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self.proc = None
        if not os.environ.get("GPULAB_KEEP_JUPYTER_TMP"):
            shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> JupyterLabServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- REST
    def api(self, method: str, path: str, timeout: float = 10) -> Any:
        req = urllib.request.Request(
            self.base_url + path, method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body = r.read()
        return json.loads(body) if body else None

    def shutdown_all_kernels(self) -> None:
        """Free the kernels a test started (lesson kernels hold torch/triton; do not let them pile up)."""
        try:
            for sess in self.api("GET", "/api/sessions"):
                self.api("DELETE", f"/api/sessions/{sess['id']}")
            for k in self.api("GET", "/api/kernels"):
                self.api("DELETE", f"/api/kernels/{k['id']}")
        except Exception:  # noqa: BLE001 -- best effort; the server teardown kills the rest
            pass

    def log_tail(self, n: int = 60) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no server log)"
        return "\n".join(lines[-n:])


# ------------------------------------------------------------------------------------------------ the page

# JS: the figure's visible state. SVG path geometry + SVG text (what the reader sees); for WebGL traces, which
# draw into a canvas, the plotted data as well. Hashed (cyrb53) so polling does not ship big strings around.
_JS_FIGURE_STATE = r"""
([widgetSel, nth, figureSel]) => {
  const hash = (str, seed = 0) => {
    let h1 = 0xdeadbeef ^ seed, h2 = 0x41c6ce57 ^ seed;
    for (let i = 0; i < str.length; i++) {
      const ch = str.charCodeAt(i);
      h1 = Math.imul(h1 ^ ch, 2654435761); h2 = Math.imul(h2 ^ ch, 1597334677);
    }
    h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
    h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
    return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(16);
  };
  const box = document.querySelectorAll(widgetSel)[nth];
  if (!box) return {found: false, why: `no element ${widgetSel} #${nth}`};
  const figs = box.querySelectorAll(figureSel);
  if (!figs.length) return {found: false, why: `no ${figureSel} inside ${widgetSel} #${nth}`};
  const parts = [];
  let paths = 0, texts = 0, gl = false;
  for (const fig of figs) {
    fig.querySelectorAll('svg path').forEach(p => { paths++; parts.push(p.getAttribute('d') || ''); });
    fig.querySelectorAll('svg text').forEach(t => { texts++; parts.push('T:' + t.textContent); });
    const gd = fig.classList.contains('js-plotly-plot') ? fig : fig.querySelector('.js-plotly-plot');
    if (gd && Array.isArray(gd._fullData) && gd._fullData.some(t => String(t.type).endsWith('gl'))) {
      gl = true;
      for (const t of gd._fullData) {
        for (const k of ['x', 'y', 'z']) if (t[k]) parts.push(k + ':' + Array.from(t[k]).join(','));
      }
    }
  }
  const r = figs[0].getBoundingClientRect();
  return {found: true, hash: hash(parts.join('\n')), paths, texts, gl, n: figs.length,
          width: Math.round(r.width), height: Math.round(r.height)};
}
"""

# JS: the x/y lengths and names of the traces plotly drew, from the graph div's data.
_JS_TRACES = r"""
([widgetSel, nth, figureSel]) => {
  const box = document.querySelectorAll(widgetSel)[nth];
  const fig = box && box.querySelector(figureSel);
  const gd = fig && (fig.classList.contains('js-plotly-plot') ? fig : fig.querySelector('.js-plotly-plot'));
  if (!gd || !Array.isArray(gd._fullData)) return [];
  const len = v => (v && typeof v.length === 'number') ? v.length : 0;
  return gd._fullData.map(t => ({name: t.name === undefined ? null : t.name, nx: len(t.x), ny: len(t.y)}));
}
"""

_JS_SLIDER_VALUE = r"""
([widgetSel, nth, sliderSel]) => {
  const box = document.querySelectorAll(widgetSel)[nth];
  const s = box && box.querySelector(sliderSel);
  if (!s) return null;
  const ro = s.querySelector('.widget-readout');
  const h = s.querySelector('.noUi-handle');
  return (ro ? ro.textContent.trim() : '') + '|' + (h ? h.getAttribute('aria-valuenow') : '');
}
"""

# JS: is the slider handle at its maximum (then the arrow keys must go left)?
_JS_SLIDER_AT_MAX = r"""
([widgetSel, nth, sliderSel]) => {
  const box = document.querySelectorAll(widgetSel)[nth];
  const h = box && box.querySelector(sliderSel + ' .noUi-handle');
  if (!h) return false;
  const now = parseFloat(h.getAttribute('aria-valuenow')), max = parseFloat(h.getAttribute('aria-valuemax'));
  return isFinite(now) && isFinite(max) && now >= max;
}
"""

# JS: a kernel barrier. The kernel handles shell messages in order, so once a silent, empty execute request sent
# now is done (reply + idle), every widget update sent before it has been handled and its outputs/comm messages
# delivered. ipywidgets throttles updates (one in flight, the latest buffered and sent on the next idle), so the
# caller runs this twice.
_JS_KERNEL_BARRIER = r"""
async ([path, timeoutMs]) => {
  const w = window.jupyterapp.shell.currentWidget;
  if (!w || !w.context || w.context.path !== path) throw new Error('notebook ' + path + ' is not the current widget');
  const k = w.sessionContext.session.kernel;
  const done = k.requestExecute({code: '', silent: true, store_history: false}).done.then(() => true);
  const timeout = new Promise(resolve => setTimeout(() => resolve(false), timeoutMs));
  return await Promise.race([done, timeout]);
}
"""

# JS: run code in the notebook's kernel outside any cell; its stdout and errors as text, or null on timeout.
_JS_KERNEL_EXECUTE = r"""
async ([path, code, timeoutMs]) => {
  const w = window.jupyterapp.shell.currentWidget;
  if (!w || !w.context || w.context.path !== path) throw new Error('notebook ' + path + ' is not the current widget');
  const k = w.sessionContext.session.kernel;
  let out = '';
  const f = k.requestExecute({code, silent: false, store_history: false});
  f.onIOPub = msg => {
    const t = msg.header.msg_type;
    if (t === 'stream') out += msg.content.text;
    else if (t === 'error') out += msg.content.ename + ': ' + msg.content.evalue + '\n';
  };
  const timeout = new Promise(resolve => setTimeout(() => resolve(false), timeoutMs));
  return (await Promise.race([f.done.then(() => true), timeout])) ? out : null;
}
"""

# JS: every plotly figure of the notebook: its cell, whether it sits in an ipywidgets Output (a static figure
# re-shown there) and, per trace, its type and how many x and y values plotly drew.
_JS_ALL_FIGURES = r"""
() => {
  const w = window.jupyterapp.shell.currentWidget;
  const len = v => (v && typeof v.length === 'number') ? v.length : 0;
  const figs = [];
  w.content.widgets.forEach((view, cell) => {
    for (const gd of view.node.querySelectorAll('.js-plotly-plot')) {
      figs.push({cell, in_output_widget: gd.closest('.widget-output') !== null,
                 traces: (Array.isArray(gd._fullData) ? gd._fullData : [])
                   .map(t => ({name: t.name === undefined ? null : t.name, type: t.type, nx: len(t.x), ny: len(t.y)}))});
    }
  });
  return figs;
}
"""

# JS: the notebook panel showing `path`, its kernel connected and idle.
_JS_KERNEL_IDLE = r"""
(path) => {
  const app = window.jupyterapp;
  if (!app || !app.shell) return false;
  const w = app.shell.currentWidget;
  if (!w || !w.context || w.context.path !== path || !w.sessionContext) return false;
  const k = w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.status === 'idle' && k.connectionStatus === 'connected';
}
"""

_JS_START_RUN_ALL = r"""
(path) => {
  const app = window.jupyterapp;
  const w = app.shell.currentWidget;
  if (!w || !w.context || w.context.path !== path) throw new Error('notebook ' + path + ' is not the current widget');
  window.__gpulabRun = {done: false, ok: null, error: null};
  app.commands.execute('notebook:run-all-cells').then(
    ok => { window.__gpulabRun = {done: true, ok: ok, error: null}; },
    err => { window.__gpulabRun = {done: true, ok: false, error: String(err)}; });
  return true;
}
"""

# JS: every cell finished -- run-all resolved, no [*] prompt, kernel idle.
_JS_RUN_FINISHED = r"""
(path) => {
  const r = window.__gpulabRun;
  if (!r || !r.done) return false;
  const w = window.jupyterapp.shell.currentWidget;
  if (!w || w.context.path !== path) return false;
  const k = w.sessionContext.session && w.sessionContext.session.kernel;
  if (!k || k.status !== 'idle') return false;
  for (const p of w.node.querySelectorAll('.jp-InputPrompt')) if (p.textContent.includes('*')) return false;
  return true;
}
"""

# JS: what ran and what failed, per code cell, from the notebook model (authoritative for the cell's own outputs)
# and from the DOM (what the reader sees, including tracebacks inside ipywidgets.Output views, which are not in
# the cell's outputs). In JupyterLab 4.6 an error output is rendered with data-mime-type
# "application/vnd.jupyter.stderr", exactly like a warning, so a shown traceback is told apart by its text.
_JS_CELL_REPORT = r"""
() => {
  const w = window.jupyterapp.shell.currentWidget;
  const cells = [];
  const views = w.content.widgets;
  for (let i = 0; i < views.length; i++) {
    const view = views[i], c = view.model;
    if (c.type !== 'code') continue;
    const src = c.sharedModel.getSource();
    const tags = c.getMetadata('tags') || [];
    const outs = c.outputs.toJSON();
    const shown = Array.from(view.node.querySelectorAll('.jp-OutputArea-output'));
    cells.push({
      index: i, source: src.slice(0, 120), empty: src.trim() === '', tags,
      execution_count: c.executionCount,
      errors: outs.filter(o => o.output_type === 'error')
                  .map(o => o.ename + ': ' + o.evalue + '\n' + (o.traceback || []).join('\n')),
      shown_tracebacks: shown.filter(e => {
          const m = e.getAttribute('data-mime-type');
          return m === 'application/vnd.jupyter.error' ||
                 (m === 'application/vnd.jupyter.stderr' && /Traceback \(most recent call last\)/.test(e.innerText));
        }).map(e => e.innerText.slice(-3000)),
      // ipywidgets shows this text (and no error output) when a widget view fails to render
      widget_errors: shown.map(e => e.innerText)
          .filter(t => /Error displaying widget|Error rendering output item|Failed to load model class/.test(t))
          .map(t => t.slice(0, 3000)),
    });
  }
  return {run: window.__gpulabRun, cells};
}
"""

# JS: the JupyterLab log console's text. Errors raised in widget callbacks (e.g. a slider observer) are not shown in
# any cell: JupyterLab routes them to the log console.
_JS_OPEN_LOG_CONSOLE = r"""
async () => {
  const app = window.jupyterapp;
  if (!document.querySelector('.jp-LogConsolePanel'))
    await app.commands.execute('logconsole:open', {insertMode: 'split-bottom', activate: false});
  return true;
}
"""
_JS_LOG_CONSOLE_READY = r"""
() => {
  const p = document.querySelector('.jp-LogConsolePanel');
  if (!p) return false;
  return p.querySelector('.jp-OutputArea-child') !== null || /No log messages/.test(p.innerText);
}
"""


def strip_ansi(s: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", s)


def _tail(text: str, n: int) -> str:
    return "\n".join(text.splitlines()[-n:])


class CheckFailed(AssertionError):
    pass


class LabDriver:
    """The steps of one browser check, on one Playwright page. Every wait is on a condition, with a timeout."""

    def __init__(self, page, server: JupyterLabServer, case: BrowserCase):
        self.page = page
        self.server = server
        self.case = case
        self.console: list[str] = []
        self.screenshot_at_failure: bytes | None = None
        self.timings: dict[str, Any] = {}
        page.on("console", lambda m: self.console.append(f"[{m.type}] {m.text}"))
        page.on("pageerror", lambda e: self.console.append(f"[pageerror] {e}"))

    def _timed(self, name: str, t0: float) -> None:
        self.timings[name] = round(time.monotonic() - t0, 2)

    def _wait(self, js: str, arg: Any, timeout_s: float, what: str, diagnose=None) -> Any:
        try:
            return self.page.wait_for_function(js, arg=arg, timeout=timeout_s * 1000, polling=100)
        except Exception as e:  # playwright TimeoutError
            if "Timeout" not in type(e).__name__ and "Timeout" not in str(e):
                raise
        msg = f"timed out after {timeout_s:g}s waiting for: {what}"
        try:  # the page as it was when the wait failed, before diagnostics open the log console
            self.screenshot_at_failure = self.page.screenshot(timeout=15000)
        except Exception:  # noqa: BLE001
            pass
        for extra in (self._dialogs, diagnose):
            if extra is None:
                continue
            try:
                note = extra()
            except Exception as e:  # noqa: BLE001 -- diagnostics must not hide the failure
                note = f"(diagnostics failed: {e!r})"
            if note:
                msg += "\n" + note
        raise CheckFailed(msg)

    def _dialogs(self) -> str:
        texts = self.page.evaluate(
            "() => Array.from(document.querySelectorAll('.jp-Dialog')).map(d => d.innerText.trim())"
        )
        return "".join(f"JupyterLab dialog open: {t!r}\n" for t in texts)

    def _running_cells(self) -> str:
        running = self.page.evaluate(r"""() => {
            const w = window.jupyterapp.shell.currentWidget;
            return w.content.widgets.map((c, i) => [i, c.node.querySelector('.jp-InputPrompt'), c.model])
              .filter(([i, p, m]) => p && p.textContent.includes('*'))
              .map(([i, p, m]) => `cell ${i}: ${m.sharedModel.getSource().slice(0, 100)}`);
        }""")
        if not running:
            return ""
        return f"still running: {running[0]}" + (
            f"\n({len(running) - 1} more cells queued)" if len(running) > 1 else ""
        )

    # 1. open the notebook, wait for its kernel
    def open_notebook(self, timeout_s: float = 60.0) -> None:
        t0 = time.monotonic()
        self.page.goto(self.server.notebook_url(self.case.path), wait_until="domcontentloaded")
        self._wait(
            _JS_KERNEL_IDLE,
            self.case.path,
            timeout_s,
            f"JupyterLab to open {self.case.path} with an idle python3 kernel",
            diagnose=lambda: "server log:\n" + self.server.log_tail(20),
        )
        self._timed("open+kernel", t0)

    # 2. run all cells, wait until every one finished
    def run_all(self) -> dict:
        t0 = time.monotonic()
        self.page.evaluate(_JS_START_RUN_ALL, self.case.path)
        self._wait(
            _JS_RUN_FINISHED,
            self.case.path,
            self.case.timeout_s,
            f"'Run All Cells' of {self.case.path} to finish (no [*] prompt, kernel idle)",
            diagnose=self._running_cells,
        )
        self._timed("run_all", t0)
        return self.cell_report()

    @staticmethod
    def problems(report: dict) -> list[str]:
        """Errors in a cell report. Errors of cells tagged ``raises-exception`` are expected (but note that
        JupyterLab's Run All still stops at them, so the cells after them are reported as not run)."""
        problems = []
        for c in report["cells"]:
            if "raises-exception" in c["tags"]:
                continue
            for err in c["errors"]:
                problems.append(f"cell {c['index']} raised:\n{strip_ansi(err)}")
            if not c["errors"]:  # a traceback shown in the cell but not among its outputs: inside an Output widget
                for tb in c["shown_tracebacks"]:
                    problems.append(f"cell {c['index']} shows a traceback (e.g. inside an ipywidgets.Output):\n{tb}")
            for err in c["widget_errors"]:
                problems.append(f"cell {c['index']}: widget failed to render:\n{err}")
        return problems

    def assert_clean(self, report: dict) -> None:
        problems = self.problems(report)
        if not problems:
            not_run = [c for c in report["cells"] if not c["empty"] and c["execution_count"] is None]
            if not_run or report["run"].get("error"):
                msg = f"run-all did not execute every code cell (result {report['run']}); not run: " + ", ".join(
                    f"cell {c['index']}: {c['source'][:60]!r}" for c in not_run
                )
                tagged = [c for c in report["cells"] if c["errors"] and "raises-exception" in c["tags"]]
                if tagged:
                    msg += (
                        f"\n(JupyterLab's Run All stops at any error, even in a cell tagged raises-exception: "
                        f"cell {tagged[0]['index']} raised {strip_ansi(tagged[0]['errors'][0]).splitlines()[0]!r})"
                    )
                problems.append(msg)
        if problems:
            raise CheckFailed("\n\n".join(problems))

    def cell_report(self) -> dict:
        return self.page.evaluate(_JS_CELL_REPORT)

    def log_console_text(self, timeout_s: float = 10.0) -> str:
        """Open JupyterLab's log console (once) and return its text."""
        self.page.evaluate(_JS_OPEN_LOG_CONSOLE)
        self.page.wait_for_function(_JS_LOG_CONSOLE_READY, timeout=timeout_s * 1000, polling=100)
        return self.page.inner_text(".jp-LogConsolePanel", timeout=timeout_s * 1000)

    def assert_no_new_errors(self, before: dict) -> None:
        """After the slider moved: no new traceback in any cell, none in the log console."""
        known = {p for p in self.problems(before)}
        problems = [p for p in self.problems(self.cell_report()) if p not in known]
        log = self.log_console_text()
        if re.search(r"Traceback \(most recent call last\)", log):
            problems.append(
                "JupyterLab's log console shows a traceback (an error in a widget callback?):\n" + _tail(log, 40)
            )
        if problems:
            raise CheckFailed("after moving the slider:\n\n" + "\n\n".join(problems))

    def kernel_execute(self, code: str, timeout_s: float = 30.0) -> str:
        """Run ``code`` in the notebook's kernel (outside any cell); returns its stdout and any error as text."""
        out = self.page.evaluate(_JS_KERNEL_EXECUTE, [self.case.path, code, timeout_s * 1000])
        if out is None:
            raise CheckFailed(f"the kernel did not finish {code!r} within {timeout_s:g}s")
        return out

    def all_figures(self) -> list[dict]:
        """Every plotly figure in the notebook: ``{cell, in_output_widget, traces: [{name, type, nx, ny}]}``."""
        return self.page.evaluate(_JS_ALL_FIGURES)

    # 3. the figure, rendered
    def figure_state(self) -> dict:
        c = self.case
        return self.page.evaluate(_JS_FIGURE_STATE, [c.widget, c.nth, c.figure])

    def _figure_diagnosis(self) -> str:
        st = self.figure_state()
        c = self.case
        n = self.page.evaluate("(sel) => document.querySelectorAll(sel).length", c.widget)
        msg = f"figure state: {st}; {n} element(s) match {c.widget!r}"
        problems = self.problems(self.cell_report())
        if problems:
            msg += "\nerrors shown in the notebook:\n" + "\n\n".join(problems)
        return msg

    def wait_figure_rendered(self, timeout_s: float = 30.0) -> dict:
        c = self.case
        t0 = time.monotonic()
        args = [c.widget, c.nth, c.figure]
        self._wait(
            f"(a) => {{ const s = ({_JS_FIGURE_STATE})(a); return s.found && s.paths > 0 && s.width > 0; }}",
            args,
            timeout_s,
            f"a rendered figure {c.figure!r} inside {c.widget!r} #{c.nth}",
            diagnose=self._figure_diagnosis,
        )
        # the figure may still be settling (plotly relayout, widget resize): wait for two equal reads in a row
        self._wait(
            "(a) => { const prev = window.__gpulabFig; const s = (" + _JS_FIGURE_STATE + ")(a);"
            " window.__gpulabFig = s.hash; return s.found && prev === s.hash; }",
            args,
            timeout_s,
            "the figure to stop changing before the slider is touched",
            diagnose=self._figure_diagnosis,
        )
        self._timed("figure", t0)
        return self.figure_state()

    # 3b. every trace the front end draws has its data (an update sent to a FigureWidget before it was displayed
    # once left the roofline's traces without x/y or names in the browser while the Python figure was right)
    def assert_traces_complete(self, when: str, timeout_s: float = 10.0) -> None:
        """Waits up to ``timeout_s`` for complete traces: a FigureWidget redrawn by a late update (a cell that set
        a slider from Python) has no plotted data for a moment on a loaded machine."""
        c = self.case
        ready = (
            f"(a) => {{ const ts = ({_JS_TRACES})(a); "
            "return ts.length > 0 && ts.every(t => t.nx > 0 && t.nx === t.ny); }"
        )
        with contextlib.suppress(Exception):  # a timeout: the read below says what is missing
            self.page.wait_for_function(ready, arg=[c.widget, c.nth, c.figure], timeout=timeout_s * 1000, polling=100)
        traces = self.page.evaluate(_JS_TRACES, [c.widget, c.nth, c.figure])
        bad = [
            f"trace {i} ({t['name']!r}): x has {t['nx']} points, y has {t['ny']}"
            for i, t in enumerate(traces)
            if not t["nx"] or not t["ny"] or t["nx"] != t["ny"]
        ]
        if not traces or bad:
            raise CheckFailed(f"{when}: the figure in the browser lacks data: " + ("; ".join(bad) or "no traces"))

    # 4. move the slider, wait for the figure to change
    def move_slider_and_wait_change(self, before: dict) -> dict:
        c = self.case
        t0 = time.monotonic()
        handle = self.page.locator(c.widget).nth(c.nth).locator(c.slider).first.locator(".noUi-handle").first
        try:
            handle.wait_for(state="visible", timeout=10_000)
        except Exception:  # noqa: BLE001
            raise CheckFailed(
                f"no visible slider handle: {c.slider!r} .noUi-handle inside {c.widget!r} #{c.nth} "
                "(an ipywidgets 8 slider renders a noUiSlider)"
            ) from None
        handle.scroll_into_view_if_needed()
        args = [c.widget, c.nth, c.slider]
        v0 = self.page.evaluate(_JS_SLIDER_VALUE, args)
        keys = ("ArrowRight", "ArrowLeft")
        if self.page.evaluate(_JS_SLIDER_AT_MAX, args):
            keys = keys[::-1]
        for key in keys:  # the other direction only if the first did not move it
            handle.focus()
            for _ in range(c.keys):
                handle.press(key)
            try:
                self.page.wait_for_function(
                    f"(a) => ({_JS_SLIDER_VALUE})(a) !== {json.dumps(v0)}", arg=args, timeout=5000, polling=100
                )
                break
            except Exception:  # noqa: BLE001
                continue
        else:
            raise CheckFailed(
                f"arrow keys on the slider handle did not change its value (readout|aria-valuenow "
                f"{v0!r}); is it disabled?"
            )
        v1 = self.page.evaluate(_JS_SLIDER_VALUE, args)
        self.timings["slider_moved"] = f"{v0} -> {v1}"

        def diagnose() -> str:
            msg = self._figure_diagnosis()
            log = self.log_console_text()
            if "No log messages" not in log:
                msg += "\nJupyterLab log console (errors in widget callbacks land here):\n" + _tail(log, 40)
            return msg

        self._wait(
            f"(a) => {{ const s = ({_JS_FIGURE_STATE})(a); "
            f"return s.found && s.paths > 0 && s.hash !== {json.dumps(before['hash'])}; }}",
            [c.widget, c.nth, c.figure],
            c.update_timeout_s,
            f"the figure to change after the slider moved ({v0} -> {v1}, readout|aria-valuenow)",
            diagnose=diagnose,
        )
        self._timed("slider->figure", t0)
        self.settle()
        return self.figure_state()

    def settle(self) -> None:
        """Wait until the kernel handled every widget update (two barriers, see _JS_KERNEL_BARRIER) and the
        figure stopped changing, so that errors from the last update are visible before they are checked."""
        c = self.case
        for _ in range(2):
            if not self.page.evaluate(_JS_KERNEL_BARRIER, [c.path, c.update_timeout_s * 1000]):
                raise CheckFailed(f"the kernel did not answer within {c.update_timeout_s:g}s after the slider moved")
        self._wait(
            "(a) => { const prev = window.__gpulabFig; const s = (" + _JS_FIGURE_STATE + ")(a);"
            " window.__gpulabFig = s.hash; return prev === s.hash; }",
            [c.widget, c.nth, c.figure],
            c.update_timeout_s,
            "the figure to settle after the slider moved",
            diagnose=self._figure_diagnosis,
        )

    # -- failure artifacts
    def save_artifacts(self, out_dir: Path, exc: BaseException | None = None) -> Path:
        out_dir.mkdir(parents=True, exist_ok=True)
        if self.screenshot_at_failure:
            (out_dir / "screenshot_at_timeout.png").write_bytes(self.screenshot_at_failure)
        try:
            self.page.screenshot(path=str(out_dir / "screenshot.png"), full_page=True, timeout=15000)
        except Exception as e:  # noqa: BLE001
            (out_dir / "screenshot.error.txt").write_text(repr(e))
        try:
            text = self.page.evaluate("() => document.body ? document.body.innerText : ''")
        except Exception as e:  # noqa: BLE001
            text = f"(could not read page text: {e!r})"
        (out_dir / "page.txt").write_text(text)
        try:
            log = self.log_console_text()
        except Exception as e:  # noqa: BLE001
            log = f"(could not read the log console: {e!r})"
        (out_dir / "log_console.txt").write_text(log)
        (out_dir / "browser_console.txt").write_text("\n".join(self.console))
        (out_dir / "server_log.txt").write_text(self.server.log_tail(400))
        if exc is not None:
            (out_dir / "failure.txt").write_text(f"{type(exc).__name__}: {exc}\n\ntimings: {self.timings}\n")
        return out_dir
