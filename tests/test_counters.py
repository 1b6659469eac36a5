"""gpulab.measure.counters and gpulab.measure.counter_cases on the CPU: every case's model against hand-computed numbers, a case
measured with a fake ncu (tests/fake_ncu.py), the report, the atomic merge into the reference file and the command
line. No GPU and no ncu are needed; tests/test_counters_ncu.py tests the parsing and the runner."""

import json

import pytest

import gpulab
from gpulab.core import reference
from gpulab.measure import counter_cases as CC
from gpulab.measure import counters as C
from gpulab.measure import ncu
from tests import fake_ncu as F

ON_GPU_SKIP = pytest.mark.skipif(gpulab.ON_GPU, reason="checks what the interpreter says; a GPU reads counters")


def fake_row(i, rng, kernel="k", **metrics):
    """A parsed row as parse_csv + attach_ranges give it; metric names with "__" spelled as keyword-safe keys."""
    names = {
        "read": ncu.DRAM_READ,
        "write": ncu.DRAM_WRITE,
        "time": ncu.TIME,
        "ld_sectors": ncu.LD_SECTORS,
        "ld_requests": ncu.LD_REQUESTS,
        "st_sectors": ncu.ST_SECTORS,
        "st_requests": ncu.ST_REQUESTS,
        "threads": ncu.THREADS_PER_INST,
        "inst": ncu.WARP_INST,
        "regs": ncu.REGISTERS,
        "block_limit": ncu.BLOCK_LIMIT_REGISTERS,
        "theoretical": ncu.THEORETICAL_OCCUPANCY,
        "achieved": ncu.ACHIEVED_OCCUPANCY,
        "hit": ncu.L2_HIT,
        "l2_sectors": ncu.L2_READ_SECTORS,
    }
    return {
        "id": i,
        "kernel": kernel,
        "range": rng,
        "block": "",
        "grid": "",
        "metrics": {names[k]: v for k, v in metrics.items()},
        "units": {},
    }


def by(comparison, label, quantity):
    (row,) = [c for c in comparison if c["label"] == label and c["quantity"] == quantity]
    return row


# ---- measuring, with a fake ncu ------------------------------------------------------------------------------


@pytest.fixture
def fake_ncu(monkeypatch):
    return lambda fail_first=None: F.install(monkeypatch, fail_first)


def test_measure_compares_the_fixture_against_44n_and_8n(fake_ncu):
    fake_ncu()
    data = C.measure("fusion")
    n = CC.CASES["fusion"].params["n"]
    unfused = by(data["comparison"], "unfused", "DRAM bytes")
    assert unfused["model"] == 44 * n
    # reads 4 x 268.44 + 536.87 Mbyte, writes 5 x 268,435.46 Kbyte
    assert unfused["counter"] == pytest.approx(1_610_630_000 + 1_342_177_300)
    assert unfused["time_ns"] == pytest.approx(190_240 + 189_950 + 180_100 + 180_000 + 270_400)
    assert by(data["comparison"], "unfused", "kernels")["counter"] == 5
    fused = by(data["comparison"], "fused", "DRAM bytes")
    assert fused["model"] == 8 * n and fused["counter"] == pytest.approx(268_440_000 + 262_144_000)
    # SM<->L2: 8,388.608 Ksector read and written by each kernel (the add reads twice that), 32 bytes each
    l2 = by(data["comparison"], "unfused", "SM<->L2 bytes")
    assert l2["counter"] == pytest.approx((6 * 8_388_608 + 5 * 8_388_608) * 32) and l2["model"] == 44 * n
    assert data["provenance"]["ncu"].startswith("Version 2025.1.0.0")
    assert data["provenance"]["metrics"] == [
        ncu.DRAM_READ,
        ncu.DRAM_WRITE,
        ncu.L2_READ_SECTORS,
        ncu.L2_WRITE_SECTORS,
        ncu.TIME,
    ]
    assert data["missing_ranges"] == []
    json.dumps(data)  # JSON-able, to be recorded


