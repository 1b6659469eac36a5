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
    r = _run("--only", "lesson02", "--steps", "x")
    assert r.returncode != 0 and "--steps needs --only" in r.stderr


def test_cli_autotune_report_needs_a_gpu_and_a_suite_that_has_one():
    r = _run("--autotune-report", "lesson08")
    assert r.returncode == 2 and "--autotune-report needs a CUDA GPU" in r.stderr
    r = _run("--autotune-report", "lesson02")
    assert r.returncode != 0 and "'lesson02' has no autotune report" in r.stderr


@pytest.mark.parametrize("module", __import__("gpulab.bench.__main__", fromlist=["LESSON_SUITES"]).LESSON_SUITES)
def test_every_lesson_suite_refuses_to_measure_without_a_gpu(module):
    import importlib

    from gpulab.timing import NoGPUTimingError

    with pytest.raises(NoGPUTimingError):
        importlib.import_module(module).run(progress=False)
