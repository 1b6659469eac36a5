"""``make gpu-check``: prove the collection green on the GPU it runs on, entry by entry, rerunning only what a change
touched.

Run on a GPU machine from the project root, with gpulab, torch, Triton, pytest and nbval importable by the Python
that runs this file (every child process is ``sys.executable``; nothing here builds or uses ``.venv``):

    python tools/gpu_check.py tests       # the GPU test files under pytest -n 14, first configs
    python tools/gpu_check.py notebooks   # each notebook alone under nbval, full autotuning, cold caches, timed
    python tools/gpu_check.py emulated    # each notebook as a T4, an L4 and an A100 would, first configs
    python tools/gpu_check.py suites      # each benchmark suite's headline steps (python -m gpulab.bench)
    python tools/gpu_check.py all         # the four parts in order, then status
    python tools/gpu_check.py proof       # tests, emulated and suites at once, then the notebooks alone, in --budget
    python tools/gpu_check.py status      # entry by entry, proven or not on the tree now (no GPU needed)
    python tools/gpu_check.py plan        # what `all` or `proof` would run now, and its seconds (no GPU needed)

**Entries and what proves them.** Each part is a list of entries: a test file (``tests/test_fusion.py``), a
notebook (``04_fusion``), an emulated run (``T4 04_fusion``), a suite (``lesson04``, ``ceilings``). An entry records
``deps``, the hash of the files it depends on (``tools/deps.py``: the notebook, suite or test file and what it imports
through gpulab and tests, transitively, the package data it reads, conftest and fixtures), and whether it passed.
An entry is *proven on the tree now* when it passed and its ``deps`` equal the hash of those files now. Every part
runs only its entries that are not proven (a change, a failure, never run); ``--all-entries`` runs them all. So an
edit to ``gpulab/figures/lesson04.py`` reruns notebook 04 (and ``T4 04_fusion``, ``L4 04_fusion``, ``A100
04_fusion``) and the test files that import it, nothing else.

**Which test files are entries.** Those that can prove something on a GPU: a file that is CPU-same
(``deps.Graph.cpu_same``: marked ``cpu_same``, skipping itself on a GPU, or reaching no device word) or whose
``pytestmark`` deselects it here (``browser``, ``slow``) is no entry; single tests marked ``cpu_same`` are
deselected (``TEST_MARKERS``). The GPU files run in one pytest (``--dist loadgroup``: each test its own unit, those
marked ``xdist_group`` together), the longest files first; a file's entry counts only when each of its collected
tests reported.

Options: ``--only 08,09`` (lessons: notebooks, emulated runs and suites of those lessons only; ``07`` is 07 and 07b,
``08`` 08 and 08b, ``00`` is 00 and 00b and the ceilings suite), ``--all-entries`` (run proven entries too),
``--budget S`` (a part starts nothing it cannot finish in S seconds and stops what runs at S, recording what it did
not reach; ``proof`` shares S between its two phases), ``--out DIR`` (the logs there, and the stamp as
``stamp.json`` after each part; default ``$OUT`` when set), ``--jobs N`` (emulated runs at once), ``--workers N``
(pytest-xdist workers; 0: none), ``--suite-jobs N`` (suites at once), ``--as T4,L4`` (the emulated GPUs), ``--gpu
SLUG`` (status and plan: the stamp ``gpu-check-SLUG.json``; default every stamp, plan the only one).

**proof**: phase 1 runs the tests, emulated and suites parts at once, the cores shared out by their estimated work
(``share_slots``); phase 2 runs the notebooks alone (they are timed) with the budget left, longest first, each
starting only where its recorded seconds fit. A second ``proof`` continues with what the first did not reach, since
proven entries never run again: ``bash tools/gpu_run.sh proof`` twice is the whole proof.

The stamp, ``gpulab/data/gpu-check-<gpu>.json`` (``<gpu>``: the short name the benchmark suite records under,
e.g. ``h200``), gathers every part's entries; each part merges its own into it and writes it atomically:

    schema: 2; gpu: the CUDA device name; slug; updated: UTC ISO time of the last write; deps_rule; versions
    parts.<tests|notebooks|emulated|suites>: {ok, items: {name: entry}, missing: [names], last_run: {tree, date,
        versions, only, seconds, unreached: [names], budget_s}} plus, for notebooks, limit_s, total_seconds,
        total_limit_s, and for tests, deselected: {file: why} and last_run.command
    an entry: {deps, date, ok, seconds, failures: [cells, test ids or reasons], stopped} (+ over_limit and
        slowest_cells: [[cell, s]] for notebooks; steps for suites; passed, failed, errors, skipped, reasons:
        {test id: first line}, slowest: [[test, s]] for test files, whose seconds are the sum of their tests')

A schema-1 stamp (one tree hash a part) is read: its entries keep their seconds (``plan`` estimates from them)
and have no ``deps``, so none is proven. A part is ``ok`` when every entry it expects passed, wherever it ran;
``status`` says which are proven on the tree now. Notebooks also keep their total within ``COLLECTION_LIMIT_S``.

The hash of a set of files (``files_hash``) is git's own: the object id of the git tree holding those files as on
disk, every regular file's mode taken as 100644 (a copy may lose the executable bit); ``tree_hash``, of every file
under ``HASHED_DIRS`` with git's modes, is the whole tree a run saw. The files that exist for this purpose: where git works
here, the files git would add (``git ls-files --cached --others --exclude-standard``); elsewhere (a copy of the tree
without ``.git``: the GPU machine) every file on disk except those the root ``.gitignore`` names (its plain
patterns: names, globs, ``dir/``); either way without ``__pycache__/``, ``.ipynb_checkpoints/``, ``*.pyc`` and
``gpulab/data/gpu-check-*.json``. The two agree on this repository (``tests/test_gpu_check.py`` checks it), so a
hash computed on the GPU machine compares with one computed on a CPU.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import dataclasses
import datetime as _dt
import fcntl
import fnmatch
import hashlib
import importlib.util
import json
import math
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import deps  # noqa: E402  (tools/ is not a package: the import graph's one home, shared with lesson_map.py)

ROOT = Path(__file__).resolve().parents[1]
HASHED_DIRS = ("gpulab", "notebooks", "tests", "tools")
STAMP_PATTERN = "gpulab/data/gpu-check-*.json"
SCHEMA = 2
READ_SCHEMAS = (1, 2)
PARTS = ("tests", "notebooks", "emulated", "suites")
NOTEBOOK_LIMIT_S = 60.0  # one notebook alone, cold caches, full autotuning: a learner sees Run All end within a minute
COLLECTION_LIMIT_S = 480.0  # the whole collection, one notebook after another (8 minutes)
EMULATED_GPUS = ("T4", "L4", "A100")
DEFAULT_BUDGET_S = 540.0  # each part fits one 10-minute run with a minute to spare for start-up and copying
PROOF_BUDGET_S = 525.0  # proof: what gpu_run.sh gives it of a 10-minute call (wheels, 30 s stop grace, packing)
SLOWEST = 3  # the longest test cases (notebook cells) an entry names
MIN_START_S = 30.0  # an untimed child (a suite, an emulated notebook) starts only with this much budget left
STOP_GRACE_S = 30.0  # after SIGINT at the budget, how long a child gets to write its report before SIGKILL
TEST_MARKERS = "not browser and not slow and not cpu_same"
DESELECTED_MARKS = ("browser", "slow")  # a test file whose pytestmark holds one runs no test under TEST_MARKERS
ALWAYS_IGNORED = ("__pycache__/", ".ipynb_checkpoints/", "*.pyc")
DEPS_RULE = (
    "git tree id, on disk, of the files an entry depends on (tools/deps.py: the notebook, suite or test file, what "
    "it imports through gpulab and tests transitively, the gpulab/data files it reads, conftest and fixtures; "
    "gpulab/data/gpu-check-*.json never); files: git ls-files --cached --others --exclude-standard, or without git "
    "every file not ignored by the root .gitignore"
)
NO_GPU = "make gpu-check needs an NVIDIA GPU: torch.cuda.is_available() is False"
# What an entry with no recorded seconds is estimated to take: a test file (worker-seconds: the H200's last whole
# run, 297 s at -n 12 over about 85 files, is 40 a file), a notebook (its limit), an emulated run, a suite.
DEFAULT_ESTIMATE_S = {"tests": 40.0, "notebooks": NOTEBOOK_LIMIT_S, "emulated": 60.0, "suites": 60.0}
TESTS_START_S = 25.0  # pytest-xdist's start and collection, before the first test runs
# proof's phase 1 shares the cores among the three parts (one process a slot, one core left for the rest); the
# GPU bounds the emulated runs (7 notebooks' kernels at once fitted an H100) and the suites (3 at once).
SLOT_CAPS = {"tests": 14, "emulated": 7, "suites": 3}
LIMITS_TEXT = f"a notebook within {NOTEBOOK_LIMIT_S:.0f} s, the collection within {COLLECTION_LIMIT_S:.0f} s"


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


def files_hash(root: Path, files, blobs: dict | None = None, modes: bool = False) -> str:
    """The hex id of the git tree holding ``files`` (relative posix paths) as on disk. ``modes`` False: every regular
    file as 100644, since a copy of the tree (the GPU machine's) may not keep the executable bit, which no entry's
    result depends on; True: git's own modes. ``blobs``: a cache of each file's (mode, id), shared between calls."""
    top: dict = {}
    for rel in sorted(files):
        *folders, name = rel.split("/")
        node = top
        for d in folders:
            node = node.setdefault(d, {})
        if blobs is None:
            mode, oid = _blob(root / rel)
        else:
            if rel not in blobs:
                blobs[rel] = _blob(root / rel)
            mode, oid = blobs[rel]
        node[name] = (mode if modes or mode == "120000" else "100644", oid)
    return _tree_id(top).hex()


def tree_hash(root: Path = ROOT, use_git: bool | None = None, dirs: tuple[str, ...] = HASHED_DIRS) -> str:
    """The hex id of the git tree of ``dirs`` (some of ``HASHED_DIRS``) as on disk, without the stamps (module
    docstring): the whole tree a run saw, recorded beside its entries."""
    if set(dirs) - set(HASHED_DIRS):
        raise GPUCheckError(f"dirs must be some of {HASHED_DIRS}, got {dirs!r}")
    files, _ = hashed_files(root, use_git)
    return files_hash(root, [f for f in files if f.split("/", 1)[0] in dirs], modes=True)


# ------------------------------------------------------------------------------------------------ entries


def _hits(token: str, name: str, kind: str) -> bool:
    t = token.lower().removeprefix("lesson")
    digits = re.match(r"\d*", t).group()
    if kind == "notebooks":
        lid = lesson_of(name)
        return lid == t or (t == digits != "" and re.match(r"\d*", lid).group() == t)
    if name == "ceilings":
        return t in ("ceilings", "00")
    return digits != "" and name == f"lesson{digits}"


def check_only(only: list[str] | None, root: Path = ROOT) -> None:
    """Raise naming --only when a token picks no notebook and is not the ceilings suite."""
    for t in only or []:
        if t.lower() != "ceilings" and not select(notebooks(root), [t], "notebooks"):
            raise GPUCheckError(f"--only: {t!r} names no lesson (notebooks: {', '.join(notebooks(root))}; or ceilings)")


def select(names: list[str], only: list[str] | None, kind: str) -> list[str]:
    """The notebook stems (``kind`` "notebooks"), emulated runs ("emulated": "T4 <stem>") or suite keys
    ("suites") that ``--only`` picks: a token ``07`` is lesson 07 (notebooks 07 and 07b, suite lesson07), ``07b``
    the notebook 07b (and suite lesson07), ``00`` lesson 00 (notebooks 00 and 00b, suites lesson00 and the
    ceilings); ``lesson08`` is ``08``; ``ceilings`` the ceilings suite alone. Test files are never picked out."""
    if not only or kind == "tests":
        return list(names)
    if kind == "emulated":
        return [n for n in names if any(_hits(t, n.split(" ", 1)[-1], "notebooks") for t in only)]
    return [n for n in names if any(_hits(t, n, kind) for t in only)]


def notebooks(root: Path = ROOT) -> list[str]:
    return sorted(p.stem for p in (root / "notebooks").glob("*.ipynb"))


def lesson_of(stem: str) -> str:
    return stem.split("_", 1)[0]


def _literal_assign(tree: ast.Module, name: str):
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node.value
    return None


def suite_list(root: Path = ROOT) -> list[tuple[str, tuple[str, ...]]]:
    """Every benchmark suite as (key, its headline steps), the ceilings first (``python -m gpulab.bench``'s own
    list, read from the source: no import, so ``status`` and ``plan`` run without torch): a suite's
    ``HEADLINE_STEPS`` where it names them, else ``("headline",)`` where its ``STEPS`` hold one, else () (the whole
    suite). Raises GPUCheckError when the runner's list or a suite's ``KEY`` is not a literal."""
    runner = root / deps.SUITE_RUNNER
    tree = ast.parse(runner.read_text())
    try:
        core = ast.literal_eval(_literal_assign(tree, "CORE"))
        mods = ast.literal_eval(_literal_assign(tree, "LESSON_SUITES"))
    except (ValueError, TypeError) as e:
        raise GPUCheckError(f"{deps.SUITE_RUNNER}: CORE and LESSON_SUITES must be literals ({e})") from None
    out = [(core, ())]
    for m in mods:
        path = root / (m.replace(".", "/") + ".py")
        t = ast.parse(path.read_text())
        key = _literal_assign(t, "KEY")
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            raise GPUCheckError(f"{path.relative_to(root)}: KEY must be a string literal")
        head = _literal_assign(t, "HEADLINE_STEPS")
        if head is not None:
            steps = tuple(ast.literal_eval(head))
        else:
            listed = _literal_assign(t, "STEPS")
            elts = listed.elts if isinstance(listed, (ast.Tuple, ast.List)) else []
            steps = ("headline",) if any(isinstance(e, ast.Constant) and e.value == "headline" for e in elts) else ()
        out.append((key.value, steps))
    return out


class Tree:
    """The tree as on disk now: the files hashes cover (``hashed_files``), the import graph over them
    (``deps.Graph``), and each entry's files and hash. ``suites``: (key, steps) of the suites (default
    ``suite_list``)."""

    def __init__(self, root: Path = ROOT, use_git: bool | None = None, suites=None):
        self.root = Path(root)
        files, self.how = hashed_files(self.root, use_git)
        self.files = set(files)
        self.graph = deps.Graph(self.root, self.files)
        self.suites = list(suites) if suites is not None else None
        self._blobs: dict = {}
        self._hashes: dict[tuple[str, str], str] = {}
        self._tests: tuple[list[str], dict[str, str]] | None = None

    def notebooks(self) -> list[str]:
        return sorted(
            f[len("notebooks/") : -len(".ipynb")] for f in self.files if re.fullmatch(r"notebooks/[^/]+\.ipynb", f)
        )

    def suite_keys(self) -> list[str]:
        if self.suites is None:
            self.suites = suite_list(self.root)
        return [k for k, _ in self.suites]

    def tests(self) -> tuple[list[str], dict[str, str]]:
        """(the test files that are entries, {every other test file: why it is not one}) (module docstring)."""
        if self._tests is None:
            gpu, other = [], {}
            for f in self.graph.test_files():
                marks = deps.file_marks((self.root / f).read_text(errors="replace"))
                off = sorted(set(marks) & set(DESELECTED_MARKS))
                same, why = self.graph.cpu_same(f)
                if off:
                    other[f] = f"marked {', '.join(off)}"
                elif same:
                    other[f] = why
                else:
                    gpu.append(f)
            self._tests = (gpu, other)
        return self._tests

    def items(self, part: str) -> list[str]:
        """Every entry name ``part`` expects on this tree."""
        if part == "tests":
            return self.tests()[0]
        if part == "notebooks":
            return self.notebooks()
        if part == "emulated":
            return [f"{g} {s}" for g in EMULATED_GPUS for s in self.notebooks()]
        if part == "suites":
            return self.suite_keys()
        raise GPUCheckError(f"part must be one of {PARTS}, got {part!r}")

    def files_of(self, part: str, name: str) -> set[str]:
        """The files entry ``name`` of ``part`` depends on (``tools/deps.py``)."""
        if part == "tests":
            return self.graph.test_file(name)
        if part in ("notebooks", "emulated"):
            stem = name.split(" ", 1)[-1]
            if f"notebooks/{stem}.ipynb" not in self.files:
                raise GPUCheckError(f"{part} entry {name!r}: no notebooks/{stem}.ipynb")
            return self.graph.notebook(stem)
        if part == "suites":
            try:
                return self.graph.suite(name)
            except ValueError as e:
                raise GPUCheckError(str(e)) from None
        raise GPUCheckError(f"part must be one of {PARTS}, got {part!r}")

    def entry_hash(self, part: str, name: str) -> str:
        """``files_hash`` of the entry's files (an emulated run's are its notebook's: one hash for the four)."""
        key = ("notebooks", name.split(" ", 1)[-1]) if part == "emulated" else (part, name)
        if key not in self._hashes:
            self._hashes[key] = files_hash(self.root, self.files_of(part, name), self._blobs)
        return self._hashes[key]

    def current(self, parts=PARTS) -> dict[str, dict[str, str]]:
        """part -> {entry name: its hash now}, every entry each part expects."""
        return {p: {n: self.entry_hash(p, n) for n in self.items(p)} for p in parts}