# ---- every case's model, by hand ----------------------------------------------------------------------------------


def test_fusion_model_44n_and_8n():
    case = CC.fusion_case(n=1000)
    u, f = case.range("unfused").name, case.range("fused").name
    rows = [
        fake_row(0, u, "sin_kernel", read=4000, write=4000, time=10),
        fake_row(1, u, "cos_kernel", read=4000, write=4000, time=10),
        fake_row(2, u, "square_kernel", read=4000, write=4000, time=10),
        fake_row(3, u, "square_kernel", read=4000, write=4000, time=10),
        fake_row(4, u, "add_kernel", read=8000, write=3000, time=20),
        fake_row(5, f, "sincos_kernel", read=4000, write=4400, time=15),
    ]
    out = C.compare(case, rows)
    row = by(out, "unfused", "DRAM bytes")
    assert (row["model"], row["counter"], row["time_ns"]) == (44000, 43000, 60)
    assert row["ratio"] == pytest.approx(43000 / 44000)
    assert row["kernels"] == ["sin_kernel", "cos_kernel", "square_kernel", "square_kernel", "add_kernel"]
    row = by(out, "fused", "DRAM bytes")
    assert (row["model"], row["counter"], row["ratio"]) == (8000, 8400, pytest.approx(1.05))
    assert by(out, "unfused", "kernels")["model"] == 5 and by(out, "fused", "kernels")["model"] == 1


def test_precision_model_8n_and_4n():
    case = CC.precision_case(n=1000)
    rows = [
        fake_row(i, case.range(d).name, read=r, write=w, time=5)
        for i, (d, r, w) in enumerate([("fp32", 4000, 4000), ("fp16", 2000, 2100), ("bf16", 2000, 1900)])
    ]
    out = C.compare(case, rows)
    assert [by(out, d, "DRAM bytes")["model"] for d in ("fp32", "fp16", "bf16")] == [8000, 4000, 4000]
    assert by(out, "fp16", "DRAM bytes")["ratio"] == pytest.approx(4100 / 4000)


def test_coalescing_model_from_the_sectors():
    case = CC.coalescing_case(n=64, strides=(1, 4), matrix=64)
    rows = [
        fake_row(
            0,
            case.range("stride1").name,
            ld_sectors=8,
            ld_requests=1,
            st_sectors=8,
            st_requests=2,
            read=256,
            write=256,
            time=3,
        ),
        fake_row(
            1,
            case.range("stride4").name,
            ld_sectors=32,
            ld_requests=2,
            st_sectors=8,
            st_requests=2,
            read=1024,
            write=256,
            time=4,
        ),
        fake_row(
            2,
            case.range("transpose-naive").name,
            ld_sectors=512,
            ld_requests=32,
            st_sectors=4096,
            st_requests=128,
            read=16384,
            write=32768,
            time=9,
        ),
        fake_row(
            3,
            case.range("transpose-tiled").name,
            ld_sectors=512,
            ld_requests=32,
            st_sectors=512,
            st_requests=32,
            read=16384,
            write=16384,
            time=5,
        ),
    ]
    out = C.compare(case, rows)
    # stride 1: 32 lanes x 4 B = 128 B = 4 sectors per 32 elements; 16-byte lanes: 512 B = 16 sectors a request
    assert by(out, "stride1", "ld sectors/32 el")["model"] == 4
    assert by(out, "stride1", "ld sectors/32 el")["counter"] == 4  # 8 sectors over 64 elements
    assert by(out, "stride1", "ld sectors/request")["model"] == 16
    assert by(out, "stride1", "ld sectors/request")["counter"] == 8
    assert by(out, "stride1", "DRAM bytes")["model"] == 512  # 64 x 4 read + 64 x 4 written
    assert by(out, "stride1", "1 el/lane")["model"] == 4  # the textbook request: 32 elements
    assert by(out, "stride1", "1 el/lane")["counter"] == 4  # beside the counters' sectors per 32 elements
    # stride 4: Triton gives a lane 4 outputs, one scalar load each, so one load's lanes are 4 x 4 x 4 = 64 B
    # apart: 32 sectors; the textbook lanes 16 B apart span 500 B: 16 sectors; DRAM: reads 64 x 16 B, writes 64 x 4 B
    assert by(out, "stride4", "ld sectors/32 el")["model"] == 32
    assert by(out, "stride4", "ld sectors/32 el")["counter"] == 16
    assert by(out, "stride4", "ld sectors/request")["model"] == 32
    assert by(out, "stride4", "ld sectors/request")["counter"] == 16
    assert by(out, "stride4", "1 el/lane")["model"] == 16
    assert by(out, "stride4", "DRAM bytes")["model"] == 1280
    assert by(out, "stride4", "DRAM bytes")["ratio"] == pytest.approx(1.0)
    # naive transpose: the write's lanes are 256 B apart, a sector each: 32 per 32 elements, 32 B per element
    assert by(out, "transpose-naive", "st sectors/32 el")["model"] == 32
    assert by(out, "transpose-naive", "st sectors/32 el")["counter"] == 32  # 4096 sectors over 4096 elements
    assert by(out, "transpose-naive", "st sectors/request")["model"] == 32
    assert by(out, "transpose-naive", "DRAM bytes")["model"] == 4096 * 4 + 4096 * 32
    assert by(out, "transpose-naive", "DRAM bytes")["ratio"] == pytest.approx(49152 / 147456)
    assert by(out, "transpose-tiled", "st sectors/32 el")["model"] == 4
    assert by(out, "transpose-tiled", "st sectors/request")["model"] == 16
    assert by(out, "transpose-tiled", "DRAM bytes")["model"] == 32768


