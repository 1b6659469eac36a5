"""Lessons 05 to 07b keep the learner in the loop: at least two predictions a lesson, each revealed by a later cell
that passes the learner's number to ``reveal``; after each kernel exercise of 05, 06 and 07 a race of the learner's
kernel (their prose words: tests/test_notebook_hygiene.py)."""

import json
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu_same  # reads the notebooks' source
ROOT = Path(__file__).resolve().parents[1]
LESSONS = {
    "05_recomputation": "sigmoid3_bwd",
    "06_coalescing": "transpose",
    "07_tiling": "tiled_matmul",
    "07b_waves": None,
}
_STUB = re.compile(r"^(my_\w+) = None  # your number", re.M)


def _cells(stem):
    return json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]


def _src(c):
    return "".join(c["source"])


@pytest.mark.parametrize("stem", sorted(LESSONS))
def test_two_predictions_each_revealed_later(stem):
    cells = _cells(stem)
    stubs = [(i, m.group(1)) for i, c in enumerate(cells) if c["cell_type"] == "code" for m in _STUB.finditer(_src(c))]
    assert len(stubs) >= 2, f"{stem}: {len(stubs)} predictions; a lesson asks for at least two"
    for i, name in stubs:
        later = [j for j, c in enumerate(cells[i + 1 :], i + 1) if re.search(rf"reveal\(\s*{name}\b", _src(c))]
        assert later, f"{stem}: {name} is never revealed"


@pytest.mark.parametrize("stem", sorted(k for k, v in LESSONS.items() if v))
def test_the_learners_kernel_is_raced_after_its_checker(stem):
    cells = [_src(c) for c in _cells(stem) if c["cell_type"] == "code"]
    checker = next(i for i, s in enumerate(cells) if f"def {LESSONS[stem]}(" in s)
    assert any(f"race({LESSONS[stem]})" in s for s in cells[checker + 1 :]), f"{stem}: no race of the learner's kernel"
