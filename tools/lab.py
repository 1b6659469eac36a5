#!/usr/bin/env python3
"""JupyterLab on the learner's own copy of the lessons (what `make lab` runs), and a fresh copy of one lesson.

    python tools/lab.py [JUPYTER_ARGS ...]   copy the lessons if needed, then open JupyterLab (`make lab`)
    python tools/lab.py copy                 copy the lessons if needed, and nothing else
    python tools/lab.py fresh LESSON         a fresh copy of one lesson, yours kept aside (`make fresh LESSON=04`)
    python tools/lab.py settings             write the settings override only (binder/postBuild)

The lessons in notebooks/ are tracked by git and stay as committed. The learner works in ``my-notebooks/`` (git
ignores it), at the same depth as notebooks/, so a notebook's relative links (``../gpulab/kernels/x.py``) resolve
from it too. A lesson missing there (all of them the first time, a lesson that a later `git pull` adds) is copied
from notebooks/; a copy already there is never overwritten. ``fresh`` renames your copy of one lesson to
``NAME.old-YYYYMMDD-HHMMSS.ipynb`` beside it, then copies the lesson afresh. When a lesson in notebooks/ has changed
since your copy was made (``my-notebooks/.copied.json`` keeps the hash of what was copied), the launch says so on one
line, with the command that takes the new one.

JupyterLab serves the repository (so those links open) with its file browser in my-notebooks/, on 127.0.0.1 with
Jupyter's token, warnings and errors only (the URL with its token is the last thing it prints), ``--allow-root``
when run as root. Kernels talk to the server over Unix sockets (``KernelManager.transport=ipc``): on TCP, ipykernel
warns at every start that its localhost traffic is not encrypted. Where the sockets' paths would be too long for
the system (``jupyter_runtime_dir()`` deeper than ``IPC_RUNTIME_DIR_MAX`` characters), kernels keep TCP.
JupyterLab's "get notified about official Jupyter news?" question is answered "no" for this environment: a settings
override, ``share/jupyter/lab/settings/overrides.d/gpulab.json`` under ``sys.prefix``, written at each launch (a
user's own setting still wins). Printed lines wrap at spaces, not inside a word: the lab loads
``tools/jupyterlab/custom.css`` (``LabApp.custom_css``; that folder replaces ``~/.jupyter/custom`` for this lab).
Stdlib only, apart from jupyter_core for the runtime directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "notebooks"
COPIES = ROOT / "my-notebooks"
RECORD = ".copied.json"  # in COPIES: lesson file name -> sha256 of notebooks/'s file when it was copied

# JupyterLab's notification plugin: "none" asks the news question on first launch, "false" never fetches news
NEWS_OFF = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false"}}
OVERRIDES = Path("share", "jupyter", "lab", "settings", "overrides.d", "gpulab.json")  # under sys.prefix

# The folder of custom.css, the lab's one style rule (printed lines wrap at spaces, never inside a word)
CUSTOM_CSS_DIR = ROOT / "tools" / "jupyterlab"

# An AF_UNIX path holds at most 107 bytes; a kernel's socket is RUNTIME/kernel-<uuid>-ipc-<n>, 52 more or so.
IPC_RUNTIME_DIR_MAX = 50


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_record(copies: Path) -> dict[str, str]:
    try:
        record = json.loads((copies / RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _write_record(copies: Path, record: dict[str, str]) -> None:
    (copies / RECORD).write_text(json.dumps(dict(sorted(record.items())), indent=1) + "\n")


def lesson_id(name: str) -> str:
    """A lesson's id, the part of its file name before the first ``_``: "07b" for 07b_waves.ipynb."""
    return name.split("_", 1)[0]


def make_copies(lessons: Path = LESSONS, copies: Path = COPIES) -> tuple[list[str], list[str]]:
    """Copy into ``copies`` each ``lessons/*.ipynb`` not there yet; never overwrite one that is. Returns (the file
    names copied now, the names of copies whose lesson changed in ``lessons`` since it was copied)."""
    copies.mkdir(exist_ok=True)
    record = _read_record(copies)
    copied, changed = [], []
    for src in sorted(lessons.glob("*.ipynb")):
        dest = copies / src.name
        if dest.exists():
            if src.name in record and record[src.name] != _sha256(src):
                changed.append(src.name)
            continue
        shutil.copy2(src, dest)
        record[src.name] = _sha256(src)
        copied.append(src.name)
    if copied:
        _write_record(copies, record)
    return copied, changed


