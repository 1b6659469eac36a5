"""The autotuner's stored choices (``gpulab.kernels._autotune``): a key timed once on a GPU is taken from this
machine's store or from the recording in gpulab/data afterwards, only for the same GPU, Triton version and candidate
list; ``fresh()``, ``GPULAB_AUTOTUNE=first`` and ``untimed()`` never read a store. The GPU is pretended (its name and
Triton version) and the timing is fake: the logic is under test, not a speed."""

import json
from types import SimpleNamespace

import pytest

from gpulab.core import reference, settings
from gpulab.kernels import _autotune

H200 = ("NVIDIA H200", "3.6.0")
CANDS = ["a", "b", "c"]
RUN = object()  # what make_run() hands the (fake) fastest


@pytest.fixture
def tuner(monkeypatch, tmp_path):
    """A fresh autotuner on a pretended H200 with stores in ``tmp_path``: ``.timed`` lists each timing's candidates,
    ``.ident[0]`` is the pretended (GPU, Triton)."""
    monkeypatch.setattr(_autotune, "STORES_ON", True)
    for name in ("_CACHE", "_ORIGIN", "_TIMED", "_LOADED"):
        monkeypatch.setattr(_autotune, name, {})
    monkeypatch.setattr(settings, "SETTINGS", settings.read({"GPULAB_CACHE_DIR": str(tmp_path / "cache")}))
    monkeypatch.setattr(reference, "DATA_DIR", tmp_path / "data")
    ident = [H200]
    monkeypatch.setattr(_autotune, "identity", lambda: ident[0] if _autotune.STORES_ON else None)
    timed = []

    def fastest(candidates, run, **kw):  # the fake clock ranks the second candidate first
        assert run is RUN
        timed.append(list(candidates))
        return candidates[1]

    monkeypatch.setattr(_autotune, "fastest", fastest)
    return SimpleNamespace(timed=timed, ident=ident)


def _pick(key, cands=CANDS):
    return _autotune.pick(key, cands, lambda: RUN)


def _new_process():
    for d in (_autotune._CACHE, _autotune._ORIGIN, _autotune._TIMED, _autotune._LOADED):
        d.clear()


def test_a_key_timed_once_is_taken_from_this_machines_store_afterwards(tuner):
    assert _pick(("k", 1)) == "b" and len(tuner.timed) == 1 and _autotune.origin(("k", 1)) == "timed now"
    path = _autotune.store_path(H200[0])
    assert path.name == "nvidia-h200.json"
    stored = json.loads(path.read_text())
    assert stored["gpu"] == H200[0] and stored["triton"] == H200[1]
    assert stored["choices"]["k|1"] == {"config": repr("b"), "candidates": _autotune.digest(CANDS)}
    _new_process()
    assert _pick(("k", 1)) == "b" and len(tuner.timed) == 1  # not timed again
    assert _autotune.origin(("k", 1)) == f"timed earlier on this machine ({path})"
    assert _pick(("k", 2)) == "b" and len(tuner.timed) == 2  # another key is timed
    assert _autotune.origins("k") == {f"timed earlier on this machine ({path})": 1, "timed now": 1}
    assert _autotune.origins("other kernel") == {}


@pytest.mark.parametrize("change", ["candidates", "gpu", "triton", "stores off", "fresh"])
def test_a_choice_is_taken_only_for_the_same_gpu_triton_and_candidates(tuner, change):
    _pick(("k", 1))
    _new_process()
    cands = CANDS
    if change == "candidates":
        cands = ["a", "b", "d"]
    elif change == "gpu":
        tuner.ident[0] = ("NVIDIA H100 80GB HBM3", "3.6.0")
    elif change == "triton":
        tuner.ident[0] = ("NVIDIA H200", "3.5.1")
    elif change == "stores off":
        _autotune.STORES_ON = False
    if change == "fresh":
        with _autotune.fresh():
            _pick(("k", 1), cands)
    else:
        _pick(("k", 1), cands)
    assert len(tuner.timed) == 2 and _autotune.origin(("k", 1)) == "timed now"


