"""What the lessons print says what the data shows: a launch the kernel hides is not called a launch cost (lesson
08's eager against graph replay), the recorded attention race names the SDPA backend it times, the fastest the
suite recorded, in the recording's dtype, a roofline drawn from measured ceilings is not labelled a datasheet
(lesson 09's kernels on the roofline); statements the recordings refute are gone from the lessons, every question a
lesson asks is revealed, and no placeholder is left in a lesson's text."""

import json
import re
from pathlib import Path

import pytest

import gpulab  # noqa: F401  (the interpreter before any kernel)
from gpulab import hardware, live
from gpulab.bench import lesson08
from gpulab.capstone import explain
from gpulab.exercises import race
from gpulab.figures import plots

pytestmark = pytest.mark.cpu_same  # reads recorded data


def test_a_launch_hidden_by_the_kernel_is_not_called_a_launch_cost():
    rows = [
        dict(L=1024, method="flash", oom=False, ms=0.071, graph_ms=0.026),
        dict(L=16384, method="flash", oom=False, ms=3.910, graph_ms=4.022),  # eager faster than replay: spread
        dict(L=65536, method="flash", oom=False, ms=64.778, graph_ms=64.975),
        dict(L=8192, method="flash", oom=False, ms=1.008, graph_ms=1.005),  # within 5% of the replay
    ]
    text = lesson08.launch_report({"rows": rows})
    assert "L =   1024: eager 0.071 ms, graph 0.026 ms, launch +0.045 ms" in text
    for L, gap in ((16384, "-0.112"), (65536, "-0.197"), (8192, "+0.003")):
        assert f"L = {L:6d}" in text and f"launch hidden by the kernel (eager - graph {gap} ms" in text
    assert "launch -" not in text


@pytest.mark.parametrize("key, part", [("08", "fwd_ms"), ("08b", "bwd_ms")])
def test_the_recorded_attention_race_names_the_fastest_sdpa_backend_and_bf16(key, part):
    rec = {"lesson08": live.recall("lesson08").data}
    row = next(r for r in rec["lesson08"]["headline"] if (r["d"], r["L"], r["causal"]) == (128, 4096, False))
    raced = race.LESSONS[key].recorded(rec)
    fastest = min(("flash", "cudnn"), key=lambda k: row[k][part])
    assert raced["torch"][0] == row[fastest][part]
    assert raced["torch"][1].startswith(race._SDPA08[fastest]) and "fastest recorded" in raced["torch"][1]
    assert "bf16" in raced["op"] and "fp16" not in raced["op"]
    assert "fastest backend here" not in race.LESSONS[key].what[1]


def test_a_roofline_of_measured_ceilings_is_labelled_measured_and_a_datasheets_datasheet():
    measured = plots.ceilings_from_spec(explain.ceilings().data)  # the recorded profile's ceilings
    assert measured and all(c["label"].startswith("measured ") and c["dash"] == "solid" for c in measured)
    assert not any("datasheet" in c["label"] or "(measured)" in c["label"] for c in measured)
    sheet = plots.ceilings_from_spec(hardware.get("H200"))
    assert sheet and all(c["label"].startswith("datasheet H200 ") and c["dash"] == "dash" for c in sheet)


ROOT = Path(__file__).resolve().parents[1]


def _cells(stem):
    return json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]


def _text(stem, kind=None):
    return "\n".join(
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in _cells(stem)
        if kind is None or c["cell_type"] == kind
    )


#: Statements the lessons made that their own data refutes, with what refutes them.
REFUTED = [
    ("00_the_machine", "so does every elementwise kernel", "precise sin and cos are bound by instructions (01, 04)"),
    ("03_precision", "a few percent *below*", "the counters read 5 to 10% below the model"),
    ("04_fusion", "they were two compiles of one source", "compiled again, the source gives ncu's registers"),
    ("05_recomputation", "left of every ridge point", "the fused way's SFU operations sit near the SFU ridge"),
    ("05_recomputation", "sig / C", "the sigmoids run on the FP32 and SFU units, not at the tensor rate"),
    ("07_tiling", "needs more\nregisters than a thread has", "64 accumulator values a thread, the cap is 255"),
    ("07_tiling", "print(lesson07.cublas_rates(", "two cuBLAS rates at one size, unexplained"),
    ("08_flash_attention", "Eager minus replay is the\nlaunch cost, measured", "it is zero or negative at large L"),
    ("09_builder_test", "the GPU finishes its work and waits", "the bf16 rung is GPU-bound"),
    ("09_builder_test", "from bf16 on, the kernels got shorter", "bf16 and fused are GPU-bound"),
]


@pytest.mark.parametrize("stem, phrase, refuted_by", REFUTED, ids=[f"{s}:{p[:24]}" for s, p, _ in REFUTED])
def test_statements_the_recordings_refute_are_gone(stem, phrase, refuted_by):
    assert phrase not in _text(stem), f"{stem} still says {phrase!r}, though {refuted_by}"


def test_lesson00s_exercise_answers_are_revealed():
    code = _text("00_the_machine", "code")
    for name in ("b200_bytes_in_flight", "pcie_over_hbm"):
        assert re.search(rf"reveal\(\s*{name}\b", code), f"{name} is asked for and never revealed"


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.stem)
def test_no_placeholder_is_left_in_a_lessons_text(path):
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "markdown":
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            left = [ln for ln in src.splitlines() if re.fullmatch(r"\s*[A-Z][A-Z_]{3,}\s*", ln)]
            assert not left, f"{path.stem}: placeholder line(s) {left} in a markdown cell"