# ------------------------------------------------------------------------------------------------ the stamp


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def stamp_path(slug: str, root: Path = ROOT) -> Path:
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", slug):
        raise GPUCheckError(f"gpu slug must be lowercase letters, digits and '-', got {slug!r}")
    return root / "gpulab" / "data" / f"gpu-check-{slug}.json"


def upgrade(data: dict) -> dict:
    """A schema-1 stamp as schema 2: its itemized entries kept (their seconds estimate the next run; without
    ``deps`` none is proven), its one tests record kept as ``parts.tests.last_run`` with no entries."""
    new = json.loads(json.dumps(data))
    new["schema"] = SCHEMA
    new.pop("tree_rule", None)
    tests = new.get("parts", {}).get("tests")
    if tests is not None and "items" not in tests:
        new["parts"]["tests"] = {"items": {}, "missing": [], "ok": False, "last_run": tests}
    return new


def load_stamp(path: Path) -> dict | None:
    """The stamp at ``path`` (schema 1 upgraded), None where there is none. GPUCheckError naming the file when it is
    not a JSON object or of a schema this tool does not read."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise GPUCheckError(f"{path} is not JSON ({e})") from None
    if not isinstance(data, dict):
        raise GPUCheckError(f"{path} must hold a JSON object, got {type(data).__name__}")
    if data.get("schema") not in READ_SCHEMAS:
        raise GPUCheckError(f"{path}: schema {data.get('schema')!r}, this tool reads schemas {READ_SCHEMAS}")
    return upgrade(data) if data["schema"] == 1 else data


def write_atomic(path: Path, data: dict) -> Path:
    """``data`` as JSON at ``path``, whole or not at all (``gpulab.measure.device.write_json_atomic``, gpulab's one home
    for it)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from gpulab.measure.device import write_json_atomic

    return write_json_atomic(path, data)


