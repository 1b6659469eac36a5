"""What a notebook, a benchmark suite or a test file depends on: the files whose contents can change its result.
``tools/gpu_check.py`` hashes each entry's files (so a change reruns only the entries it touches) and
``tools/lesson_map.py`` reads a notebook's imports here. ``python tools/deps.py notebooks/04_fusion.ipynb`` (or
``suite:lesson04``, ``tests/test_fusion.py``) prints one entry's files.

The rules (docs/gpu-check.md says the same):

1. **Imports**, read from the source with ``ast`` (every ``import`` and ``from ... import``, at module level or inside
   a function; relative ones resolved against the importing file's package), followed transitively through
   ``gpulab`` and ``tests``. Importing ``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` too, so they count.
   A bare name that is a file of ``tools/`` or of the importing file's folder counts (tests put ``tools/`` on
   ``sys.path``). A string literal that is exactly a module's name (``"gpulab.bench.lesson04"``) counts as an
   import of it (of a hub: its own file), and an f-string starting ``"gpulab.<package>."`` as an import of the
   whole package: that is how ``importlib.import_module`` is called in gpulab (``dynamic_imports_unresolved`` finds
   any other call, and any literal naming a hub there).
2. **Import-only modules are left out.** A *hub*, a package ``__init__`` whose body is only ``from . import
   (submodules)`` (``gpulab/figures/__init__.py``), counts as its own file; of its submodules, an importer depends on
   those it names (``figures.lesson04`` after ``from gpulab import figures``; ``from gpulab.figures import
   lesson09``), or on all of them when it uses the hub's name any other way. Likewise a suite's entry leaves out
   the other suites that ``python -m gpulab.bench --only KEY`` imports to list their keys (``SUITE_RUNNER``). Why
   the verdict stays sound: each module so left out is a dependency, in full, of another entry (its own notebook,
   its own suite), which reruns when the module changes and imports it the same way.
3. **Package data.** A file that names its package's ``data`` folder (``DATA_RE``) depends on the files of
   ``gpulab/data`` that its string literals name (``"history-cpus.json"``; an f-string ``f"reference-{gpu}.json"`` is
   the pattern ``reference-*.json``), or on all of them when none match; the gpu-check stamps never count.
4. **Tests' files.** A test file depends on ``tests/__init__.py`` and every ``conftest.py`` from ``tests/`` down to
   its folder: a conftest's imports at module level, and those inside a fixture only where the test file names the
   fixture (or a fixture it names names it, or it is autouse): the browser's harness is the browser tests'. A file
   of ``tests/`` whose string literals (not its prose) name ``fixtures`` depends on all of ``tests/fixtures``;
   ``notebooks`` or ``notebooks/...`` on every notebook; ``tools`` on every file of ``tools/``. Package data,
   fixtures and notebooks count as bytes (``read_only``); a notebook's imports count too where the file runs code
   (``RUNS_RE``: it may execute the notebook).

Only files of ``universe`` count (the files the tree hash covers: what git would add, ``gpu_check.hashed_files``).

A test file is **CPU-same** (``Graph.cpu_same``) when running it on a GPU proves nothing the CPU run does not, so
``make gpu-check`` leaves it out:

- it skips itself on a GPU (its ``pytestmark`` holds ``skipif(gpulab.ON_GPU, ...)``); or
- automatically: no Python file it depends on names a device word (``DEVICE_RE``: ``.cuda``, ``"cuda"``,
  ``triton.``, ``import triton``, ``ON_GPU``, ``DEVICE``, ``gpulab.MODE``, ``gpulab.size(``, ``live(``,
  ``plan.current(``, ``compute_capability()``; comments and docstrings aside) and no file of tests/ among them
  starts a process or executes code it reads (``RUNS_RE``). What every test imports (``common``: ``import
  gpulab`` and ``tests/conftest.py``'s module-level imports) is left out of the scan, unless the file (or a helper)
  imports it itself: what it chooses reaches a test only through a device word; or
- it says so, ``pytest.mark.cpu_same`` in its ``pytestmark``, and ``mark_refused`` finds nothing: neither it nor a
  helper of tests/ it imports names a device word or runs something, nor imports a module of ``LAUNCHERS``
  (kernels, checkers, suites, the capstone) or one whose own code names a device word. The mark is for a file whose
  imports reach the device only in functions it never calls (figures import kernel modules for their hand counts);
  a refused mark keeps the file on the GPU.

A single test of a GPU file that computes only on CPU tensors and launches nothing (a float64 diagnosis) carries
``@pytest.mark.cpu_same``; the GPU run deselects it (``-m "not cpu_same"``).
"""

