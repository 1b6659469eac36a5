"""``make gpu-check`` (tools/gpu_check.py) on the CPU: the committed stamp read (a warning, never a failure, when
it does not prove the tree now), and the tool's own logic with fake runners: the tree hash against git's, the
stamp's merging, --only, junit parsing, the 90-second rule, the budget and the atomic write."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "tools" / "gpu_check.py")
gc = importlib.util.module_from_spec(_spec)
sys.modules["gpu_check"] = gc
_spec.loader.exec_module(gc)

FIXTURE = ROOT / "tests" / "fixtures" / "gpu_check_junit.xml"
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(cwd, *args) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True, env=env).stdout


# ------------------------------------------------------------------------------------------------ the committed stamp


def test_the_committed_stamp_proves_the_tree_now_or_warns():
    """A stamp on an older tree, or one holding a failure, is a warning: the CPU cannot re-run the GPU parts."""
    stamps = sorted(ROOT.glob(gc.STAMP_PATTERN))
    if not stamps:
        return
    now = gc.part_trees(ROOT)
    for path in stamps:
        stamp = gc.load_stamp(path)
        assert len(gc.status_lines(stamp, now, path.name)) <= 15
        for why in gc.stamp_warnings(stamp, now):
            msg = f"{path.relative_to(ROOT)}: {why}; run make gpu-check on a GPU machine"
            print("warning:", msg)
            warnings.warn(msg, UserWarning, stacklevel=1)


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
        "README.md": "outside the hashed folders\n",
        ".gitignore": "__pycache__/\n*.egg-info/\nbuild/\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


@needs_git
def test_tree_hash_is_gits_tree_id_of_the_three_folders(tmp_path):
    root = _tree(tmp_path)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "t")
    listing = _git(root, "ls-tree", "HEAD", *gc.HASHED_DIRS)
    want = subprocess.run(["git", "-C", str(root), "mktree"], input=listing, capture_output=True, text=True).stdout
    assert gc.tree_hash(root, use_git=True) == want.strip()
    assert gc.tree_hash(root, use_git=False) == want.strip()


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
    root = _tree(tmp_path)
    monkeypatch.setattr(gc.shutil, "which", lambda name: None)
    files, how = gc.hashed_files(root)
    assert how == "walk" and "gpulab/a/c.py" in files and "README.md" not in files
    with pytest.raises(gc.GPUCheckError, match="use_git=True"):
        gc.hashed_files(root, use_git=True)


def test_gitignore_negations_are_refused(tmp_path):
    root = _tree(tmp_path)
    (root / ".gitignore").write_text("!keep.py\n")
    with pytest.raises(gc.GPUCheckError, match="negations"):
        gc.tree_hash(root, use_git=False)


@needs_git
def test_this_repository_hashes_the_same_with_and_without_git():
    """The GPU machine may hash a copy without .git: the walk must choose git's files here."""
    if gc._git_files(ROOT) is None:
        pytest.skip("not a git checkout")
    git_files, _ = gc.hashed_files(ROOT, use_git=True)
    walk_files, _ = gc.hashed_files(ROOT, use_git=False)
    assert walk_files == git_files
    assert gc.tree_hash(ROOT, use_git=True) == gc.tree_hash(ROOT, use_git=False)
    dirty = _git(ROOT, "status", "--porcelain", "--", *gc.HASHED_DIRS)
    if not [ln for ln in dirty.splitlines() if "gpu-check-" not in ln]:
        listing = _git(ROOT, "ls-tree", "HEAD", *gc.HASHED_DIRS)
        if "gpu-check-" not in _git(ROOT, "ls-files", "gpulab/data"):
            want = subprocess.run(["git", "-C", str(ROOT), "mktree"], input=listing, capture_output=True, text=True)
            assert gc.tree_hash(ROOT) == want.stdout.strip()


# ------------------------------------------------------------------------------------------------ junit, --only


