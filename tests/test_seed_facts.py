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
    """What a code cell prints, run in ``names`` (the earlier cells' names it reads; the names it defines are added)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, "<cell>", "exec"), names)  # noqa: S102  (a lesson's own cell)
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


def _code_with(stem: str, needle: str) -> str:
    cells = [_src(c) for c in _cells(stem) if c["cell_type"] == "code" and needle in _src(c)]
    assert len(cells) == 1, f"{stem}: {len(cells)} code cells with {needle!r}, one expected"
    return cells[0]


def test_lesson07b_counts_the_bursts_a_row_takes_and_sets_the_sweep_beside_the_count():
    from gpulab import live, sectors
    from gpulab.bench import lesson07
    from gpulab.exercises.predict import reveal

    prose = _prose("07b_waves")
    assert re.search(r"\bbursts?\b", prose) and "sector" in prose, "lesson 07b no longer teaches the burst boundaries"
    assert "my_run_sectors = None  # your number" in "".join(_src(c) for c in _cells("07b_waves"))
    rec07 = live.recall(lesson07.KEY)
    names = {"rec07": rec07, "reveal": reveal, "my_run_sectors": None}
    counted = _run(_code_with("07b_waves", "sectors.tile_row_sectors(2049, 16"), names)
    # the seed's doubling, from the model: a one-sector run at N = 2048, two on 15 of 16 rows at N = 2049
    assert (
        sectors.tile_row_sectors(2048, 16, itemsize=2) == [1]
        and sectors.tile_row_sectors(2049, 16, itemsize=2).count(2) == 15
    )
    assert re.search(r"^ 2048\s+0\s+1\.00\s+4\.00$", counted, re.M) and re.search(
        r"^ 2049\s+2\s+1\.94\s+4\.94$", counted, re.M
    )
    assert "15 of every 16 rows' runs cross a sector boundary" in counted
    tested = _run(_code_with("07b_waves", "sector_offset_pairs"), names)
    for method, name in (("torch", "cuBLAS"), ("gpulab", "gpulab")):
        for offset in (16, 0):
            r = [p["ratio"] for p in sectors.sector_offset_pairs(rec07.data["sweep"], method, row_offset=offset)]
            ratio = sorted(r)[len(r) // 2] if len(r) % 2 else sum(sorted(r)[len(r) // 2 - 1 : len(r) // 2 + 1]) / 2
            assert f"median rate ratio {ratio:.2f} over {len(r)} pairs" in tested, (name, offset)
    assert "x1.062 the sectors at 2056 as at 2064" in tested
    assert not re.search(r"\b0\.\d\d\b", prose), "a ratio typed in the prose, not printed from the data"


def test_lesson09_prices_a_compute_optimal_run_at_the_ladders_mfu():
    from gpulab import live
    from gpulab.bench import lesson09
    from gpulab.capstone import explain
    from gpulab.capstone.gpt import GPT2_SMALL
    from gpulab.models import scaling

    prose = _prose("09_builder_test")
    assert re.search(r"scaling laws?", prose, re.I) and "Kaplan" in prose and "Hoffmann" in prose, (
        "lesson 09 no longer says why compute matters: scaling laws"
    )
    shown = live.recall(lesson09.KEY)
    gaps = {g["rung"]: g for g in explain.gaps(shown.data)}
    names = {"shown": shown, "gaps": gaps, "explain": explain, "GPT2_SMALL": GPT2_SMALL}
    printed = _run(_code_with("09_builder_test", "scaling.compute_optimal_tokens"), names)
    run = 20 * 124_439_808 * explain.model_flops_per_token(GPT2_SMALL)  # by hand: 20 tokens a parameter
    assert f"= {run:.2e} FLOPs" in printed
    low, high = min(gaps.values(), key=lambda g: g["mfu"]), max(gaps.values(), key=lambda g: g["mfu"])
    for g in (low, high):
        hours = run / (g["mfu"] * hardware.get("H200").peak("bf16") * 1e12) / 3600
        assert f"at the MFU of '{g['rung']}' ({g['mfu']:.1%}): {hours:.1f} hours on one H200" in printed
    assert "x100 the FLOPs" in printed and scaling.TOKENS_PER_PARAM == 20
    assert not re.search(r"\d+(\.\d+)? hours", prose), "hours typed in the prose, not printed from the data"
