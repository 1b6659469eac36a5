"""`make lab` (tools/lab.py): the learner works in a git-ignored copy of the lessons, made on first use and never
overwritten, with a fresh copy of one lesson on request (the old one kept aside); JupyterLab runs its kernels over
Unix sockets, without ipykernel's warning about unencrypted TCP, and asks no question about Jupyter news."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import lab  # noqa: E402  (tools/ is not a package: on the path only from here)

TCP_WARNING = "running over TCP without encryption"
CUSTOM_CSS = lab.CUSTOM_CSS_DIR / "custom.css"


def _lessons(folder: Path, **texts: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for stem, text in texts.items():
        (folder / f"{stem}.ipynb").write_text(text)
    return folder


# ------------------------------------------------------------------------------------------------ the copy


def test_first_use_copies_every_lesson_and_later_ones_never_overwrite(tmp_path):
    lessons = _lessons(tmp_path / "notebooks", **{"00_a": "a0", "07_t": "t0", "07b_w": "w0"})
    copies = tmp_path / "my-notebooks"
    assert lab.make_copies(lessons, copies) == (["00_a.ipynb", "07_t.ipynb", "07b_w.ipynb"], [])
    (copies / "00_a.ipynb").write_text("my answers")
    assert lab.make_copies(lessons, copies) == ([], [])
    assert (copies / "00_a.ipynb").read_text() == "my answers"
    # a `git pull` adds one lesson and changes another: the new one copied, the changed one named, nothing overwritten
    _lessons(lessons, **{"08_f": "f0", "07_t": "t1"})
    assert lab.make_copies(lessons, copies) == (["08_f.ipynb"], ["07_t.ipynb"])
    assert (copies / "07_t.ipynb").read_text() == "t0" and (copies / "00_a.ipynb").read_text() == "my answers"


def test_a_fresh_copy_keeps_yours_aside_in_the_same_folder(tmp_path):
    lessons = _lessons(tmp_path / "notebooks", **{"07_t": "t0", "07b_w": "w0"})
    copies = tmp_path / "my-notebooks"
    lab.make_copies(lessons, copies)
    (copies / "07_t.ipynb").write_text("mine, first")
    _lessons(lessons, **{"07_t": "t1"})
    when = time.mktime((2026, 12, 7, 9, 30, 5, 0, 0, -1))
    kept = lab.fresh_copy("07", lessons, copies, now=when)
    assert kept == copies / "07_t.old-20261207-093005.ipynb" and kept.read_text() == "mine, first"
    assert (copies / "07_t.ipynb").read_text() == "t1" and (copies / "07b_w.ipynb").read_text() == "w0"
    (copies / "07_t.ipynb").write_text("mine, second")
    again = lab.fresh_copy("07_t.ipynb", lessons, copies, now=when)  # the same second: a new name, nothing lost
    assert again == copies / "07_t.old-20261207-093005-2.ipynb" and again.read_text() == "mine, second"
    assert kept.read_text() == "mine, first"
    assert lab.make_copies(lessons, copies) == ([], []), "a fresh copy is recorded as the lesson it copied"
    assert lab.fresh_copy("07b", lessons, copies, now=when).name == "07b_w.old-20261207-093005.ipynb"


def test_a_fresh_copy_of_a_lesson_never_copied_and_of_no_lesson(tmp_path):
    lessons = _lessons(tmp_path / "notebooks", **{"04_f": "f0"})
    copies = tmp_path / "my-notebooks"
    assert lab.fresh_copy("04", lessons, copies) is None and (copies / "04_f.ipynb").read_text() == "f0"
    with pytest.raises(LookupError, match="no lesson '4'; the lessons: 04"):
        lab.fresh_copy("4", lessons, copies)


def test_the_copy_sits_beside_notebooks_so_relative_links_resolve_and_git_ignores_it():
    assert lab.COPIES.parent == lab.LESSONS.parent == ROOT
    links = set()
    for nb in lab.LESSONS.glob("*.ipynb"):
        links.update(re.findall(r"\]\((\.\./[^)\s#]+)", nb.read_text()))
    assert links, "the lessons link to gpulab's source"
    missing = sorted(link for link in links if not (lab.COPIES / link).resolve().exists())
    assert not missing, f"links that do not resolve from {lab.COPIES.name}/: {missing}"
    if shutil.which("git") and (ROOT / ".git").exists():
        probe = f"{lab.COPIES.name}/00_the_machine.ipynb"
        ignored = subprocess.run(["git", "check-ignore", "-q", probe], cwd=ROOT, check=False)
        assert ignored.returncode == 0, f".gitignore must ignore {probe}"


def test_make_lab_opens_the_copy_and_make_fresh_takes_one_lesson():
    if shutil.which("make") is None:
        pytest.skip("needs make")
    plan = subprocess.run(
        ["make", "-n", "lab", "fresh", "LESSON=04"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert "tools/lab.py" in plan and "tools/lab.py fresh 04" in plan, plan
    assert "jupyter lab notebooks" not in plan, "make lab must not serve the tracked notebooks/"


# ------------------------------------------------------------------------------------------------ the server


def test_the_news_override_lands_where_jupyterlab_reads_its_settings():
    # a module of JupyterLab itself: tools/jupyterlab (the custom CSS, on the path here) makes a bare
    # "jupyterlab" importable where JupyterLab is not installed (the GPU machine)
    get_app_dir = pytest.importorskip("jupyterlab.commands").get_app_dir

    if os.environ.get("JUPYTERLAB_DIR"):
        pytest.skip("JUPYTERLAB_DIR moves JupyterLab's application directory")
    assert Path(get_app_dir()).resolve() == (Path(sys.prefix) / lab.OVERRIDES.parents[2]).resolve()


def test_ipc_only_where_the_socket_paths_fit():
    assert lab.ipc_usable("/tmp/r") == (os.name == "posix")
    assert not lab.ipc_usable("/home/" + "x" * 60 + "/.local/share/jupyter/runtime")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(os.name != "posix", reason="Unix sockets")
def test_lab_kernels_use_unix_sockets_without_the_tcp_warning_and_no_news_question(tmp_path):
    """The command `make lab` runs, on a tiny repository: a kernel started through the server connects over IPC and
    prints no TCP warning; the notification settings default to fetchNews "false" (JupyterLab asks its news question only on "none"); the file browser opens in the copy."""
    pytest.importorskip("jupyterlab.labapp")  # JupyterLab itself, not tools/jupyterlab (the custom CSS)
    BlockingKernelClient = pytest.importorskip("jupyter_client").BlockingKernelClient

    repo = tmp_path / "repo"
    _lessons(
        repo / "notebooks", **{"00_a": json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})}
    )
    lab.make_copies(repo / "notebooks", repo / "my-notebooks")
    short = Path(tempfile.mkdtemp(prefix="gl-"))  # the socket paths must fit in 107 bytes
    prefix = tmp_path / "prefix"
    assert lab.write_settings(prefix) == prefix / lab.OVERRIDES
    port, token = _free_port(), secrets.token_hex(16)
    settings_dir = prefix / lab.OVERRIDES.parent.parent  # where overrides.d sits, as under sys.prefix
    extra = ["--no-browser", f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    extra += [f"--IdentityProvider.token={token}", f"--LabApp.app_settings_dir={settings_dir}"]
    extra += ["--LabApp.news_url=None", "--LabApp.extension_manager=readonly"]  # no network
    cmd = lab.lab_command(extra, str(short / "rt"), root=repo, copies=repo / "my-notebooks")
    assert "--KernelManager.transport=ipc" in cmd
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "IPYTHONDIR"))}
    env.update(
        JUPYTER_RUNTIME_DIR=str(short / "rt"),
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "user-settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
        IPYTHONDIR=str(tmp_path / "ipython"),
    )
    log_path = tmp_path / "server.log"

    def api(method: str, path: str, body: dict | None = None):
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.read()

    with open(log_path, "wb") as log:
        server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, log_path.read_text()[-3000:]
            try:
                api("GET", "/api/status")
                break
            except OSError:
                assert time.monotonic() < deadline, log_path.read_text()[-3000:]
                time.sleep(0.2)
        kernel = json.loads(api("POST", "/api/kernels", {"name": "python3"}))
        connection = short / "rt" / f"kernel-{kernel['id']}.json"
        assert json.loads(connection.read_text())["transport"] == "ipc"
        client = BlockingKernelClient(connection_file=str(connection))
        client.load_connection_file()
        client.start_channels(hb=False)  # no heartbeat: on a loaded machine a late beat reads as a dead kernel
        try:  # the kernel answers over its sockets: its start-up is logged by then
            reply, deadline = None, time.monotonic() + 120
            while reply is None and time.monotonic() < deadline:
                client.kernel_info()
                with contextlib.suppress(queue.Empty):
                    reply = client.get_shell_msg(timeout=2)
            assert reply is not None and reply["msg_type"] == "kernel_info_reply", reply
        finally:
            client.stop_channels()
        news = json.loads(api("GET", "/lab/api/settings/@jupyterlab/apputils-extension:notification"))
        # the override becomes the schema's default, which JupyterLab reads when the user has set nothing
        assert news["schema"]["properties"]["fetchNews"]["default"] == "false", news["schema"]
        page = api("GET", "/lab").decode()
        assert re.search(r'"preferredPath": "/?my-notebooks"', page), "the file browser opens in the copy"
        assert "custom/custom.css" in page and api("GET", "/custom/custom.css") == CUSTOM_CSS.read_bytes()
        api("DELETE", f"/api/kernels/{kernel['id']}")
    finally:
        with contextlib.suppress(ProcessLookupError):  # a server that never started, or ended, has no group left
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
        shutil.rmtree(short, ignore_errors=True)
    text = log_path.read_text()
    assert TCP_WARNING not in text, text[-3000:]


# ------------------------------------------------------------------------------------------------ the style


def _jupyterlab_rule(selector: str) -> str:
    """JupyterLab's own CSS rule for ``selector``, read from the installed bundle."""
    import jupyterlab

    for path in sorted((Path(jupyterlab.__file__).parent / "static").glob("*.js")):
        text = path.read_text(errors="replace")
        start = text.find(selector + " {")
        if start >= 0:
            return text[start : text.index("}", start) + 1]
    pytest.skip(f"no rule {selector!r} in JupyterLab's bundle")