def test_junit_counts_and_failing_names():
    j = gc.parse_junit(FIXTURE)
    assert (j["passed"], j["failed"], j["errors"], j["skipped"]) == (2, 2, 1, 1)
    assert j["failures"] == [
        "tests/test_flash_teaching.py::test_forward_and_backward_match_float64[fp32-causal]",
        "tests/test_recompute.py::TestMemory::test_measured_memory_matches_the_model_on_the_gpu",
        "notebooks/08_flash_attention.ipynb::Cell 12",
    ]
    assert j["reasons"][j["failures"][0]] == "AssertionError: LSE off by 2.6e-04 > 1e-05"
    assert gc.cell_names(j["failures"][2:]) == ["Cell 12"]
    assert j["slowest"] == [
        ["Cell 12", 2.0],
        ["test_forward_and_backward_match_float64[fp32-causal]", 0.5],
        ["TestMemory::test_measured_memory_matches_the_model_on_the_gpu", 0.1],
    ]


def test_only_picks_lessons():
    nbs = gc.notebooks(ROOT)
    assert gc.select(nbs, ["07"], "notebooks") == ["07_tiling", "07b_waves"]
    assert gc.select(nbs, ["08"], "notebooks") == ["08_flash_attention", "08b_flash_backward"]
    assert gc.select(nbs, ["00"], "notebooks") == ["00_the_machine", "00b_first_kernel"]
    assert gc.select(nbs, ["00b"], "notebooks") == ["00b_first_kernel"]
    assert gc.select(nbs, ["07b", "lesson09"], "notebooks") == ["07b_waves", "09_builder_test"]
    assert gc.select(nbs, None, "notebooks") == nbs
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
    heads = dict(gc.suite_list())
    assert heads["lesson08"] == heads["lesson07"] == ("headline",) and heads["ceilings"] == heads["lesson04"] == ()
    assert heads["lesson02"] == ("variants",)  # its lane_branch step builds CUDA code: recorded on its own


# ------------------------------------------------------------------------------------------------ merging


def _entry(tree, ok=True, seconds=10.0):
    return {"tree": tree, "date": "d", "ok": ok, "seconds": seconds, "failures": [] if ok else ["Cell 3"]}


def _run(tree, only=None, unreached=()):
    return {"tree": tree, "date": "d", "versions": {}, "only": only, "seconds": 1, "unreached": list(unreached)}


def test_merge_keeps_other_lessons_with_their_own_tree():
    names = ["00_a", "01_b", "02_c"]
    s = gc.merge(
        None,
        "notebooks",
        {"items": {n: _entry("t1") for n in names}, "last_run": _run("t1")},
        gpu="NVIDIA H200",
        slug="h200",
        expected=names,
    )
    assert s["parts"]["notebooks"]["ok"] and s["parts"]["notebooks"]["total_seconds"] == 30
    s = gc.merge(
        s,
        "notebooks",
        {"items": {"01_b": _entry("t2", ok=False)}, "last_run": _run("t2", ["01"])},
        gpu="NVIDIA H200",
        slug="h200",
        expected=names,
    )
    items = s["parts"]["notebooks"]["items"]
    assert [items[n]["tree"] for n in names] == ["t1", "t2", "t1"] and list(items) == names
    assert not s["parts"]["notebooks"]["ok"] and s["parts"]["notebooks"]["last_run"]["only"] == ["01"]
    assert s["parts"]["notebooks"]["total_trees"] == ["t1", "t2"]
    s = gc.merge(
        s,
        "tests",
        {"tree": "t2", "ok": True, "passed": 3, "failed": 0, "errors": 0, "skipped": 1, "seconds": 5.0},
        gpu="NVIDIA H200",
        slug="h200",
    )
    assert s["parts"]["tests"]["passed"] == 3 and "notebooks" in s["parts"]
    warn = gc.stamp_warnings(s, "t2")
    assert any("notebooks was checked on another tree" in w for w in warn)
    assert any("notebooks holds a failure" in w for w in warn)
    assert any("emulated has no result" in w for w in warn)
    lines = gc.status_lines(s, "t2", "x.json")
    assert len(lines) <= 15 and any("01_b (Cell 3)" in ln for ln in lines) and lines[-1].endswith("tree now")
    with pytest.raises(gc.GPUCheckError, match="stamp is for 'h200'"):
        gc.merge(s, "tests", {}, gpu="Tesla T4", slug="t4")