def test_coalescing_recording_matches_the_layout_model():
    """The recorded H200 counters: at strides 2 and 4 the L1 counts 32 sectors a load, as the request Triton
    issues (4 outputs a lane, lanes 4 x stride x 4 B apart) predicts, not the textbook's 8 and 16."""
    rec = C.recorded("coalescing").data
    if rec is None:
        pytest.skip("no recording of the coalescing counters")
    case = CC.get_case("coalescing")
    assert rec["params"] == case.params
    out = C.compare(case, rec["rows"])
    for s in (2, 4):
        for quantity in ("ld sectors/request", "ld sectors/32 el"):
            assert by(out, f"stride{s}", quantity)["model"] == 32
            assert by(out, f"stride{s}", quantity)["ratio"] == pytest.approx(1.0, abs=0.005)
        assert by(out, f"stride{s}", "1 el/lane")["model"] == 4 * s
        assert by(out, f"stride{s}", "1 el/lane")["ratio"] == pytest.approx(32 / (4 * s), abs=0.005)
    # the report shows the models of the code beside the recorded counters
    text = C.report("coalescing", rec, print_it=False)
    (line,) = [ln for ln in text.splitlines() if ln.strip().startswith("stride2 ")]
    assert "ld sectors/request 32 / 32 (1.00x)" in line and "1 el/lane 8 / 32 (4.00x)" in line


def test_divergence_models_where_uniform_and_loop():
    case = CC.divergence_case(n=64, block=16, fraction_a=0.5, frac_expensive=0.0, cheap=4, expensive=64)
    inst = {
        "path-a": 1000,
        "path-b": 600,
        "where": 1700,
        "uniform": 800,
        "loop-zero": 100,
        "loop-full": 1700,
        "loop-interleaved": 210,
        "loop-sorted": 190,
    }
    rows = [
        fake_row(i, case.range(lab).name, inst=v, threads=32.0 if lab != "where" else 31.5, time=1)
        for i, (lab, v) in enumerate(inst.items())
    ]
    out = C.compare(case, rows)
    assert by(out, "where", "warp inst")["model"] == 1600  # A + B
    assert by(out, "where", "warp inst")["ratio"] == pytest.approx(1700 / 1600)
    assert by(out, "uniform", "warp inst")["model"] == pytest.approx(800)  # half of the 4 blocks take A
    # every trip count 4: 4 blocks x 4 steps = 16 of the full run's 4 x 64: 100 + 1600 x 16 / 256
    assert by(out, "loop-interleaved", "warp inst")["model"] == pytest.approx(200)
    assert by(out, "loop-sorted", "warp inst")["model"] == pytest.approx(200)
    assert by(out, "path-a", "warp inst")["model"] is None
    assert by(out, "where", "threads/inst")["model"] == 32.0
    assert by(out, "where", "threads/inst")["ratio"] == pytest.approx(31.5 / 32)