def _part_ok(part: str, p: dict, expected: list[str]) -> dict:
    """Recompute ``ok``, ``missing`` (and the notebooks' totals) of a part from its items."""
    items = p["items"]
    p["missing"] = [n for n in expected if n not in items]
    ok = not p["missing"] and all(e["ok"] for e in items.values())
    if part == "notebooks":
        p["limit_s"] = NOTEBOOK_LIMIT_S
        p["total_limit_s"] = COLLECTION_LIMIT_S
        p["total_seconds"] = round(sum(e["seconds"] for e in items.values()), 1)
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
    """The stamp after one part's run. ``result``: ``{"items": {name: entry}, "last_run": {...}}`` (+ any other
    part-level keys, e.g. the tests' ``deselected``), whose entries replace those of the same name and leave the
    others, each with its own ``deps``. ``expected``: every entry name the part has (for ``missing`` and ``ok``); an
    entry of a name not in it (a notebook renamed, a test file now CPU-same) is dropped."""
    if part not in PARTS:
        raise GPUCheckError(f"part must be one of {PARTS}, got {part!r}")
    new = json.loads(json.dumps(stamp)) if stamp else {"schema": SCHEMA, "parts": {}}
    if stamp and stamp.get("slug") not in (None, slug):
        raise GPUCheckError(f"stamp is for {stamp.get('slug')!r}, this result for {slug!r}")
    new.update(schema=SCHEMA, gpu=gpu, slug=slug, updated=now_iso(), deps_rule=DEPS_RULE)
    new.pop("tree_rule", None)
    if versions:
        new["versions"] = versions
    old = new["parts"].get(part, {"items": {}})
    items = {**old.get("items", {}), **result["items"]}
    names = list(expected) if expected is not None else sorted(items)
    order = [n for n in names if n in items] + (sorted(n for n in items if n not in names) if expected is None else [])
    p = {k: v for k, v in result.items() if k != "items"}
    p["items"] = {n: items[n] for n in order}
    new["parts"][part] = _part_ok(part, p, names)
    return new