def test_first_and_untimed_read_no_store(tuner, monkeypatch):
    _pick(("k", 1))
    _new_process()
    with _autotune.untimed():
        assert _pick(("k", 1)) == "a" and _autotune.cached(("k", 1)) is None
    monkeypatch.setattr(settings, "SETTINGS", settings.read({"GPULAB_AUTOTUNE": "first"}))
    assert _pick(("k", 1)) == "a" and len(tuner.timed) == 1
    assert "untimed" in _autotune.origin(("k", 1))


def test_record_writes_the_timed_keys_and_a_learner_reads_them(tuner, tmp_path):
    path = tmp_path / "data" / "autotune-h200.json"
    assert _autotune.record(path, {"gpu": H200[0], "triton": H200[1], "date": "d1"}) is None  # nothing timed yet
    _pick(("k", 1))
    _autotune.record(path, {"gpu": H200[0], "triton": H200[1], "date": "d1"})
    _new_process()
    _autotune.store_path(H200[0]).unlink()  # another machine: only the recording
    assert _pick(("k", 1)) == "b" and len(tuner.timed) == 1
    assert _autotune.origin(("k", 1)) == "recorded on NVIDIA H200 (gpulab/data/autotune-h200.json, d1)"
    # a later recording on the same GPU and Triton adds its keys; another Triton starts the file anew
    _pick(("k", 2))
    _autotune.record(path, {"gpu": H200[0], "triton": H200[1], "date": "d2"})
    assert set(json.loads(path.read_text())["choices"]) == {"k|1", "k|2"}
    _new_process()
    _pick(("k", 3))
    _autotune.record(path, {"gpu": H200[0], "triton": "3.7.0", "date": "d3"})
    data = json.loads(path.read_text())
    assert set(data["choices"]) == {"k|3"} and data["date"] == "d3" and data["triton"] == "3.7.0"


def test_a_broken_store_is_ignored_and_rewritten(tuner):
    path = _autotune.store_path(H200[0])
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert _pick(("k", 1)) == "b" and len(tuner.timed) == 1
    assert json.loads(path.read_text())["choices"]["k|1"]["config"] == repr("b")


def test_labels_of_configs_and_keys():
    import torch
    import triton

    a = triton.Config({"BLOCK_M": 64, "BLOCK_N": 32}, num_warps=4, num_stages=2)
    b = triton.Config({"BLOCK_N": 32, "BLOCK_M": 64}, num_warps=4, num_stages=2)  # the same config
    c = triton.Config({"BLOCK_M": 64, "BLOCK_N": 32}, num_warps=8, num_stages=2)
    assert _autotune.config_label(a) == _autotune.config_label(b) != _autotune.config_label(c)
    assert _autotune.digest([a, c]) != _autotune.digest([c, a])  # the order is part of the list
    assert _autotune.key_label(("flash_attention", "fwd", torch.bfloat16, 128, False)) == (
        "flash_attention|fwd|torch.bfloat16|128|False"
    )


def test_tests_run_with_the_stores_off():
    assert _autotune.STORES_ON is False and _autotune.identity() is None


def test_the_cli_times_every_candidate_only_when_it_records(monkeypatch):
    """``python -m gpulab.bench`` takes stored choices; ``--record`` runs in ``fresh()`` (a recording tunes anew)."""
    import gpulab
    from gpulab.bench import __main__ as cli
    from gpulab.bench import lesson02
    from gpulab.core import timing

    if gpulab.ON_GPU:
        pytest.skip("the test clock is for the CPU")
    seen = []
    monkeypatch.setattr(lesson02, "run", lambda progress=True: seen.append(_autotune._FRESH[0]) or {"rows": []})
    monkeypatch.setattr(lesson02, "report", lambda data: "")
    with timing.test_clock():
        assert cli.main(["--only", "lesson02"]) == 0
        with pytest.raises(SystemExit, match="test clock"):
            cli.main(["--only", "lesson02", "--record"])
    assert seen == [False, True] and _autotune._FRESH[0] is False