def test_occupancy_model_from_the_registers():
    case = CC.occupancy_case(blocks=(1024,), num_warps=4)
    rows = [
        fake_row(0, case.range("block1024").name, regs=40, block_limit=12, theoretical=75.0, achieved=60.0, time=100)
    ]
    out = C.compare(case, rows)
    # 65536 registers / (40 x 32 x 4) = 12 blocks of 4 warps = 48 warps (under the 64-warp cap)
    assert by(out, "block1024", "resident warps/SM")["model"] == 48
    assert by(out, "block1024", "resident warps/SM")["counter"] == pytest.approx(48.0)  # 75% of 64
    assert by(out, "block1024", "achieved warps/SM")["ratio"] == pytest.approx(0.8)  # 60% of 64 = 38.4
    assert by(out, "block1024", "registers/thread")["counter"] == 40
    assert by(out, "block1024", "block limit (registers)")["counter"] == 12


def test_tiling_model_2n3s_and_2n3s_over_t():
    case = CC.tiling_case(n_noreuse=64, n_tiled=256)
    rows = [
        fake_row(0, case.range("noreuse").name, read=65536, l2_sectors=16384, hit=90.0, time=50),
        fake_row(1, case.range("tiled-group8").name, read=524288, l2_sectors=32768, hit=80.0, time=20),
        fake_row(2, case.range("tiled-group1").name, read=786432, l2_sectors=32768, hit=70.0, time=25),
    ]
    out = C.compare(case, rows)
    assert by(out, "noreuse", "DRAM read bytes")["model"] == 2 * 64**3 * 4  # 2,097,152
    assert by(out, "noreuse", "L2 read bytes")["counter"] == 16384 * 32
    assert by(out, "tiled-group8", "DRAM read bytes")["model"] == 2 * 256**3 * 4 // 128  # 1,048,576
    assert by(out, "tiled-group8", "DRAM read bytes")["ratio"] == pytest.approx(0.5)
    assert by(out, "tiled-group1", "L2 read bytes")["ratio"] == pytest.approx(1.0)
    assert by(out, "tiled-group1", "L2 hit rate")["counter"] == 70.0


def test_flash_models_and_a_time_weighted_hit_rate():
    case = CC.flash_case(B=1, H=2, L=256, d=64, dtype="bf16")
    naive, flash = case.range("naive").name, case.range("flash").name
    rows = [
        fake_row(0, naive, "mul", read=60000, write=65536, hit=10.0, time=100),
        fake_row(1, naive, "gemm", read=70000, write=262144, hit=50.0, time=300),
        fake_row(2, flash, "flash_attention_fwd_kernel", read=196608, write=67584, l2_sectors=12352, hit=60.0, time=80),
    ]
    out = C.compare(case, rows)
    # (6 BHLd + 4 BHL^2) x 2 bytes = (196,608 + 524,288) x 2
    assert by(out, "naive", "DRAM bytes")["model"] == 1_441_792
    assert by(out, "naive", "DRAM bytes")["counter"] == 60000 + 65536 + 70000 + 262144
    assert by(out, "naive", "L2 hit rate")["counter"] == pytest.approx((10 * 100 + 50 * 300) / 400)
    # each tensor once: BH ((2Ld + 2Ld) s + 4L) = 2 x (131,072 + 1,024)
    assert by(out, "flash", "DRAM bytes")["model"] == 264_192
    assert by(out, "flash", "DRAM bytes")["ratio"] == pytest.approx(264_192 / 264_192)
    # K and V once per query block of 128: 2 blocks: BH ((2Ld + 2 x 2Ld) s + 4L)
    assert by(out, "flash", "L2 read bytes")["model"] == 395_264
    assert by(out, "flash", "L2 read bytes")["counter"] == 12352 * 32


