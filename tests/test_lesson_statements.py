"""What the lessons print says what the data shows: a launch the kernel hides is not called a launch cost (lesson
08's eager against graph replay), and the recorded attention race names the SDPA backend it times, the fastest the
suite recorded, in the recording's dtype."""

import pytest

import gpulab  # noqa: F401  (the interpreter before any kernel)
from gpulab import live
from gpulab.bench import lesson08
from gpulab.exercises import race

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
