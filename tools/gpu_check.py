"""``make gpu-check``: prove the collection green on the GPU it runs on, in parts of one short run each.

Run on a GPU machine from the project root, with gpulab, torch, Triton, pytest and nbval importable by the Python
that runs this file (every child process is ``sys.executable``; nothing here builds or uses ``.venv``):

    python tools/gpu_check.py tests       # pytest tests -m "not browser and not slow" -n 8, first configs
    python tools/gpu_check.py notebooks   # each notebook alone under nbval, full autotuning, cold caches, timed
    python tools/gpu_check.py emulated    # each notebook as a T4, an L4 and an A100 would, first configs
    python tools/gpu_check.py suites      # each benchmark suite's headline steps (python -m gpulab.bench)
    python tools/gpu_check.py status      # the stamp in at most 15 lines (no GPU needed)
    python tools/gpu_check.py all         # the four parts in order, then status

Options: ``--only 08,09`` (lessons: notebooks and suites of those lessons only; ``07`` is 07 and 07b, ``08`` 08 and 08b, ``00`` is 00 and
00b and the ceilings suite), ``--rest`` (only the notebooks or suites with no entry on the current tree), ``--budget S``
(a part starts nothing it cannot finish in S seconds and stops what runs at S, recording what it did not reach),
``--out DIR`` (also copy the stamp and the logs there; default ``$OUT`` when set), ``--jobs N`` (emulated runs at
once), ``--workers N`` (pytest-xdist workers of the tests part; 0: none), ``--as T4,L4`` (the emulated GPUs).

The stamp, ``gpulab/data/gpu-check-<gpu>.json`` (``<gpu>``: the short name the benchmark suite records under,
e.g. ``h200``), gathers every part's results; each part merges its own into it and writes it atomically:

    schema: 1; gpu: the CUDA device name; slug; updated: UTC ISO time of the last write; tree_rule: how trees hash
    parts.tests: {tree, date, versions, ok, passed, failed, errors, skipped, failures: [test ids],
                  reasons: {test id: first line}, slowest: [[test id, s]], seconds, stopped, command}
    parts.<notebooks|emulated|suites>: {ok, items: {name: entry}, missing: [names], last_run: {tree, date,
                  versions, only, seconds, unreached: [names], budget_s}} plus, for notebooks, limit_s,
                  total_seconds, total_limit_s, total_trees
    an entry: {tree, date, ok, seconds, failures: [cells or reasons], stopped} (+ over_limit and slowest_cells:
              [[cell, s]] for notebooks, + steps for suites); a notebook is named by its file stem, an emulated run by "T4 <stem>"

An entry names the tree it was checked on, so a run with ``--only`` keeps the other lessons' entries, each with its
own tree. A part is ``ok`` when every item it expects has an entry and every entry passes (notebooks: each within
``NOTEBOOK_LIMIT_S`` and their total within ``COLLECTION_LIMIT_S``); ``status`` says which trees those entries are
on and whether the tree has changed since. Each part hashes only the folders its result depends on
(``PART_DIRS``: the suites gpulab, the notebooks and emulated runs gpulab and notebooks, the tests all three), so
an edit to tests/ leaves the suites' and notebooks' entries proving the tree.

The tree hash (``tree_hash``) is git's own: the object id of a git tree whose entries are ``gpulab``,
``notebooks`` and ``tests`` (or those of them a part hashes) as they are on disk, every
``gpulab/data/gpu-check-*.json`` left out. On a clean
checkout without a stamp it equals ``git mktree`` over ``git ls-tree HEAD gpulab notebooks tests``. Which files
count: where git works here, the files git would add (``git ls-files --cached --others --exclude-standard``);
elsewhere (a copy of the tree without ``.git``: the GPU machine) every file on disk except those the root
``.gitignore`` names (its plain patterns: names, globs, ``dir/``); either way without ``__pycache__/``,
``.ipynb_checkpoints/`` and ``*.pyc``. The two agree on this repository (``tests/test_gpu_check.py`` checks it), so a hash computed on the GPU
machine compares with one computed on a CPU.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as _dt
import fcntl
import fnmatch
import hashlib
import importlib.util
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HASHED_DIRS = ("gpulab", "notebooks", "tests")
# What each part's result depends on, so what its entries' tree hashes: a suite runs gpulab alone, a notebook
# gpulab and the notebooks, the tests all three. A change to tests/ leaves the suites' and notebooks' proof standing.
PART_DIRS = {
    "tests": HASHED_DIRS,
    "notebooks": ("gpulab", "notebooks"),
    "emulated": ("gpulab", "notebooks"),
    "suites": ("gpulab",),
}
STAMP_PATTERN = "gpulab/data/gpu-check-*.json"
SCHEMA = 1
PARTS = ("tests", "notebooks", "emulated", "suites")
NOTEBOOK_LIMIT_S = 90.0  # one notebook alone, cold caches, full autotuning (issue 21)
COLLECTION_LIMIT_S = 600.0  # the whole collection, one notebook after another
EMULATED_GPUS = ("T4", "L4", "A100")
DEFAULT_BUDGET_S = 540.0  # each part fits one 10-minute run with a minute to spare for start-up and copying
SLOWEST = 3  # the longest test cases (notebook cells) an entry names
MIN_START_S = 30.0  # an untimed child (a suite, an emulated notebook) starts only with this much budget left
STOP_GRACE_S = 30.0  # after SIGINT at the budget, how long a child gets to write its report before SIGKILL
TEST_MARKERS = "not browser and not slow"
ALWAYS_IGNORED = ("__pycache__/", ".ipynb_checkpoints/", "*.pyc")
TREE_RULE = (
    "git tree id, on disk without gpulab/data/gpu-check-*.json, of the folders a part depends on: tests {gpulab, "
    "notebooks, tests}, notebooks and emulated {gpulab, notebooks}, suites {gpulab}; files: git ls-files --cached "
    "--others --exclude-standard, or without git every file not ignored by the root .gitignore"
)
NO_GPU = "make gpu-check needs an NVIDIA GPU: torch.cuda.is_available() is False"


class GPUCheckError(RuntimeError):
    """A part cannot run here (no GPU, a bad argument); the message says why."""


# ------------------------------------------------------------------------------------------------ the tree hash


def _is_stamp(rel: str) -> bool:
    return fnmatch.fnmatchcase(rel, STAMP_PATTERN)


def _git_files(root: Path) -> list[str] | None:
    """The files git would add under the hashed folders, or None where git does not work here."""
    if shutil.which("git") is None:
        return None
    try:
        r = subprocess.run(
            [
                "git",
                "-C",
                str(root),
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
                "--",
                *HASHED_DIRS,
            ],
            capture_output=True,
            timeout=60,
        )
        top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0 or top.returncode != 0 or Path(top.stdout.decode().strip()).resolve() != root.resolve():
        return None
    return sorted({p for p in r.stdout.decode("utf-8", "surrogateescape").split("\0") if p})


def _ignore_patterns(root: Path) -> list[str]:
    gi = root / ".gitignore"
    lines = gi.read_text().splitlines() if gi.exists() else []
    pats = [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    return list(ALWAYS_IGNORED) + pats


def _ignored(parts: tuple[str, ...], is_dir: bool, patterns: list[str]) -> bool:
    """The subset of gitignore rules the root .gitignore uses: ``name`` or ``glob`` (any path component),
    ``name/`` (directories only), ``/anchored`` or ``a/b`` (the path from the root). Negations are not supported
    (the walk would disagree with git): a pattern starting with ``!`` raises."""
    rel = "/".join(parts)
    for pat in patterns:
        if pat.startswith("!"):
            raise GPUCheckError(
                f".gitignore pattern {pat!r}: negations are outside the subset tools/gpu_check.py reads"
            )
        dir_only = pat.endswith("/")
        p = pat.rstrip("/")
        if dir_only and not is_dir:
            continue
        if "/" in p:
            if fnmatch.fnmatchcase(rel, p.lstrip("/")):
                return True
        elif fnmatch.fnmatchcase(parts[-1], p):
            return True
    return False


def _walk_files(root: Path) -> list[str]:
    """Every file under the hashed folders that the root .gitignore (and ``ALWAYS_IGNORED``) leaves in."""
    patterns = _ignore_patterns(root)
    out = []
    for top in HASHED_DIRS:
        if not (root / top).is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(root / top):
            base = Path(dirpath).relative_to(root).parts
            links = [d for d in dirnames if Path(dirpath, d).is_symlink()]  # a link to a folder is a file to git
            dirnames[:] = [d for d in dirnames if d not in links and not _ignored(base + (d,), True, patterns)]
            filenames = filenames + links
            for f in filenames:
                if not _ignored(base + (f,), False, patterns):
                    out.append("/".join(base + (f,)))
    return sorted(out)


def _object_id(kind: str, body: bytes) -> bytes:
    return hashlib.sha1(f"{kind} {len(body)}\0".encode() + body).digest()


def _blob(path: Path) -> tuple[str, bytes]:
    if path.is_symlink():
        return "120000", _object_id("blob", os.readlink(path).encode("utf-8", "surrogateescape"))
    mode = "100755" if os.access(path, os.X_OK) else "100644"
    return mode, _object_id("blob", path.read_bytes())


def _tree_id(node: dict) -> bytes:
    """``node``: name -> (mode, id) for a blob, or name -> dict for a folder. Git orders entries by name, a
    folder's name compared as if it ended in '/'."""
    entries = []
    for name, v in node.items():
        if isinstance(v, dict):
            entries.append((name + "/", b"40000 " + name.encode() + b"\0" + _tree_id(v)))
        else:
            entries.append((name, v[0].encode() + b" " + name.encode() + b"\0" + v[1]))
    entries.sort(key=lambda e: e[0].encode("utf-8", "surrogateescape"))
    return _object_id("tree", b"".join(e[1] for e in entries))