def test_a_range_that_ran_no_kernel_has_no_counter():
    case = CC.fusion_case(n=1000)
    out = C.compare(case, [fake_row(0, case.range("fused").name, read=4000, write=4000, time=5)])
    row = by(out, "unfused", "DRAM bytes")
    assert row["counter"] is None and row["ratio"] is None and row["model"] == 44000


def test_get_case_names_the_known_cases():
    with pytest.raises(ValueError, match="case must be one of"):
        CC.get_case("fusoin")


# ---- report ----------------------------------------------------------------------------------------------------


def test_report_prints_model_counter_and_time_in_few_lines(capsys):
    case = CC.coalescing_case(n=64, strides=(1, 4), matrix=64)
    rows = [
        fake_row(i, r.name, ld_sectors=8, ld_requests=1, st_sectors=8, st_requests=2, read=256, write=256, time=1500)
        for i, r in enumerate(case.ranges)
    ]
    text = C.report(case, {"comparison": C.compare(case, rows)})
    assert text == capsys.readouterr().out.rstrip("\n")
    lines = text.splitlines()
    assert len(lines) <= 15
    stride1 = next(ln for ln in lines if ln.strip().startswith("stride1 "))
    assert "DRAM bytes 512 B / 512 B (1.00x)" in stride1 and "time 1.5 us" in stride1


@ON_GPU_SKIP
def test_report_without_counters_says_why_and_that_nothing_is_recorded(tmp_path, monkeypatch):
    monkeypatch.setattr(reference, "DATA_DIR", tmp_path)
    text = C.report("fusion", print_it=False)
    lines = text.splitlines()
    assert "interpreter" in lines[1] and "no recording" in lines[2]


def test_report_falls_back_to_the_recording_when_ncu_fails(fake_ncu, tmp_path, monkeypatch):
    monkeypatch.setattr(reference, "DATA_DIR", tmp_path)
    fake_ncu(fail_first="==ERROR== The application returned an error code (1).\n")
    lines = C.report("fusion", print_it=False).splitlines()
    assert lines[1].startswith("  ncu could not measure here (RuntimeError: ncu failed on case 'fusion'")
    assert "no recording" in lines[2]


def test_report_falls_back_to_the_recording_when_ncu_prints_what_cannot_be_read(fake_ncu, tmp_path, monkeypatch):
    monkeypatch.setattr(reference, "DATA_DIR", tmp_path)
    fake_ncu()
    garbled = F.RAW.replace('"268,435.46"', '"268,43"', 1)  # a stray separator in one value of the first record
    monkeypatch.setattr(ncu, "_import", lambda exe, report_path, rename: F.RAW_NVTX if rename else garbled)
    lines = C.report("fusion", print_it=False).splitlines()
    assert lines[1].startswith("  ncu could not measure here (ValueError: ncu CSV metric 'dram__bytes_write.sum'")
    assert "record 0 (ID 0, kernel 'sin_kernel')" in lines[1] and "no recording" in lines[2]


def test_cli_stops_when_ncu_has_no_permission(fake_ncu, capsys):
    fake_ncu(fail_first="==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n")
    assert C.main(["--all"]) == 2
    assert "ERR_NVGPUCTRPERM" in capsys.readouterr().err