# JS: the indices in the <pre>'s text where a line of the layout starts (the first character on a lower line)
_LINE_STARTS = """() => {
  const node = document.querySelector('pre').firstChild, starts = [];
  const range = document.createRange();
  let top = null;
  for (let i = 0; i < node.data.length; i++) {
    range.setStart(node, i);
    range.setEnd(node, i + 1);
    const r = range.getClientRects()[0];
    if (!r) continue;
    if (top !== null && r.top > top + 1) starts.push(i);
    top = r.top;
  }
  return starts;
}"""


@pytest.mark.browser
def test_printed_lines_wrap_at_spaces_in_the_lab(browser):
    """An output about 570 px wide (the lab at 1000 px with the file browser open) and narrower: JupyterLab's own rule
    breaks a provenance line inside a word ("torch 2.11." / "0+cu130"); with custom.css before it, as the lab loads
    them (JupyterLab injects its styles after the page's head), every line break falls at a space or after a hyphen."""
    jlab = _jupyterlab_rule(".jp-OutputArea-output pre")
    assert "break-all" in jlab, jlab
    line = "no GPU here: recorded on NVIDIA H200 (2026-12-03; driver 580.159.04, torch 2.11.0+cu130, Triton 3.6.0)"
    page = browser.new_page(viewport={"width": 1000, "height": 400})
    mid_word = {}
    try:
        for name, css in (("JupyterLab alone", ""), ("with custom.css", CUSTOM_CSS.read_text())):
            mid_word[name] = []
            for width in range(300, 580, 10):
                page.set_content(
                    f"<style>{css}</style><style>{jlab}</style><body><div class='jp-OutputArea-output' "
                    f"style='width: {width}px; font: 13px monospace'><pre>{line}</pre></div></body>"
                )
                starts = page.evaluate(_LINE_STARTS)
                assert starts, f"{name}, {width} px: the line is wider than the output, so it wraps"
                # a break at a space, or after a hyphen (2026-/12-03), is the browser's ordinary one
                mid_word[name] += [
                    (width, line[i - 5 : i + 5]) for i in starts if line[i - 1] not in " -" and line[i] != " "
                ]
    finally:
        page.close()
    assert mid_word["JupyterLab alone"], "JupyterLab's own rule breaks inside words (the fault custom.css fixes)"
    assert not mid_word["with custom.css"], mid_word["with custom.css"]


def test_binder_writes_the_news_override_too(tmp_path):
    """binder/postBuild runs ``python tools/lab.py settings``: the override lands under that Python's prefix."""
    assert "python tools/lab.py settings" in (ROOT / "binder" / "postBuild").read_text()
    venv = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    subprocess.run([str(python), str(ROOT / "tools" / "lab.py"), "settings"], check=True, timeout=60, cwd=tmp_path)
    assert json.loads((venv / lab.OVERRIDES).read_text()) == lab.NEWS_OFF