def hashed_files(root: Path = ROOT, use_git: bool | None = None) -> tuple[list[str], str]:
    """The files the tree hash covers (relative posix paths; the stamps and ``ALWAYS_IGNORED`` left out, whichever
    way they were chosen) and how they were chosen:
    "git" or "walk". ``use_git``: None tries git and falls back to the walk; True requires git."""
    files = _git_files(root) if use_git in (None, True) else None
    how = "git"
    if files is None:
        if use_git:
            raise GPUCheckError(f"use_git=True, but git does not work in {root}")
        files, how = _walk_files(root), "walk"
    keep = [f for f in files if not _is_stamp(f) and os.path.lexists(root / f) and not _always_ignored(f)]
    return keep, how


def _always_ignored(rel: str) -> bool:
    parts = tuple(rel.split("/"))
    return any(_ignored(parts[: i + 1], i < len(parts) - 1, list(ALWAYS_IGNORED)) for i in range(len(parts)))


def tree_hash(root: Path = ROOT, use_git: bool | None = None, dirs: tuple[str, ...] = HASHED_DIRS) -> str:
    """The hex id of the git tree of ``dirs`` (some of ``HASHED_DIRS``) as on disk, without the stamps (module
    docstring)."""
    if set(dirs) - set(HASHED_DIRS):
        raise GPUCheckError(f"dirs must be some of {HASHED_DIRS}, got {dirs!r}")
    files, _ = hashed_files(root, use_git)
    top: dict = {}
    for rel in (f for f in files if f.split("/", 1)[0] in dirs):
        *folders, name = rel.split("/")
        node = top
        for d in folders:
            node = node.setdefault(d, {})
        node[name] = _blob(root / rel)
    return _tree_id(top).hex()