# ------------------------------------------------------------------------------------------------ junit xml


def junit_cases(path: Path) -> list[dict]:
    """Each test case of a pytest ``--junitxml`` file (either junit family): file (as the xml gives it, else
    from the classname: ``tests.test_x.TestC`` -> ``tests/test_x.py``, or from a module's name where it failed to
    collect), id (``file::name``, a class kept in the
    name), name, kind ("passed", "failed", "errors" or "skipped"), seconds and reason (a failure's first message
    line, at most 200 characters)."""
    root = ET.parse(path).getroot()
    out = []
    for case in root.iter("testcase"):
        name = case.get("name", "?")
        file = case.get("file") or ""
        cls = case.get("classname") or ""
        if file and cls:
            mod = file[:-3].replace("/", ".") if file.endswith(".py") else None
            if mod and cls.startswith(mod + "."):
                name = f"{cls[len(mod) + 1 :]}::{name}"
        elif cls and not file:
            parts = cls.split(".")
            i = next((k + 1 for k, part in enumerate(parts) if part.startswith("test_")), len(parts))
            file = "/".join(parts[:i]) + ".py"
            name = "::".join(parts[i:] + [name])
        elif not file and re.fullmatch(r"\w+(\.\w+)+", name):  # a module that failed to collect
            file = name.replace(".", "/") + ".py"
        where = file or cls
        bad = case.find("failure")
        kind = "failed" if bad is not None else None
        if bad is None:
            bad = case.find("error")
            kind = "errors" if bad is not None else None
        if kind is None:
            kind = "skipped" if case.find("skipped") is not None else "passed"
        text = (bad.get("message") or bad.text or "").strip() if bad is not None else ""
        out.append(
            {
                "file": file,
                "id": f"{where}::{name}" if where else name,
                "name": name,
                "kind": kind,
                "seconds": float(case.get("time") or 0.0),
                "reason": (text.splitlines() or [""])[0][:200],
            }
        )
    return out


def summarize(cases: list[dict]) -> dict:
    """Counts and failing ids of some test cases: passed, failed, errors, skipped, failures (their ids), reasons
    (id -> first line), slowest (the ``SLOWEST`` longest cases as ``[name, seconds]``, longest first: for a
    notebook, the cells to shorten when it runs past its limit) and seconds (their sum)."""
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    failures, reasons = [], {}
    for c in cases:
        counts[c["kind"]] += 1
        if c["kind"] in ("failed", "errors"):
            failures.append(c["id"])
            reasons[c["id"]] = c["reason"]
    ranked = sorted(cases, key=lambda c: -c["seconds"])[:SLOWEST]
    slowest = [[c["name"], round(c["seconds"], 1)] for c in ranked]
    return {
        **counts,
        "failures": failures,
        "reasons": reasons,
        "slowest": slowest,
        "seconds": round(sum(c["seconds"] for c in cases), 1),
    }


def parse_junit(path: Path) -> dict:
    """``summarize`` of every case of a pytest ``--junitxml`` file (``junit_cases``)."""
    return summarize(junit_cases(path))


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
    all_entries: bool = False
    jobs: int = 7
    workers: int = 14
    suite_jobs: int = 3
    as_gpus: tuple[str, ...] = EMULATED_GPUS
    tree: Tree | None = None  # the tree now; built on first use (``tree_of``)
    suites: list[tuple[str, tuple[str, ...]]] | None = None  # (key, steps); None: ``suite_list``
    threads: str | None = None  # OMP_NUM_THREADS of every child; None: ``threads_each`` of the part's own children
    out: Path | None = None  # where each merge also copies the stamp (stamp.json): a call cut short keeps it


def tree_of(ctx: Context) -> Tree:
    if ctx.tree is None:
        ctx.tree = Tree(ctx.root, suites=ctx.suites)
    return ctx.tree


def entry_state(entry: dict | None, deps_now: str) -> str:
    """ "proven" (passed, on files as they are now), "changed" (its files changed since), "failed", "never run",
    or "unhashed" (a schema-1 entry, with no ``deps``)."""
    if entry is None:
        return "never run"
    if "deps" not in entry:
        return "unhashed"
    if entry["deps"] != deps_now:
        return "changed"
    return "proven" if entry.get("ok") else "failed"


def estimate_s(part: str, entry: dict | None) -> float:
    """An entry's seconds as last recorded (a test file's: the sum of its tests'), else ``DEFAULT_ESTIMATE_S``."""
    if entry and isinstance(entry.get("seconds"), (int, float)) and entry["seconds"] > 0:
        return float(entry["seconds"])
    return DEFAULT_ESTIMATE_S[part]


def stamp_items(ctx: Context, part: str) -> dict:
    old = load_stamp(stamp_path(ctx.slug, ctx.root)) or {}
    return old.get("parts", {}).get(part, {}).get("items", {})


def to_run(ctx: Context, part: str) -> list[str]:
    """The entries ``part`` runs now, longest first (by recorded seconds): those ``--only`` picks that are not
    proven on the tree now (every one with ``--all-entries``)."""
    tree = tree_of(ctx)
    names = select(tree.items(part), ctx.only, part)
    if part == "emulated":
        names = [n for n in names if n.split(" ", 1)[0] in ctx.as_gpus]
    items = stamp_items(ctx, part)
    if not ctx.all_entries:
        names = [n for n in names if entry_state(items.get(n), tree.entry_hash(part, n)) != "proven"]
    return sorted(names, key=lambda n: -estimate_s(part, items.get(n)))


def _entry(ctx: Context, part: str, name: str, **kw) -> dict:
    return {"deps": tree_of(ctx).entry_hash(part, name), "date": now_iso(), **kw}


def _last_run(ctx: Context, t0: float, unreached: list[str], **kw) -> dict:
    tree = tree_of(ctx)
    return {
        "tree": files_hash(tree.root, tree.files, tree._blobs, modes=True),
        "date": now_iso(),
        "versions": ctx.versions,
        "only": ctx.only,
        "seconds": round(ctx.clock() - t0, 1),
        "unreached": unreached,
        "budget_s": ctx.budget_s,
        **kw,
    }


def _threads(ctx: Context, processes: int) -> str:
    return ctx.threads or os.environ.get("OMP_NUM_THREADS") or threads_each(processes)


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


# A pytest plugin each test run loads: it writes the ids of the tests collected (after deselection) to
# $GPU_CHECK_COLLECTED, so a file's entry counts only once every one of its tests reported.
COLLECT_PLUGIN = """
import json, os


def pytest_collection_finish(session):
    path = os.environ.get("GPU_CHECK_COLLECTED")
    if path:
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump([item.nodeid for item in session.items], f)
        os.replace(tmp, path)
"""