def test_merge_marks_missing_items_and_the_collection_limit():
    names = ["00_a", "01_b"]
    s = gc.merge(
        None, "notebooks", {"items": {"00_a": _entry("t")}, "last_run": _run("t")}, gpu="g", slug="h200", expected=names
    )
    assert s["parts"]["notebooks"]["missing"] == ["01_b"] and not s["parts"]["notebooks"]["ok"]
    items = {n: _entry("t", seconds=80.0) for n in names}
    s = gc.merge(None, "notebooks", {"items": items, "last_run": _run("t")}, gpu="g", slug="h200", expected=names)
    assert s["parts"]["notebooks"]["ok"]
    many = [f"{i:02d}_n" for i in range(8)]
    items = {n: _entry("t", seconds=80.0) for n in many}  # each within 90 s, 640 s in all
    s = gc.merge(None, "notebooks", {"items": items, "last_run": _run("t")}, gpu="g", slug="h200", expected=many)
    assert s["parts"]["notebooks"]["total_seconds"] == 640 and not s["parts"]["notebooks"]["ok"]


def test_write_atomic_leaves_the_old_file_whole_when_the_write_fails(tmp_path, monkeypatch):
    path = tmp_path / "gpu-check-h200.json"
    gc.write_atomic(path, {"schema": 1, "a": 1})
    assert json.loads(path.read_text()) == {"schema": 1, "a": 1}

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)  # the module object gpulab.device uses too
    with pytest.raises(OSError, match="disk full"):
        gc.write_atomic(path, {"schema": 1, "a": 2})
    assert json.loads(path.read_text()) == {"schema": 1, "a": 1}
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


# ------------------------------------------------------------------------------------------------ parts, faked


class FakeMachine:
    """A runner and a clock: each command takes the seconds ``plan`` gives its notebook or suite, and writes the
    junit xml it was asked for with the failing cells ``plan`` lists; a run longer than its timeout is stopped."""

    def __init__(self, plan):
        self.plan, self.now, self.calls = plan, 0.0, []

    def clock(self):
        return self.now

    def __call__(self, cmd, env, timeout_s, log):
        key = next(k for k in self.plan if any(k in a for a in cmd))
        seconds, failing = self.plan[key]
        self.calls.append((key, cmd, env, timeout_s))
        stopped = seconds > timeout_s
        seconds = min(seconds, timeout_s)
        self.now += seconds
        xml = next((a.split("=", 1)[1] for a in cmd if a.startswith("--junitxml=")), None)
        if xml and not stopped:
            cases = "".join(
                f'<testcase classname="n" name="Cell {i}" file="notebooks/{key}.ipynb" time="{i}.0">'
                + ('<failure message="boom"/>' if i in failing else "")
                + "</testcase>"
                for i in range(4)
            )
            Path(xml).write_text(f"<testsuites><testsuite>{cases}</testsuite></testsuites>")
        rc = None if stopped else (1 if failing else 0)
        return gc.Ran(rc, seconds, "out\n", stopped)


def _ctx(tmp_path, machine, **kw):
    (tmp_path / "notebooks").mkdir(exist_ok=True)
    for stem in kw.pop("notebooks", ["00_a", "01_b", "02_c"]):
        (tmp_path / "notebooks" / f"{stem}.ipynb").write_text("{}")
    return gc.Context(
        root=tmp_path,
        gpu="NVIDIA H200",
        slug="h200",
        logs=tmp_path / "logs",
        runner=machine,
        clock=machine.clock,
        tree="t1",
        **kw,
    )


