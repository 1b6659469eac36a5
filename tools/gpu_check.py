"""``make gpu-check``: prove the collection green on the GPU it runs on, entry by entry, rerunning only what a change
touched. docs/gpu-check.md says how and why it is sound; run from the project root, with gpulab, torch, Triton,
pytest, nbval and pytest-xdist importable by the Python that runs this file (every child is ``sys.executable``):

    python tools/gpu_check.py tests       # the GPU test files in one pytest, -n 14, first configs
    python tools/gpu_check.py notebooks   # each notebook alone under nbval, full autotuning, cold caches, timed
    python tools/gpu_check.py emulated    # each notebook as a T4, an L4 and an A100 would, first configs
    python tools/gpu_check.py suites      # each benchmark suite's headline steps (python -m gpulab.bench)
    python tools/gpu_check.py all         # the four parts in order, then status
    python tools/gpu_check.py proof       # tests, emulated and suites at once, then the notebooks alone, in --budget
    python tools/gpu_check.py status      # entry by entry, proven or not on the tree now (no GPU needed)
    python tools/gpu_check.py plan        # what `all` or `proof` would run now, and its seconds (no GPU needed)

What is gpulab's own lives here: the entries (a test file, a notebook, an emulated run ``T4 04_fusion``, a suite)
and the hash of the files each depends on (``tools/deps.py``), the stamp and its verdict, the plan. pytest runs
everything: the GPU test files, and the other parts as the cases of ``tools/gpu_cases.py``, one case an entry. Each
pytest loads this file as a plugin (``-p gpu_check``), which writes pytest's own reports as they come (a run
stopped at the budget keeps what finished) and the ids it collected (a test file counts once each test reported).

The stamp ``gpulab/data/gpu-check-<gpu>.json`` (schema 2; a schema-1 stamp is read, its entries unhashed) gathers
every part's entries; each part merges its own:

    schema: 2; gpu: the CUDA device name; slug; updated: UTC ISO time of the last write; deps_rule; versions
    parts.<tests|notebooks|emulated|suites>: {ok, items: {name: entry}, missing: [names], last_run: {tree, date,
        versions, only, seconds, unreached: [names], budget_s}} plus, for notebooks, limit_s, total_seconds,
        total_limit_s, and for tests, deselected: {file: why} and last_run.command
    an entry: {deps, date, ok, seconds, failures: [cells, test ids or reasons], stopped} (+ over_limit and
        slowest_cells: [[cell, s]] for notebooks; steps for suites; first_try for an emulated run tried twice;
        passed, failed, errors, skipped, reasons: {test id: first line}, slowest: [[test, s]] for test files,
        whose seconds are the sum of their tests')

An entry is *proven on the tree now* when it passed and its ``deps`` equal the hash of its files now.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import dataclasses
import datetime as _dt
import fcntl
import hashlib
import importlib.util
import json
import math
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
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
PROOF_BUDGET_S = 525.0  # proof: what gpu_run.sh gives it of a 10-minute call (wheels, status, packing)
CASE_GRACE_S = 15.0  # a pytest of cases ends this long after the budget at most (each case stops its child by then)
SLOWEST = 3  # the longest test cases (notebook cells) an entry names
MIN_START_S = 30.0  # an untimed case (a suite, an emulated notebook) starts only with this much budget left
TEST_MARKERS = "not browser and not slow and not cpu_same"
DESELECTED_MARKS = ("browser", "slow")  # a test file whose pytestmark holds one runs no test under TEST_MARKERS
ALWAYS_IGNORED = ("__pycache__/", ".ipynb_checkpoints/", "*.pyc")
DEPS_RULE = (
    "sha256 over each file's path and the sha256 of its bytes, of the files an entry depends on (tools/deps.py: the "
    "notebook, suite or test file, what it imports through gpulab and tests transitively, the gpulab/data files it "
    "reads, conftest and fixtures; gpulab/data/gpu-check-*.json never); files: git ls-files --cached --others "
    "--exclude-standard, or without git every file the root .gitignore leaves in"
)
NO_GPU = "make gpu-check needs an NVIDIA GPU: torch.cuda.is_available() is False"
WHEELS = "bash ../shared/tools/gpu-wheels.sh pytest-xdist pytest-timeout pathspec (tools/gpu_run.sh installs .whl/)"
MISSING = "{package} is not installed, and {why} (pip install {package}; on a machine without network: " + WHEELS + ")"
TEST_LIMIT_S = 300.0  # a GPU test running longer is hung or must be split: pytest-timeout stops it, naming its stack
# What an entry with no recorded seconds is estimated to take: a test file (worker-seconds: the H200's last whole
# run, 297 s at -n 12 over about 85 files, is 40 a file), a notebook (its limit), an emulated run, a suite.
DEFAULT_ESTIMATE_S = {"tests": 40.0, "notebooks": NOTEBOOK_LIMIT_S, "emulated": 60.0, "suites": 60.0}
TESTS_START_S = 25.0  # pytest-xdist's start and collection, before the first test runs
# proof's phase 1 shares the cores among the three parts (one process a slot, one core left for the rest); the
# GPU bounds the emulated runs (7 notebooks' kernels at once fitted an H100) and the suites (3 at once).
SLOT_CAPS = {"tests": 14, "emulated": 7, "suites": 3}
# Notebooks whose checks compare two timings taken at different moments (01: each point against the roof measured
# before it) run one at a time after the others: beside other jobs a point can beat a roof measured while the GPU
# was busier (on the H200, 01's cell 12 failed as T4, L4 and A100 beside the tests and passed alone).
ALONE = ("01_roofline",)


class GPUCheckError(RuntimeError):
    """A part cannot run here (no GPU, a missing package, a bad argument or stamp); the message says why."""


# ------------------------------------------------------------------------------------------------ files and hashes


def _git_files(root: Path) -> list[str] | None:
    """The files git would add under the hashed folders, or None where git does not work here."""
    cmd = ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--"]
    try:
        top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True, timeout=60)
        r = subprocess.run([*cmd, *HASHED_DIRS], capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0 or top.returncode != 0 or Path(top.stdout.decode().strip()).resolve() != root.resolve():
        return None
    return sorted({p for p in r.stdout.decode("utf-8", "surrogateescape").split("\0") if p})


def _walk_files(root: Path) -> list[str]:
    """Every file under the hashed folders that the root .gitignore (read by pathspec, as git reads it) and
    ``ALWAYS_IGNORED`` leave in."""
    need("pathspec", "pathspec", f"{root} is no git checkout: pathspec reads its .gitignore as git does")
    import pathspec

    gi = root / ".gitignore"
    spec = pathspec.GitIgnoreSpec.from_lines([*ALWAYS_IGNORED, *(gi.read_text().splitlines() if gi.exists() else [])])
    out = []
    for top in HASHED_DIRS:
        for dirpath, dirnames, filenames in os.walk(root / top):
            base = Path(dirpath).relative_to(root).as_posix()
            dirnames[:] = [d for d in dirnames if not spec.match_file(f"{base}/{d}/")]
            out += [f"{base}/{f}" for f in filenames if not spec.match_file(f"{base}/{f}")]
    return sorted(out)


def _ignored(rel: str) -> bool:
    """A stamp, or a file ``ALWAYS_IGNORED`` names (whichever way the files were listed)."""
    parts = rel.split("/")
    return (
        re.fullmatch(r"gpulab/data/gpu-check-[^/]*\.json", rel) is not None
        or rel.endswith(".pyc")
        or any(p in ("__pycache__", ".ipynb_checkpoints") for p in parts[:-1])
    )


def hashed_files(root: Path = ROOT, use_git: bool | None = None) -> tuple[list[str], str]:
    """The files hashes cover (relative posix paths, the stamps and ``ALWAYS_IGNORED`` left out) and how they were
    listed: "git" (``git ls-files``) or "walk" (without git: the GPU machine's copy). ``use_git``: None tries git
    and falls back to the walk; True requires git; False walks."""
    files = _git_files(root) if use_git in (None, True) else None
    how = "git"
    if files is None:
        if use_git:
            raise GPUCheckError(f"use_git=True, but git does not work in {root}")
        files, how = _walk_files(root), "walk"
    return [f for f in files if not _ignored(f) and os.path.isfile(root / f)], how


def files_hash(root: Path, files, digests: dict | None = None) -> str:
    """The hex sha256 of ``files`` (relative posix paths) as on disk: over each file's path and the sha256 of its
    bytes, in path order. No mode counts (a copy of the tree may lose the executable bit). ``digests``: each file's
    digest, a cache shared between calls."""
    digests = {} if digests is None else digests
    h = hashlib.sha256()
    for rel in sorted(files):
        if rel not in digests:
            digests[rel] = hashlib.sha256((root / rel).read_bytes()).hexdigest()
        h.update(f"{rel}\0{digests[rel]}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def tree_hash(root: Path = ROOT, use_git: bool | None = None) -> str:
    """``files_hash`` of every file hashes cover: the whole tree a run saw, recorded beside its entries."""
    return files_hash(root, hashed_files(root, use_git)[0])


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
        self.digests: dict = {}
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
            self._hashes[key] = files_hash(self.root, self.files_of(part, name), self.digests)
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


# ------------------------------------------------------------------------------------------------ pytest's reports

# The plugin half of this file: every pytest that a part starts loads it (``-p gpu_check``), and so does each
# notebook's nbval run; it writes only where the variables name a file.
_config = None


def pytest_configure(config):
    global _config
    _config = config


def pytest_runtest_logreport(report):
    """Each report as pytest serializes it (``pytest_report_to_serializable``, as pytest-xdist and pytest-reportlog
    do), one JSON line as it comes, to $GPU_CHECK_REPORTS (in pytest-xdist's controller only): a run stopped at the
    budget keeps every report it made."""
    path = os.environ.get("GPU_CHECK_REPORTS")
    if path and _config is not None and not hasattr(_config, "workerinput"):
        data = _config.hook.pytest_report_to_serializable(config=_config, report=report)
        with open(path, "a") as f:
            f.write(json.dumps(data, default=str) + "\n")


def pytest_collectreport(report):
    """A file that fails to collect: its report too (one line a worker under pytest-xdist)."""
    if report.failed:
        pytest_runtest_logreport(report)


def pytest_collection_finish(session):
    """The ids of the tests collected, after deselection, to $GPU_CHECK_COLLECTED (each xdist worker collects
    them all): a test file's entry counts once each of them reported."""
    path = os.environ.get("GPU_CHECK_COLLECTED")
    if path:
        Path(f"{path}.{os.getpid()}").write_text(json.dumps([item.nodeid for item in session.items]))
        os.replace(f"{path}.{os.getpid()}", path)


def _first_line(longrepr) -> str:
    """The message of a serialized report's ``longrepr``, at most 200 characters: a failure's crash line, a skip's
    reason, else the first line pytest marks ``E`` (a collection error's exception), else the first line."""
    if isinstance(longrepr, dict):
        text = (longrepr.get("reprcrash") or {}).get("message") or ""
    elif isinstance(longrepr, list | tuple):
        text = str(longrepr[-1]) if longrepr else ""
    else:
        text = str(longrepr or "")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    marked = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
    return (marked or lines or [""])[0][:200]


RANK = {"passed": 0, "skipped": 1, "failed": 2, "errors": 2}


def read_reports(path: Path) -> list[dict]:
    """The tests of a $GPU_CHECK_REPORTS file, in the order they first reported, each as {id, file, name, kind
    ("passed", "failed", "errors" or "skipped"), seconds (setup, call and teardown), reason (``_first_line`` of the
    first failure, else of the skip), properties ({name: value} that it recorded)}. A failure outside the call is an
    error; a file that failed to collect is one case of kind "errors"."""
    cases: dict[str, dict] = {}
    for line in path.read_text(errors="replace").splitlines() if path.exists() else []:
        try:
            r = json.loads(line)
        except ValueError:  # a line cut short by the stop
            continue
        nodeid = r.get("nodeid") or ""
        file, _, name = nodeid.partition("::")
        c = cases.setdefault(nodeid, dict(id=nodeid, file=file, name=name or nodeid, kind="passed", seconds=0.0))
        c.setdefault("reason", "")
        c["seconds"] += float(r.get("duration") or 0.0)
        c["properties"] = {**c.get("properties", {}), **dict(r.get("user_properties") or [])}
        outcome = r.get("outcome")
        bad = r.get("$report_type") == "CollectReport" or r.get("when") != "call"
        kind = "errors" if outcome == "failed" and bad else outcome
        if RANK.get(kind, 0) > RANK[c["kind"]]:
            c["kind"], c["reason"] = kind, _first_line(r.get("longrepr"))
    return list(cases.values())


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


# ------------------------------------------------------------------------------------------------ running


@dataclass
class Ran:
    """What one child process did: exit status (None when stopped), wall seconds, its output, stopped at its
    time limit."""

    rc: int | None
    seconds: float
    output: str
    stopped: bool = False


def run_child(cmd: list[str], env: dict, timeout_s: float, log: Path, cwd: Path = ROOT) -> Ran:
    """Run ``cmd`` from ``cwd`` in a session of its own, its output to ``log``; at ``timeout_s`` the session is
    killed, the child's children with it (what it reported is already on disk, ``pytest_runtest_logreport``)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with open(log, "w") as out:
        out.write("+ " + " ".join(cmd) + "\n")
        out.flush()
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=max(timeout_s, 1.0))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            rc = None
    return Ran(rc, time.monotonic() - t0, log.read_text(errors="replace"), rc is None)


def tail(text: str, lines: int = 120) -> str:
    return "\n".join(text.splitlines()[-lines:]) + "\n"


def threads_each(processes: int) -> str:
    """OMP_NUM_THREADS for one of ``processes`` running at once: this machine's cores shared out (at least 1).
    torch's CPU ops otherwise start one thread per core in every process, and 12 pytest workers on 16 cores
    ran float64 references 10 times slower than one process does."""
    return str(max(1, (os.cpu_count() or 1) // max(1, processes)))


def base_env(**set_vars: str) -> dict:
    """This process's environment without the GPULAB_* switches a part sets itself and this tool's own
    GPU_CHECK_* files, plus ``set_vars``."""
    drop = ("GPULAB_MODE", "GPULAB_AS_GPU", "GPULAB_AUTOTUNE")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("GPU_CHECK_")}
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


def have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def need(module: str, package: str, why: str) -> None:
    """GPUCheckError naming ``package``, ``why`` it is needed and how to get it, where ``module`` is missing."""
    if not have(module):
        raise GPUCheckError(MISSING.format(package=package, why=why))


def xdist_args(n: int, opt: str) -> list[str]:
    """pytest's options to run ``n`` at once (pytest-xdist, ``--dist loadgroup``), none for one; GPUCheckError
    naming the package where more than one is asked for and pytest-xdist is not installed (never one at a time
    without a word)."""
    if n <= 1:
        return []
    one = "or run one at a time: --workers 0 --jobs 1 --suite-jobs 1"
    need("xdist", "pytest-xdist", f"{opt} {n} runs {n} at once through it; {one}")
    return ["-n", str(n), "--dist", "loadgroup"]


TIMEOUT_WHY = f"the tests part stops a test hung past {TEST_LIMIT_S:.0f} s through it"


@dataclass
class Context:
    """Everything a part needs from outside: the tree and GPU it runs on, where its logs go, how it runs a pytest
    (``runner``: ``run_child``'s signature; tests inject fakes), the clock (UNIX seconds: cases in other processes
    read the deadline), the budget and the options."""

    root: Path = ROOT
    gpu: str = ""
    slug: str = ""
    versions: dict = field(default_factory=dict)
    logs: Path = ROOT / "build" / "gpu-check"
    runner: Callable[..., Ran] = run_child
    clock: Callable[[], float] = time.time
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
        "tree": files_hash(tree.root, tree.files, tree.digests),
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


def run_pytest(ctx: Context, tag: str, args: list[str], env: dict, timeout_s: float) -> tuple[Ran, list, list | None]:
    """``python -m pytest ARGS`` from the tree's root with this file as a plugin, its log ``<tag>.log``, stopped at
    ``timeout_s``. Returns the run, its tests (``read_reports``) and the ids it collected (None where it wrote none)."""
    reports, collected = ctx.logs / f"{tag}.reports.jsonl", ctx.logs / f"{tag}.collected.json"
    reports.unlink(missing_ok=True)
    collected.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-p", "gpu_check", "-p", "no:cacheprovider", "-q", *args]
    here = str(Path(__file__).resolve().parent)
    env = {**env, "GPU_CHECK_REPORTS": str(reports), "GPU_CHECK_COLLECTED": str(collected)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
    ran = ctx.runner(cmd, env, timeout_s, ctx.logs / f"{tag}.log", cwd=ctx.root)
    ids = json.loads(collected.read_text()) if collected.exists() else None
    return ran, read_reports(reports), ids


def part_tests(ctx: Context) -> dict:
    """The GPU test files that are not proven (``to_run``), longest first, in one pytest: ``ctx.workers`` at once
    (pytest-xdist, ``--dist loadgroup``), first configs, CPU-same tests deselected, stopped at the budget. Each
    file gets its own entry once every test of it collected here reported (or one failed); the others are
    unreached."""
    t0 = ctx.clock()
    tree = tree_of(ctx)
    todo = to_run(ctx, "tests")
    deselected = tree.tests()[1]
    if not todo:
        return {"items": {}, "deselected": deselected, "last_run": _last_run(ctx, t0, [])}
    parallel = xdist_args(ctx.workers, "--workers")
    need("pytest_timeout", "pytest-timeout", TIMEOUT_WHY)
    workers = ctx.workers if parallel else 0
    args = [*todo, "-m", TEST_MARKERS, "--continue-on-collection-errors", "--durations=25", *parallel]
    args += ["--timeout", f"{TEST_LIMIT_S:.0f}", "--timeout-method", "thread"]  # a hang in CUDA too
    with tempfile.TemporaryDirectory(prefix="gpu-check-tests-") as tmp:
        env = base_env(GPULAB_AUTOTUNE="first", GPULAB_CACHE_DIR=str(Path(tmp) / "cache"))
        env["OMP_NUM_THREADS"] = _threads(ctx, workers or 1)
        ran, cases, ids = run_pytest(ctx, "tests", args, env, ctx.budget_s - (ctx.clock() - t0))
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
        complete = ids is not None and len(mine) >= want.get(f, 0)
        if ids is None and not bad and not cases and ran.rc not in (0, 5, None):
            bad, s["failures"] = True, [f"no test ran (pytest exit {ran.rc}, no list of collected tests)"]
        if not (complete or bad):
            unreached.append(f)
            continue
        counts = {k: s[k] for k in ("seconds", "passed", "failed", "errors", "skipped", "slowest")}
        failures = s["failures"][:10]
        reasons = {k: s["reasons"][k] for k in failures if k in s["reasons"]}
        counts.update(failures=failures, reasons=reasons, stopped=ran.stopped and not complete)
        items[f] = _entry(ctx, "tests", f, ok=complete and not bad, **counts)
    if any(not e["ok"] for e in items.values()) or unreached:
        (ctx.logs / "tests.tail.txt").write_text(tail(ran.output, 200))
    shown = ["python -m pytest -p gpu_check", *[a for a in args if a not in todo], f"<{len(todo)} test files>"]
    bad_n = sum(not e["ok"] for e in items.values())
    print(f"tests: {len(items)} files reported ({bad_n} failing), {len(unreached)} unreached, {ran.seconds:.0f} s")
    last = _last_run(ctx, t0, unreached, command=" ".join(shown), workers=workers, rc=ran.rc, stopped=ran.stopped)
    return {"items": items, "deselected": deselected, "last_run": last}


def notebook_start_s(est: float | None) -> float:
    """The budget a notebook needs left to start: its limit, or less where its recorded seconds say it runs
    shorter (a quarter more, plus 10 s)."""
    return NOTEBOOK_LIMIT_S if est is None else min(NOTEBOOK_LIMIT_S, est * 1.25 + 10.0)


def suite_args(key: str, steps: tuple[str, ...]) -> list[str]:
    """``python -m gpulab.bench`` arguments for a suite's headline: its headline ``steps`` (``suite_list``), or
    the whole suite for ()."""
    return ["--only", key] + (["--steps", ",".join(steps)] if steps else [])


def split_alone(names: list[str]) -> tuple[list[str], list[str]]:
    """``names`` ("T4 01_roofline", ...) split into those that may run at once and those of ``ALONE``, order kept."""
    alone = [n for n in names if n.split(" ", 1)[-1] in ALONE]
    return [n for n in names if n not in alone], alone


def case_of(ctx: Context, part: str, name: str, old: dict, tmp: Path, threads: str) -> dict:
    """How entry ``name`` of ``part`` runs as a case of tools/gpu_cases.py (``gpu_cases.run_case``): the command,
    the environment it sets over a fresh one (``cold``: "all" caches fresh, or "gpulab"'s alone), the budget it
    needs left to start, its log. ``old``: the part's entries in the stamp (a notebook's recorded seconds)."""
    stem = name.split(" ", 1)[-1]
    nbval = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "gpu_check", "--nbval-lax"]
    nbval.append(f"notebooks/{stem}.ipynb")
    case = {"part": part, "name": name, "start_s": MIN_START_S, "cold": "all", "cmd": nbval}
    if part == "notebooks":
        est = old.get(name, {}).get("seconds") or None
        case.update(start_s=notebook_start_s(est), env={"GPULAB_AUTOTUNE": "full"}, log=f"nb-{stem}.log")
    elif part == "emulated":
        gpu = name.split(" ", 1)[0]
        env = {"GPULAB_AUTOTUNE": "first", "GPULAB_AS_GPU": gpu, "OMP_NUM_THREADS": threads}
        env["TRITON_CACHE_DIR"] = str(tmp / "triton")  # shared by the part's runs
        case.update(env=env, log=f"as-{gpu}-{stem}.log")
    else:
        tree_of(ctx).suite_keys()
        args = suite_args(name, dict(tree_of(ctx).suites)[name])
        env = {"GPULAB_AUTOTUNE": "full", "OMP_NUM_THREADS": threads}
        case.update(cold="gpulab", cmd=[sys.executable, "-m", "gpulab.bench", *args], env=env, log=f"suite-{name}.log")
        case["steps"] = " ".join(args[2:]) or "all"
    case["log"] = str(ctx.logs / case["log"])
    return case


CASES_FILE = Path(__file__).resolve().with_name("gpu_cases.py")


def run_cases(ctx: Context, part: str, names: list[str], jobs: int, t0: float, tmp: Path, tag: str) -> dict:
    """Entries ``names`` of ``part``, in this order, as the cases of tools/gpu_cases.py in one pytest, ``jobs`` at
    once, within the budget from ``t0``: {name: what its case recorded} for every case that reported."""
    old = stamp_items(ctx, part)
    threads = _threads(ctx, jobs)
    spec = {"deadline": t0 + ctx.budget_s, "root": str(ctx.root)}
    spec["cases"] = [case_of(ctx, part, n, old, tmp, threads) for n in names]
    if spec["deadline"] - ctx.clock() < min(c["start_s"] for c in spec["cases"]):
        return {}  # no case could start: each is unreached
    path = ctx.logs / f"{tag}.cases.json"
    path.write_text(json.dumps(spec, indent=1))
    args = [str(CASES_FILE), *xdist_args(jobs, {"emulated": "--jobs", "suites": "--suite-jobs"}.get(part, part))]
    env = base_env(GPU_CHECK_CASES=str(path), OMP_NUM_THREADS=threads)
    _, cases, _ = run_pytest(ctx, tag, args, env, spec["deadline"] - ctx.clock() + CASE_GRACE_S)
    got = {}
    for c in cases:
        if "entry" in c["properties"]:
            entry = json.loads(c["properties"]["entry"])
            got[entry.pop("name")] = entry
        elif c["kind"] in ("failed", "errors"):  # the case itself broke: its entry fails, naming why
            name = re.sub(r"^test_entry\[(.*)\]$", r"\1", c["name"])
            got[name] = {"ok": False, "seconds": round(c["seconds"], 1), "failures": [c["reason"]], "stopped": False}
    return got


def part_cases(ctx: Context, part: str) -> dict:
    """The notebooks, emulated runs or suites that are not proven (``to_run``), longest first, as the cases of
    tools/gpu_cases.py: the notebooks one after another (they are timed), the suites ``ctx.suite_jobs`` at once,
    the emulated runs ``ctx.jobs`` at once and then, one at a time, those of ``ALONE`` and those whose every cell
    failed (their kernel never ran one), tried once more (the entry keeps the first try; without time for it, the
    first try stands)."""
    t0 = ctx.clock()
    todo = to_run(ctx, part)
    jobs = {"notebooks": 1, "emulated": ctx.jobs, "suites": ctx.suite_jobs}[part]
    together, alone = split_alone(todo) if part == "emulated" else (todo, [])
    got: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix=f"gpu-check-{part}-") as tmp:
        if together:
            got = run_cases(ctx, part, together, jobs, t0, Path(tmp), part)
        retry = [n for n in together if got.get(n, {}).get("every_cell_failed")]
        if alone or retry:
            again = run_cases(ctx, part, alone + retry, 1, t0, Path(tmp), f"{part}-alone")
            for n in retry:
                if "unreached" in again.get(n, {"unreached": ""}):
                    again.pop(n, None)  # no time to try again: the first try stands
                else:
                    again[n]["first_try"] = {"failures": got[n]["failures"][:3] + ["..."], "seconds": got[n]["seconds"]}
            got.update(again)
    items, unreached = {}, []
    for n in todo:
        r = got.get(n, {"unreached": "not reported"})
        if "unreached" in r:
            unreached.append(n)
            continue
        items[n] = _entry(ctx, part, n, **{k: v for k, v in r.items() if k != "every_cell_failed"})
        verdict = "ok" if r["ok"] else "FAIL " + ", ".join(r["failures"][:6])
        cells = ", ".join(f"{c} {t:.0f} s" for c, t in r.get("slowest_cells", []))
        print(f"  {n:32} {r['seconds']:6.1f} s  {verdict}" + (f"  (slowest: {cells})" if cells else ""), flush=True)
    return {"items": items, "last_run": _last_run(ctx, t0, unreached)}


PART_FUNCS = {
    "tests": part_tests,
    "notebooks": lambda ctx: part_cases(ctx, "notebooks"),
    "emulated": lambda ctx: part_cases(ctx, "emulated"),
    "suites": lambda ctx: part_cases(ctx, "suites"),
}


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
            workers=min(slots.get("tests", 1), ctx.workers),
            jobs=min(slots.get("emulated", 1), ctx.jobs),
            suite_jobs=min(slots.get("suites", 1), ctx.suite_jobs),
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
    ap.add_argument(
        "--workers", type=_positive("--workers", int, True), default=14, help="pytest -n (0, 1: one process)"
    )
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
    try:
        check_only(only, root)
        if args.part == "status":
            return _status(args.gpu or None, root)
        if args.part == "plan":
            return _plan(args.gpu or None, root, only, args.all_entries, as_gpus, budget, args.json)
        at_once = {"tests": ("--workers", args.workers), "emulated": ("--jobs", args.jobs)}
        at_once["suites"] = ("--suite-jobs", args.suite_jobs)
        for part, (opt, n) in at_once.items():
            if args.part in (part, "all", "proof"):
                xdist_args(n, opt)
        if args.part in ("tests", "all", "proof"):
            need("pytest_timeout", "pytest-timeout", TIMEOUT_WHY)
        gpu, slug, versions = gpu_info()
        out = Path(args.out) if args.out else None
        logs = (out / "gpu-check-logs") if out else root / "build" / "gpu-check"
        opts = {k: getattr(args, k) for k in ("all_entries", "jobs", "workers", "suite_jobs")}
        ctx = Context(root, gpu, slug, versions, logs, budget_s=budget, only=only, as_gpus=as_gpus, out=out, **opts)
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