def part_tests(ctx: Context) -> dict:
    """The GPU test files that are not proven (``to_run``), longest first, in one pytest: xdist with
    ``ctx.workers`` (``--dist loadgroup``) when installed, first configs, CPU-same tests deselected. Each file gets
    its own entry once every test of it collected here reported (or one failed); the others are unreached."""
    t0 = ctx.clock()
    tree = tree_of(ctx)
    todo = to_run(ctx, "tests")
    deselected = tree.tests()[1]
    if not todo:
        return {"items": {}, "deselected": deselected, "last_run": _last_run(ctx, t0, [])}
    xml, collected = ctx.logs / "tests.xml", ctx.logs / "tests-collected.json"
    xml.unlink(missing_ok=True)
    collected.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", *todo, "-m", TEST_MARKERS, "-q", "-p", "no:cacheprovider"]
    cmd += ["-p", "gpu_check_collect", "--continue-on-collection-errors"]
    cmd += ["-o", "junit_family=xunit1", f"--junitxml={xml}", "--durations=25"]  # the slowest, in tests.log
    workers = 0
    if ctx.workers > 0 and importlib.util.find_spec("xdist") is not None:
        workers = ctx.workers
        cmd += ["-n", str(workers), "--dist", "loadgroup"]
    with tempfile.TemporaryDirectory(prefix="gpu-check-tests-") as tmp:
        (Path(tmp) / "gpu_check_collect.py").write_text(COLLECT_PLUGIN)
        path = os.pathsep.join(p for p in (tmp, os.environ.get("PYTHONPATH", "")) if p)
        env = base_env(
            GPULAB_AUTOTUNE="first", GPULAB_CACHE_DIR=str(Path(tmp) / "cache"), GPU_CHECK_COLLECTED=str(collected)
        )
        env["PYTHONPATH"] = path
        env["OMP_NUM_THREADS"] = _threads(ctx, workers or 1)
        ran = ctx.runner(cmd, env, ctx.budget_s, ctx.logs / "tests.log")
    cases = junit_cases(xml) if xml.exists() else []
    ids = json.loads(collected.read_text()) if collected.exists() else None
    want: dict[str, int] = {}
    for nodeid in ids or []:
        f = nodeid.split("::", 1)[0]
        want[f] = want.get(f, 0) + 1
    got: dict[str, list[dict]] = {}
    for c in cases:
        got.setdefault(c["file"], []).append(c)
    items, unreached = {}, []
    for f in todo:
        mine = got.get(f, [])
        s = summarize(mine)
        bad = s["failed"] + s["errors"] > 0
        complete = ids is not None and len({c["id"] for c in mine}) >= want.get(f, 0)
        if ids is None and not bad and not cases and ran.rc not in (0, 5, None):
            bad, s["failures"] = True, [f"no test ran (pytest exit {ran.rc}, no list of collected tests)"]
        if not (complete or bad):
            unreached.append(f)
            continue
        items[f] = _entry(
            ctx,
            "tests",
            f,
            ok=complete and not bad,
            seconds=s["seconds"],
            passed=s["passed"],
            failed=s["failed"],
            errors=s["errors"],
            skipped=s["skipped"],
            failures=s["failures"][:10],
            reasons={k: s["reasons"][k] for k in s["failures"][:10] if k in s["reasons"]},
            slowest=s["slowest"],
            stopped=ran.stopped and not complete,
        )
    if any(not e["ok"] for e in items.values()) or unreached:
        (ctx.logs / "tests.tail.txt").write_text(tail(ran.output, 200))
    shown = ["python"] + [a if not a.startswith("--junitxml") else "--junitxml=tests.xml" for a in cmd[1:]]
    shown = [a for a in shown if a not in todo] + [f"<{len(todo)} test files>"]
    bad_n = sum(not e["ok"] for e in items.values())
    print(f"tests: {len(items)} files reported ({bad_n} failing), {len(unreached)} unreached, {ran.seconds:.0f} s")
    last = _last_run(ctx, t0, unreached, command=" ".join(shown), workers=workers, rc=ran.rc, stopped=ran.stopped)
    return {"items": items, "deselected": deselected, "last_run": last}


def notebook_start_s(est: float | None) -> float:
    """The budget a notebook needs left to start: its limit, or less where its recorded seconds say it runs
    shorter (a quarter more, plus 10 s)."""
    return NOTEBOOK_LIMIT_S if est is None else min(NOTEBOOK_LIMIT_S, est * 1.25 + 10.0)


