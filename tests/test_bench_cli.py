"""`python -m gpulab.bench` without a GPU: shows the recorded data, labelled, and measures nothing."""

import subprocess
import sys

import pytest

import gpulab

pytestmark = pytest.mark.skipif(gpulab.ON_GPU, reason="interpreter-mode behaviour of the CLI")


def _run(*args):
    return subprocess.run([sys.executable, "-m", "gpulab.bench", *args], capture_output=True, text=True, timeout=120)


def test_cli_prints_reference_data_labelled_as_recorded():
    r = _run()
    assert r.returncode == 0, r.stderr
    assert "not a measurement" in r.stdout and "recorded on NVIDIA H200" in r.stdout
    assert "copy bandwidth" in r.stdout and "ratio" in r.stdout


def test_cli_refuses_to_record_without_a_gpu():
    r = _run("--record")
    assert r.returncode == 2 and "needs a CUDA GPU" in r.stderr


def test_cli_rejects_unknown_suite():
    r = _run("--only", "nope")
    assert r.returncode != 0 and "unknown suite" in (r.stderr + r.stdout)


def test_cli_steps_need_one_suite_with_steps():
    r = _run("--steps", "headline")
    assert r.returncode != 0 and "--steps needs --only naming one lesson suite" in r.stderr
    r = _run("--only", "lesson07", "--steps", "headline,nope")
    assert r.returncode != 0 and "unknown step(s) ['nope']" in r.stderr and "'sweep'" in r.stderr
    r = _run("--only", "lesson06", "--steps", "x")
    assert r.returncode != 0 and "--steps needs --only" in r.stderr
    r = _run("--only", "lesson02", "--steps", "x")
    assert r.returncode != 0 and "unknown step(s) ['x']" in r.stderr and "'lane_branch'" in r.stderr


def test_cli_autotune_report_needs_a_gpu_and_a_suite_that_has_one():
    r = _run("--autotune-report", "lesson08")
    assert r.returncode == 2 and "--autotune-report needs a CUDA GPU" in r.stderr
    r = _run("--autotune-report", "lesson02")
    assert r.returncode != 0 and "'lesson02' has no autotune report" in r.stderr


@pytest.mark.parametrize("module", __import__("gpulab.bench.__main__", fromlist=["LESSON_SUITES"]).LESSON_SUITES)
def test_every_lesson_suite_refuses_to_measure_without_a_gpu(module):
    import importlib

    from gpulab.core.timing import NoGPUTimingError

    with pytest.raises(NoGPUTimingError):
        importlib.import_module(module).run(progress=False)


def test_cli_refuses_json_without_a_gpu_and_writes_nothing(tmp_path):
    out = tmp_path / "records.json"
    r = _run("--json", str(out))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--json needs a CUDA GPU" in r.stderr and str(out) in r.stderr
    assert not out.exists()


def _recorded_copy(tmp_path, monkeypatch, edit):
    """A copy of the shipped reference file, edited, as the only reference data ``gpulab.core.reference`` sees."""
    import json

    from gpulab.core import reference

    data = json.loads(reference.path_for("h200").read_text())
    edit(data)
    monkeypatch.setattr(reference, "DATA_DIR", tmp_path)
    path = reference.path_for("h200")
    path.write_text(json.dumps(data))
    return path


def test_a_recorded_entry_missing_a_key_names_the_file_and_the_suite(tmp_path, monkeypatch, capsys):
    from gpulab.bench.__main__ import main

    def edit(data):
        del data["profile"]  # the core suite's report reads it
        data["lesson02"] = {"provenance": data["lesson02"]["provenance"]}  # every measured key gone

    path = _recorded_copy(tmp_path, monkeypatch, edit)
    rc = main(["--only", "ceilings,lesson02,lesson03"])
    out, err = capsys.readouterr()
    assert rc == 1
    for suite in ("ceilings", "lesson02"):
        assert f"[{suite}] {path} lacks the key" in err, err
    assert "'profile'" in err
    assert "[lesson03] recorded on" in out, "the complete suites are still shown"


def test_a_recorded_value_of_the_wrong_type_names_the_file_and_the_suite(tmp_path, monkeypatch, capsys):
    """A string where the report formats a number, a number where it reads a table: an error naming the file, the
    suite and what failed, never a traceback; the other suites are still shown."""
    from gpulab.bench.__main__ import main

    def edit(data):
        data["profile"]["copy_tbps"] = "fast"
        data["lesson02"] = {k: (v if k == "provenance" else 7) for k, v in data["lesson02"].items()}

    path = _recorded_copy(tmp_path, monkeypatch, edit)
    rc = main(["--only", "ceilings,lesson02,lesson03"])
    out, err = capsys.readouterr()
    assert rc == 1 and "Traceback" not in err
    assert f"[ceilings] {path} holds a value the ceilings report cannot read (ValueError: " in err, err
    assert f"[lesson02] {path} holds a value the lesson02 report cannot read (TypeError: " in err, err
    assert "[lesson03] recorded on" in out, "the readable suites are still shown"


def test_a_truncated_reference_file_is_named(tmp_path, monkeypatch):
    from gpulab.core import reference

    path = _recorded_copy(tmp_path, monkeypatch, lambda data: None)
    path.write_text(path.read_text()[:100])
    with pytest.raises(ValueError, match=f"{path} is not valid JSON"):
        reference.load("h200")
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match=f"{path} must hold a JSON object, got list"):
        reference.load("h200")
    assert reference.label({"lesson02": {}}, "lesson02") == "recorded (no provenance in the file)"