def test_report_shows_the_recording_with_its_provenance(tmp_path, monkeypatch):
    monkeypatch.setattr(reference, "DATA_DIR", tmp_path)
    case = CC.fusion_case(n=1000)
    rows = [fake_row(0, case.range("fused").name, read=4000, write=4000, time=5)]
    rec = {
        "comparison": C.compare(case, rows),
        "provenance": {
            "gpu": "NVIDIA H200",
            "date": "2026-12-01",
            "ncu": "Version 2025.1.0.0",
            "torch": "2.11.0",
            "triton": "3.6.0",
        },
    }
    (tmp_path / "reference-h200.json").write_text(json.dumps({"counters": {"cases": {"fusion": rec}}}))
    text = C.report("fusion", live=False, print_it=False)
    assert "recorded on NVIDIA H200 (2026-12-01; ncu 2025.1.0, torch 2.11.0" in text
    assert "8 kB / 8 kB (1.00x)" in text


def test_small_ratios():
    case = CC.fusion_case(n=1000)  # model 8000 bytes; counters 4 bytes: 1/2000 of it
    rows = [fake_row(0, case.range("fused").name, read=2, write=2, time=5)]
    assert "8 kB / 4 B (0.0005x)" in C.table(C.compare(case, rows))


def test_help_says_what_to_type_in_a_few_lines(capsys):
    with pytest.raises(SystemExit):
        C.main(["--help"])
    out = capsys.readouterr().out
    description = out.split("\n\n")[1:-1]  # between the usage line and the options
    assert sum(len(part.splitlines()) + 1 for part in description) <= 12, out
    assert "python -m gpulab.measure.counters --all --record" in out and "NVTX" not in out


# ---- recording -------------------------------------------------------------------------------------------------


def _reference_file(tmp_path):
    path = tmp_path / "reference-h200.json"
    original = {
        "provenance": {"gpu": "NVIDIA H200"},
        "lesson02": {"n": 16},
        "counters": {
            "provenance": {"date": "2026-11-30"},
            "cases": {"precision": {"comparison": [], "provenance": {}}},
        },
    }
    path.write_text(json.dumps(original))
    return path, original


def test_record_merges_and_keeps_other_keys(tmp_path):
    path, original = _reference_file(tmp_path)
    rec = {"comparison": [{"label": "fused"}], "provenance": {"date": "2026-12-01", "ncu": "Version 2025.1.0.0"}}
    C.record({"fusion": rec}, path)
    data = json.loads(path.read_text())
    assert data["lesson02"] == original["lesson02"] and data["provenance"] == original["provenance"]
    assert set(data["counters"]["cases"]) == {"precision", "fusion"}
    assert data["counters"]["cases"]["fusion"] == rec
    assert data["counters"]["provenance"] == rec["provenance"]
    assert reference.label({"provenance": {}, **data}, "counters").startswith("recorded on ? (2026-12-01")


def test_record_is_atomic(tmp_path):
    path, _ = _reference_file(tmp_path)
    before = path.read_text()
    with pytest.raises(TypeError):
        C.record({"fusion": {"comparison": [object()], "provenance": {}}}, path)  # fails while writing
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left behind


# ---- command line ----------------------------------------------------------------------------------------------


