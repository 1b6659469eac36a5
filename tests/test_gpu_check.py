"""``make gpu-check`` (tools/gpu_check.py) and what its entries depend on (tools/deps.py), on the CPU: the committed
stamp read (a warning, never a failure, when it does not prove the tree now); on a tiny fake tree, each entry's
dependency hash (an edit changes exactly the entries that depend on it), which test files are CPU-same, what reruns,
the status lines and verdict, the plan; the tree hash against git's; the stamp's merging, junit parsing, the
90-second rule and the budget with fake runners and a fake clock."""

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "tools" / "gpu_check.py")
gc = importlib.util.module_from_spec(_spec)
sys.modules["gpu_check"] = gc
_spec.loader.exec_module(gc)
deps = gc.deps
_spec = importlib.util.spec_from_file_location("gpu_cases", ROOT / "tools" / "gpu_cases.py")
cases = importlib.util.module_from_spec(_spec)
sys.modules["gpu_cases"] = cases
_spec.loader.exec_module(cases)

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(cwd, *args) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True, env=env).stdout


# ------------------------------------------------------------------------------------------------ the committed stamp


def warn_unless_proven(path: Path, stamp: dict, now: dict[str, dict[str, str]]) -> None:
    """One UserWarning, of one line, when the stamp at ``path`` does not prove the tree ``now``: its verdict."""
    if gc.stamp_warnings(stamp, now):
        verdict = gc.status_lines(stamp, now, path.name)[-1].removeprefix("verdict: ")
        msg = f"{path.relative_to(ROOT)}: {verdict}; run make gpu-check on a GPU machine"
        print("warning:", msg)
        warnings.warn(msg, UserWarning, stacklevel=2)


def test_an_unproven_stamp_is_one_warning_of_one_line():
    now = {part: {f"{part}_{i}": "h" for i in range(3)} for part in gc.PARTS}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_unless_proven(ROOT / "gpulab" / "data" / "gpu-check-x.json", {"parts": {}}, now)
    assert len(caught) == 1, [str(w.message) for w in caught]
    (msg,) = [str(w.message) for w in caught]
    assert "\n" not in msg and msg.startswith("gpulab/data/gpu-check-x.json: not proven on the tree now"), msg
    assert all(f"{part} 3" in msg for part in gc.PARTS), msg


