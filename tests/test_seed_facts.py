"""The seed lectures' facts that a lesson must teach are taught where they fit, with their numbers printed from the
data (issue 39, item 8): the move from GDDR to HBM (lesson 00), scaling laws as the reason compute matters (lesson
09), and the matmul-size dip at DRAM burst boundaries (lesson 07b). Each test reads the lesson's source and runs
the cell that prints the fact, so that removing the teaching or typing its numbers fails."""

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

import gpulab  # noqa: F401  (the interpreter before any kernel)
from gpulab import hardware

pytestmark = pytest.mark.cpu_same  # reads the notebooks' source and the recorded data
ROOT = Path(__file__).resolve().parents[1]


def _cells(stem: str) -> list[dict]:
    return json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]


def _src(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _prose(stem: str) -> str:
    return "\n".join(_src(c) for c in _cells(stem) if c["cell_type"] == "markdown")


def _run(source: str, names: dict) -> str:
    """What a code cell prints, run with ``names`` defined (the earlier cells' names it reads)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, "<cell>", "exec"), dict(names))  # noqa: S102  (a lesson's own cell)
    return out.getvalue()


def test_lesson00_teaches_the_move_from_gddr_to_hbm_from_the_table():
    prose = _prose("00_the_machine")
    assert "**GDDR**" in prose and "**HBM**" in prose, "lesson 00 no longer names GDDR and HBM"
    cells = [_src(c) for c in _cells("00_the_machine") if c["cell_type"] == "code" and "memory_kind" in _src(c)]
    assert len(cells) == 1, "lesson 00 prints no GPU's memory kind from gpulab.hardware"
    printed = _run(cells[0], {"hardware": hardware})
    for name in ("RTX 4090", "H200", "V100 SXM2", "T4"):
        s = hardware.get(name)
        line = f"{s.name:>14} ({s.year}): {s.memory_kind:>6} {s.hbm_gbps:5.0f} GB/s"
        assert line in printed, f"lesson 00 does not print {name}'s memory from the table: {line!r}"
    gddr, hbm = hardware.get("RTX 4090"), hardware.get("H200")
    assert f"H200 HBM3e (2023): x{hbm.hbm_gbps / gddr.hbm_gbps:.1f} the fastest GDDR here" in printed
    assert re.search(r"\bGDDR6X\b", printed) and not re.search(r"\d+ GB/s", cells[0]), "numbers typed, not read"