@ON_GPU_SKIP
def test_cli_without_counters_shows_the_reason_and_refuses_to_record(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(reference, "DATA_DIR", tmp_path)
    assert C.main(["--case", "precision"]) == 0
    assert "interpreter" in capsys.readouterr().out
    assert C.main(["--all", "--record"]) == 2
    assert "--record needs counters" in capsys.readouterr().err
    assert C.main(["--list"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(CC.CASES)


@ON_GPU_SKIP
def test_cli_json_without_counters_says_nothing_was_written(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(reference, "DATA_DIR", tmp_path)
    out_json = tmp_path / "counters.json"
    assert C.main(["--case", "fusion", "--json", str(out_json)]) == 2
    err = capsys.readouterr().err
    assert f"--json {out_json} needs counters measured here" in err and "interpreter" in err
    assert "Nothing was written" in err and not out_json.exists()


def test_module_docstring_starts_with_the_command_for_every_case():
    doc = C.__doc__
    assert "python -m gpulab.measure.counters --all --record" in doc.split("\n\n")[2]


# ---- the child's kernels, small, in the interpreter ------------------------------------------------------------

SMALL = {
    "fusion": lambda: CC.fusion_case(n=1000),
    "precision": lambda: CC.precision_case(n=100),
    "coalescing": lambda: CC.coalescing_case(n=64, strides=(1, 3), matrix=40),
    "divergence": lambda: CC.divergence_case(n=48, block=16, k_a=2, k_b=1, cheap=1, expensive=3),
    "lane_branch": lambda: CC.lane_branch_case(n=100, trips=2, block=32, boundaries=(0, 5, 32)),
    "occupancy": lambda: CC.occupancy_case(n=2000, blocks=(1024,)),
    "tiling": lambda: CC.tiling_case(n_noreuse=20, n_tiled=40),
    "flash": lambda: CC.flash_case(B=1, H=1, L=40, d=16),
}


@ON_GPU_SKIP
def test_the_child_refuses_to_run_without_a_gpu():
    from gpulab.core.timing import NoGPUTimingError

    with pytest.raises(NoGPUTimingError):
        C.run_child("precision")


def test_every_case_has_a_small_twin():
    assert set(SMALL) == set(CC.CASES)
    for name, make in SMALL.items():
        small, full = make(), CC.CASES[name]
        assert small.metrics == full.metrics and small.model.__qualname__ == full.model.__qualname__


CUDA_CPP = {"lane_branch"}  # CUDA C++ kernels: nvcc and a GPU, no interpreter (tests/test_lane_branch.py on a CPU)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.skipif(not gpulab.ON_GPU, reason="a CUDA C++ kernel needs a GPU"))
        if n in CUDA_CPP
        else n
        for n in sorted(SMALL)
    ],
)
def test_the_childs_launch_calls_run_small_in_the_interpreter(name):
    """The launch calls the child makes, run small in the interpreter (the same code, tiny inputs): every range
    gets a callable that returns a result and the ranges come in the case's order."""
    case = SMALL[name]()
    runs = case.setup(case)
    assert [r.name for r, _ in runs] == [r.name for r in case.ranges]
    for _, fn in runs:
        assert fn() is not None


def test_cli_records_each_case_into_the_reference_file(fake_ncu, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(reference, "DATA_DIR", tmp_path)
    path, original = _reference_file(tmp_path)
    fake_ncu()
    out_json = tmp_path / "out" / "counters.json"
    assert C.main(["--case", "fusion", "--record", "--gpu-name", "h200", "--json", str(out_json)]) == 0
    printed = capsys.readouterr().out
    assert "unfused" in printed and f"recorded into {path}" in printed
    data = json.loads(path.read_text())
    assert data["lesson02"] == original["lesson02"]
    assert set(data["counters"]["cases"]) == {"precision", "fusion"}
    assert data["counters"]["cases"]["fusion"]["provenance"]["ncu"].startswith("Version 2025.1.0.0")
    assert set(json.loads(out_json.read_text())) == {"fusion"}


def test_row_finds_a_label_and_quantity_and_names_what_is_missing():
    comparison = [
        {"label": "noreuse", "quantity": "DRAM read bytes", "counter": 3.0},
        {"label": "noreuse", "quantity": "L2 hit rate", "counter": 99.0},
        {"label": "tiled", "quantity": "DRAM read bytes", "counter": 1.0},
    ]
    assert C.row(comparison, "tiled", "DRAM read bytes")["counter"] == 1.0
    assert C.row({"comparison": comparison}, "noreuse", "L2 hit rate")["counter"] == 99.0
    with pytest.raises(KeyError, match="'tiled' and quantity 'L2 hit rate'.*'noreuse', 'DRAM read bytes'"):
        C.row(comparison, "tiled", "L2 hit rate")


def test_byte_text_reads_as_decimal_units():
    """counters.byte_text, which the counter tables and the trace's tables both print bytes with."""
    from gpulab.measure.counters import byte_text

    assert [byte_text(v) for v in (512, 2_100, 2_100_000, 4.2e9)] == ["512 B", "2.1 kB", "2.1 MB", "4.2 GB"]