from __future__ import annotations

import ast
import fnmatch
import io
import json
import re
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gpulab", "tests")  # the top-level names whose imports are followed
STAMP_GLOB = "gpu-check-*.json"  # in gpulab/data: the proofs themselves, never a dependency
SUITE_RUNNER = "gpulab/bench/__main__.py"  # python -m gpulab.bench: imports every suite, runs those of --only
GPULAB_IMPORT = "gpulab/__init__.py"  # `import gpulab`: every test and notebook runs it
ROOT_CONFTEST = "tests/conftest.py"
# gpulab's packages that launch kernels or time them: a file marked cpu_same imports none of them directly
LAUNCHERS = ("gpulab/kernels/", "gpulab/exercises/", "gpulab/bench/", "gpulab/capstone/")
DATA_RE = re.compile(r"""/\s*["']data["']|["']data["']\s*/|gpulab/data|DATA_DIR""")
DEVICE_RE = re.compile(
    r"\.cuda\b|[\"']cuda[\"':]|\btriton\.|\bimport triton|\bfrom triton|ON_GPU|\bDEVICE\b|gpulab\.MODE|gpulab\.size\("
    r"|\blive\(|plan\.current\(|compute_capability\(\)"
)
RUNS_RE = re.compile(r"subprocess|multiprocessing|\bfork\b|nbval|nbclient|ExecutePreprocessor|\bexec\(")
_MODULE_NAME = re.compile(r"(gpulab|tests)(\.\w+)*")


@dataclass
class Parsed:
    """One file's imports: ``files`` imported in full; ``literal_files`` named by string literals (rule 1);
    ``hubs``, binding -> hub file, for each name bound to a hub
    package (rule 2); ``chains``, the dotted names the source uses (``figures.lesson04.time_figure``)."""

    files: set[str] = field(default_factory=set)
    literal_files: set[str] = field(default_factory=set)
    hubs: dict[str, str] = field(default_factory=dict)
    chains: set[str] = field(default_factory=set)
    text: str = ""