def test_notebooks_part_applies_the_90_second_rule_and_the_budget(tmp_path):
    m = FakeMachine({"00_a": (80, []), "01_b": (95, []), "02_c": (30, [2])})
    s = gc.run_part("notebooks", _ctx(tmp_path, m, budget_s=1000))
    items = s["parts"]["notebooks"]["items"]
    assert items["00_a"]["ok"] and items["00_a"]["seconds"] == 80
    assert items["00_a"]["slowest_cells"] == [["Cell 3", 3.0], ["Cell 2", 2.0], ["Cell 1", 1.0]]
    assert not items["01_b"]["ok"] and items["01_b"]["over_limit"] and items["01_b"]["failures"] == ["over 90 s"]
    assert items["02_c"]["failures"] == ["Cell 2"]
    assert m.calls[0][1][:2] == [sys.executable, "-m"] and "--nbval-lax" in m.calls[0][1]
    assert "notebooks/00_a.ipynb" in m.calls[0][1]
    env = m.calls[0][2]
    assert env["GPULAB_AUTOTUNE"] == "full" and "GPULAB_AS_GPU" not in env
    assert env["TRITON_CACHE_DIR"] != m.calls[1][2]["TRITON_CACHE_DIR"]  # a cold cache for each notebook
    assert (tmp_path / "logs" / "nb-02_c.tail.txt").exists()
    assert gc.load_stamp(gc.stamp_path("h200", tmp_path)) == s

    m = FakeMachine({"00_a": (80, []), "01_b": (200, []), "02_c": (30, [])})
    s = gc.run_part("notebooks", _ctx(tmp_path, m, budget_s=250))
    run = s["parts"]["notebooks"]["last_run"]
    b = s["parts"]["notebooks"]["items"]["01_b"]
    assert b["stopped"] and not b["ok"] and b["seconds"] == 170  # stopped at the budget, past the 90 s limit
    assert run["unreached"] == ["02_c"] and [c[0] for c in m.calls] == ["00_a", "01_b"]


def test_only_and_rest_bookkeeping(tmp_path):
    m = FakeMachine({"00_a": (10, []), "01_b": (10, [1]), "02_c": (10, [])})
    gc.run_part("notebooks", _ctx(tmp_path, m))
    m2 = FakeMachine({"01_b": (12, [])})
    ctx = _ctx(tmp_path, m2, only=["01"])
    ctx.tree = "t2"
    s = gc.run_part("notebooks", ctx)
    items = s["parts"]["notebooks"]["items"]
    assert {n: e["tree"] for n, e in items.items()} == {"00_a": "t1", "01_b": "t2", "02_c": "t1"}
    assert s["parts"]["notebooks"]["ok"] and s["parts"]["notebooks"]["last_run"]["only"] == ["01"]
    m3 = FakeMachine({"00_a": (10, []), "02_c": (10, [])})
    ctx = _ctx(tmp_path, m3, rest=True)
    ctx.tree = "t2"
    gc.run_part("notebooks", ctx)
    assert [c[0] for c in m3.calls] == ["00_a", "02_c"]  # 01_b is already on t2


def test_emulated_part_names_failing_cells_per_gpu(tmp_path):
    m = FakeMachine({"00_a": (10, []), "01_b": (10, [3])})
    s = gc.run_part("emulated", _ctx(tmp_path, m, notebooks=["00_a", "01_b"], jobs=3))
    items = s["parts"]["emulated"]["items"]
    assert list(items) == ["T4 00_a", "T4 01_b", "L4 00_a", "L4 01_b", "A100 00_a", "A100 01_b"]
    assert items["L4 01_b"]["failures"] == ["Cell 3"] and not s["parts"]["emulated"]["ok"]
    envs = {c[2]["GPULAB_AS_GPU"] for c in m.calls}
    assert envs == {"T4", "L4", "A100"} and {c[2]["GPULAB_AUTOTUNE"] for c in m.calls} == {"first"}


def test_suites_part_runs_each_headline_and_records_what_it_did_not_reach(tmp_path):
    m = FakeMachine({"ceilings": (20, []), "lesson04": (40, [1]), "lesson08": (500, [])})
    suites = [("ceilings", ()), ("lesson04", ()), ("lesson08", ("headline",))]
    s = gc.run_part("suites", _ctx(tmp_path, m, suites=suites, budget_s=300))
    p = s["parts"]["suites"]
    assert p["items"]["ceilings"]["ok"] and not p["items"]["lesson04"]["ok"]
    assert p["last_run"]["unreached"] == ["lesson08"] and p["missing"] == ["lesson08"]
    assert m.calls[2][1][-4:] == ["--only", "lesson08", "--steps", "headline"]
    assert m.calls[2][3] == 240  # what the budget had left