def part_trees(root: Path = ROOT, use_git: bool | None = None) -> dict[str, str]:
    """Each part's tree hash now (``PART_DIRS``)."""
    by_dirs = {d: tree_hash(root, use_git, d) for d in set(PART_DIRS.values())}
    return {part: by_dirs[d] for part, d in PART_DIRS.items()}


# ------------------------------------------------------------------------------------------------ the stamp


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def stamp_path(slug: str, root: Path = ROOT) -> Path:
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", slug):
        raise GPUCheckError(f"gpu slug must be lowercase letters, digits and '-', got {slug!r}")
    return root / "gpulab" / "data" / f"gpu-check-{slug}.json"


def load_stamp(path: Path) -> dict | None:
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    if data.get("schema") != SCHEMA:
        raise GPUCheckError(f"{path}: schema {data.get('schema')!r}, this tool reads schema {SCHEMA}")
    return data


def write_atomic(path: Path, data: dict) -> Path:
    """``data`` as JSON at ``path``, whole or not at all (``gpulab.device.write_json_atomic``, gpulab's one home
    for it)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from gpulab.device import write_json_atomic

    return write_json_atomic(path, data)


def _part_ok(part: str, p: dict, expected: list[str]) -> dict:
    """Recompute ``ok``, ``missing`` (and the notebooks' totals) of an itemized part from its items."""
    items = p["items"]
    p["missing"] = [n for n in expected if n not in items]
    ok = not p["missing"] and all(e["ok"] for e in items.values())
    if part == "notebooks":
        p["limit_s"] = NOTEBOOK_LIMIT_S
        p["total_limit_s"] = COLLECTION_LIMIT_S
        p["total_seconds"] = round(sum(e["seconds"] for e in items.values()), 1)
        p["total_trees"] = sorted({e["tree"] for e in items.values()})
        ok = ok and p["total_seconds"] <= COLLECTION_LIMIT_S
    p["ok"] = ok
    return p


def merge(
    stamp: dict | None,
    part: str,
    result: dict,
    *,
    gpu: str,
    slug: str,
    versions: dict | None = None,
    expected: list[str] | None = None,
) -> dict:
    """The stamp after one part's run. ``result`` for "tests": that part's whole record; for an itemized part:
    ``{"items": {name: entry}, "last_run": {...}}``, whose entries replace those of the same name and leave the
    others, each with its own tree. ``expected``: every item name the part has (for ``missing`` and ``ok``); an
    entry of a name not in it (a notebook that no longer exists) is dropped."""
    if part not in PARTS:
        raise GPUCheckError(f"part must be one of {PARTS}, got {part!r}")
    new = json.loads(json.dumps(stamp)) if stamp else {"schema": SCHEMA, "parts": {}}
    if stamp and stamp.get("slug") not in (None, slug):
        raise GPUCheckError(f"stamp is for {stamp.get('slug')!r}, this result for {slug!r}")
    new.update(schema=SCHEMA, gpu=gpu, slug=slug, updated=now_iso(), tree_rule=TREE_RULE)
    if versions:
        new["versions"] = versions
    if part == "tests":
        new["parts"]["tests"] = result
    else:
        old = new["parts"].get(part, {"items": {}})
        items = {**old.get("items", {}), **result["items"]}
        names = list(expected) if expected is not None else sorted(items)
        # an entry of an item the part no longer has (a notebook renamed or split) is dropped with it
        order = [n for n in names if n in items] + (
            sorted(n for n in items if n not in names) if expected is None else []
        )
        items = {n: items[n] for n in order}
        p = {"items": items, "last_run": result["last_run"]}
        new["parts"][part] = _part_ok(part, p, names)
    return new


# ------------------------------------------------------------------------------------------------ junit xml


def parse_junit(path: Path) -> dict:
    """Counts and failing ids from a pytest ``--junitxml`` file (either junit family): passed, failed, errors,
    skipped, failures (``file::name`` where the file is given, else ``classname::name``) and reasons (each failure's
    first message line, at most 200 characters) and slowest (the ``SLOWEST`` longest cases as ``[name, seconds]``,
    longest first: for a notebook, the cells to shorten when it runs past its limit)."""
    root = ET.parse(path).getroot()
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    failures, reasons, times = [], {}, []
    for case in root.iter("testcase"):
        name = case.get("name", "?")
        where = case.get("file") or case.get("classname") or ""
        if case.get("file") and case.get("classname"):
            mod = case.get("file")[:-3].replace("/", ".") if case.get("file").endswith(".py") else None
            cls = case.get("classname")
            if mod and cls.startswith(mod + "."):
                name = f"{cls[len(mod) + 1 :]}::{name}"
        tid = f"{where}::{name}" if where else name
        times.append((float(case.get("time") or 0.0), name))
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
            kind = "errors" if bad is not None else None
        else:
            kind = "failed"
        if kind:
            counts[kind] += 1
            failures.append(tid)
            text = (bad.get("message") or bad.text or "").strip()
            reasons[tid] = (text.splitlines() or [""])[0][:200]
        elif case.find("skipped") is not None:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    slowest = [[name, round(t, 1)] for t, name in sorted(times, key=lambda x: -x[0])[:SLOWEST]]
    return {**counts, "failures": failures, "reasons": reasons, "slowest": slowest}


def cell_names(failures: list[str]) -> list[str]:
    """nbval's failing items as cell names ("Cell 12"), the notebook path left off."""
    return [f.rsplit("::", 1)[-1] for f in failures]


# ------------------------------------------------------------------------------------------------ running


@dataclass
class Ran:
    """What one child process did: exit status (None when stopped), wall seconds, its output, stopped at its
    time limit."""

    rc: int | None
    seconds: float
    output: str
    stopped: bool = False


def catch_sigint() -> None:
    """Let children feel SIGINT. A job a shell starts in the background (``gpu_check.py ... &``) ignores SIGINT,
    its children inherit that, and a Python child that starts with SIGINT ignored never raises
    KeyboardInterrupt: pytest could not write its report at the budget. A handled signal is reset to the default
    in a child, an ignored one is not, so this process handles it. Main thread only (Python's rule)."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def run_command(cmd: list[str], env: dict, timeout_s: float, log: Path) -> Ran:
    """Run ``cmd`` from the project root, output to ``log``. At ``timeout_s`` it gets SIGINT (pytest then still
    writes its junit xml), and SIGKILL ``STOP_GRACE_S`` later."""
    catch_sigint()
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    stopped = False
    with open(log, "w") as out:
        out.write("+ " + " ".join(cmd) + "\n")
        out.flush()
        p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=max(timeout_s, 1.0))
        except subprocess.TimeoutExpired:
            stopped = True
            os.killpg(p.pid, signal.SIGINT)
            try:
                p.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            rc = None
    return Ran(rc, time.monotonic() - t0, log.read_text(errors="replace"), stopped)


def tail(text: str, lines: int = 120) -> str:
    return "\n".join(text.splitlines()[-lines:]) + "\n"


@dataclass
class Context:
    """Everything a part needs from outside: the tree and GPU it runs on, where its logs go, how it runs a child
    (``runner``: ``run_command``'s signature; tests inject fakes), the clock, the budget and the options."""

    root: Path = ROOT
    gpu: str = ""
    slug: str = ""
    versions: dict = field(default_factory=dict)
    logs: Path = ROOT / "build" / "gpu-check"
    runner: Callable[..., Ran] = run_command
    clock: Callable[[], float] = time.monotonic
    budget_s: float = DEFAULT_BUDGET_S
    only: list[str] | None = None
    rest: bool = False
    jobs: int = 3
    workers: int = 8
    as_gpus: tuple[str, ...] = EMULATED_GPUS
    tree: str = ""
    suites: list[tuple[str, tuple[str, ...]]] | None = None  # (key, steps); None: read from gpulab.bench


def threads_each(processes: int) -> str:
    """OMP_NUM_THREADS for one of ``processes`` running at once: this machine's cores shared out (at least 1).
    torch's CPU ops otherwise start one thread per core in every process, and 12 pytest workers on 16 cores
    ran float64 references 10 times slower than one process does."""
    return str(max(1, (os.cpu_count() or 1) // max(1, processes)))


def base_env(**set_vars: str) -> dict:
    """This process's environment without the GPULAB_* switches a part sets itself, plus ``set_vars``."""
    env = {k: v for k, v in os.environ.items() if k not in ("GPULAB_MODE", "GPULAB_AS_GPU", "GPULAB_AUTOTUNE")}
    env.update(PYTHONUNBUFFERED="1", **set_vars)
    return env


def cold_env(tmp: Path, **set_vars: str) -> dict:
    """A learner's first run: every cache folder fresh under ``tmp`` (gpulab's device profile and tables,
    Triton's kernels, torch.compile's, CUDA's JIT)."""
    for d in ("gpulab", "triton", "inductor", "cuda", "ipython", "jupyter-runtime"):
        (tmp / d).mkdir(parents=True, exist_ok=True)
    return base_env(
        GPULAB_CACHE_DIR=str(tmp / "gpulab"),
        TRITON_CACHE_DIR=str(tmp / "triton"),
        TORCHINDUCTOR_CACHE_DIR=str(tmp / "inductor"),
        CUDA_CACHE_PATH=str(tmp / "cuda"),
        XDG_CACHE_HOME=str(tmp),
        IPYTHONDIR=str(tmp / "ipython"),
        JUPYTER_RUNTIME_DIR=str(tmp / "jupyter-runtime"),
        **set_vars,
    )


def notebooks(root: Path = ROOT) -> list[str]:
    return sorted(p.stem for p in (root / "notebooks").glob("*.ipynb"))


def lesson_of(stem: str) -> str:
    return stem.split("_", 1)[0]


def suite_list() -> list[tuple[str, tuple[str, ...]]]:
    """Every benchmark suite as (key, its headline steps), the ceilings first (``python -m gpulab.bench``'s own
    list): a suite's ``HEADLINE_STEPS`` where it names them, else ``("headline",)`` where its ``STEPS`` hold one,
    else () (the whole suite)."""
    from gpulab.bench.__main__ import CORE, LESSON_SUITES

    out = [(CORE, ())]
    for m in LESSON_SUITES:
        mod = importlib.import_module(m)
        steps = tuple(getattr(mod, "STEPS", ()))
        out.append((mod.KEY, tuple(getattr(mod, "HEADLINE_STEPS", ("headline",) if "headline" in steps else ()))))
    return out


def _hits(token: str, name: str, kind: str) -> bool:
    t = token.lower().removeprefix("lesson")
    digits = re.match(r"\d*", t).group()
    if kind == "notebooks":
        lid = lesson_of(name)
        return lid == t or (t == digits != "" and re.match(r"\d*", lid).group() == t)
    if name == "ceilings":
        return t in ("ceilings", "00")
    return digits != "" and name == f"lesson{digits}"


def select(names: list[str], only: list[str] | None, kind: str) -> list[str]:
    """The notebook stems (``kind`` "notebooks") or suite keys ("suites") that ``--only`` picks: a token ``07`` is
    lesson 07 (notebooks 07 and 07b, suite lesson07), ``07b`` the notebook 07b (and suite lesson07), ``00`` lesson
    00 (notebooks 00 and 00b, suites lesson00 and the ceilings); ``lesson08`` is ``08``; ``ceilings`` the ceilings
    suite alone."""
    if not only:
        return list(names)
    return [n for n in names if any(_hits(t, n, kind) for t in only)]


def check_only(only: list[str] | None, root: Path = ROOT) -> None:
    """Raise naming --only when a token picks no notebook and is not the ceilings suite."""
    for t in only or []:
        if t.lower() != "ceilings" and not select(notebooks(root), [t], "notebooks"):
            raise GPUCheckError(f"--only: {t!r} names no lesson (notebooks: {', '.join(notebooks(root))}; or ceilings)")


def _entry(ctx: Context, **kw) -> dict:
    return {"tree": ctx.tree, "date": now_iso(), **kw}


def _last_run(ctx: Context, t0: float, unreached: list[str]) -> dict:
    return {
        "tree": ctx.tree,
        "date": now_iso(),
        "versions": ctx.versions,
        "only": ctx.only,
        "seconds": round(ctx.clock() - t0, 1),
        "unreached": unreached,
        "budget_s": ctx.budget_s,
    }


def _pending(names: list[str], ctx: Context, part: str) -> list[str]:
    """``names`` less, with ``--rest``, those whose entry in the stamp is on the current tree."""
    if not ctx.rest:
        return names
    old = load_stamp(stamp_path(ctx.slug, ctx.root)) or {}
    items = old.get("parts", {}).get(part, {}).get("items", {})
    return [n for n in names if items.get(n, {}).get("tree") != ctx.tree]


def _nbval(ctx: Context, stem: str, env: dict, timeout_s: float, tag: str) -> tuple[Ran, dict | None]:
    xml = ctx.logs / f"{tag}.xml"
    xml.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax", f"notebooks/{stem}.ipynb"]
    cmd += ["-o", "junit_family=xunit1", f"--junitxml={xml}"]
    ran = ctx.runner(cmd, env, timeout_s, ctx.logs / f"{tag}.log")
    junit = parse_junit(xml) if xml.exists() else None
    return ran, junit


def _failures(ran: Ran, junit: dict | None) -> list[str]:
    fails = cell_names(junit["failures"]) if junit else []
    if ran.stopped:
        fails.append(f"stopped after {ran.seconds:.0f} s")
    elif ran.rc not in (0, None) and not fails:
        fails.append(f"pytest exit {ran.rc}" + ("" if junit else " (no junit xml)"))
    return fails


def part_tests(ctx: Context) -> dict:
    """The GPU tests under pytest (xdist with ``ctx.workers`` when installed), first configs."""
    xml = ctx.logs / "tests.xml"
    xml.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", "tests", "-m", TEST_MARKERS, "-q", "-p", "no:cacheprovider"]
    cmd += ["-o", "junit_family=xunit1", f"--junitxml={xml}", "--durations=25"]  # the slowest, in tests.log
    if ctx.workers > 0 and importlib.util.find_spec("xdist") is not None:
        cmd += ["-n", str(ctx.workers)]
    with tempfile.TemporaryDirectory(prefix="gpu-check-tests-") as tmp:
        env = base_env(GPULAB_AUTOTUNE="first", GPULAB_CACHE_DIR=tmp)
        env.setdefault("OMP_NUM_THREADS", threads_each(ctx.workers if "-n" in cmd else 1))
        ran = ctx.runner(cmd, env, ctx.budget_s, ctx.logs / "tests.log")
    junit = parse_junit(xml) if xml.exists() else None
    res = {
        "tree": ctx.tree,
        "date": now_iso(),
        "versions": ctx.versions,
        "command": " ".join(
            ["python"] + [a if not a.startswith("--junitxml") else "--junitxml=tests.xml" for a in cmd[1:]]
        ),
        "seconds": round(ran.seconds, 1),
        "stopped": ran.stopped,
        **(junit or {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "failures": [], "reasons": {}}),
    }
    if junit is None:
        res["failures"] = [f"no junit xml (pytest exit {ran.rc}{', stopped at the budget' if ran.stopped else ''})"]
    res["ok"] = ran.rc == 0 and not ran.stopped and junit is not None and res["failed"] == res["errors"] == 0
    if not res["ok"]:
        (ctx.logs / "tests.tail.txt").write_text(tail(ran.output, 200))
    return res


def part_notebooks(ctx: Context) -> dict:
    """Each notebook alone, one after another, as a learner's first run: full autotuning, every cache cold, timed.
    A notebook starts only with ``NOTEBOOK_LIMIT_S`` of budget left, so one stopped at the budget has run past
    the limit and fails."""
    t0 = ctx.clock()
    todo = _pending(select(notebooks(ctx.root), ctx.only, "notebooks"), ctx, "notebooks")
    items, unreached = {}, []
    for stem in todo:
        left = ctx.budget_s - (ctx.clock() - t0)
        if left < NOTEBOOK_LIMIT_S:
            unreached.append(stem)
            continue
        with tempfile.TemporaryDirectory(prefix=f"gpu-check-{stem}-") as tmp:
            env = cold_env(Path(tmp), GPULAB_AUTOTUNE="full")
            ran, junit = _nbval(ctx, stem, env, left, f"nb-{stem}")
        fails = _failures(ran, junit)
        over = ran.seconds > NOTEBOOK_LIMIT_S
        if over:
            fails.append(f"over {NOTEBOOK_LIMIT_S:.0f} s")
        ok = ran.rc == 0 and not ran.stopped and not over and not fails
        slowest = junit["slowest"] if junit else []
        items[stem] = _entry(
            ctx,
            ok=ok,
            seconds=round(ran.seconds, 1),
            over_limit=over,
            failures=fails,
            stopped=ran.stopped,
            slowest_cells=slowest,
        )
        if not ok:
            (ctx.logs / f"nb-{stem}.tail.txt").write_text(tail(ran.output))
        cells = ", ".join(f"{name} {t:.0f} s" for name, t in slowest)
        verdict = "ok" if ok else "FAIL " + ", ".join(fails[:6])
        print(f"  {stem:28} {ran.seconds:6.1f} s  {verdict}  (slowest: {cells})", flush=True)
    return {"items": items, "last_run": _last_run(ctx, t0, unreached)}


# Notebooks whose checks compare two timings taken at different moments (01: each point against the roof measured
# before it) run one at a time after the others: beside other jobs a point can beat a roof measured while the GPU
# was busier (on the H200, 01's cell 12 failed as T4, L4 and A100 beside the tests and passed alone).
ALONE = ("01_roofline",)


def split_alone(names: list[str]) -> tuple[list[str], list[str]]:
    """``names`` ("T4 01_roofline", ...) split into those that may run at once and those of ``ALONE``, order kept."""
    alone = [n for n in names if n.split(" ", 1)[-1] in ALONE]
    return [n for n in names if n not in alone], alone


def _every_cell_failed(junit: dict | None) -> bool:
    """Whether a notebook's run failed in each of its cells: its kernel never ran a cell (it died or did not
    start), which a notebook's own fault does not do (a failing cell leaves the next ones to run)."""
    return bool(junit and junit["failed"] + junit["errors"] > 1 and junit["passed"] == junit["skipped"] == 0)


def part_emulated(ctx: Context) -> dict:
    """Each notebook as each GPU of ``ctx.as_gpus`` would choose (GPULAB_AS_GPU), first configs, ``ctx.jobs`` at
    once; each run with its own gpulab cache, Triton's cache shared by the part. A run that fails in every cell
    (its kernel never ran one) runs once more, alone, after the others: its entry keeps that first try."""
    t0 = ctx.clock()
    names = [f"{g} {s}" for g in ctx.as_gpus for s in select(notebooks(ctx.root), ctx.only, "notebooks")]
    todo = _pending(names, ctx, "emulated")
    items, unreached, retry = {}, [], {}
    lock = threading.Lock()
    with tempfile.TemporaryDirectory(prefix="gpu-check-emulated-") as tmp:

        def one(name: str) -> None:
            gpu, stem = name.split(" ", 1)
            left = ctx.budget_s - (ctx.clock() - t0)
            if left < MIN_START_S:
                with lock:
                    if name in retry:  # no time to try again: the first try stands
                        items[name] = _entry(
                            ctx,
                            ok=False,
                            seconds=retry[name]["seconds"],
                            failures=retry[name]["failures"],
                            stopped=False,
                        )
                    else:
                        unreached.append(name)
                return
            env = cold_env(Path(tmp) / name.replace(" ", "-"), GPULAB_AUTOTUNE="first", GPULAB_AS_GPU=gpu)
            env["TRITON_CACHE_DIR"] = str(Path(tmp) / "triton")
            env.setdefault("OMP_NUM_THREADS", threads_each(ctx.jobs))
            ran, junit = _nbval(ctx, stem, env, left, f"as-{gpu}-{stem}")
            if ran.stopped and not (junit and junit["failures"]):
                with lock:
                    unreached.append(name)
                return
            fails = _failures(ran, junit)
            ok = ran.rc == 0 and not fails
            if not ok:
                (ctx.logs / f"as-{gpu}-{stem}.tail.txt").write_text(tail(ran.output))
            with lock:
                if not ok and name not in retry and _every_cell_failed(junit):
                    retry[name] = {"failures": fails[:3] + ["..."], "seconds": round(ran.seconds, 1)}
                    return
                items[name] = _entry(ctx, ok=ok, seconds=round(ran.seconds, 1), failures=fails, stopped=ran.stopped)
                if name in retry:
                    items[name]["first_try"] = retry[name]
            print(f"  {name:32} {ran.seconds:6.1f} s  {'ok' if ok else 'FAIL ' + ', '.join(fails[:6])}", flush=True)

        (Path(tmp) / "triton").mkdir()
        together, alone = split_alone(todo)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, ctx.jobs)) as pool:
            list(pool.map(one, together))
        for name in alone + sorted(retry, key=todo.index):
            one(name)
    unreached.sort(key=todo.index)
    return {"items": items, "last_run": _last_run(ctx, t0, unreached)}


def suite_args(key: str, steps: tuple[str, ...]) -> list[str]:
    """``python -m gpulab.bench`` arguments for a suite's headline: its headline ``steps`` (``suite_list``), or
    the whole suite for ()."""
    return ["--only", key] + (["--steps", ",".join(steps)] if steps else [])


def part_suites(ctx: Context) -> dict:
    """Each benchmark suite's headline step, one after another, full autotuning, a fresh gpulab cache."""
    t0 = ctx.clock()
    suites = ctx.suites if ctx.suites is not None else suite_list()
    steps = dict(suites)
    todo = _pending(select([k for k, _ in suites], ctx.only, "suites"), ctx, "suites")
    items, unreached = {}, []
    for key in todo:
        left = ctx.budget_s - (ctx.clock() - t0)
        if left < MIN_START_S:
            unreached.append(key)
            continue
        args = suite_args(key, steps[key])
        with tempfile.TemporaryDirectory(prefix=f"gpu-check-{key}-") as tmp:
            env = base_env(GPULAB_AUTOTUNE="full", GPULAB_CACHE_DIR=tmp)
            ran = ctx.runner([sys.executable, "-m", "gpulab.bench", *args], env, left, ctx.logs / f"suite-{key}.log")
        if ran.stopped:
            unreached.append(key)
            continue
        ok = ran.rc == 0
        last = [ln for ln in ran.output.splitlines() if ln.strip()][-1:] or [""]
        fails = [] if ok else [f"exit {ran.rc}: {last[0][:200]}"]
        items[key] = _entry(
            ctx, ok=ok, seconds=round(ran.seconds, 1), steps=" ".join(args[2:]) or "all", failures=fails, stopped=False
        )
        if not ok:
            (ctx.logs / f"suite-{key}.tail.txt").write_text(tail(ran.output))
        print(f"  {key:12} {ran.seconds:6.1f} s  {'ok' if ok else 'FAIL ' + fails[0]}", flush=True)
    return {"items": items, "last_run": _last_run(ctx, t0, unreached)}


PART_FUNCS = {"tests": part_tests, "notebooks": part_notebooks, "emulated": part_emulated, "suites": part_suites}


def expected_items(part: str, ctx: Context) -> list[str] | None:
    if part == "notebooks":
        return notebooks(ctx.root)
    if part == "emulated":
        return [f"{g} {s}" for g in EMULATED_GPUS for s in notebooks(ctx.root)]
    if part == "suites":
        return [k for k, _ in (ctx.suites if ctx.suites is not None else suite_list())]
    return None


def run_part(part: str, ctx: Context) -> dict:
    """Run one part and merge its result into the stamp (written atomically). Returns the new stamp."""
    if not ctx.tree:
        ctx.tree = tree_hash(ctx.root, dirs=PART_DIRS[part])
    ctx.logs.mkdir(parents=True, exist_ok=True)
    print(f"gpu-check {part} on {ctx.gpu}, tree {ctx.tree[:10]}, budget {ctx.budget_s:.0f} s", flush=True)
    result = PART_FUNCS[part](ctx)
    path = stamp_path(ctx.slug, ctx.root)
    # parts may run at once (tests beside emulated): each reads, merges and writes under one lock
    with open(Path(tempfile.gettempdir()) / f"{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        new = merge(
            load_stamp(path),
            part,
            result,
            gpu=ctx.gpu,
            slug=ctx.slug,
            versions=ctx.versions,
            expected=expected_items(part, ctx),
        )
        write_atomic(path, new)
    return new


# ------------------------------------------------------------------------------------------------ status


def _now(now: str | dict, part: str) -> str:
    """``now``: one tree hash for every part, or ``part_trees``'s dict."""
    return now[part] if isinstance(now, dict) else now


def _now_line(now: str | dict) -> str:
    if not isinstance(now, dict):
        return f"tree now: {now[:10]}"
    return "trees now: " + ", ".join(f"{part} {h[:10]}" for part, h in now.items())


def _trees(entries, now: str) -> str:
    counts: dict[str, int] = {}
    for e in entries:
        counts[e["tree"]] = counts.get(e["tree"], 0) + 1
    return ", ".join(f"{t[:10]}{' (now)' if t == now else ''} x{n}" for t, n in counts.items())


def status_lines(stamp: dict, now: str | dict, path: str = "") -> list[str]:
    """The stamp in at most 15 lines: which parts passed on which tree, whether the tree changed since. ``now``:
    the tree hash now, one for all parts or per part (``part_trees``)."""
    v = stamp.get("versions", {})
    lines = [
        f"gpu-check stamp {path}: {stamp.get('gpu')}, updated {stamp.get('updated')}",
        "versions: " + ", ".join(f"{k} {v[k]}" for k in ("python", "torch", "triton", "cuda", "driver") if k in v),
        _now_line(now),
    ]
    changed = []
    parts = stamp.get("parts", {})
    trees_now = now
    for part in PARTS:
        now = _now(trees_now, part)
        p = parts.get(part)
        if p is None:
            lines.append(f"{part:9} not run")
            continue
        verdict = "PASS" if p.get("ok") else "FAIL"
        if part == "tests":
            lines.append(
                f"{part:9} {verdict} {p['passed']} passed, {p['failed']} failed, {p['errors']} errors, "
                f"{p['skipped']} skipped, {p['seconds']:.0f} s on {p['tree'][:10]}{' (now)' if p['tree'] == now else ''}"
                + (", stopped at the budget" if p.get("stopped") else "")
            )
            if p["tree"] != now:
                changed.append(part)
            bad = p.get("failures", [])
        else:
            items = p["items"]
            good = sum(e["ok"] for e in items.values())
            extra = ""
            if part == "notebooks" and items:
                slow = max(items, key=lambda n: items[n]["seconds"])
                extra = f", total {p['total_seconds']:.0f}/{COLLECTION_LIMIT_S:.0f} s, slowest {slow} {items[slow]['seconds']:.0f} s"
            missing = f", {len(p['missing'])} never run" if p.get("missing") else ""
            lines.append(
                f"{part:9} {verdict} {good}/{len(items)} passed{extra}{missing}; trees {_trees(items.values(), now)}"
            )
            if any(e["tree"] != now for e in items.values()):
                changed.append(part)
            bad = [f"{n} ({', '.join(e['failures'][:3])})" for n, e in items.items() if not e["ok"]]
        if bad:
            lines.append(f"  failing: {'; '.join(bad[:4])}" + (f"; +{len(bad) - 4} more" if len(bad) > 4 else ""))
    all_ok = all(parts.get(p, {}).get("ok") for p in PARTS)
    if changed:
        lines.append(f"tree changed since: {', '.join(changed)} checked on an older tree")
    lines.append(
        "verdict: every part passes on the tree now"
        if all_ok and not changed
        else "verdict: not proven on the tree now"
    )
    return [ln if len(ln) <= 200 else ln[:197] + "..." for ln in lines[:15]]


def stamp_warnings(stamp: dict, now: str | dict) -> list[str]:
    """Why a committed stamp does not prove the tree now (``now`` as ``status_lines`` takes it): an entry on
    another tree, or a failure."""
    out = []
    for part in PARTS:
        p = stamp.get("parts", {}).get(part)
        if p is None:
            out.append(f"part {part} has no result")
            continue
        entries = [p] if part == "tests" else list(p["items"].values())
        if any(e["tree"] != _now(now, part) for e in entries):
            out.append(f"part {part} was checked on another tree (the tree has changed since)")
        if not p.get("ok"):
            out.append(f"part {part} holds a failure or a missing entry")
    return out


# ------------------------------------------------------------------------------------------------ the command


def gpu_info() -> tuple[str, str, dict]:
    """(device name, slug, versions) of this machine's GPU; GPUCheckError without one."""
    import torch

    if not torch.cuda.is_available():
        raise GPUCheckError(NO_GPU)
    import triton

    from gpulab import hardware
    from gpulab.device import _driver_version, _slug

    name = torch.cuda.get_device_name(0)
    spec = hardware.find(name)
    slug = spec.name.split()[0].lower() if spec else _slug(name)
    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "driver": _driver_version(),
        "gpu": name,
    }
    return name, slug, versions


def _positive(name: str, kind=float, zero_ok: bool = False):
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if v < 0 or (v == 0 and not zero_ok):
            raise argparse.ArgumentTypeError(f"{name} must be {'>= 0' if zero_ok else '> 0'}, got {text!r}")
        return v

    return parse


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python tools/gpu_check.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("part", choices=(*PARTS, "status", "all"))
    ap.add_argument("--only", default="", help="comma-separated lessons, e.g. 08,09 (notebooks and suites)")
    ap.add_argument("--rest", action="store_true", help="only items without an entry on the current tree")
    ap.add_argument("--budget", type=_positive("--budget"), default=DEFAULT_BUDGET_S, help="seconds per part")
    ap.add_argument("--out", default=os.environ.get("OUT", ""), help="copy the stamp and logs here (default $OUT)")
    ap.add_argument("--jobs", type=_positive("--jobs", int), default=3, help="emulated notebook runs at once")
    ap.add_argument("--workers", type=_positive("--workers", int, True), default=8, help="pytest -n (0: none)")
    ap.add_argument("--as", dest="as_gpus", default=",".join(EMULATED_GPUS), help="emulated GPUs, e.g. T4,L4")
    args = ap.parse_args(argv)
    only = [t.strip() for t in args.only.split(",") if t.strip()] or None
    as_gpus = tuple(g.strip() for g in args.as_gpus.split(",") if g.strip())
    if set(as_gpus) - set(EMULATED_GPUS) or not as_gpus:
        ap.error(f"--as must name some of {', '.join(EMULATED_GPUS)}, got {args.as_gpus!r}")
    catch_sigint()  # before any thread starts a child
    try:
        if args.part == "status":
            return _status()
        check_only(only)
        gpu, slug, versions = gpu_info()
        out = Path(args.out) if args.out else None
        logs = (out / "gpu-check-logs") if out else ROOT / "build" / "gpu-check"
        ctx = Context(
            gpu=gpu,
            slug=slug,
            versions=versions,
            logs=logs,
            budget_s=args.budget,
            only=only,
            rest=args.rest,
            jobs=args.jobs,
            workers=args.workers,
            as_gpus=as_gpus,
        )
        parts = PARTS if args.part == "all" else (args.part,)
        for part in parts:
            ctx.tree = tree_hash(dirs=PART_DIRS[part])
            run_part(part, ctx)
            if out:
                shutil.copy2(stamp_path(slug), out / stamp_path(slug).name)
        _status()
        stamp = load_stamp(stamp_path(slug)) or {}
        return 0 if all(stamp.get("parts", {}).get(p, {}).get("ok") for p in parts) else 1
    except GPUCheckError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _status() -> int:
    stamps = sorted(ROOT.glob(STAMP_PATTERN))
    if not stamps:
        print(f"no gpu-check stamp yet ({STAMP_PATTERN}): run make gpu-check on a GPU machine")
        return 0
    now = part_trees()
    for p in stamps:
        print("\n".join(status_lines(load_stamp(p), now, str(p.relative_to(ROOT)))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