def test_the_committed_stamp_proves_the_tree_now_or_warns(monkeypatch, capsys):
    """A stamp whose entries are not proven on the tree now is a warning: the CPU cannot re-run the GPU parts.
    ``status`` runs here, without a GPU, in at most 15 lines a stamp."""
    stamps = sorted(ROOT.glob(gc.STAMP_PATTERN))
    tree = gc.Tree(ROOT)
    now = tree.current()
    for path in stamps:
        stamp = gc.load_stamp(path)
        lines = gc.status_lines(stamp, now, path.name)
        assert len(lines) <= 15 and lines[-1].startswith("verdict: ")
        warn_unless_proven(path, stamp, now)
    # rule 2 is sound when each figure module a notebook only imports is another notebook's dependency in full
    hub = tree.graph.hub_members("gpulab/figures/__init__.py") or {}
    used = set().union(*(tree.files_of("notebooks", nb) for nb in tree.notebooks()))
    assert hub and not set(hub.values()) - used
    capsys.readouterr()
    monkeypatch.setattr(gc, "Tree", lambda root=ROOT, **kw: tree)  # the tree computed once
    assert gc.main(["status"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert sum(ln.startswith("verdict: ") for ln in out) == len(stamps) and len(out) <= 15 * max(1, len(stamps))


def test_gpulabs_dynamic_imports_are_all_seen():
    """Every importlib.import_module or __import__ in gpulab names its modules where rule 1 reads them."""
    assert deps.dynamic_imports_unresolved() == []


# ------------------------------------------------------------------------------------------------ a fake tree

NB = lambda *lines: json.dumps({"cells": [{"cell_type": "code", "source": [ln + "\n" for ln in lines]}]})  # noqa: E731

FAKE = {
    "gpulab/__init__.py": "from . import plan\n\nON_GPU = plan.X == 2\n",
    "gpulab/plan.py": "X = 1\n",
    "gpulab/fusion.py": "def bytes_moved(n):\n    return 8 * n\n",
    "gpulab/reference.py": (
        "from pathlib import Path\nDATA_DIR = Path(__file__).parent / 'data'\n\n\n"
        "def load(gpu):\n    return (DATA_DIR / f'reference-{gpu}.json').read_text()\n"
    ),
    "gpulab/data/reference-h200.json": "{}\n",
    "gpulab/data/history-cpus.json": "[]\n",
    "gpulab/figures/__init__.py": '"""Figures, one module a lesson."""\n\nfrom . import lesson04, lesson05\n',
    "gpulab/figures/lesson04.py": "from .. import fusion\n\n\ndef f():\n    return fusion.bytes_moved(1)\n",
    "gpulab/figures/lesson05.py": "from ..kernels import sincos\n\n\ndef g():\n    return sincos.COUNT\n",
    "gpulab/kernels/__init__.py": "import gpulab\n",
    "gpulab/kernels/sincos.py": "import triton\n\nCOUNT = 2\n",
    "gpulab/kernels/store.py": "import torch\n\n\ndef name():\n    return torch.cuda.get_device_name(0)\n",
    "gpulab/bench/__init__.py": "",
    "gpulab/bench/__main__.py": (
        'import gpulab\nfrom gpulab import reference\nCORE = "ceilings"\n'
        'LESSON_SUITES = ["gpulab.bench.lesson04", "gpulab.bench.lesson05"]\n'
    ),
    "gpulab/bench/lesson04.py": 'from ..kernels import sincos\nKEY = "lesson04"\nSTEPS = ("headline", "sweep")\n',
    "gpulab/bench/lesson05.py": 'from .. import fusion\nKEY = "lesson05"\nHEADLINE_STEPS = ("ways",)\n',
    "notebooks/04_fusion.ipynb": NB("import gpulab", "from gpulab import figures", "figures.lesson04.f()"),
    "notebooks/05_recompute.ipynb": NB("from gpulab import figures, reference", "figures.lesson05.g()", "%time 1"),
    "tests/__init__.py": "",
    "tests/conftest.py": (
        "import pytest\n\nfrom gpulab.kernels import store\n\n\n"
        "@pytest.fixture\ndef browser():\n    from tests import helper\n\n    return helper\n"
    ),
    "tests/test_store.py": "from gpulab.kernels import store\n\n\ndef test_n():\n    assert store.name()\n",
    "tests/helper.py": "import subprocess\n",
    "tests/fixtures/case.txt": "x\n",
    "tests/test_fig04.py": (
        "import gpulab\nfrom gpulab import figures\n\n\ndef test_f():\n    assert figures.lesson04.f() == 8 and gpulab.ON_GPU in (0, 1)\n"
    ),
    "tests/test_sincos.py": "from gpulab.kernels import sincos\n\n\ndef test_c():\n    assert sincos.COUNT == 2\n",
    "tests/test_pure.py": (
        "from pathlib import Path\n\nfrom gpulab import fusion\n\nF = Path(__file__).parent / 'fixtures'\n\n\n"
        "def test_b():\n    assert fusion.bytes_moved(2) == 16\n"
    ),
    "tests/test_marked.py": (
        "import pytest\n\nfrom gpulab.figures import lesson05\n\npytestmark = pytest.mark.cpu_same\n\n\n"
        "def test_g():\n    assert lesson05.g() == 2\n"
    ),
    "tests/test_marked_bad.py": (
        "import pytest\n\nfrom gpulab.kernels import sincos\n\npytestmark = [pytest.mark.cpu_same]\n\n\n"
        "def test_c():\n    assert sincos.COUNT\n"
    ),
    "tests/test_skips.py": (
        'import gpulab\nimport pytest\n\npytestmark = pytest.mark.skipif(gpulab.ON_GPU, reason="CPU paths")\n\n\n'
        "def test_s(browser):\n    assert browser\n"
    ),
    "tests/test_reads_nb.py": (
        "from pathlib import Path\n\nfrom gpulab.kernels import sincos\n\nGROUPS = ('gpulab.figures',)\n\n\n"
        "def test_r():\n    assert sincos.COUNT and (Path('notebooks') / '04_fusion.ipynb').exists()\n"
    ),
    "tests/test_runs_nb.py": (
        "import json\nfrom pathlib import Path\n\n\ndef test_x():\n"
        "    exec(json.loads(Path('notebooks/04_fusion.ipynb').read_text())['cells'][0]['source'][0])\n"
    ),
    "tests/test_web.py": "import pytest\n\npytestmark = pytest.mark.browser\n\n\ndef test_w(browser):\n    assert browser\n",
    "tools/build.py": "X = 1\n",
    ".gitignore": "__pycache__/\nbuild/\n",
}
GPU_TESTS = [
    "tests/test_fig04.py",
    "tests/test_marked_bad.py",
    "tests/test_reads_nb.py",
    "tests/test_runs_nb.py",
    "tests/test_sincos.py",
    "tests/test_store.py",
]


def _fake_tree(root: Path, files: dict = FAKE) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _edit(root: Path, rel: str) -> None:
    """Change ``rel`` as a person would: a comment line added (a code cell added to a notebook)."""
    if rel.endswith(".ipynb"):
        nb = json.loads((root / rel).read_text())
        nb["cells"].append({"cell_type": "code", "source": ["x = 1\n"]})
        (root / rel).write_text(json.dumps(nb))
    else:
        (root / rel).write_text((root / rel).read_text() + "\n# edited\n")


def _changed(before: dict, after: dict) -> set[str]:
    return {f"{p}:{n}" for p in before for n in before[p] if before[p][n] != after[p].get(n)}


@pytest.fixture
def fake(tmp_path):
    return _fake_tree(tmp_path)


def test_imports_rule_1_cannot_see_are_named(fake):
    (fake / "gpulab/loader.py").write_text(
        "import importlib\n\nHUB = 'gpulab.figures'\n\n\ndef load(name):\n    return importlib.import_module(name)\n"
    )
    (fake / "gpulab/loader2.py").write_text(
        "import importlib\n\n\ndef load(n):\n    return importlib.import_module(n)\n"
    )
    (fake / "gpulab/loader3.py").write_text("import importlib\n\nM = importlib.import_module(f'gpulab.kernels.{1}')\n")
    assert deps.dynamic_imports_unresolved(deps.Graph(fake)) == [
        "gpulab/loader.py:3: names the hub gpulab.figures",
        "gpulab/loader2.py:5: imports a module named at run time",
    ]


def test_entries_of_the_fake_tree(fake):
    tree = gc.Tree(fake)
    assert tree.how == "walk"  # no .git here
    assert tree.items("notebooks") == ["04_fusion", "05_recompute"]
    assert tree.items("emulated")[:2] == ["T4 04_fusion", "T4 05_recompute"] and len(tree.items("emulated")) == 6
    assert tree.items("suites") == ["ceilings", "lesson04", "lesson05"]
    assert gc.suite_list(fake) == [("ceilings", ()), ("lesson04", ("headline",)), ("lesson05", ("ways",))]
    gpu, other = tree.tests()
    assert gpu == GPU_TESTS  # test_store imports what every test imports (conftest's), itself: it is scanned
    assert other == {
        "tests/test_marked.py": "marked cpu_same",
        "tests/test_pure.py": "reaches no device word",
        "tests/test_skips.py": "skips itself on a GPU",
        "tests/test_web.py": "marked browser",
    }
    same, why = tree.graph.cpu_same("tests/test_marked_bad.py")
    assert not same and "marked cpu_same, but tests/test_marked_bad.py imports gpulab/kernels/" in why  # kept on GPU


def test_each_entry_depends_on_what_it_imports(fake):
    g = gc.Tree(fake).graph
    nb04 = g.notebook("04_fusion")
    assert nb04 == {
        "notebooks/04_fusion.ipynb",
        "gpulab/__init__.py",
        "gpulab/plan.py",
        "gpulab/figures/__init__.py",
        "gpulab/figures/lesson04.py",
        "gpulab/fusion.py",
    }  # not lesson05: the hub's other submodule is only imported
    nb05 = g.notebook("05_recompute")
    assert {"gpulab/figures/lesson05.py", "gpulab/kernels/sincos.py", "gpulab/kernels/__init__.py"} <= nb05
    assert "gpulab/data/reference-h200.json" in nb05 and "gpulab/data/history-cpus.json" not in nb05  # rule 3
    assert "gpulab/figures/lesson04.py" not in nb05
    assert g.suite("lesson04") == {
        "gpulab/bench/__main__.py",
        "gpulab/bench/__init__.py",
        "gpulab/bench/lesson04.py",
        "gpulab/kernels/__init__.py",
        "gpulab/kernels/sincos.py",
        "gpulab/reference.py",
        "gpulab/data/reference-h200.json",
        "gpulab/__init__.py",
        "gpulab/plan.py",
    }  # not lesson05: the runner lists it, runs lesson04
    assert "gpulab/bench/lesson05.py" in g.closure(["gpulab/bench/__main__.py"])  # a test of the runner: every suite
    t = g.test_file("tests/test_pure.py")
    assert "tests/fixtures/case.txt" in t and "tests/conftest.py" in t and "tests/helper.py" not in t
    assert "tests/helper.py" in g.test_file("tests/test_skips.py")  # it names the fixture whose import it is
    reads = g.test_file("tests/test_reads_nb.py")  # notebooks read as bytes: their imports do not count
    assert {"notebooks/04_fusion.ipynb", "gpulab/figures/__init__.py"} <= reads
    assert "gpulab/figures/lesson04.py" not in reads  # nor does a hub named by a literal: its own file
    assert "gpulab/figures/lesson04.py" in g.test_file("tests/test_runs_nb.py")  # it executes what it reads
    with pytest.raises(ValueError, match="suite 'lesson09'"):
        g.suite("lesson09")


def test_an_edit_changes_exactly_the_entries_that_depend_on_it(fake):
    """The example of issue 36: an edit to lesson 04's figures reruns notebook 04, its three emulated runs and the
    test files that import it, nothing else; an edit to gpulab/__init__.py reruns everything."""
    before = gc.Tree(fake).current()
    expected = {
        "gpulab/figures/lesson04.py": {
            "notebooks:04_fusion",
            "emulated:T4 04_fusion",
            "emulated:L4 04_fusion",
            "emulated:A100 04_fusion",
            "tests:tests/test_fig04.py",
            "tests:tests/test_runs_nb.py",
        },
        "notebooks/04_fusion.ipynb": {
            "notebooks:04_fusion",
            *(f"emulated:{g} 04_fusion" for g in gc.EMULATED_GPUS),
            "tests:tests/test_reads_nb.py",
            "tests:tests/test_runs_nb.py",
        },
        "gpulab/kernels/sincos.py": {
            "notebooks:05_recompute",
            *(f"emulated:{g} 05_recompute" for g in gc.EMULATED_GPUS),
            "suites:lesson04",
            "tests:tests/test_sincos.py",
            "tests:tests/test_marked_bad.py",
            "tests:tests/test_reads_nb.py",
            "tests:tests/test_runs_nb.py",  # it executes what it reads: every notebook's imports
        },
        "gpulab/data/reference-h200.json": {
            "notebooks:05_recompute",
            *(f"emulated:{g} 05_recompute" for g in gc.EMULATED_GPUS),
            *(f"suites:{k}" for k in ("ceilings", "lesson04", "lesson05")),
            "tests:tests/test_runs_nb.py",
        },
        "gpulab/data/history-cpus.json": set(),  # nothing reads it
        "gpulab/data/gpu-check-h200.json": set(),  # a stamp is never a dependency
        "tests/helper.py": set(),  # only a fixture no GPU test file names imports it
        "tools/build.py": set(),
    }
    (fake / "gpulab/data/gpu-check-h200.json").write_text("{}\n")
    for rel, want in expected.items():
        _edit(fake, rel)
        after = gc.Tree(fake).current()
        assert _changed(before, after) == want, rel
        before = after
    _edit(fake, "gpulab/__init__.py")
    after = gc.Tree(fake).current()
    assert _changed(before, after) == {f"{p}:{n}" for p in before for n in before[p]}


def _by_hand(root: Path, files) -> str:
    """The hash rule written out: sha256 over each file's path and the sha256 of its bytes, in path order."""
    lines = "".join(f"{f}\0{hashlib.sha256((root / f).read_bytes()).hexdigest()}\n" for f in sorted(files))
    return hashlib.sha256(lines.encode()).hexdigest()


@needs_git
def test_entry_hashes_are_the_same_with_git_and_without(fake):
    """The GPU machine gets a copy without .git: each entry's files and hash must be those computed here."""
    _git(fake, "init", "-q")
    (fake / "build").mkdir()
    (fake / "build" / "x.py").write_text("ignored\n")
    with_git = gc.Tree(fake, use_git=True)
    assert with_git.how == "git"
    assert with_git.current() == gc.Tree(fake, use_git=False).current()
    files = with_git.files_of("notebooks", "04_fusion")
    assert with_git.entry_hash("notebooks", "04_fusion") == _by_hand(fake, files)


def test_an_entry_hash_leaves_out_the_executable_bit(fake):
    """A copy of the tree may lose the executable bit: no entry's result, and no hash, depends on it."""
    before, whole = gc.Tree(fake).entry_hash("notebooks", "04_fusion"), gc.tree_hash(fake, use_git=False)
    os.chmod(fake / "gpulab/fusion.py", 0o755)
    assert gc.Tree(fake).entry_hash("notebooks", "04_fusion") == before
    assert gc.tree_hash(fake, use_git=False) == whole


# ------------------------------------------------------------------------------------------------ status and plan


def _entry(deps_hash, ok=True, seconds=10.0, **kw):
    return {"deps": deps_hash, "date": "d", "ok": ok, "seconds": seconds, "failures": [] if ok else ["Cell 3"], **kw}


def _proven_stamp(now: dict, seconds: float = 10.0) -> dict:
    return {
        "schema": 2,
        "gpu": "NVIDIA H200",
        "slug": "h200",
        "updated": "u",
        "versions": {"torch": "2.11"},
        "parts": {p: {"items": {n: _entry(h, seconds=seconds) for n, h in now[p].items()}} for p in gc.PARTS},
    }


def test_status_says_entry_by_entry_and_ends_with_the_verdict(fake):
    now = gc.Tree(fake).current()
    stamp = _proven_stamp(now)
    lines = gc.status_lines(stamp, now, "x.json")
    assert lines[-1] == "verdict: proven on the tree now" and len(lines) <= 15
    assert any(ln.startswith("notebooks 2/2 proven") for ln in lines)
    _edit(fake, "gpulab/figures/lesson04.py")
    now2 = gc.Tree(fake).current()
    stamp["parts"]["suites"]["items"]["lesson05"].update(ok=False, failures=["exit 1: boom"])
    del stamp["parts"]["suites"]["items"]["lesson04"]
    lines = gc.status_lines(stamp, now2, "x.json")
    assert len(lines) <= 15
    assert lines[-1].startswith(
        "verdict: not proven on the tree now: rerun tests 2 (test_fig04, test_runs_nb), notebooks 1 (04_fusion)"
    )
    assert "emulated 3" in lines[-1] and "suites 2 (lesson04, lesson05)" in lines[-1]
    suites = next(ln for ln in lines if ln.startswith("suites"))
    assert (
        suites.startswith("suites    1/3 proven")
        and "failed 1 (lesson05)" in suites
        and "never run 1 (lesson04)" in suites
    )
    assert any("changed 3 (T4 04_fusion, L4 04_fusion, A100 04_fusion)" in ln for ln in lines)
    assert "  failing: lesson05 (exit 1: boom)" in lines
    assert gc.stamp_warnings(stamp, now2)[0] == "part tests: changed 2 of its entries not proven"
    many = {p: {f"{p}{i:03d}": "h" for i in range(200)} for p in gc.PARTS}  # the line count holds for any tree
    assert len(gc.status_lines({"parts": {}}, many, "x.json")) <= 15


def test_notebooks_over_the_collection_limit_are_not_proven(fake, monkeypatch):
    monkeypatch.setattr(gc, "COLLECTION_LIMIT_S", 600.0)  # the fake tree has two notebooks: a limit two can pass
    now = gc.Tree(fake).current()
    stamp = _proven_stamp(now, seconds=301.0)  # every entry passed as recorded; the two notebooks take 602 s
    lines = gc.status_lines(stamp, now, "x.json")
    assert lines[-1].startswith("verdict: not proven on the tree now: rerun the notebooks' total")
    assert any("602 s in all, over the collection's 600 s" in ln for ln in lines)


def test_a_schema_1_stamp_is_read_and_proves_nothing(fake):
    old = {
        "schema": 1,
        "gpu": "NVIDIA H200",
        "slug": "h200",
        "tree_rule": "old",
        "parts": {
            "tests": {"tree": "t", "passed": 3, "failed": 0, "errors": 0, "skipped": 0, "seconds": 297.0, "ok": True},
            "notebooks": {"items": {"04_fusion": {"tree": "t", "ok": True, "seconds": 90.2}}, "ok": False},
        },
    }
    path = gc.stamp_path("h200", fake)
    path.write_text(json.dumps(old))
    stamp = gc.load_stamp(path)
    assert stamp["schema"] == 2 and stamp["parts"]["tests"]["items"] == {}
    assert stamp["parts"]["tests"]["last_run"]["seconds"] == 297.0
    now = gc.Tree(fake).current()
    assert (
        gc.entry_state(stamp["parts"]["notebooks"]["items"]["04_fusion"], now["notebooks"]["04_fusion"]) == "unhashed"
    )
    pl = gc.make_plan(stamp, now)
    assert pl["parts"]["notebooks"]["run"][0] == ["04_fusion", "unhashed", 90.2]  # its seconds still estimate it
    path.write_text(json.dumps({"schema": 9}))
    with pytest.raises(gc.GPUCheckError, match="schema 9"):
        gc.load_stamp(path)


def test_plan_lists_what_runs_and_its_seconds(fake, capsys):
    now = gc.Tree(fake).current()
    stamp = _proven_stamp(now)
    stamp["parts"]["notebooks"]["items"]["04_fusion"].update(deps="old", seconds=80.0)
    stamp["parts"]["tests"]["items"]["tests/test_sincos.py"].update(ok=False, seconds=120.0, slowest=[["t", 70.0]])
    pl = gc.make_plan(stamp, now, cores=16, budget_s=520)
    assert pl["parts"]["notebooks"]["run"] == [["04_fusion", "changed", 80.0]]
    assert pl["parts"]["tests"]["run"] == [["tests/test_sincos.py", "failed", 120.0]]
    assert pl["parts"]["emulated"]["run"] == [] and pl["slots"] == {"tests": 14}
    assert pl["walls"]["tests"] == gc.TESTS_START_S + 70.0  # bounded by its longest test, not 120 / 14
    assert pl["phase1_s"] == gc.TESTS_START_S + 70.0 and pl["phase2_s"] == 80.0
    assert pl["calls"] == [gc.TESTS_START_S + 70.0 + 80.0]
    lines = gc.plan_lines(pl, 520)
    assert lines[0].startswith("tests     1 to run, 120 worker-s") and "test_sincos 120 s (failed)" in lines[0]
    assert lines[-1].startswith("proof: phase 1") and "1 call of `bash tools/gpu_run.sh proof`" in lines[-1]
    assert gc.make_plan(stamp, now, only=["05"])["parts"]["notebooks"]["run"] == []  # --only: lesson 05 alone
    everything = gc.make_plan(stamp, now, all_entries=True)
    assert len(everything["parts"]["emulated"]["run"]) == 6
    gc.stamp_path("h200", fake).write_text(json.dumps(stamp))
    assert gc.main(["plan"], root=fake) == 0
    out = capsys.readouterr().out
    assert "04_fusion 80 s (changed)" in out and "proof:" in out
    assert gc.main(["plan", "--json"], root=fake) == 0
    assert json.loads(capsys.readouterr().out)["parts"]["suites"]["run"] == []


def test_cores_are_shared_by_work_and_calls_packed(monkeypatch):
    monkeypatch.setattr(gc, "NOTEBOOK_LIMIT_S", 90.0)  # the packing rule at a limit of 90 s
    assert gc.share_slots({"tests": 1000.0, "emulated": 500.0, "suites": 100.0}, 15) == {
        "tests": 9,
        "emulated": 5,
        "suites": 1,
    }
    assert gc.share_slots({"tests": 0.0, "emulated": 2000.0, "suites": 760.0}, 15) == {"emulated": 7, "suites": 3}
    assert gc.lpt_makespan([228, 151, 135, 47, 36], 3) == 228 and gc.lpt_makespan([10, 10, 10], 2) == 20
    assert gc.lpt_makespan([], 3) == 0
    # phase 1 of 400 s leaves 120 s: the 90 s notebook starts there; each other one needs more than the 30 s left
    # (82 s recorded: 90 s left; 20 s: 35 s), so they go to the second call
    calls = gc._calls(400.0, [90.0, 82.0, 57.0, 55.0, 20.0], 520.0)
    assert calls == [400.0 + 90.0, 82.0 + 57.0 + 55.0 + 20.0]
    assert gc._calls(600.0, [10.0], 520.0) == [520.0, 80.0 + 10.0]  # phase 1 spills into the second call
    assert gc._calls(0.0, [], 520.0) == []
    assert gc.notebook_start_s(None) == 90.0 and gc.notebook_start_s(20.0) == 35.0


# ------------------------------------------------------------------------------------------------ the tree hash


def _tree(tmp_path: Path) -> Path:
    files = {
        "gpulab/__init__.py": "x = 1\n",
        "gpulab/data/reference-h200.json": "{}\n",
        "gpulab/a.b": "dot sorts before the folder a\n",
        "gpulab/a/c.py": "# a folder named a\n",
        "gpulab/a-b.py": "",
        "notebooks/00_x.ipynb": '{"cells": []}\n',
        "tests/test_x.py": "def test(): pass\n",
        "tests/fixtures/f.csv": "1,2\n",
        "tools/t.py": "",
        "README.md": "outside the hashed folders\n",
        ".gitignore": "__pycache__/\n*.egg-info/\nbuild/\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


@needs_git
def test_tree_hash_is_the_hash_of_the_hashed_folders_files(tmp_path):
    root = _tree(tmp_path)
    _git(root, "init", "-q")
    want = [ln for ln in _git(root, "ls-files", "--others", "--exclude-standard").splitlines() if "/" in ln]
    assert gc.hashed_files(root, use_git=True) == (sorted(want), "git") and "README.md" not in want
    assert gc.tree_hash(root, use_git=True) == gc.tree_hash(root, use_git=False) == _by_hand(root, want)


@needs_git
def test_tree_hash_leaves_out_the_stamps_and_what_git_ignores(tmp_path):
    root = _tree(tmp_path)
    _git(root, "init", "-q")
    before = gc.tree_hash(root, use_git=True)
    assert gc.tree_hash(root, use_git=True) == before == gc.tree_hash(root, use_git=False)  # stable
    (root / "gpulab/data/gpu-check-h200.json").write_text('{"schema": 1}\n')
    (root / "gpulab/data/gpu-check-t4.json").write_text("{}\n")
    (root / "gpulab/__pycache__").mkdir()
    (root / "gpulab/__pycache__/x.cpython-312.pyc").write_bytes(b"\0")
    (root / "tests/x.pyc").write_bytes(b"\0")
    (root / "notebooks/.ipynb_checkpoints").mkdir()
    (root / "notebooks/.ipynb_checkpoints/00_x-checkpoint.ipynb").write_text("{}")
    (root / "gpulab/thing.egg-info").mkdir()
    (root / "gpulab/thing.egg-info/PKG-INFO").write_text("x")
    (root / "README.md").write_text("changed outside\n")
    assert gc.tree_hash(root, use_git=True) == before
    assert gc.tree_hash(root, use_git=False) == before
    (root / "tests/test_x.py").write_text("def test(): assert 1\n")
    assert gc.tree_hash(root, use_git=False) != before
    assert gc.tree_hash(root, use_git=True) == gc.tree_hash(root, use_git=False)  # an untracked edit counts too


def test_tree_hash_without_git_walks_the_disk(tmp_path, monkeypatch):
    root = _tree(tmp_path)  # no .git here
    files, how = gc.hashed_files(root)
    assert how == "walk" and "gpulab/a/c.py" in files and "README.md" not in files
    with pytest.raises(gc.GPUCheckError, match="use_git=True"):
        gc.hashed_files(root, use_git=True)
    monkeypatch.setitem(sys.modules, "pathspec", None)  # not installed: the walk says what to install
    with pytest.raises(gc.GPUCheckError, match="pathspec is not installed, and .* is no git checkout"):
        gc.hashed_files(root)


@needs_git
def test_the_walk_reads_gitignore_as_git_does(tmp_path):
    """Negations, anchored patterns, folder patterns and globs: the walk lists what git would add."""
    root = _tree(tmp_path)
    (root / ".gitignore").write_text("*.log\n!keep.log\n/gpulab/local/\ntests/**/out-*\ndata/\n")
    for rel in ("gpulab/x.log", "gpulab/keep.log", "gpulab/local/a.py", "tests/local/a.py", "tests/a/b/out-1.txt"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x\n")
    (root / "tools/data").mkdir()
    (root / "tools/data/z.csv").write_text("1\n")
    _git(root, "init", "-q")
    walk = gc.hashed_files(root, use_git=False)[0]
    assert walk == gc.hashed_files(root, use_git=True)[0]
    assert "gpulab/keep.log" in walk and "tests/local/a.py" in walk and "gpulab/x.log" not in walk


@needs_git
def test_this_repository_hashes_the_same_with_and_without_git():
    """The GPU machine may hash a copy without .git: the walk must choose git's files here."""
    if gc._git_files(ROOT) is None:
        pytest.skip("not a git checkout")
    git_files, _ = gc.hashed_files(ROOT, use_git=True)
    walk_files, _ = gc.hashed_files(ROOT, use_git=False)
    assert walk_files == git_files
    assert gc.tree_hash(ROOT, use_git=True) == gc.tree_hash(ROOT, use_git=False)


# ------------------------------------------------------------------------------------------------ junit, --only


REPORTED = """
import pytest


@pytest.fixture
def broken():
    raise RuntimeError("setup broke")


def test_pass(record_property):
    record_property("entry", '{"ok": true}')


def test_fail():
    assert 1 == 2, "off by one"


def test_error(broken):
    pass


def test_skip():
    pytest.skip("no GPU")


@pytest.mark.slow
def test_deselected():
    pass
"""


def test_a_real_pytest_reports_each_test_as_it_ends(tmp_path):
    """A pytest with this tool as its plugin (``run_pytest``) writes pytest's own reports as they come and the ids
    it collected after deselection; read back, each test has its kind, seconds, first line and properties, and a
    file that fails to collect is one error."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_a.py").write_text(REPORTED)
    (tmp_path / "tests/test_b.py").write_text("import no_such_module\n")
    ctx = gc.Context(root=tmp_path, logs=tmp_path / "logs")
    ctx.logs.mkdir()
    args = ["tests", "-m", "not slow", "--continue-on-collection-errors", "-W", "ignore"]
    ran, cases, ids = gc.run_pytest(ctx, "t", args, gc.base_env(), 300)
    assert ran.rc == 1 and not ran.stopped, ran.output
    assert ids == [f"tests/test_a.py::test_{n}" for n in ("pass", "fail", "error", "skip")]
    by = {c["id"]: c for c in cases}
    assert {i: c["kind"] for i, c in by.items()} == {
        "tests/test_b.py": "errors",
        "tests/test_a.py::test_pass": "passed",
        "tests/test_a.py::test_fail": "failed",
        "tests/test_a.py::test_error": "errors",
        "tests/test_a.py::test_skip": "skipped",
    }
    assert "off by one" in by["tests/test_a.py::test_fail"]["reason"]
    assert by["tests/test_a.py::test_error"]["reason"] == "RuntimeError: setup broke"
    assert by["tests/test_a.py::test_skip"]["reason"] == "Skipped: no GPU"
    assert "no_such_module" in by["tests/test_b.py"]["reason"] and by["tests/test_b.py"]["file"] == "tests/test_b.py"
    assert by["tests/test_a.py::test_pass"]["properties"] == {"entry": '{"ok": true}'}
    s = gc.summarize(cases)
    assert (s["passed"], s["failed"], s["errors"], s["skipped"]) == (1, 1, 2, 1)
    assert s["failures"] == ["tests/test_b.py", "tests/test_a.py::test_fail", "tests/test_a.py::test_error"]


def test_reports_cut_short_are_read_up_to_the_cut(tmp_path):
    """A run killed at the budget may leave half a line: the reports before it still count."""
    path = tmp_path / "r.jsonl"
    line = {"$report_type": "TestReport", "nodeid": "notebooks/x.ipynb::Cell 3", "when": "call", "duration": 2.5}
    path.write_text(json.dumps({**line, "outcome": "failed", "longrepr": "boom\nmore"}) + "\n" + '{"nodeid": "n')
    (case,) = gc.read_reports(path)
    assert (case["file"], case["name"], case["kind"], case["seconds"], case["reason"]) == (
        "notebooks/x.ipynb",
        "Cell 3",
        "failed",
        2.5,
        "boom",
    )
    assert gc.read_reports(tmp_path / "none.jsonl") == []


def test_only_picks_lessons():
    nbs = gc.notebooks(ROOT)
    assert gc.select(nbs, ["07"], "notebooks") == ["07_tiling", "07b_waves"]
    assert gc.select(nbs, ["08"], "notebooks") == ["08_flash_attention", "08b_flash_backward"]
    assert gc.select(nbs, ["00"], "notebooks") == ["00_the_machine", "00b_first_kernel"]
    assert gc.select(nbs, ["00b"], "notebooks") == ["00b_first_kernel"]
    assert gc.select(nbs, ["07b", "lesson09"], "notebooks") == ["07b_waves", "09_builder_test"]
    assert gc.select(nbs, None, "notebooks") == nbs
    assert gc.select(["T4 07_tiling", "L4 08_flash_attention"], ["08"], "emulated") == ["L4 08_flash_attention"]
    assert gc.select(["tests/test_x.py"], ["08"], "tests") == ["tests/test_x.py"]
    suites = ["ceilings", "lesson00", "lesson07", "lesson08"]
    assert gc.select(suites, ["00"], "suites") == ["ceilings", "lesson00"]
    assert gc.select(suites, ["07b", "08"], "suites") == ["lesson07", "lesson08"]
    assert gc.select(suites, ["ceilings"], "suites") == ["ceilings"]
    gc.check_only(["08", "ceilings"], ROOT)
    with pytest.raises(gc.GPUCheckError, match="--only: '99'"):
        gc.check_only(["99"], ROOT)
    assert gc.suite_args("lesson08", ("headline",)) == ["--only", "lesson08", "--steps", "headline"]
    assert gc.suite_args("lesson02", ("variants", "x")) == ["--only", "lesson02", "--steps", "variants,x"]
    assert gc.suite_args("lesson04", ()) == ["--only", "lesson04"]


def test_the_suite_list_read_from_the_source_is_the_imported_one():
    """status and plan read the suites without importing them (no torch needed): the same list the modules give."""
    import importlib

    from gpulab.bench.__main__ import CORE, LESSON_SUITES

    want = [(CORE, ())]
    for name in LESSON_SUITES:
        mod = importlib.import_module(name)
        steps = tuple(getattr(mod, "STEPS", ()))
        want.append((mod.KEY, tuple(getattr(mod, "HEADLINE_STEPS", ("headline",) if "headline" in steps else ()))))
    assert gc.suite_list() == want


# ------------------------------------------------------------------------------------------------ merging


def _run(only=None, unreached=()):
    return {"tree": "t", "date": "d", "versions": {}, "only": only, "seconds": 1, "unreached": list(unreached)}


def test_merge_keeps_other_entries_with_their_own_deps():
    names = ["00_a", "01_b", "02_c"]
    s = gc.merge(
        None,
        "notebooks",
        {"items": {n: _entry("h1") for n in names}, "last_run": _run()},
        gpu="NVIDIA H200",
        slug="h200",
        expected=names,
    )
    assert s["parts"]["notebooks"]["ok"] and s["parts"]["notebooks"]["total_seconds"] == 30
    assert s["schema"] == 2 and s["deps_rule"] == gc.DEPS_RULE
    s = gc.merge(
        s,
        "notebooks",
        {"items": {"01_b": _entry("h2", ok=False)}, "last_run": _run(["01"])},
        gpu="NVIDIA H200",
        slug="h200",
        expected=names,
    )
    items = s["parts"]["notebooks"]["items"]
    assert [items[n]["deps"] for n in names] == ["h1", "h2", "h1"] and list(items) == names
    assert not s["parts"]["notebooks"]["ok"] and s["parts"]["notebooks"]["last_run"]["only"] == ["01"]
    t = {
        "items": {"tests/test_a.py": _entry("h3", passed=3)},
        "deselected": {"tests/test_b.py": "x"},
        "last_run": _run(),
    }
    s = gc.merge(s, "tests", t, gpu="NVIDIA H200", slug="h200", expected=["tests/test_a.py"])
    assert s["parts"]["tests"]["ok"] and s["parts"]["tests"]["deselected"] == {"tests/test_b.py": "x"}
    assert "notebooks" in s["parts"]
    with pytest.raises(gc.GPUCheckError, match="stamp is for 'h200'"):
        gc.merge(s, "tests", {"items": {}}, gpu="Tesla T4", slug="t4")


def test_merge_marks_missing_items_and_the_collection_limit():
    names = ["00_a", "01_b"]
    s = gc.merge(
        None, "notebooks", {"items": {"00_a": _entry("t")}, "last_run": _run()}, gpu="g", slug="h200", expected=names
    )
    assert s["parts"]["notebooks"]["missing"] == ["01_b"] and not s["parts"]["notebooks"]["ok"]
    items = {n: _entry("t", seconds=80.0) for n in names}
    s = gc.merge(None, "notebooks", {"items": items, "last_run": _run()}, gpu="g", slug="h200", expected=names)
    assert s["parts"]["notebooks"]["ok"]
    many = [f"{i:02d}_n" for i in range(8)]
    items = {n: _entry("t", seconds=80.0) for n in many}  # each within 90 s, 640 s in all
    s = gc.merge(None, "notebooks", {"items": items, "last_run": _run()}, gpu="g", slug="h200", expected=many)
    assert s["parts"]["notebooks"]["total_seconds"] == 640 and not s["parts"]["notebooks"]["ok"]


def test_merge_drops_the_entries_of_items_the_part_no_longer_has():
    old = {"00_setup_and_ceilings": _entry("t0", True, 30.0), "01_roofline": _entry("t0", True, 20.0)}
    s = gc.merge(None, "notebooks", {"items": old, "last_run": _run()}, gpu="g", slug="h200")
    names = ["00_the_machine", "01_roofline"]
    new = {"00_the_machine": _entry("t1", True, 25.0)}
    s = gc.merge(s, "notebooks", {"items": new, "last_run": _run()}, gpu="g", slug="h200", expected=names)
    p = s["parts"]["notebooks"]
    assert list(p["items"]) == names and p["missing"] == [] and p["total_seconds"] == 45.0 and p["ok"]


def test_write_atomic_leaves_the_old_file_whole_when_the_write_fails(tmp_path, monkeypatch):
    path = tmp_path / "gpu-check-h200.json"
    gc.write_atomic(path, {"schema": 1, "a": 1})
    assert json.loads(path.read_text()) == {"schema": 1, "a": 1}

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)  # the module object gpulab.measure.device uses too
    with pytest.raises(OSError, match="disk full"):
        gc.write_atomic(path, {"schema": 1, "a": 2})
    assert json.loads(path.read_text()) == {"schema": 1, "a": 1}
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


# ------------------------------------------------------------------------------------------------ parts, faked


def _report(nodeid, outcome, seconds=1.5, longrepr=None, **props):
    """One line of ``run_pytest``'s reports, as pytest serializes a test's call."""
    props = [[k, v] for k, v in props.items()]
    return {"$report_type": "TestReport", "nodeid": nodeid, "when": "call", "outcome": outcome, "duration": seconds,
            "longrepr": longrepr, "user_properties": props}  # fmt: skip


class FakeMachine:
    """The GPU machine, faked, and its clock. As gpu_check's runner of a pytest of cases it runs each case here
    (``gpu_cases.run_case``) against a fake child and reports it as pytest does (``test_entry``); each child
    takes the seconds ``plan`` gives its notebook or suite and reports four cells, failing those ``plan`` lists; a
    child longer than its timeout is stopped."""

    def __init__(self, plan):
        self.plan, self.now, self.calls = plan, 0.0, []

    def clock(self):
        return self.now

    def __call__(self, cmd, env, timeout_s, log, cwd=None):
        spec = json.loads(Path(env["GPU_CHECK_CASES"]).read_text())
        assert str(gc.CASES_FILE) in cmd and timeout_s == spec["deadline"] - self.now + gc.CASE_GRACE_S
        with open(env["GPU_CHECK_REPORTS"], "a") as out:
            for case in spec["cases"]:
                tmp = Path(tempfile.mkdtemp(dir=log.parent))
                entry = cases.run_case(case, spec["deadline"], tmp, run=self.child, clock=self.clock, root=cwd)
                outcome = "skipped" if "unreached" in entry else "passed" if entry["ok"] else "failed"
                nodeid = f"tools/gpu_cases.py::test_entry[{case['name']}]"
                out.write(json.dumps(_report(nodeid, outcome, entry=json.dumps(entry))) + "\n")
        return gc.Ran(0, 1.0, "", False)

    def child(self, cmd, env, timeout_s, log, cwd=None):
        key = next(k for k in self.plan if any(k in a for a in cmd))
        seconds, failing = self.plan[key]
        self.calls.append((key, cmd, env, timeout_s))
        stopped = seconds > timeout_s
        seconds = min(seconds, timeout_s)
        self.now += seconds
        if "--nbval-lax" in cmd and not stopped:
            with open(env["GPU_CHECK_REPORTS"], "w") as out:
                for i in range(4):
                    bad = i in failing
                    line = _report(f"notebooks/{key}.ipynb::Cell {i}", "failed" if bad else "passed", float(i))
                    out.write(json.dumps({**line, "longrepr": "boom" if bad else None}) + "\n")
        rc = None if stopped else (1 if failing else 0)
        return gc.Ran(rc, seconds, "out\n", stopped)


def _ctx(root, machine, **kw):
    kw = {"jobs": 1, "suite_jobs": 1, "workers": 0, **kw}
    return gc.Context(
        root=root, gpu="NVIDIA H200", slug="h200", logs=root / "logs", runner=machine, clock=machine.clock, **kw
    )


NB3 = {f"notebooks/{s}.ipynb": NB("import gpulab") for s in ("00_a", "01_b", "02_c")}


@pytest.fixture
def three(tmp_path):
    """A fake tree of three notebooks (00_a, 01_b, 02_c) and the two suites, without the fake tree's notebooks."""
    files = {k: v for k, v in FAKE.items() if not k.startswith("notebooks/")}
    return _fake_tree(tmp_path, {**files, **NB3})


def test_notebooks_part_applies_the_90_second_rule_and_the_budget(three, monkeypatch):
    monkeypatch.setattr(gc, "NOTEBOOK_LIMIT_S", 90.0)  # the rule at a limit of 90 s (the real one is lower)
    m = FakeMachine({"00_a": (80, []), "01_b": (95, []), "02_c": (30, [2])})
    s = gc.run_part("notebooks", _ctx(three, m, budget_s=1000))
    items = s["parts"]["notebooks"]["items"]
    assert items["00_a"]["ok"] and items["00_a"]["seconds"] == 80
    assert items["00_a"]["deps"] == gc.Tree(three).entry_hash("notebooks", "00_a")
    assert items["00_a"]["slowest_cells"] == [["Cell 3", 3.0], ["Cell 2", 2.0], ["Cell 1", 1.0]]
    assert not items["01_b"]["ok"] and items["01_b"]["over_limit"] and items["01_b"]["failures"] == ["over 90 s"]
    assert items["02_c"]["failures"] == ["Cell 2"]
    assert m.calls[0][1][:2] == [sys.executable, "-m"] and "--nbval-lax" in m.calls[0][1]
    assert "notebooks/00_a.ipynb" in m.calls[0][1]
    env = m.calls[0][2]
    assert env["GPULAB_AUTOTUNE"] == "full" and "GPULAB_AS_GPU" not in env
    assert env["TRITON_CACHE_DIR"] != m.calls[1][2]["TRITON_CACHE_DIR"]  # a cold cache for each notebook
    assert (three / "logs" / "nb-02_c.tail.txt").exists()
    assert gc.load_stamp(gc.stamp_path("h200", three)) == s

    # only what is not proven runs again, longest first by its recorded seconds: 01_b (95 s), then 02_c
    m = FakeMachine({"01_b": (200, []), "02_c": (30, [])})
    s = gc.run_part("notebooks", _ctx(three, m, budget_s=150))
    run = s["parts"]["notebooks"]["last_run"]
    b = s["parts"]["notebooks"]["items"]["01_b"]
    assert [c[0] for c in m.calls] == ["01_b"]  # 00_a is proven
    assert b["stopped"] and not b["ok"] and b["seconds"] == 150  # stopped at the budget, past the 90 s limit
    assert run["unreached"] == ["02_c"]  # 30 s recorded needs 47.5 s left; none was


def test_a_notebook_stopped_at_the_budget_within_its_limit_is_unreached(three):
    m = FakeMachine({"00_a": (10, []), "01_b": (10, []), "02_c": (10, [])})
    gc.run_part("notebooks", _ctx(three, m))
    _edit(three, "notebooks/01_b.ipynb")
    m = FakeMachine({"01_b": (60, [])})
    s = gc.run_part("notebooks", _ctx(three, m, budget_s=40))  # recorded 10 s: starts with 22.5 s needed
    p = s["parts"]["notebooks"]
    assert p["last_run"]["unreached"] == ["01_b"] and p["items"]["01_b"]["seconds"] == 10  # the old entry stays
    now = gc.Tree(three).current()
    assert gc.entry_state(p["items"]["01_b"], now["notebooks"]["01_b"]) == "changed"


def test_only_all_entries_and_what_reruns(three):
    m = FakeMachine({"00_a": (10, []), "01_b": (10, [1]), "02_c": (10, [])})
    gc.run_part("notebooks", _ctx(three, m))
    m2 = FakeMachine({"00_a": (10, []), "01_b": (12, []), "02_c": (10, [])})
    s = gc.run_part("notebooks", _ctx(three, m2))
    assert [c[0] for c in m2.calls] == ["01_b"]  # the failed one, nothing else
    assert s["parts"]["notebooks"]["ok"]
    m3 = FakeMachine({"00_a": (10, []), "01_b": (10, []), "02_c": (10, [])})
    gc.run_part("notebooks", _ctx(three, m3))
    assert m3.calls == []  # every entry proven
    _edit(three, "gpulab/plan.py")  # imported by `import gpulab`: every notebook's
    m4 = FakeMachine({"00_a": (10, []), "01_b": (10, []), "02_c": (10, [])})
    s = gc.run_part("notebooks", _ctx(three, m4, only=["01"]))
    assert [c[0] for c in m4.calls] == ["01_b"] and s["parts"]["notebooks"]["last_run"]["only"] == ["01"]
    m5 = FakeMachine({"00_a": (10, []), "01_b": (10, []), "02_c": (10, [])})
    gc.run_part("notebooks", _ctx(three, m5, all_entries=True))
    assert sorted(c[0] for c in m5.calls) == ["00_a", "01_b", "02_c"]


def test_emulated_part_names_failing_cells_per_gpu(three, monkeypatch):
    monkeypatch.setattr(gc, "have", lambda module: True)
    m = FakeMachine({"00_a": (10, []), "01_b": (10, [3]), "02_c": (10, [])})
    s = gc.run_part("emulated", _ctx(three, m, jobs=3))
    items = s["parts"]["emulated"]["items"]
    assert set(items) == {f"{g} {n}" for g in gc.EMULATED_GPUS for n in ("00_a", "01_b", "02_c")}
    assert list(items)[:3] == ["T4 00_a", "T4 01_b", "T4 02_c"]  # the stamp keeps the part's order
    assert items["L4 01_b"]["failures"] == ["Cell 3"] and not s["parts"]["emulated"]["ok"]
    envs = {c[2]["GPULAB_AS_GPU"] for c in m.calls}
    assert envs == {"T4", "L4", "A100"} and {c[2]["GPULAB_AUTOTUNE"] for c in m.calls} == {"first"}
    assert {c[2]["OMP_NUM_THREADS"] for c in m.calls} == {os.environ.get("OMP_NUM_THREADS") or gc.threads_each(3)}


def test_suites_part_runs_each_headline_and_records_what_it_did_not_reach(three):
    old = {k: _entry("old", seconds=sec) for k, sec in (("ceilings", 50.0), ("lesson04", 1.0), ("lesson05", 40.0))}
    gc.stamp_path("h200", three).write_text(
        json.dumps({"schema": 2, "slug": "h200", "parts": {"suites": {"items": old}}})
    )
    m = FakeMachine({"ceilings": (20, []), "lesson04": (500, []), "lesson05": (40, [1])})
    s = gc.run_part("suites", _ctx(three, m, budget_s=300, suite_jobs=1, out=three / "out"))
    assert json.loads((three / "out" / "stamp.json").read_text()) == s  # a copy after each part, for $OUT
    p = s["parts"]["suites"]
    assert [c[0] for c in m.calls] == ["ceilings", "lesson05", "lesson04"]  # longest first, by recorded seconds
    assert p["items"]["ceilings"]["ok"] and not p["items"]["lesson05"]["ok"]
    assert p["last_run"]["unreached"] == ["lesson04"] and p["items"]["lesson04"]["deps"] == "old"
    assert m.calls[2][1][-4:] == ["--only", "lesson04", "--steps", "headline"] and m.calls[2][3] == 240
    assert p["items"]["lesson05"]["steps"] == "--steps ways" and p["items"]["ceilings"]["steps"] == "all"


def test_a_part_keeps_its_results_when_the_stamp_is_not_json(three, capsys):
    """A stamp that stopped being JSON while a part ran (a hand edit, a copy cut short) is set aside and a new
    stamp holds the part's results; status and plan name the unreadable file instead of a traceback."""
    path = gc.stamp_path("h200", three)
    m = FakeMachine({"ceilings": (5, []), "lesson04": (5, []), "lesson05": (5, [])})

    def corrupting(cmd, env, timeout_s, log, cwd):
        path.write_text('{"schema": 2, "parts": {')  # cut short
        return m(cmd, env, timeout_s, log, cwd)

    ctx = _ctx(three, m, suite_jobs=1)
    ctx.runner = corrupting
    s = gc.run_part("suites", ctx)
    assert sorted(s["parts"]["suites"]["items"]) == ["ceilings", "lesson04", "lesson05"]
    assert gc.load_stamp(path) == s
    assert path.with_name(path.name + ".unreadable").read_text() == '{"schema": 2, "parts": {'
    assert "is not JSON" in capsys.readouterr().out
    path.write_text("[1, 2]")
    assert gc.main(["status"], root=three) == 2
    assert f"error: {path} must hold a JSON object, got list" in capsys.readouterr().err
    path.write_text("nope")
    assert gc.main(["plan"], root=three) == 2
    assert f"error: {path} is not JSON" in capsys.readouterr().err


class FakePytest:
    """One pytest run of the tests part: writes the collected ids ($GPU_CHECK_COLLECTED) and the reports of
    ``cases`` (file -> [(name, kind)]) of those files the command names; ``unreported`` files are collected but
    their last case never reports (the run was stopped)."""

    def __init__(self, cases, unreported=(), rc=1, stopped=False):
        self.cases, self.unreported, self.rc, self.stopped, self.calls = cases, set(unreported), rc, stopped, []

    def clock(self):
        return 0.0

    def __call__(self, cmd, env, timeout_s, log, cwd=None):
        self.calls.append((cmd, env))
        files = [a for a in cmd if a.startswith("tests/") and a.endswith(".py")]
        ids = [f"{f}::{name}" for f in files for name, _ in self.cases.get(f, [])]
        Path(env["GPU_CHECK_COLLECTED"]).write_text(json.dumps(ids))
        with open(env["GPU_CHECK_REPORTS"], "w") as out:
            for f in files:
                rows = self.cases.get(f, [])
                for name, kind in rows[:-1] if f in self.unreported else rows:
                    crash = {"reprcrash": {"message": "assert 1 == 2"}} if kind == "failed" else None
                    out.write(json.dumps(_report(f"{f}::{name}", kind, longrepr=crash)) + "\n")
        return gc.Ran(None if self.stopped else self.rc, 42.0, "tail\n", self.stopped)


def test_tests_part_gives_each_file_its_entry(fake, monkeypatch):
    monkeypatch.setattr(gc, "have", lambda module: True)
    fp = FakePytest(
        {
            "tests/test_fig04.py": [("test_f", "passed"), ("test_g", "skipped")],
            "tests/test_sincos.py": [("test_c", "failed"), ("test_d", "passed")],
            "tests/test_marked_bad.py": [("test_c", "passed"), ("test_e", "passed")],
        },
        unreported=["tests/test_marked_bad.py"],
        stopped=True,
    )
    s = gc.run_part("tests", _ctx(fake, fp, workers=12))
    cmd, env = fp.calls[0]
    assert cmd[cmd.index("-n") + 1] == "12" and cmd[cmd.index("--dist") + 1] == "loadgroup"
    assert gc.TEST_MARKERS == "not browser and not slow and not cpu_same"
    assert cmd[cmd.index(gc.TEST_MARKERS) - 1] == "-m"
    assert cmd[cmd.index("--timeout") + 1] == "300" and cmd[cmd.index("--timeout-method") + 1] == "thread"
    assert [a for a in cmd if a.startswith("tests/")] == GPU_TESTS  # CPU-same and browser files never run
    assert env["GPULAB_AUTOTUNE"] == "first" and cmd[cmd.index("-p") + 1] == "gpu_check"  # reports as they come
    p = s["parts"]["tests"]
    assert p["items"]["tests/test_fig04.py"]["ok"] and p["items"]["tests/test_fig04.py"]["skipped"] == 1
    assert p["items"]["tests/test_fig04.py"]["seconds"] == 3.0
    bad = p["items"]["tests/test_sincos.py"]
    assert not bad["ok"] and bad["failures"] == ["tests/test_sincos.py::test_c"]
    assert bad["reasons"]["tests/test_sincos.py::test_c"] == "assert 1 == 2"
    assert "tests/test_marked_bad.py" not in p["items"] and p["last_run"]["unreached"] == ["tests/test_marked_bad.py"]
    assert p["deselected"]["tests/test_pure.py"] == "reaches no device word"
    fp2 = FakePytest({"tests/test_sincos.py": [("test_c", "passed"), ("test_d", "passed")]}, rc=0)
    s = gc.run_part("tests", _ctx(fake, fp2, workers=0))
    files = [a for a in fp2.calls[0][0] if a.startswith("tests/")]
    assert files == ["tests/test_marked_bad.py", "tests/test_sincos.py"] and "-n" not in fp2.calls[0][0]  # 40 s, 3 s
    assert s["parts"]["tests"]["items"]["tests/test_sincos.py"]["ok"]  # the failure fixed
    assert s["parts"]["tests"]["ok"]  # test_marked_bad.py collected nothing this time: nothing left unproven


def test_proof_runs_the_three_parts_then_the_notebooks_with_the_time_left(three, monkeypatch):
    monkeypatch.setattr(gc, "have", lambda module: True)
    plan = {n: (10, []) for n in ("00_a", "01_b", "02_c")} | {k: (20, []) for k in ("ceilings", "lesson04", "lesson05")}
    m = FakeMachine(plan)

    def runner(cmd, env, timeout_s, log, cwd):
        if "GPU_CHECK_CASES" in env:
            return m(cmd, env, timeout_s, log, cwd)
        Path(env["GPU_CHECK_COLLECTED"]).write_text("[]")  # every GPU test file's tests are deselected here
        m.now += 50
        m.calls.append(("tests", cmd, env, timeout_s))
        return gc.Ran(5, 50.0, "no tests ran\n")

    ctx = _ctx(three, m, budget_s=400)
    ctx.runner = runner
    pl = gc.run_proof(ctx, concurrent_parts=False)
    work = {"tests": len(GPU_TESTS) * 40.0, "emulated": 9 * 60.0, "suites": 3 * 60.0}  # nothing recorded: defaults
    assert pl["slots"] == gc.share_slots(work, max(1, (os.cpu_count() or 16) - 1))
    phase2 = [c for c in m.calls if "--nbval-lax" in c[1] and "GPULAB_AS_GPU" not in c[2]]
    assert m.calls[-3:] == phase2 and len(m.calls) == 1 + 9 + 3 + 3  # the notebooks last, alone
    assert phase2[0][3] == 400 - (50 + 9 * 10 + 3 * 20)  # what phase 1 left of the budget
    assert m.now == 50 + 9 * 10 + 3 * 20 + 3 * 10
    s = gc.load_stamp(gc.stamp_path("h200", three))
    assert all(s["parts"][p]["ok"] for p in gc.PARTS)
    now = gc.Tree(three).current()
    assert gc.status_lines(s, now, "x")[-1] == "verdict: proven on the tree now"
    m.calls.clear()
    gc.run_proof(ctx, concurrent_parts=False)  # a second proof: nothing left to run
    assert m.calls == []


def test_parts_refuse_without_a_gpu(capsys, monkeypatch):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    assert gc.main(["notebooks"]) == 2
    assert "make gpu-check needs an NVIDIA GPU: torch.cuda.is_available() is False" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        gc.main(["notebooks", "--budget", "-3"])
    assert "--budget must be > 0" in capsys.readouterr().err
    for text in ("nan", "inf", "-inf"):
        with pytest.raises(SystemExit):
            gc.main(["proof", f"--budget={text}"])
        assert f"--budget must be a finite number, got '{text}'" in capsys.readouterr().err


def test_a_missing_plugin_is_named_before_anything_runs(capsys, monkeypatch):
    """Runs at once go through pytest-xdist, and the tests part's limit through pytest-timeout: without one, a part
    says which and how to get it (never quietly one at a time, nor without a limit)."""
    monkeypatch.setattr(gc, "have", lambda module: module != "xdist")
    for argv, opt in (
        (["tests"], "--workers 14"),
        (["emulated"], "--jobs 7"),
        (["proof", "--workers", "0"], "--jobs 7"),
    ):
        assert gc.main(argv) == 2
        err = capsys.readouterr().err
        assert f"error: pytest-xdist is not installed, and {opt} runs" in err and "gpu-wheels.sh pytest-xdist" in err
        assert "--workers 0 --jobs 1 --suite-jobs 1" in err
    monkeypatch.setattr(gc, "have", lambda module: module != "pytest_timeout")
    assert gc.main(["tests"]) == 2
    assert "error: pytest-timeout is not installed, and the tests part stops a test hung" in capsys.readouterr().err

    def no_gpu():  # the step after the plugins: on a GPU the part would run for real, in this worker
        raise gc.GPUCheckError(gc.NO_GPU)

    monkeypatch.setattr(gc, "gpu_info", no_gpu)
    assert gc.main(["emulated", "--jobs", "1"]) == 2  # one at a time and no tests: neither is needed
    assert "needs an NVIDIA GPU" in capsys.readouterr().err


def test_run_child_stops_the_childs_session_at_its_limit(tmp_path, monkeypatch):
    """The budget for real: at its limit the child and what it started are killed (what it reported is on disk
    already). The limit passes once the child has started its own child (an event, not this machine's speed)."""
    import time

    ready = tmp_path / "ready"

    class LimitWhenReady(subprocess.Popen):
        """run_child's wait for the limit ends as the limit passing, once the child has made ``ready``."""

        def wait(self, timeout=None):
            if str(ready) not in self.args or getattr(self, "limit_passed", False):
                return super().wait(timeout)
            self.limit_passed = True
            t0 = time.monotonic()
            while not ready.exists() and self.poll() is None and time.monotonic() - t0 < 600:  # 600 s: a hang only
                time.sleep(0.01)
            raise subprocess.TimeoutExpired(self.args, timeout)

    monkeypatch.setattr(subprocess, "Popen", LimitWhenReady)
    code = (
        "import pathlib, subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "pathlib.Path(sys.argv[1]).write_text(str(p.pid))\ntime.sleep(600)\n"
    )
    ran = gc.run_child([sys.executable, "-c", code, str(ready)], dict(os.environ), 1.0, tmp_path / "log")
    assert ran.stopped and ran.rc is None, ran.output
    grandchild = int(ready.read_text())
    t0 = time.monotonic()
    while _alive(grandchild) and time.monotonic() - t0 < 60:  # SIGKILL lands at once; 60 s: a failure only
        time.sleep(0.01)
    assert not _alive(grandchild), "the child's own child outlived the limit"
    ran = gc.run_child([sys.executable, "-c", "print('hi')"], dict(os.environ), 600.0, tmp_path / "log")
    assert (ran.rc, ran.stopped, ran.output.splitlines()[-1]) == (0, False, "hi")


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed and not yet reaped by whoever adopted it, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_an_emulated_run_with_no_time_to_try_again_keeps_its_first_try(three):
    """00_a fails every cell on each GPU: 9 runs of 10 s leave 35 s of 125, time for one more try (T4's); the
    other two keep their first try, and so does each of them when no try can start at all (budget 110)."""
    every = [0, 1, 2, 3]
    m = FakeMachine({"00_a": (10, every), "01_b": (10, []), "02_c": (10, [])})
    items = gc.run_part("emulated", _ctx(three, m, budget_s=125))["parts"]["emulated"]["items"]
    assert len(m.calls) == 10 and len(items) == 9
    assert items["T4 00_a"]["first_try"]["failures"] == ["Cell 0", "Cell 1", "Cell 2", "..."]
    for name in ("L4 00_a", "A100 00_a"):
        assert items[name]["failures"] == [f"Cell {i}" for i in every] and "first_try" not in items[name]
    gc.stamp_path("h200", three).unlink()
    m = FakeMachine({"00_a": (10, every), "01_b": (10, []), "02_c": (10, [])})
    s = gc.run_part("emulated", _ctx(three, m, budget_s=110))
    items = s["parts"]["emulated"]["items"]
    assert len(m.calls) == 9 and len(items) == 9 and s["parts"]["emulated"]["last_run"]["unreached"] == []
    assert not items["T4 00_a"]["ok"] and "first_try" not in items["T4 00_a"]


def test_a_real_run_of_the_cases_on_the_cpu(three):
    """The notebooks and suites parts for real on the CPU (a labelled test run, no proof): tools/gpu_cases.py
    under pytest, each case a real nbval run of a notebook of the fake tree or a real ``python -m gpulab.bench`` of
    its suites, reported by pytest and read back into the stamp's entries."""
    import nbformat

    for stem, last in (("00_a", "assert x == 1"), ("01_b", "assert x == 2")):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell(last)])
        nbformat.write(nb, three / f"notebooks/{stem}.ipynb")
    ctx = gc.Context(root=three, gpu="CPU (a test run)", slug="cpu-test", logs=three / "logs", budget_s=300.0)
    ctx.jobs = ctx.suite_jobs = ctx.workers = 1
    ctx.only = ["00", "01"]
    items = gc.run_part("notebooks", ctx)["parts"]["notebooks"]["items"]
    assert sorted(items) == ["00_a", "01_b"]
    assert items["00_a"]["ok"] and items["00_a"]["failures"] == [] and 0 < items["00_a"]["seconds"] < 300
    assert {c for c, _ in items["00_a"]["slowest_cells"]} == {"Cell 0", "Cell 1"}
    assert not items["01_b"]["ok"] and items["01_b"]["failures"] == ["Cell 1"]
    assert (three / "logs/nb-01_b.tail.txt").exists() and (three / "logs/notebooks.reports.jsonl").exists()
    ctx.only, ctx.tree = ["04"], None
    suites = gc.run_part("suites", ctx)["parts"]["suites"]["items"]
    assert (
        list(suites) == ["lesson04"] and suites["lesson04"]["ok"] and suites["lesson04"]["steps"] == "--steps headline"
    )
    assert "--only lesson04 --steps headline" in (three / "logs/suite-lesson04.log").read_text()


def test_emulated_runs_timing_comparisons_alone_after_the_rest():
    names = ["T4 00_the_machine", "T4 01_roofline", "L4 01_roofline", "L4 02_warp_divergence"]
    together, alone = gc.split_alone(names)
    assert together == ["T4 00_the_machine", "L4 02_warp_divergence"]
    assert alone == ["T4 01_roofline", "L4 01_roofline"]


def test_emulated_run_whose_kernel_ran_no_cell_runs_once_more_alone(three, monkeypatch):
    """Every cell failing (a kernel that died or never started) is tried again after the others; the entry keeps
    the first try. A notebook failing only some cells, or failing all cells twice, is not forgiven."""
    tries = {}

    class Flaky(FakeMachine):
        def child(self, cmd, env, timeout_s, log, cwd=None):
            key = next(k for k in self.plan if any(k in a for a in cmd))
            tag = (key, env["GPULAB_AS_GPU"])
            tries[tag] = tries.get(tag, 0) + 1
            if key == "00_a" and env["GPULAB_AS_GPU"] == "T4":
                self.plan[key] = (10, [0, 1, 2, 3] if tries[tag] == 1 else [])
            elif key == "00_a":
                self.plan[key] = (10, [])
            return super().child(cmd, env, timeout_s, log)

    m = Flaky({"00_a": (10, []), "01_b": (10, [0, 1, 2, 3]), "02_c": (10, [2])})
    monkeypatch.setattr(gc, "have", lambda module: True)
    s = gc.run_part("emulated", _ctx(three, m, jobs=2))
    items = s["parts"]["emulated"]["items"]
    assert items["T4 00_a"]["ok"] and items["T4 00_a"]["first_try"]["failures"][0] == "Cell 0"
    assert tries[("00_a", "T4")] == 2 and tries[("00_a", "L4")] == 1 and tries[("02_c", "T4")] == 1
    assert not items["T4 01_b"]["ok"] and tries[("01_b", "T4")] == 2 and "first_try" in items["T4 01_b"]
    assert items["T4 02_c"]["failures"] == ["Cell 2"] and "first_try" not in items["T4 02_c"]
    assert sorted((c[0], c[2]["GPULAB_AS_GPU"]) for c in m.calls[-4:]) == [
        ("00_a", "T4"),
        ("01_b", "A100"),
        ("01_b", "L4"),
        ("01_b", "T4"),
    ]
    assert not s["parts"]["emulated"]["ok"]
    envs = [c[2] for c in m.calls]  # each run has its own IPython and Jupyter runtime folders
    assert len({e["IPYTHONDIR"] for e in envs}) == len({e["JUPYTER_RUNTIME_DIR"] for e in envs}) == len(envs) == 13