def test_tests_part_counts_and_falls_back_without_xdist(tmp_path, monkeypatch):
    def runner(cmd, env, timeout_s, log):
        runner.cmd, runner.env = cmd, env
        xml = next(a.split("=", 1)[1] for a in cmd if a.startswith("--junitxml="))
        shutil.copy(FIXTURE, xml)
        return gc.Ran(1, 42.0, "tail\n")

    ctx = _ctx(tmp_path, FakeMachine({}), budget_s=100, workers=8)
    ctx.runner = runner
    real = importlib.util.find_spec
    monkeypatch.setattr(gc.importlib.util, "find_spec", lambda n: object() if n == "xdist" else real(n))
    s = gc.run_part("tests", ctx)
    t = s["parts"]["tests"]
    assert (t["passed"], t["failed"], t["errors"], not t["ok"]) == (2, 2, 1, True)
    assert runner.cmd[-2:] == ["-n", "8"] and runner.env["GPULAB_AUTOTUNE"] == "first"
    if "OMP_NUM_THREADS" not in os.environ:  # the cores shared out among the workers
        assert runner.env["OMP_NUM_THREADS"] == str(max(1, (os.cpu_count() or 1) // 8))
    assert "not browser and not slow" in runner.cmd and runner.cmd[0] == sys.executable
    monkeypatch.setattr(gc.importlib.util, "find_spec", lambda n: None if n == "xdist" else real(n))
    gc.run_part("tests", ctx)
    assert "-n" not in runner.cmd


def test_parts_refuse_without_a_gpu(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    assert gc.main(["tests"]) == 2
    assert "make gpu-check needs an NVIDIA GPU: torch.cuda.is_available() is False" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        gc.main(["notebooks", "--budget", "-3"])
    assert "--budget must be > 0" in capsys.readouterr().err


def test_run_command_stops_a_child_at_its_limit(tmp_path):
    """The budget guard for real: SIGINT at the limit, so pytest can still write its report; also when this
    process was started ignoring SIGINT (a shell's background job), which its children would inherit."""
    import signal

    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    code = "import time\ntry:\n    time.sleep(30)\nexcept KeyboardInterrupt:\n    print('interrupted', flush=True)\n"
    try:
        ran = gc.run_command([sys.executable, "-c", code], dict(os.environ), 1.0, tmp_path / "log")
    finally:
        signal.signal(signal.SIGINT, before)
    assert ran.stopped and ran.rc is None and ran.seconds < 10 and "interrupted" in ran.output
    ran = gc.run_command([sys.executable, "-c", "print('hi')"], dict(os.environ), 30.0, tmp_path / "log")
    assert (ran.rc, ran.stopped, ran.output.splitlines()[-1]) == (0, False, "hi")


def test_emulated_runs_timing_comparisons_alone_after_the_rest():
    names = ["T4 00_the_machine", "T4 01_roofline", "L4 01_roofline", "L4 02_warp_divergence"]
    together, alone = gc.split_alone(names)
    assert together == ["T4 00_the_machine", "L4 02_warp_divergence"]
    assert alone == ["T4 01_roofline", "L4 01_roofline"]


def test_merge_drops_the_entries_of_items_the_part_no_longer_has():
    old = {"00_setup_and_ceilings": _entry("t0", True, 30.0), "01_roofline": _entry("t0", True, 20.0)}
    s = gc.merge(None, "notebooks", {"items": old, "last_run": _run("t0")}, gpu="g", slug="h200")
    names = ["00_the_machine", "01_roofline"]
    new = {"00_the_machine": _entry("t1", True, 25.0)}
    s = gc.merge(s, "notebooks", {"items": new, "last_run": _run("t1")}, gpu="g", slug="h200", expected=names)
    p = s["parts"]["notebooks"]
    assert list(p["items"]) == names and p["missing"] == [] and p["total_seconds"] == 45.0 and p["ok"]


def test_emulated_run_whose_kernel_ran_no_cell_runs_once_more_alone(tmp_path):
    """Every cell failing (a kernel that died or never started) is tried again after the others; the entry keeps
    the first try. A notebook failing only some cells, or failing all cells twice, is not forgiven."""
    tries = {}

    class Flaky(FakeMachine):
        def __call__(self, cmd, env, timeout_s, log):
            key = next(k for k in self.plan if any(k in a for a in cmd))
            tag = (key, env["GPULAB_AS_GPU"])
            tries[tag] = tries.get(tag, 0) + 1
            if key == "00_a" and env["GPULAB_AS_GPU"] == "T4":
                self.plan[key] = (10, [0, 1, 2, 3] if tries[tag] == 1 else [])
            elif key == "00_a":
                self.plan[key] = (10, [])
            return super().__call__(cmd, env, timeout_s, log)

    m = Flaky({"00_a": (10, []), "01_b": (10, [0, 1, 2, 3]), "02_c": (10, [2])})
    s = gc.run_part("emulated", _ctx(tmp_path, m, notebooks=["00_a", "01_b", "02_c"], jobs=2))
    items = s["parts"]["emulated"]["items"]
    assert items["T4 00_a"]["ok"] and items["T4 00_a"]["first_try"]["failures"][0] == "Cell 0"
    assert tries[("00_a", "T4")] == 2 and tries[("00_a", "L4")] == 1 and tries[("02_c", "T4")] == 1
    assert not items["T4 01_b"]["ok"] and tries[("01_b", "T4")] == 2 and "first_try" in items["T4 01_b"]
    assert items["T4 02_c"]["failures"] == ["Cell 2"] and "first_try" not in items["T4 02_c"]
    assert [(c[0], c[2]["GPULAB_AS_GPU"]) for c in m.calls[-4:]] == [
        ("00_a", "T4"),
        ("01_b", "T4"),
        ("01_b", "L4"),
        ("01_b", "A100"),
    ]
    assert not s["parts"]["emulated"]["ok"]
    envs = [c[2] for c in m.calls]  # each notebook and GPU has its own IPython and Jupyter runtime folders
    assert len({e["IPYTHONDIR"] for e in envs}) == len({e["JUPYTER_RUNTIME_DIR"] for e in envs}) == 9


def test_each_part_hashes_the_folders_it_depends_on(tmp_path):
    """An edit to tests/ changes the tests' tree alone; to notebooks/ the notebooks', emulated runs' and tests';
    to gpulab/ every part's. A stamp whose suites were checked before a test edit still proves them."""
    root = _tree(tmp_path)
    before = gc.part_trees(root, use_git=False)
    assert before["notebooks"] == before["emulated"] != before["tests"] != before["suites"]
    assert before["tests"] == gc.tree_hash(root, use_git=False)  # the tests' tree is the whole one
    changed = {}
    for rel in ("tests/test_x.py", "notebooks/00_x.ipynb", "gpulab/__init__.py"):
        (root / rel).write_text((root / rel).read_text() + "\n")
        now = gc.part_trees(root, use_git=False)
        changed[rel.split("/")[0]] = sorted(p for p in gc.PARTS if now[p] != before[p])
        before = now
    assert changed == {
        "tests": ["tests"],
        "notebooks": ["emulated", "notebooks", "tests"],
        "gpulab": ["emulated", "notebooks", "suites", "tests"],
    }
    with pytest.raises(gc.GPUCheckError, match="dirs must be some of"):
        gc.tree_hash(root, use_git=False, dirs=("docs",))
    s = gc.merge(
        None,
        "suites",
        {"items": {"lesson04": _entry(before["suites"], True, 40.0)}, "last_run": _run("x")},
        gpu="g",
        slug="h200",
        expected=["lesson04"],
    )
    (root / "tests/test_x.py").write_text("def test(): assert 2\n")
    now = gc.part_trees(root, use_git=False)
    assert not any("suites" in w for w in gc.stamp_warnings(s, now))
    assert any("suites" in ln and "(now)" in ln for ln in gc.status_lines(s, now, "x.json"))