def notebook_code(path: Path) -> list[str]:
    """The code cells of a notebook, IPython's ``%magic`` and ``!shell`` lines blanked."""
    cells = json.loads(path.read_text())["cells"]
    out = []
    for cell in cells:
        if cell.get("cell_type") == "code":
            src = "".join(cell["source"])
            out.append("\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in src.splitlines()))
    return out


class Graph:
    """The import graph of the files under ``root``; ``universe``: the files that may count (None: every file on
    disk). Each file is parsed once."""

    def __init__(self, root: Path = ROOT, universe: set[str] | list[str] | None = None):
        self.root = Path(root)
        self.universe = set(universe) if universe is not None else None
        self._parsed: dict[str, Parsed] = {}
        self._direct: dict[tuple[str, bool], set[str]] = {}
        self._hubs: dict[str, dict[str, str] | None] = {}
        self._code: dict[str, str] = {}
        self._asts: dict[str, ast.Module | None] = {}
        self._read_only: dict[str, set[str]] = {}
        self._conftests: dict = {}

    # ---- files and module names

    def short_names(self) -> dict[str, str]:
        """``gpulab.SHORT_NAMES`` read from ``gpulab/__init__.py`` without importing it: the short name a notebook
        may import (``from gpulab import roofline``) -> the module it stands for (``gpulab.models.roofline``)."""
        if not hasattr(self, "_short"):
            self._short = {}
            tree = self._ast(GPULAB_IMPORT)
            for node in tree.body if tree is not None else ():
                if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "SHORT_NAMES":
                    space: dict = {}
                    table = ast.Expression(node.value)
                    ast.fix_missing_locations(table)
                    space["SHORT_NAMES"] = eval(compile(table, GPULAB_IMPORT, "eval"), {})  # strings only, no names
                    self._short = dict(space["SHORT_NAMES"])
        return self._short

    def _short_or_none(self, base: str, name: str) -> str | None:
        """The module ``from base import name`` stands for through a short name, or None."""
        if base == "gpulab" and not self.module_file(f"gpulab.{name}"):
            return self.short_names().get(name)
        return None

    def exists(self, rel: str) -> bool:
        if self.universe is not None:
            return rel in self.universe
        return (self.root / rel).is_file()

    def module_file(self, name: str) -> str | None:
        """The file of module ``name`` ("gpulab.kernels.relu" -> "gpulab/kernels/relu.py"), or None."""
        base = name.replace(".", "/")
        for rel in (f"{base}.py", f"{base}/__init__.py"):
            if self.exists(rel):
                return rel
        return None

    def _with_parents(self, name: str) -> set[str]:
        """The files importing ``name`` runs: each package ``__init__`` on the way, then the module."""
        parts = name.split(".")
        return {f for i in range(1, len(parts) + 1) if (f := self.module_file(".".join(parts[:i])))}

    def _package(self, rel: str) -> str | None:
        if not rel.endswith(".py"):
            return None
        parts = rel[:-3].split("/")
        return ".".join(parts[:-1]) if parts else None

    def submodules(self, package_file: str) -> list[str]:
        """The modules of the package whose ``__init__.py`` is ``package_file``: its files and its packages."""
        prefix = package_file[: -len("__init__.py")]
        out = []
        for f in sorted(self._glob(prefix)):
            rest = f[len(prefix) :] if f.startswith(prefix) and f != package_file and f.endswith(".py") else ""
            if rest and (rest.count("/") == 0 or (rest.count("/") == 1 and rest.endswith("/__init__.py"))):
                out.append(f)
        return out

    def _on_disk(self, prefix: str) -> set[str]:
        return {p.relative_to(self.root).as_posix() for p in (self.root / prefix).glob("**/*") if p.is_file()}

    def hub_members(self, rel: str) -> dict[str, str] | None:
        """For a hub (rule 2): submodule name -> file; None when ``rel`` is not a hub."""
        if rel not in self._hubs:
            self._hubs[rel] = self._hub_members(rel)
        return self._hubs[rel]

    def _hub_members(self, rel: str) -> dict[str, str] | None:
        if not rel.endswith("/__init__.py"):
            return None
        tree = self._ast(rel)
        if tree is None:
            return None
        members: dict[str, str] = {}
        package = self._package(rel)
        for i, node in enumerate(tree.body):
            if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # the docstring
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                continue
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module is None:
                for a in node.names:
                    f = self.module_file(f"{package}.{a.name}")
                    if f is None:
                        return None
                    members[a.name] = f
                continue
            return None
        return members or None

    # ---- one file

    def _resolve_bare(self, name: str, rel: str) -> set[str]:
        top = name.split(".")[0]
        out = set()
        for folder in ("tools", rel.rsplit("/", 1)[0] if "/" in rel else ""):
            f = f"{folder}/{top}.py" if folder else f"{top}.py"
            if self.exists(f):
                out.add(f)
        return out

    def parse(self, rel: str) -> Parsed:
        if rel in self._parsed:
            return self._parsed[rel]
        p = Parsed()
        path = self.root / rel
        if rel.endswith(".ipynb"):
            sources = notebook_code(path)
            trees = [_parse_or_none(src) for src in sources]
        elif rel.endswith(".py"):
            sources, trees = [path.read_text(errors="replace")], [self._ast(rel)]
        else:
            sources, trees = [], []
        p.text = "\n".join(sources)
        for tree in trees:
            if tree is not None:  # a file that does not parse fails on every machine; its text still counts
                self._read_tree(tree, rel, p)
        self._parsed[rel] = p
        return p

    def _bind_or_import(self, name: str, binding: str | None, p: Parsed) -> None:
        """``name`` imported in full, or bound to ``binding`` when it is a hub."""
        f = self.module_file(name)
        if f is not None and binding is not None and self.hub_members(f) is not None:
            p.files |= self._with_parents(name)  # a hub's own file (closure leaves hubs unexpanded)
            p.hubs[binding] = f
        else:
            p.files |= self._with_parents(name)

    def _read_tree(self, tree: ast.AST, rel: str, p: Parsed) -> None:
        package = self._package(rel)
        inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] in PACKAGES:
                        self._bind_or_import(a.name, a.asname or a.name, p)
                    else:
                        p.files |= self._resolve_bare(a.name, rel)
            elif isinstance(node, ast.ImportFrom):
                base = _from_base(node, package)
                if base is None:
                    continue
                if base.split(".")[0] not in PACKAGES:
                    if not node.level:
                        p.files |= self._resolve_bare(base, rel)
                    continue
                p.files |= self._with_parents(base)
                base_file = self.module_file(base)
                for a in node.names:
                    if a.name == "*":
                        members = self.hub_members(base_file) if base_file else None
                        p.files |= set((members or {}).values())
                    elif self.module_file(f"{base}.{a.name}"):
                        self._bind_or_import(f"{base}.{a.name}", a.asname or a.name, p)
                    elif short := self._short_or_none(base, a.name):
                        self._bind_or_import(short, a.asname or a.name, p)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if _MODULE_NAME.fullmatch(node.value) and self.module_file(node.value):
                    p.literal_files |= self._with_parents(node.value)  # a hub named so: its own file (rule 2)
            elif isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
                head = str(node.values[0].value)
                if re.fullmatch(r"(gpulab|tests)(\.\w+)*\.", head) and self.module_file(head[:-1]):
                    pkg_file = self.module_file(head[:-1])
                    p.literal_files |= self._with_parents(head[:-1]) | set(self.submodules(pkg_file))
            if isinstance(node, (ast.Attribute, ast.Name)) and id(node) not in inner:
                parts, n = [], node
                while isinstance(n, ast.Attribute):
                    parts.append(n.attr)
                    n = n.value
                if isinstance(n, ast.Name):
                    p.chains.add(".".join([n.id, *reversed(parts)]))
                    if n.id == "gpulab" and parts and (short := self._short_or_none("gpulab", parts[-1])):
                        p.files |= self._with_parents(short)  # gpulab.timing.time_ms after `import gpulab`

    def named_imports(self, rel: str) -> set[str]:
        """The modules of gpulab and tests that ``rel``'s import statements name, dotted: ``from X import n`` names
        ``X.n`` where that is a module and ``X`` otherwise; ``import X.Y`` names ``X.Y``; relative imports
        resolved. No parent packages, no string literals (``lesson_map`` lists these)."""
        if rel.endswith(".ipynb"):
            trees = [_parse_or_none(src) for src in notebook_code(self.root / rel)]
        else:
            trees = [self._ast(rel)]
        package = self._package(rel)
        out: set[str] = set()
        for tree in (t for t in trees if t is not None):
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    out |= {a.name for a in node.names if a.name.split(".")[0] in PACKAGES}
                elif isinstance(node, ast.ImportFrom):
                    base = _from_base(node, package)
                    if base is None or base.split(".")[0] not in PACKAGES:
                        continue
                    for a in node.names:
                        sub = f"{base}.{a.name}"
                        out.add(sub if self.module_file(sub) else self._short_or_none(base, a.name) or base)
        return out

    def _hub_uses(self, p: Parsed) -> set[str]:
        """The hub submodules ``p`` names through its hub bindings (rule 2)."""
        out: set[str] = set()
        for binding, hub in p.hubs.items():
            members = self.hub_members(hub) or {}
            for chain in p.chains:
                if chain == binding:
                    out |= set(members.values())  # the hub's name used bare: every submodule
                elif chain.startswith(binding + "."):
                    name = chain[len(binding) + 1 :].split(".")[0]
                    sub = members.get(name) or self.module_file(f"{self._package(hub)}.{name}")
                    out |= {sub} if sub else set(members.values())
        return out

    def data_files(self) -> list[str]:
        """The files of gpulab/data but the gpu-check stamps."""
        return sorted(f for f in self._glob("gpulab/data/") if not fnmatch.fnmatchcase(f.rsplit("/", 1)[1], STAMP_GLOB))

    def _data_deps(self, rel: str, text: str) -> set[str]:
        """Rule 3: the files of gpulab/data ``rel`` reads."""
        if not rel.endswith(".py") or not DATA_RE.search(text):
            return set()
        tree = self._ast(rel)
        pats = set()
        for node in ast.walk(tree) if tree else ():
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if re.fullmatch(r"[\w*.-]+\.[A-Za-z]\w*", node.value):
                    pats.add(node.value)
            elif isinstance(node, ast.JoinedStr):
                pat = "".join(str(v.value) if isinstance(v, ast.Constant) else "*" for v in node.values)
                if re.fullmatch(r"[\w*.-]+\.[A-Za-z]\w*", pat):
                    pats.add(pat)
        data = self.data_files()
        hit = {f for f in data if any(fnmatch.fnmatchcase(f.rsplit("/", 1)[1], pat) for pat in pats)}
        return hit or set(data)

    def _test_extras(self, rel: str) -> tuple[set[str], set[str]]:
        """Rule 4: what a file of tests/ reads besides its imports, from its string literals (not its prose), as
        (files followed, files read as bytes): fixtures, and notebooks unless the file runs code (``RUNS_RE``: then
        what the notebooks import counts too), are read; tools are followed (tests load them as modules)."""
        if not rel.startswith("tests/") or not rel.endswith(".py"):
            return set(), set()
        lits = self.literals(rel)
        follow, read = set(), set()
        if any(t in ("fixtures", "tests/fixtures") or t.startswith(("fixtures/", "tests/fixtures/")) for t in lits):
            read |= self._glob("tests/fixtures/")
        if any(t == "notebooks" or t.startswith("notebooks/") for t in lits):
            nbs = {f for f in self._glob("notebooks/") if f.endswith(".ipynb")}
            (follow if RUNS_RE.search(self.code(rel)) else read).update(nbs)
        if any(t == "tools" or t.startswith("tools/") for t in lits):
            follow |= self._glob("tools/")
        return follow, read

    def literals(self, rel: str) -> set[str]:
        """The string literals of a Python file's code, docstrings left out (an f-string's constant parts each)."""
        tree = self._ast(rel)
        if tree is None:
            return set()
        docs = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
                first = node.body[0]
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                    docs.add(id(first.value))
        return {
            n.value
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
        }

    def code(self, rel: str) -> str:
        """A Python file's code without its comments and docstrings (what ``DEVICE_RE`` is matched against); a
        notebook's code cells."""
        if rel not in self._code:
            self._code[rel] = self._code_of(rel)
        return self._code[rel]

    def _code_of(self, rel: str) -> str:
        if rel.endswith(".ipynb"):
            return self.parse(rel).text
        text = (self.root / rel).read_text(errors="replace")
        tree = self._ast(rel)
        try:
            toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
        except (SyntaxError, tokenize.TokenError):
            toks = None
        if tree is None or toks is None:
            return text
        lines = text.splitlines(keepends=True)
        drop: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
                first = node.body[0]
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                    drop.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
        for t in toks:
            if t.type == tokenize.COMMENT:
                r, c = t.start
                lines[r - 1] = lines[r - 1][:c] + "\n"
        return "".join(ln for i, ln in enumerate(lines, 1) if i not in drop)

    def _glob(self, prefix: str) -> set[str]:
        """The files under folder ``prefix`` ("tests/fixtures/"): of the universe, else on disk."""
        cands = self.universe if self.universe is not None else self._on_disk(prefix)
        return {f for f in cands if f.startswith(prefix)}

    def direct(self, rel: str, literals: bool = True) -> set[str]:
        """The files ``rel`` depends on directly (rules 1-4), those it reads as bytes (``read_only``) among them. A
        hub depends on none through its submodules. ``literals`` False: leave out the modules named only by string
        literals (``SUITE_RUNNER``'s suite list)."""
        key = (rel, literals)
        if key in self._direct:
            return self._direct[key]
        read: set[str] = set()
        if self.hub_members(rel) is not None:
            out: set[str] = set()
        else:
            p = self.parse(rel)
            follow, read = self._test_extras(rel)
            read = read | self._data_deps(rel, p.text)
            out = set(p.files) | self._hub_uses(p) | (p.literal_files if literals else set()) | follow
            read = read - out
            out |= read
        out = {f for f in out if self.exists(f)} - {rel}
        self._direct[key] = out
        self._read_only[rel] = read
        return out

    def read_only(self, rel: str) -> set[str]:
        """The files ``rel`` reads as bytes (package data, fixtures, notebooks it only reads): counted, not
        followed."""
        self.direct(rel)
        return self._read_only[rel]

    def closure(self, starts, literals_of: tuple[str, ...] = (), leaves: set[str] = frozenset()) -> set[str]:
        """``starts`` and every file they depend on, transitively. The files of ``literals_of`` do not follow
        their string-literal imports (rule 2's suite runner); ``leaves`` are kept but not followed, and so is each
        file a file reads as bytes (``read_only``) unless another one imports it."""
        followed: set[str] = set()
        read: set[str] = set()
        todo = [s for s in starts if self.exists(s)]
        while todo:
            f = todo.pop()
            if f in followed:
                continue
            followed.add(f)
            if f in leaves:
                continue
            deps = self.direct(f, literals=f not in literals_of)
            ro = self._read_only[f]
            read |= deps & ro
            todo.extend(deps - ro - followed)
        return followed | read

    # ---- entries

    def notebook(self, stem: str) -> set[str]:
        """A notebook's files (and an emulated run's): the notebook and everything it imports."""
        return self.closure([f"notebooks/{stem}.ipynb"])

    def suite(self, key: str) -> set[str]:
        """``python -m gpulab.bench --only KEY``'s files: the runner (without the other suites) and the suite
        ``gpulab.bench.KEY`` (none for the ceilings, which the runner measures itself)."""
        starts = [SUITE_RUNNER, *self._with_parents("gpulab.bench")]
        f = self.module_file(f"gpulab.bench.{key}")
        if f is not None:
            starts.append(f)
        elif key != "ceilings":
            raise ValueError(f"suite {key!r}: no gpulab/bench/{key}.py")
        return self.closure(starts, literals_of=(SUITE_RUNNER,))

    def test_file(self, rel: str) -> set[str]:
        """A test file's files: it, ``tests/__init__.py`` and the conftest files above it (an import inside a
        conftest fixture counts only where the test file names that fixture: ``conftest_imports``), and what they
        import."""
        parts = rel.split("/")
        starts, leaves, read = [rel], set(), set()
        for i in range(1, len(parts)):
            folder = "/".join(parts[:i])
            starts.append(f"{folder}/__init__.py")
            conf = f"{folder}/conftest.py"
            if self.exists(conf):
                leaves.add(conf)
                starts += sorted(self.conftest_imports(conf, rel))
                read |= self._conftest_parts(conf)[2]
        return self.closure(starts + sorted(leaves), leaves=leaves) | {f for f in read if self.exists(f)}

    def _helpers(self, rel: str) -> set[str]:
        """Test file ``rel`` and the files of tests/ it imports, through files of tests/ only (conftest aside)."""
        helpers, todo = {rel}, [rel]
        while todo:
            for d in self.direct(todo.pop()):
                if d.startswith("tests/") and d.endswith(".py") and not d.endswith("conftest.py") and d not in helpers:
                    helpers.add(d)
                    todo.append(d)
        return helpers

    def mark_refused(self, rel: str) -> str | None:
        """Why test file ``rel`` may not claim ``cpu_same`` by its mark (None when it may): it, or a helper of tests/
        it imports, names a device word (``DEVICE_RE``) or runs something (``RUNS_RE``), or imports a module of
        ``LAUNCHERS`` or one whose own code names a device word (``import gpulab`` and what it imports aside). The
        mark covers what the automatic rule cannot see: a file whose imports reach the device in functions it
        never calls (a figure module importing a kernel module for its hand counts)."""
        helpers = self._helpers(rel)
        boot = self.closure([GPULAB_IMPORT])
        for f in sorted(helpers):
            code = self.code(f)
            if m := DEVICE_RE.search(code) or RUNS_RE.search(code):
                return f"{f} names {m.group()!r}"
            for d in sorted(self.direct(f) - boot):
                if d.startswith("gpulab/") and d.endswith(".py"):
                    if d.startswith(LAUNCHERS) or DEVICE_RE.search(self.code(d)):
                        return f"{f} imports {d}"
        return None

    def common(self) -> set[str]:
        """What every test imports, left out of ``cpu_same``'s scan: ``import gpulab`` (``GPULAB_IMPORT``) and the
        imports at module level of ``tests/conftest.py``, with what they import."""
        if not hasattr(self, "_common"):
            starts = [GPULAB_IMPORT]
            if self.exists(ROOT_CONFTEST):
                starts += sorted(self.conftest_imports(ROOT_CONFTEST, None))
            self._common = self.closure(starts)
        return self._common

    def conftest_imports(self, conftest: str, test: str | None) -> set[str]:
        """What ``conftest`` makes ``test`` depend on: its imports outside fixtures, and those inside the fixtures
        that ``test`` names (an argument, ``usefixtures("...")``), that those fixtures name, or that are autouse;
        rules 3 and 4 for the whole file. ``test`` None: no fixture named."""
        rest, fixtures, _ = self._conftest_parts(conftest)
        used = set(re.findall(r"\w+", (self.root / test).read_text(errors="replace"))) if test else set()
        todo = [f for f in fixtures if f in used]
        while todo:
            for a in fixtures[todo.pop()][0]:
                if a in fixtures and a not in used:
                    used.add(a)
                    todo.append(a)
        out = set(rest)
        for name, (_, files) in fixtures.items():
            if name in used:
                out |= files
        return out

    def _conftest_parts(self, conftest: str) -> tuple[set[str], dict[str, tuple[list[str], set[str]]], set[str]]:
        """(the files ``conftest`` depends on outside its fixtures, {fixture: (its arguments, its files)}, the files
        it reads as bytes)."""
        if conftest in self._conftests:
            return self._conftests[conftest]
        tree = self._ast(conftest)
        body = tree.body if tree else []
        fixtures: dict[str, tuple[list[str], set[str]]] = {}
        rest = []

        def files_of(node: ast.AST) -> set[str]:
            p = Parsed()
            self._read_tree(node, conftest, p)
            return {f for f in p.files | self._hub_uses(p) | p.literal_files if self.exists(f)} - {conftest}

        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _fixture(node) == "fixture":
                fixtures[node.name] = ([a.arg for a in node.args.args], files_of(node))
            else:
                rest.append(node)
        text = (self.root / conftest).read_text()
        follow, read = self._test_extras(conftest)
        read = (read | self._data_deps(conftest, text)) - {conftest}
        out = (files_of(ast.Module(body=rest, type_ignores=[])) | follow) - {conftest}, fixtures, read
        self._conftests[conftest] = out
        return out

    def _ast(self, rel: str) -> ast.Module | None:
        """A Python file's syntax tree (None where it does not parse), parsed once."""
        if rel not in self._asts:
            try:
                self._asts[rel] = ast.parse((self.root / rel).read_text(errors="replace"))
            except (SyntaxError, OSError, ValueError):
                self._asts[rel] = None
        return self._asts[rel]

    def test_files(self) -> list[str]:
        """Every test file pytest collects under tests/ (``test_*.py``)."""
        names = (f for f in self._glob("tests/") if f.endswith(".py"))
        return sorted(f for f in names if f.rsplit("/", 1)[-1].startswith("test_"))

    # ---- which tests prove something on a GPU

    def cpu_same(self, rel: str) -> tuple[bool, str]:
        """Whether test file ``rel`` proves nothing more on a GPU than on the CPU (module docstring), and why:
        (True, "marked cpu_same" | "skips itself on a GPU" | "reaches no device word") or (False, "<file>: <what
        it does>")."""
        marks = file_marks((self.root / rel).read_text(errors="replace"))
        if "cpu_same" in marks:
            refused = self.mark_refused(rel)
            return (False, f"marked cpu_same, but {refused}") if refused else (True, "marked cpu_same")
        if "skipif(gpulab.ON_GPU)" in marks:
            return True, "skips itself on a GPU"
        helpers = self._helpers(rel)
        named = set().union(*(self.direct(f) for f in helpers))  # what it imports itself is scanned, common or not
        scanned = (self.test_file(rel) - self.common()) | (named - self.closure([GPULAB_IMPORT])) | helpers
        for f in sorted(scanned):
            if not f.endswith(".py"):
                continue  # data, fixtures and notebooks read as files are the same bytes on any machine
            code = self.code(f)
            if f.startswith("tests/") and (m := RUNS_RE.search(code)):
                return False, f"{f}: {m.group()}"
            if m := DEVICE_RE.search(code):
                return False, f"{f}: {m.group()}"
        return True, "reaches no device word"