def find_lesson(lesson: str, lessons: Path = LESSONS) -> Path:
    """The notebook in ``lessons`` named by ``lesson``: its id ("04", "07b"), stem or file name. Raises
    LookupError naming the lessons there when none matches."""
    names = sorted(p.name for p in lessons.glob("*.ipynb"))
    want = lesson.strip().removesuffix(".ipynb").rsplit("/", 1)[-1]
    hits = [n for n in names if want in (lesson_id(n), n.removesuffix(".ipynb"))]
    if len(hits) != 1:
        raise LookupError(f"no lesson {lesson!r}; the lessons: {', '.join(lesson_id(n) for n in names)}")
    return lessons / hits[0]


def fresh_copy(lesson: str, lessons: Path = LESSONS, copies: Path = COPIES, now: float | None = None) -> Path | None:
    """Take a fresh copy of one lesson into ``copies``: the copy there is first renamed to
    ``STEM.old-YYYYMMDD-HHMMSS.ipynb`` in the same folder (its links still resolve; never overwritten: a name taken
    gets ``-2``, ``-3``...). Returns the path yours was moved to, or None when there was no copy. Raises LookupError
    for an unknown lesson."""
    src = find_lesson(lesson, lessons)
    copies.mkdir(exist_ok=True)
    dest = copies / src.name
    kept = None
    if dest.exists():
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
        kept = copies / f"{src.stem}.old-{stamp}.ipynb"
        n = 2
        while kept.exists():
            kept = copies / f"{src.stem}.old-{stamp}-{n}.ipynb"
            n += 1
        dest.rename(kept)
    shutil.copy2(src, dest)
    record = _read_record(copies)
    record[src.name] = _sha256(src)
    _write_record(copies, record)
    return kept


def ipc_usable(runtime_dir: str) -> bool:
    """Whether kernels can use Unix sockets under ``runtime_dir``: a POSIX system and a path short enough."""
    return os.name == "posix" and len(os.path.abspath(runtime_dir)) <= IPC_RUNTIME_DIR_MAX


def write_settings(prefix: Path = Path(sys.prefix)) -> Path | None:
    """Write the settings override (``NEWS_OFF``) under ``prefix``; the file's path, or None where it cannot be
    written (a read-only environment: JupyterLab then asks its question as usual)."""
    path = prefix / OVERRIDES
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(NEWS_OFF, indent=1) + "\n"
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    except OSError:
        return None
    return path


def lab_command(extra: list[str], runtime_dir: str, root: Path = ROOT, copies: Path = COPIES) -> list[str]:
    """The ``jupyter lab`` command line: the repository ``root`` served, the file browser in ``copies``; ``extra``:
    further JupyterLab arguments, last. ``runtime_dir``: Jupyter's runtime directory, where the kernels' sockets go."""
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        f"--ServerApp.root_dir={root}",
        f"--FileContentsManager.preferred_dir={copies.relative_to(root).as_posix()}",
        "--ServerApp.ip=127.0.0.1",
        "--ServerApp.log_level=WARN",
        "--LabApp.custom_css=True",
        f"--ServerApp.tornado_settings=static_custom_path={CUSTOM_CSS_DIR}",
    ]
    if ipc_usable(runtime_dir):
        cmd.append("--KernelManager.transport=ipc")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # Jupyter refuses to start as root without it
    return cmd + list(extra)


def _copy_and_say() -> None:
    copied, changed = make_copies()
    where = COPIES.relative_to(ROOT)
    if copied:
        print(f"[lab] copied {len(copied)} lessons into {where}/ (yours to edit; git ignores it)", flush=True)
    if changed:
        ids = " ".join(lesson_id(n) for n in changed)
        print(
            f"[lab] changed in notebooks/ since your copy was made: {ids}; "
            "`make fresh LESSON=ID` takes the new one and keeps yours aside",
            flush=True,
        )


def main(argv: list[str]) -> int:
    if argv[:1] == ["fresh"]:
        if len(argv) != 2:
            print("usage: python tools/lab.py fresh LESSON   (an id such as 04 or 07b)", file=sys.stderr)
            return 2
        try:
            kept = fresh_copy(argv[1])
        except LookupError as e:
            print(f"[lab] {e}", file=sys.stderr)
            return 2
        name = find_lesson(argv[1]).name
        where = COPIES.relative_to(ROOT)
        if kept:
            print(f"[lab] yours is now {where}/{kept.name}; {where}/{name} is a fresh copy of notebooks/{name}")
        else:
            print(f"[lab] {where}/{name} is a fresh copy of notebooks/{name}")
        return 0
    if argv[:1] == ["settings"]:
        path = write_settings()
        print(f"[lab] JupyterLab's news question answered no: {path}" if path else "[lab] settings not writable")
        return 0
    _copy_and_say()
    if argv[:1] == ["copy"]:
        return 0
    from jupyter_core.paths import jupyter_runtime_dir

    write_settings()
    cmd = lab_command(argv, jupyter_runtime_dir())
    os.execv(cmd[0], cmd)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
