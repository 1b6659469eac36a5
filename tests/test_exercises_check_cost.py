"""What a kernel check costs in Triton's interpreter, counted rather than timed (no test depends on this machine's
speed): the flash forward's cases, run by a kernel of 16 x 16 tiles (the lesson's interpreter tiles), visit few
enough (query block, key tile) pairs to check in seconds, while the long case still spans three key tiles of 256
(a forward without the online-softmax rescale fails at any tile up to 256)."""

import pytest

import gpulab  # noqa: F401  (the interpreter before any kernel)
from gpulab.exercises import ex08
from gpulab.models import attention
from gpulab.models.waves import cdiv

#: The (query block, key tile) pairs at 16 x 16 tiles a check may ask for: the issue's 20 to 54 s checks asked
#: twice as many, nearly all in the long case's non-causal run.
MAX_PAIRS = 2000


def _cases(monkeypatch):
    seen = {}

    def fake_check_kernel(name, fn, cases, **kw):
        seen["cases"] = cases
        return ex08.Report(name)

    monkeypatch.setattr(ex08, "check_kernel", fake_check_kernel)
    ex08.check_flash_forward(lambda *a: None)
    return seen["cases"]


def _pairs(case, tile=16):
    B, H, L, d = case["q"].shape
    return B * H * attention.tiles_visited(L, tile, tile, case["causal"])


def test_the_flash_forward_check_asks_few_tile_pairs_of_a_16_tile_kernel(monkeypatch):
    cases = _cases(monkeypatch)
    total = sum(_pairs(c) for c in cases)
    assert total <= MAX_PAIRS, f"{total} (query block, key tile) pairs at 16 x 16 tiles"
    long = [c for c in cases if c["q"].shape[2] > ex08.LONG_L]
    assert long and all(c["causal"] for c in long)
    assert all(cdiv(c["q"].shape[2], 256) >= 3 for c in long), "the long case must span three key tiles of 256"
    assert {c["causal"] for c in cases if c["q"].shape[2] <= ex08.LONG_L} == {False, True}


@pytest.mark.parametrize("causal", [False, True])
def test_tiles_visited_counts_the_pairs_the_kernel_walks(causal):
    # L = 45 at 16 x 16: 3 query blocks; non-causal each walks 3 key tiles, causal 1 + 2 + 3
    assert attention.tiles_visited(45, 16, 16, causal) == (6 if causal else 9)