def _parse_or_none(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def _from_base(node: ast.ImportFrom, package: str | None) -> str | None:
    """The module a ``from ... import`` reads from, a relative one resolved against ``package`` (None when it
    cannot be: a relative import outside a package)."""
    base = node.module or ""
    if not node.level:
        return base
    if package is None:
        return None
    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
    return ".".join(anchor + ([base] if base else []))


def file_marks(source: str) -> set[str]:
    """The marks a test file's ``pytestmark`` sets on all its tests: "cpu_same", "browser", ... by name, and
    "skipif(gpulab.ON_GPU)" for a skip whose condition is exactly ``gpulab.ON_GPU``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    out = set()
    for node in tree.body:
        if not (
            isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
        ):
            continue
        values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
        for v in values:
            call = v if isinstance(v, ast.Call) else None
            target = call.func if call else v
            if not isinstance(target, ast.Attribute):
                continue
            if target.attr == "skipif" and call and call.args and ast.unparse(call.args[0]) == "gpulab.ON_GPU":
                out.add("skipif(gpulab.ON_GPU)")
            else:
                out.add(target.attr)
    return out


def _fixture(fn: ast.FunctionDef) -> str | None:
    """ "fixture" for a ``@pytest.fixture`` function, "autouse" for an autouse one, else None."""
    for d in fn.decorator_list:
        call = d if isinstance(d, ast.Call) else None
        target = call.func if call else d
        name = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""
        if name == "fixture":
            auto = any(
                k.arg == "autouse" and isinstance(k.value, ast.Constant) and k.value.value
                for k in (call.keywords if call else [])
            )
            return "autouse" if auto else "fixture"
    return None


def dynamic_imports_unresolved(graph: Graph | None = None) -> list[str]:
    """What rule 1 cannot see in gpulab, ``file:line: why`` each: a call of ``importlib.import_module`` or
    ``__import__`` whose argument is neither a string literal nor an f-string with a package prefix, in a module
    that names no module by a literal; a literal naming a hub (it counts as the hub's own file only)."""
    g = graph or Graph()
    out = []
    for path in sorted((g.root / "gpulab").rglob("*.py")):
        rel = path.relative_to(g.root).as_posix()
        tree = ast.parse(path.read_text())
        names = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and _MODULE_NAME.fullmatch(n.value)
        ]
        for n in names:
            f = g.module_file(n.value)
            if f is not None and g.hub_members(f) is not None:
                out.append(f"{rel}:{n.lineno}: names the hub {n.value}")
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if name not in ("import_module", "__import__") or not node.args:
                continue
            arg = node.args[0]
            if isinstance(arg, ast.Constant):
                continue
            if (
                rel == GPULAB_IMPORT
                and isinstance(arg, ast.Subscript)
                and getattr(arg.value, "id", "") == "SHORT_NAMES"
            ):
                continue  # the short names' table, which rule 1 reads (Graph.short_names)
            if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
                if re.fullmatch(r"(gpulab|tests)(\.\w+)*\.", str(arg.values[0].value)):
                    continue
            if not names:
                out.append(f"{rel}:{node.lineno}: imports a module named at run time")
    return out


def _main(argv: list[str]) -> int:
    g = Graph()
    for what in argv or ["notebooks/04_fusion.ipynb"]:
        if what.startswith("suite:"):
            files = g.suite(what.split(":", 1)[1])
        elif what.endswith(".ipynb"):
            files = g.notebook(Path(what).stem)
        else:
            files = g.test_file(what)
            print(f"{what}: cpu_same: {g.cpu_same(what)}")
        print(f"{what}: {len(files)} files")
        print("\n".join(f"  {f}" for f in sorted(files)))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
