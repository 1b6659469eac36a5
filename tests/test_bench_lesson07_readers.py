"""The lesson07 suite's record readers that notebooks 07 and 07b print from: the build's table, and the wave step
of the dense sweep with its tile and wave counts, each against hand counts and the reference file read here."""

import pytest

from gpulab.bench import lesson07
from gpulab.core import reference

REC = reference.load("h200")


def test_the_build_table_prints_every_step_with_its_time_and_rate():
    text = lesson07.build_lines(REC["lesson07"])
    lines = text.splitlines()
    assert len(lines) == 1 + len(REC["lesson07"]["build"]) <= 15
    for r, line in zip(REC["lesson07"]["build"], lines[1:]):
        assert r["step"] in line and f"{r['ms']:.3f} ms" in line and f"{r['tflops']:.1f} TFLOP/s" in line
    assert lesson07.build_lines({}) == ""


def test_the_wave_step_counts_tiles_and_waves_by_hand_and_reads_the_rates():
    s = REC["lesson07"]["sweep"]
    assert tuple(s["tile"]) == (128, 256) and s["sms"] == 132
    one, two = lesson07.wave_step(REC["lesson07"], ns=(2048, 2056))
    # 2048: 16 x 8 = 128 tiles on 132 SMs, one wave; 2056: 17 x 9 = 153 tiles, a second wave with 21 busy
    assert (one["tiles"], one["waves"], one["last_busy"]) == (128, 1, 128)
    assert (two["tiles"], two["waves"], two["last_busy"]) == (153, 2, 153 - 132)
    for row in (one, two):
        i = s["ns"].index(row["n"])
        assert row["gpulab"] == pytest.approx(2 * row["n"] ** 3 / (s["gpulab_ms"][i] * 1e9))
        assert row["torch"] == pytest.approx(2 * row["n"] ** 3 / (s["torch_ms"][i] * 1e9))
    assert two["gpulab"] < 0.5 * one["gpulab"]  # the recorded step: one wave to two halves the rate
    assert lesson07.wave_step(REC["lesson07"], ns=(7,)) == []
