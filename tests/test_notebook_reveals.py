"""Every reveal a lesson makes is fair: it says why a guess far off is off (``why=``), and where it sets a model
beside a measurement it says why the two part (``gap_why=``, shown when they are 2x or more apart: a learner who
counted what the model counts is told so, and why the hardware differs). The judging itself is tested in
tests/test_exercises_predict.py; answers shown before their question in tests/test_answer_leaks.py."""

import ast
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu_same  # reads the notebooks' source
ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _reveal_calls(path: Path):
    """(cell index, the call's keyword names) of every ``reveal(...)`` call in the notebook's code cells."""
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] != "code" or "reveal(" not in src:
            continue
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "reveal":
                yield i, {k.arg for k in node.keywords}


def test_the_lessons_reveal_predictions():
    assert sum(1 for p in NOTEBOOKS for _ in _reveal_calls(p)) >= 28


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_reveal_says_why_and_why_model_and_measurement_part(path):
    for i, kw in _reveal_calls(path):
        assert "why" in kw, f"{path.stem} cell {i}: a reveal without why= (the line a guess far off is shown)"
        if {"model", "measured"} <= kw:
            assert "gap_why" in kw, f"{path.stem} cell {i}: model and measurement without gap_why= (why they part)"