def part_notebooks(ctx: Context) -> dict:
    """Each notebook alone, one after another, as a learner's first run: full autotuning, every cache cold, timed.
    Longest first; a notebook starts only with ``notebook_start_s`` of budget left, and a shorter one after it may
    still fit. One stopped at the budget before its limit is unreached; past its limit, it fails."""
    t0 = ctx.clock()
    todo = to_run(ctx, "notebooks")
    old = stamp_items(ctx, "notebooks")
    items, unreached = {}, []
    for stem in todo:
        left = ctx.budget_s - (ctx.clock() - t0)
        est = old[stem]["seconds"] if stem in old and old[stem].get("seconds") else None
        if left < notebook_start_s(est):
            unreached.append(stem)
            continue
        with tempfile.TemporaryDirectory(prefix=f"gpu-check-{stem}-") as tmp:
            env = cold_env(Path(tmp), GPULAB_AUTOTUNE="full")
            ran, junit = _nbval(ctx, stem, env, left, f"nb-{stem}")
        over = ran.seconds > NOTEBOOK_LIMIT_S
        if ran.stopped and not over:
            unreached.append(stem)
            print(f"  {stem:28} stopped at the budget after {ran.seconds:.0f} s", flush=True)
            continue
        fails = _failures(ran, junit)
        if over:
            fails.append(f"over {NOTEBOOK_LIMIT_S:.0f} s")
        ok = ran.rc == 0 and not ran.stopped and not over and not fails
        slowest = junit["slowest"] if junit else []
        items[stem] = _entry(
            ctx,
            "notebooks",
            stem,
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
    once, longest first; each run with its own gpulab cache, Triton's cache shared by the part. A run that fails in
    every cell (its kernel never ran one) runs once more, alone, after the others: its entry keeps that first
    try."""
    t0 = ctx.clock()
    todo = to_run(ctx, "emulated")
    items, unreached, retry = {}, [], {}
    lock = threading.Lock()
    threads = _threads(ctx, ctx.jobs)
    with tempfile.TemporaryDirectory(prefix="gpu-check-emulated-") as tmp:

        def one(name: str) -> None:
            gpu, stem = name.split(" ", 1)
            left = ctx.budget_s - (ctx.clock() - t0)
            if left < MIN_START_S:
                with lock:
                    if name in retry:  # no time to try again: the first try stands
                        first = retry[name]
                        items[name] = _entry(
                            ctx, "emulated", name, ok=False, seconds=first["seconds"], failures=first["failures"]
                        )
                        items[name]["stopped"] = False
                    else:
                        unreached.append(name)
                return
            env = cold_env(Path(tmp) / name.replace(" ", "-"), GPULAB_AUTOTUNE="first", GPULAB_AS_GPU=gpu)
            env["TRITON_CACHE_DIR"] = str(Path(tmp) / "triton")
            env["OMP_NUM_THREADS"] = threads
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
                items[name] = _entry(
                    ctx, "emulated", name, ok=ok, seconds=round(ran.seconds, 1), failures=fails, stopped=ran.stopped
                )
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
    """Each benchmark suite's headline steps, ``ctx.suite_jobs`` at once, longest first, full autotuning, each with
    a fresh gpulab cache."""
    t0 = ctx.clock()
    tree = tree_of(ctx)
    tree.suite_keys()
    steps = dict(tree.suites)
    todo = to_run(ctx, "suites")
    items, unreached = {}, []
    lock = threading.Lock()
    threads = _threads(ctx, ctx.suite_jobs)

    def one(key: str) -> None:
        left = ctx.budget_s - (ctx.clock() - t0)
        if left < MIN_START_S:
            with lock:
                unreached.append(key)
            return
        args = suite_args(key, steps[key])
        with tempfile.TemporaryDirectory(prefix=f"gpu-check-{key}-") as tmp:
            env = base_env(GPULAB_AUTOTUNE="full", GPULAB_CACHE_DIR=tmp, OMP_NUM_THREADS=threads)
            ran = ctx.runner([sys.executable, "-m", "gpulab.bench", *args], env, left, ctx.logs / f"suite-{key}.log")
        if ran.stopped:
            with lock:
                unreached.append(key)
            return
        ok = ran.rc == 0
        last = [ln for ln in ran.output.splitlines() if ln.strip()][-1:] or [""]
        fails = [] if ok else [f"exit {ran.rc}: {last[0][:200]}"]
        entry = _entry(
            ctx,
            "suites",
            key,
            ok=ok,
            seconds=round(ran.seconds, 1),
            steps=" ".join(args[2:]) or "all",
            failures=fails,
            stopped=False,
        )
        with lock:
            items[key] = entry
        if not ok:
            (ctx.logs / f"suite-{key}.tail.txt").write_text(tail(ran.output))
        print(f"  {key:12} {ran.seconds:6.1f} s  {'ok' if ok else 'FAIL ' + fails[0]}", flush=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, ctx.suite_jobs)) as pool:
        list(pool.map(one, todo))
    unreached.sort(key=todo.index)
    return {"items": {k: items[k] for k in todo if k in items}, "last_run": _last_run(ctx, t0, unreached)}


PART_FUNCS = {"tests": part_tests, "notebooks": part_notebooks, "emulated": part_emulated, "suites": part_suites}


def run_part(part: str, ctx: Context) -> dict:
    """Run one part's unproven entries and merge them into the stamp (written atomically). Returns the new stamp."""
    tree = tree_of(ctx)
    ctx.logs.mkdir(parents=True, exist_ok=True)
    print(f"gpu-check {part} on {ctx.gpu}, budget {ctx.budget_s:.0f} s", flush=True)
    result = PART_FUNCS[part](ctx)
    path = stamp_path(ctx.slug, ctx.root)
    # parts may run at once (proof): each reads, merges and writes under one lock
    with open(Path(tempfile.gettempdir()) / f"{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            old = load_stamp(path)
        except GPUCheckError as e:  # the part's results are kept in a new stamp; the unreadable file is set aside
            aside = path.with_name(path.name + ".unreadable")
            os.replace(path, aside)
            print(f"gpu-check: {e}; moved to {aside.name}, a new stamp holds this part's results", flush=True)
            old = None
        new = merge(old, part, result, gpu=ctx.gpu, slug=ctx.slug, versions=ctx.versions, expected=tree.items(part))
        write_atomic(path, new)
        if ctx.out is not None:
            ctx.out.mkdir(parents=True, exist_ok=True)
            write_atomic(ctx.out / "stamp.json", new)
    return new


# ------------------------------------------------------------------------------------------------ plan and proof


def lpt_makespan(seconds: list[float], machines: int) -> float:
    """Wall seconds of ``seconds``-long jobs run ``machines`` at once, longest first, each to the first free one."""
    free = [0.0] * max(1, machines)
    for s in sorted(seconds, reverse=True):
        i = free.index(min(free))
        free[i] += s
    return max(free) if seconds else 0.0


def share_slots(work: dict[str, float], slots: int, caps: dict[str, int] = SLOT_CAPS) -> dict[str, int]:
    """Processes for each part of proof's phase 1, ``slots`` in all: one to each part with work, then one at a time
    to the part whose work a process is largest, up to its cap (water-filling: the phase ends with its slowest
    part)."""
    out = {p: 1 for p, w in work.items() if w > 0}
    for _ in range(max(0, slots - len(out))):
        room = [p for p in out if out[p] < caps.get(p, slots)]
        if not room:
            break
        p = max(room, key=lambda q: work[q] / out[q])
        out[p] += 1
    return out


def make_plan(
    stamp: dict | None,
    now: dict[str, dict[str, str]],
    *,
    only: list[str] | None = None,
    all_entries: bool = False,
    as_gpus: tuple[str, ...] = EMULATED_GPUS,
    cores: int = 16,
    budget_s: float = PROOF_BUDGET_S,
) -> dict:
    """What ``all`` (and ``proof``) would run on the tree ``now`` (``Tree.current``) given ``stamp``, with
    estimates from its recorded seconds: per part, ``run`` ([name, state, seconds] longest first) and ``seconds``
    (its work); ``slots`` (``share_slots`` over ``cores`` - 1), ``phase1_s`` (the tests, emulated runs and suites at
    once), ``phase2_s`` (the notebooks alone) and ``calls``, the seconds of each ``proof`` call of ``budget_s``."""
    parts = (stamp or {}).get("parts", {})
    out: dict = {"parts": {}}
    for part in PARTS:
        items = parts.get(part, {}).get("items", {})
        names = select(list(now[part]), only, part)
        if part == "emulated":
            names = [n for n in names if n.split(" ", 1)[0] in as_gpus]
        rows = []
        for n in names:
            state = entry_state(items.get(n), now[part][n])
            if state != "proven" or all_entries:
                rows.append([n, state, round(estimate_s(part, items.get(n)), 1)])
        rows.sort(key=lambda r: -r[2])
        slowest = [items[r[0]]["slowest"][0][1] for r in rows if r[0] in items and items[r[0]].get("slowest")]
        longest = max(slowest, default=0.0)
        out["parts"][part] = {"run": rows, "seconds": round(sum(r[2] for r in rows), 1), "longest_test_s": longest}
    p = out["parts"]
    slots = share_slots({k: p[k]["seconds"] for k in ("tests", "emulated", "suites")}, max(1, cores - 1))
    walls = {
        "tests": (TESTS_START_S + max(p["tests"]["seconds"] / slots["tests"], p["tests"]["longest_test_s"]))
        if "tests" in slots
        else 0.0,
        "emulated": lpt_makespan([r[2] for r in p["emulated"]["run"]], slots.get("emulated", 1)),
        "suites": lpt_makespan([r[2] for r in p["suites"]["run"]], slots.get("suites", 1)),
    }
    out.update(slots=slots, walls={k: round(v, 1) for k, v in walls.items()})
    out["phase1_s"] = round(max(walls.values()), 1)
    out["phase2_s"] = p["notebooks"]["seconds"]
    out["calls"] = _calls(out["phase1_s"], [r[2] for r in p["notebooks"]["run"]], budget_s)
    return out


def _calls(phase1_s: float, notebook_s: list[float], budget_s: float) -> list[float]:
    """The seconds of each ``proof`` call: phase 1 first (spilling into the next call past ``budget_s``), then the
    notebooks longest first, each where ``notebook_start_s`` fits, the rest in the next call."""
    calls, first, left = [], phase1_s, sorted(notebook_s, reverse=True)
    while first > 0 or left:
        used = min(first, budget_s)
        first -= used
        rest = []
        for s in left:
            if budget_s - used >= notebook_start_s(s):
                used += s
            else:
                rest.append(s)
        if used == 0:  # a notebook that fits no call: it runs alone and fails at its limit
            used, rest = min(rest[0], budget_s), rest[1:]
        calls.append(round(used, 1))
        left = rest
        if len(calls) > 20:
            break
    return calls


def _short(part: str, name: str) -> str:
    return name.removeprefix("tests/").removesuffix(".py") if part == "tests" else name


def _names(part: str, names: list[str], n: int = 4) -> str:
    shown = ", ".join(_short(part, x) for x in names[:n])
    return shown + (f", +{len(names) - n}" if len(names) > n else "")


def plan_lines(pl: dict, budget_s: float = PROOF_BUDGET_S) -> list[str]:
    """``make_plan``'s answer in a few lines: each part's entries to run and seconds, then the proof calls."""
    lines = []
    for part in PARTS:
        p = pl["parts"][part]
        rows = p["run"]
        if not rows:
            lines.append(f"{part:9} nothing to run")
            continue
        how = {
            "tests": f"~{pl['walls']['tests']:.0f} s at -n {pl['slots'].get('tests', 1)}",
            "emulated": f"~{pl['walls']['emulated']:.0f} s at {pl['slots'].get('emulated', 1)} at once",
            "suites": f"~{pl['walls']['suites']:.0f} s at {pl['slots'].get('suites', 1)} at once",
            "notebooks": "alone, one after another",
        }[part]
        unit = "worker-s" if part == "tests" else "s"
        lines.append(
            f"{part:9} {len(rows)} to run, {p['seconds']:.0f} {unit} ({how}): "
            + _names(part, [f"{_short(part, r[0])} {r[2]:.0f} s ({r[1]})" for r in rows], 3)
        )
    calls = pl["calls"]
    if not calls:
        lines.append("proof: nothing to run: every entry is proven on the tree now")
    else:
        lines.append(
            f"proof: phase 1 (tests, emulated, suites at once) ~{pl['phase1_s']:.0f} s, phase 2 (notebooks alone) "
            f"~{pl['phase2_s']:.0f} s: {len(calls)} call{'s' if len(calls) > 1 else ''} of `bash tools/gpu_run.sh proof` "
            f"(budget {budget_s:.0f} s each): " + ", ".join(f"~{c:.0f} s" for c in calls)
        )
    return lines


def run_proof(ctx: Context, concurrent_parts: bool = True) -> dict:
    """Phase 1: the tests, emulated and suites parts at once (their unproven entries), the cores shared out by their
    estimated work (``make_plan``); phase 2: the notebooks alone with the budget left. Returns the plan it
    followed. ``concurrent_parts`` False runs phase 1's parts one after another (tests with a fake clock)."""
    t0 = ctx.clock()
    tree = tree_of(ctx)
    now = tree.current()
    stamp = load_stamp(stamp_path(ctx.slug, ctx.root))
    pl = make_plan(
        stamp,
        now,
        only=ctx.only,
        all_entries=ctx.all_entries,
        as_gpus=ctx.as_gpus,
        cores=os.cpu_count() or 16,
        budget_s=ctx.budget_s,
    )
    print("\n".join(["gpu-check proof: the plan"] + plan_lines(pl, ctx.budget_s)), flush=True)
    slots = pl["slots"]
    first = [p for p in ("tests", "emulated", "suites") if pl["parts"][p]["run"]]
    if first:
        sub = dataclasses.replace(
            ctx,
            workers=slots.get("tests", 1) if ctx.workers else 0,
            jobs=slots.get("emulated", 1),
            suite_jobs=slots.get("suites", 1),
            threads=ctx.threads or threads_each(sum(slots.values())),
        )
        if concurrent_parts:
            with concurrent.futures.ThreadPoolExecutor(max_workers=len(first)) as pool:
                list(pool.map(lambda part: run_part(part, sub), first))
        else:
            for part in first:
                run_part(part, sub)
    left = ctx.budget_s - (ctx.clock() - t0)
    if pl["parts"]["notebooks"]["run"] and left >= min(notebook_start_s(r[2]) for r in pl["parts"]["notebooks"]["run"]):
        run_part("notebooks", dataclasses.replace(ctx, budget_s=left))
    return pl


# ------------------------------------------------------------------------------------------------ status


def status_lines(
    stamp: dict, now: dict[str, dict[str, str]], path: str = "", deselected: int | None = None
) -> list[str]:
    """The stamp against the tree ``now`` (``Tree.current``: part -> {entry: its hash now}) in at most 15 lines:
    each part's entries proven on the tree now and what to rerun (changed, failed, never run), the failing
    entries, then the verdict: ``verdict: proven on the tree now`` when every entry is proven (and the notebooks'
    total within its limit), else ``verdict: not proven on the tree now: rerun ...``."""
    v = stamp.get("versions", {})
    lines = [
        f"gpu-check stamp {path}: {stamp.get('gpu')}, updated {stamp.get('updated')}",
        "versions: " + ", ".join(f"{k} {v[k]}" for k in ("python", "torch", "triton", "cuda", "driver") if k in v),
    ]
    parts = stamp.get("parts", {})
    todo, failing, over = {}, [], None
    for part in PARTS:
        items = parts.get(part, {}).get("items", {})
        names = list(now[part])
        states = {n: entry_state(items.get(n), now[part][n]) for n in names}
        proven = [n for n in names if states[n] == "proven"]
        rerun = [n for n in names if states[n] != "proven"]
        todo[part] = rerun
        extra = ""
        if part == "tests" and deselected is not None:
            extra = f" ({deselected} CPU-same or deselected files are no entries)"
        if part == "notebooks" and names and all(n in items for n in names):
            total = sum(items[n]["seconds"] for n in names)
            slow = max(names, key=lambda n: items[n]["seconds"])
            extra = f", total {total:.0f}/{COLLECTION_LIMIT_S:.0f} s, slowest {slow} {items[slow]['seconds']:.0f} s"
            if total > COLLECTION_LIMIT_S:
                over = total
        groups = []
        for state in ("changed", "failed", "never run", "unhashed"):
            these = [n for n in rerun if states[n] == state]
            if these:
                groups.append(f"{state} {len(these)} ({_names(part, these, 3)})")
        lines.append(
            f"{part:9} {len(proven)}/{len(names)} proven{extra}" + (f"; rerun {'; '.join(groups)}" if groups else "")
        )
        for n in names:
            e = items.get(n)
            if e is not None and not e.get("ok"):
                failing.append(f"{_short(part, n)} ({', '.join(str(x) for x in e.get('failures', [])[:2])})")
    if failing:
        lines.append(
            "  failing: " + "; ".join(failing[:4]) + (f"; +{len(failing) - 4} more" if len(failing) > 4 else "")
        )
    if over is not None:
        lines.append(
            f"  notebooks take {over:.0f} s in all, over the collection's {COLLECTION_LIMIT_S:.0f} s: shorten the slowest"
        )
    if not any(todo.values()) and over is None:
        lines.append("verdict: proven on the tree now")
    else:
        what = [
            f"{p} {len(todo[p])}" + (f" ({_names(p, todo[p], 2)})" if len(todo[p]) <= 2 else "")
            for p in PARTS
            if todo[p]
        ]
        if over is not None:
            what.append("the notebooks' total")
        lines.append(
            "verdict: not proven on the tree now: rerun " + ", ".join(what) + " (python tools/gpu_check.py plan)"
        )
    return [ln if len(ln) <= 200 else ln[:197] + "..." for ln in lines[:15]]


def stamp_warnings(stamp: dict, now: dict[str, dict[str, str]]) -> list[str]:
    """Why a committed stamp does not prove the tree ``now`` (``Tree.current``): per part, its entries that are
    not proven there, by state."""
    out = []
    for part in PARTS:
        items = stamp.get("parts", {}).get(part, {}).get("items", {})
        counts: dict[str, int] = {}
        for n, h in now[part].items():
            s = entry_state(items.get(n), h)
            if s != "proven":
                counts[s] = counts.get(s, 0) + 1
        if counts:
            out.append(
                f"part {part}: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + " of its entries not proven"
            )
    return out


# ------------------------------------------------------------------------------------------------ the command


def gpu_info() -> tuple[str, str, dict]:
    """(device name, slug, versions) of this machine's GPU; GPUCheckError without one."""
    import torch

    if not torch.cuda.is_available():
        raise GPUCheckError(NO_GPU)
    import triton

    from gpulab.core import hardware
    from gpulab.measure.device import _driver_version, _slug

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
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"{name} must be a finite number, got {text!r}")
        if v < 0 or (v == 0 and not zero_ok):
            raise argparse.ArgumentTypeError(f"{name} must be {'>= 0' if zero_ok else '> 0'}, got {text!r}")
        return v

    return parse


def _stamps(gpu: str | None, root: Path = ROOT) -> list[Path]:
    if gpu:
        p = stamp_path(gpu, root)
        if not p.exists():
            raise GPUCheckError(f"--gpu {gpu}: no {p.relative_to(root)}")
        return [p]
    return sorted(root.glob(STAMP_PATTERN))


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    ap = argparse.ArgumentParser(
        prog="python tools/gpu_check.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("part", choices=(*PARTS, "all", "proof", "status", "plan"))
    ap.add_argument("--only", default="", help="comma-separated lessons, e.g. 08,09 (notebooks, emulated, suites)")
    ap.add_argument("--all-entries", action="store_true", help="run proven entries too")
    ap.add_argument("--rest", action="store_true", help=argparse.SUPPRESS)  # the default now: kept for old lines
    ap.add_argument("--budget", type=_positive("--budget"), default=None, help="seconds per part (proof: in all)")
    ap.add_argument("--out", default=os.environ.get("OUT", ""), help="logs and stamp.json here (default $OUT)")
    ap.add_argument("--jobs", type=_positive("--jobs", int), default=7, help="emulated notebook runs at once")
    ap.add_argument("--workers", type=_positive("--workers", int, True), default=14, help="pytest -n (0: none)")
    ap.add_argument("--suite-jobs", type=_positive("--suite-jobs", int), default=3, help="suites at once")
    ap.add_argument("--as", dest="as_gpus", default=",".join(EMULATED_GPUS), help="emulated GPUs, e.g. T4,L4")
    ap.add_argument("--gpu", default="", help="status, plan: the stamp gpu-check-GPU.json (default: every stamp)")
    ap.add_argument("--json", action="store_true", help="plan: print the plan as JSON")
    args = ap.parse_args(argv)
    only = [t.strip() for t in args.only.split(",") if t.strip()] or None
    as_gpus = tuple(g.strip() for g in args.as_gpus.split(",") if g.strip())
    if set(as_gpus) - set(EMULATED_GPUS) or not as_gpus:
        ap.error(f"--as must name some of {', '.join(EMULATED_GPUS)}, got {args.as_gpus!r}")
    budget = args.budget or (PROOF_BUDGET_S if args.part in ("proof", "plan") else DEFAULT_BUDGET_S)
    catch_sigint()  # before any thread starts a child
    try:
        check_only(only, root)
        if args.part == "status":
            return _status(args.gpu or None, root)
        if args.part == "plan":
            return _plan(args.gpu or None, root, only, args.all_entries, as_gpus, budget, args.json)
        gpu, slug, versions = gpu_info()
        out = Path(args.out) if args.out else None
        logs = (out / "gpu-check-logs") if out else root / "build" / "gpu-check"
        ctx = Context(
            root=root,
            gpu=gpu,
            slug=slug,
            versions=versions,
            logs=logs,
            budget_s=budget,
            only=only,
            all_entries=args.all_entries,
            jobs=args.jobs,
            workers=args.workers,
            suite_jobs=args.suite_jobs,
            as_gpus=as_gpus,
            out=out,
        )
        if args.part == "proof":
            logs.mkdir(parents=True, exist_ok=True)
            run_proof(ctx)
        else:
            for part in PARTS if args.part == "all" else (args.part,):
                ctx.tree = None  # the tree as it is when the part starts
                run_part(part, ctx)
        tree = Tree(root)
        _status(slug, root, tree)
        stamp = load_stamp(stamp_path(slug, root)) or {}
        return 0 if not stamp_warnings(stamp, tree.current()) else 1
    except GPUCheckError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _status(gpu: str | None = None, root: Path = ROOT, tree: Tree | None = None) -> int:
    stamps = _stamps(gpu, root)
    if not stamps:
        print(f"no gpu-check stamp yet ({STAMP_PATTERN}): run make gpu-check on a GPU machine")
        return 0
    tree = tree or Tree(root)
    now = tree.current()
    for p in stamps:
        lines = status_lines(load_stamp(p), now, str(p.relative_to(root)), deselected=len(tree.tests()[1]))
        print("\n".join(lines))
    return 0


def _plan(gpu, root, only, all_entries, as_gpus, budget, as_json) -> int:
    stamps = _stamps(gpu, root)
    if len(stamps) > 1:
        raise GPUCheckError(f"plan: {len(stamps)} stamps; name one with --gpu ({', '.join(p.name for p in stamps)})")
    stamp = load_stamp(stamps[0]) if stamps else None
    pl = make_plan(stamp, Tree(root).current(), only=only, all_entries=all_entries, as_gpus=as_gpus, budget_s=budget)
    if as_json:
        print(json.dumps(pl, indent=1))
        return 0
    where = stamps[0].relative_to(root) if stamps else "no stamp"
    print(f"plan on the tree now (estimates from {where}'s recorded seconds):")
    print("\n".join(plan_lines(pl, budget)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
