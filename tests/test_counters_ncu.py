"""gpulab.measure.ncu on the CPU: ncu's CSV parsed from fixtures in its raw-page format and from small texts that ncu could
print or that a truncated or garbled report holds (parsed strictly: a value is read right or refused, naming the
metric and the row), availability in the interpreter, and the runner's plumbing with a fake ncu. No GPU and no
ncu are needed."""

import pytest

import gpulab
from gpulab.measure import counter_cases, ncu
from tests import fake_ncu as F

ON_GPU_SKIP = pytest.mark.skipif(gpulab.ON_GPU, reason="checks what the interpreter says; a GPU reads counters")

HEAD = '"ID","Kernel Name","Block Size","{m1}","{m2}"\n"","","","{u1}","{u2}"\n'


def csv_text(rows, m1=ncu.DRAM_READ, u1="byte", m2=ncu.TIME, u2="ns", head=HEAD):
    """A small raw-page CSV: two metric columns (names and units), then one record per row of
    ``(id, kernel, value 1, value 2)``, every field quoted as ncu quotes it."""
    lines = [head.format(m1=m1, m2=m2, u1=u1, u2=u2)]
    lines += [f'"{i}","{k}","(128, 1, 1)","{a}","{b}"\n' for i, k, a, b in rows]
    return "==PROF== Disconnected from process 1\n" + "".join(lines)


# ---- values and units --------------------------------------------------------------------------------------------


def test_to_base_scales_units_and_reads_thousands_separators():
    assert ncu.to_base("1,234.50", "Kbyte") == (1234500.0, "byte")
    assert ncu.to_base("268.44", "Mbyte") == (pytest.approx(268_440_000.0), "byte")
    assert ncu.to_base("2", "Gbyte") == (2e9, "byte")
    assert ncu.to_base("1,073,741,824", "byte") == (1073741824.0, "byte")
    assert ncu.to_base("2.5", "usecond") == (2500.0, "ns")
    assert ncu.to_base("0.18", "msecond") == (pytest.approx(180_000.0), "ns")
    assert ncu.to_base("3", "second") == (3e9, "ns")
    assert ncu.to_base("75.5", "%") == (75.5, "%")
    assert ncu.to_base("3", "Ksector") == (3000.0, "sector")
    assert ncu.to_base("40", "register/thread") == (40.0, "register/thread")
    assert ncu.to_base("n/a", "byte") == (None, "byte")
    with pytest.raises(ValueError):
        ncu.to_base("NVIDIA H200", "")


@pytest.mark.parametrize("unit", ["Kbyte/second", "psecond", "cycle/usecond", "kbyte", "Xbyte", "bytes", "%%"])
def test_to_base_refuses_a_unit_it_does_not_know(unit):
    with pytest.raises(ValueError, match="is not one gpulab reads"):
        ncu.to_base("1.5", unit)


@pytest.mark.parametrize("text", ["1,5", "12,34", "1,2345.0", ",123", "1.2.3", "1 234", "12.5%", "0x10", "inf"])
def test_to_base_refuses_a_number_it_would_misread(text):
    with pytest.raises(ValueError, match="is not a number"):
        ncu.to_base(text, "byte")


# ---- parsing whole reports ---------------------------------------------------------------------------------------


def test_parse_csv_reads_the_raw_page_among_prof_lines():
    rows = ncu.parse_csv(F.RAW)
    assert [r["id"] for r in rows] == [0, 1, 2, 3, 4, 5]
    assert [r["kernel"] for r in rows[:5]] == [
        "sin_kernel",
        "cos_kernel",
        "square_kernel",
        "square_kernel",
        "add_kernel",
    ]
    # a quoted kernel name with commas inside stays one field
    assert rows[5]["kernel"].startswith("void at::native::vectorized_elementwise_kernel<4, ")
    assert rows[5]["kernel"].endswith("std::array<char *, 2>>(int, T2, T3)")
    first = rows[0]["metrics"]
    assert first[ncu.DRAM_READ] == pytest.approx(268_440_000.0)  # 268.44 Mbyte
    assert first[ncu.DRAM_WRITE] == pytest.approx(268_435_460.0)  # 268,435.46 Kbyte
    assert first[ncu.TIME] == pytest.approx(190_240.0)  # 190.24 usecond in ns
    assert first["lts__t_bytes.sum"] == 1_073_741_824.0  # byte, with separators
    assert first[ncu.L2_HIT] == 12.5
    assert rows[0]["units"][ncu.TIME] == "ns" and rows[0]["units"][ncu.DRAM_WRITE] == "byte"
    assert rows[5]["metrics"][ncu.TIME] == pytest.approx(1_120_500.0)  # "1,120.50" usecond
    assert rows[5]["metrics"]["lts__t_bytes.sum"] is None  # n/a
    assert "device__attribute_display_name" not in first  # a text column is not a number: kept as text
    assert rows[0]["attributes"] == {"device__attribute_display_name": "NVIDIA H200"}
    assert rows[0]["block"] == "(128, 1, 1)" and rows[0]["range"] is None


def test_parse_csv_base_units_agree_with_scaled_units():
    scaled, base = ncu.parse_csv(F.RAW), ncu.parse_csv(F.RAW_NVTX)
    for a, b in zip(scaled, base):
        for k in (ncu.DRAM_READ, ncu.DRAM_WRITE, ncu.TIME):
            assert a["metrics"][k] == pytest.approx(b["metrics"][k], rel=1e-12), (a["id"], k)


def test_parse_csv_scales_every_prefix_and_time_unit():
    text = csv_text([(0, "k", "1.5", "2"), (1, "k", "2,000.25", "0.5")], u1="Gbyte", u2="msecond")
    rows = ncu.parse_csv(text)
    assert [r["metrics"][ncu.DRAM_READ] for r in rows] == [1.5e9, pytest.approx(2.00025e12)]
    assert [r["metrics"][ncu.TIME] for r in rows] == [2e6, 5e5]
    assert rows[1]["units"] == {ncu.DRAM_READ: "byte", ncu.TIME: "ns"}


def test_parse_csv_names_the_metric_and_row_of_a_unit_it_does_not_know():
    text = csv_text([(0, "sin_kernel", "1.5", "2"), (1, "cos_kernel", "1", "2")], u2="psecond")
    with pytest.raises(ValueError, match=r"metric 'gpu__time_duration.sum', record 0 \(ID 0, kernel 'sin_kernel'\)"):
        ncu.parse_csv(text)


def test_parse_csv_refuses_a_stray_separator_naming_metric_and_row():
    text = csv_text([(0, "sin_kernel", "1,000", "2"), (7, "cos_kernel", "12,34", "2")])
    with pytest.raises(ValueError, match=r"'dram__bytes_read.sum', record 1 \(ID 7, kernel 'cos_kernel'\).*'12,34'"):
        ncu.parse_csv(text)


def test_parse_csv_refuses_text_in_a_metric_with_a_unit():
    text = csv_text([(0, "k", "about 3", "2")])
    with pytest.raises(ValueError, match="'dram__bytes_read.sum', record 0.*not a number"):
        ncu.parse_csv(text)


def test_parse_csv_refuses_a_truncated_last_record():
    whole = csv_text([(0, "sin_kernel", "1", "2"), (1, "cos_kernel", "3", "4")])
    assert len(ncu.parse_csv(whole)) == 2
    for cut in (1, 3, 6, 12):  # inside the last field, after a comma, after a closing quote, mid-record
        with pytest.raises(ValueError, match="truncated"):
            ncu.parse_csv(whole.rstrip("\n")[:-cut])


def test_parse_csv_refuses_a_record_without_an_id():
    text = csv_text([(0, "k", "1", "2"), ("", "k", "3", "4")])
    with pytest.raises(ValueError, match="record 1 has no kernel ID"):
        ncu.parse_csv(text)


def test_parse_csv_reads_only_the_metrics_asked_and_each_must_be_there():
    text = csv_text([(0, "k", "1", "NVIDIA H200")], u2="")
    (row,) = ncu.parse_csv(text, [ncu.DRAM_READ])  # the text column is not asked for: not read
    assert row["metrics"] == {ncu.DRAM_READ: 1.0} and row["attributes"] == {}
    with pytest.raises(ValueError, match=r"record 0.*not a number"):
        ncu.parse_csv(text, [ncu.DRAM_READ, ncu.TIME])  # asked for: it must be a number
    with pytest.raises(ValueError, match=r"no column for metric\(s\) \['smsp__inst_executed.sum'\]"):
        ncu.parse_csv(text, [ncu.DRAM_READ, ncu.WARP_INST])


def test_parse_csv_without_a_header_says_so():
    with pytest.raises(ValueError, match="no ncu CSV header"):
        ncu.parse_csv("==PROF== Connected to process 1\n==ERROR== the application returned an error code (1)\n")


def test_ranges_come_from_the_nvtx_renamed_export():
    rows = ncu.parse_csv(F.RAW)
    assert (
        ncu.attach_ranges(rows, ncu.parse_csv(F.RAW_NVTX), ["gpulab:fusion:unfused", "gpulab:fusion:fused"]) == "nvtx"
    )
    assert [r["range"] for r in rows] == ["gpulab:fusion:unfused"] * 5 + ["gpulab:fusion:fused"]


def test_without_nvtx_names_one_kernel_per_range_goes_by_launch_order():
    rows = ncu.parse_csv(F.RAW)[:2]  # two kernels, IDs 0 and 1, no range in their names
    assert ncu.attach_ranges(rows, rows, ["gpulab:x:a", "gpulab:x:b"]) == "launch order"
    assert [r["range"] for r in rows] == ["gpulab:x:a", "gpulab:x:b"]
    rows = ncu.parse_csv(F.RAW)  # six kernels for two ranges: no guess
    assert ncu.attach_ranges(rows, rows, ["gpulab:x:a", "gpulab:x:b"]) == "none"
    assert {r["range"] for r in rows} == {None}


def test_match_range_takes_the_longest_name():
    names = ["gpulab:c:stride1", "gpulab:c:stride16"]
    assert ncu.match_range("gpulab:c:stride16", names) == "gpulab:c:stride16"
    assert ncu.match_range("gpulab:c:stride1/", names) == "gpulab:c:stride1"
    assert ncu.match_range("<default>:gpulab:c:stride16/sin_kernel", names) == "gpulab:c:stride16"
    assert ncu.match_range("other", names) is None


# ---- availability --------------------------------------------------------------------------------------------


@ON_GPU_SKIP
def test_available_is_false_in_the_interpreter_with_a_reason():
    assert not gpulab.ON_GPU
    ok, why = ncu.available()
    assert ok is False and "interpreter" in why and "\n" not in why


def test_available_needs_ncu_on_path(monkeypatch):
    monkeypatch.setattr(gpulab, "ON_GPU", True)
    monkeypatch.setattr(ncu, "ncu_path", lambda: None)
    ok, why = ncu.available()
    assert ok is False and "`ncu` is not on PATH" in why


def test_available_sees_counters_restricted_to_admins(monkeypatch, tmp_path):
    params = tmp_path / "params"
    params.write_text("ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\nEnableMSI: 1\n")
    monkeypatch.setattr(gpulab, "ON_GPU", True)
    monkeypatch.setattr(ncu, "ncu_path", lambda: "/opt/ncu")
    monkeypatch.setattr(ncu, "DRIVER_PARAMS", params)
    monkeypatch.setattr(ncu.os, "geteuid", lambda: 1000)
    ok, why = ncu.available()
    assert ok is False and ncu.PERMISSION_ERROR in why
    monkeypatch.setattr(ncu.os, "geteuid", lambda: 0)  # root may read them
    assert ncu.available() == (True, "")
    params.write_text("RmProfilingAdminOnly: 0\n")
    monkeypatch.setattr(ncu.os, "geteuid", lambda: 1000)
    assert ncu.available() == (True, "")


def test_ncu_short():
    assert ncu.ncu_short("Version 2025.3.1.0 (build 36398880) (public-release)") == "ncu 2025.3.1"
    assert ncu.ncu_short("unknown") == "ncu unknown"


# ---- the runner, with a fake ncu -------------------------------------------------------------------------------

FUSION = counter_cases.CASES["fusion"]


def test_profile_runs_ncu_on_the_child_and_keeps_the_asked_metrics(monkeypatch):
    fake = F.install(monkeypatch)
    rows, info = ncu.profile(FUSION)
    run = fake.calls[0]
    assert run[0] == "/opt/ncu" and run[run.index("--clock-control") + 1] == "none" and "--nvtx" in run
    includes = [run[i + 1] for i, a in enumerate(run) if a == "--nvtx-include"]
    assert includes == ["gpulab:fusion:unfused/", "gpulab:fusion:fused/"]
    assert run[-4:] == ["-m", "gpulab.measure.counters", "--child", "fusion"]
    assert run[run.index("--metrics") + 1] == (
        "dram__bytes_read.sum,dram__bytes_write.sum,"
        "lts__t_sectors_srcunit_tex_op_read.sum,"
        "lts__t_sectors_srcunit_tex_op_write.sum,gpu__time_duration.sum"
    )
    assert [r["range"] for r in rows] == ["gpulab:fusion:unfused"] * 5 + ["gpulab:fusion:fused"]
    assert info["dropped"] == [] and info["ranges_by"] == "nvtx"


def test_profile_drops_a_metric_ncu_does_not_know_and_retries(monkeypatch):
    fake = F.install(monkeypatch, fail_first="==ERROR== Failed to find metric dram__bytes_write.sum\n")
    small = counter_cases.CounterCase(**{**FUSION.__dict__, "metrics": (ncu.DRAM_READ, ncu.DRAM_WRITE, ncu.TIME)})
    rows, info = ncu.profile(small)
    assert info["dropped"] == [ncu.DRAM_WRITE]
    second = fake.calls[1]
    assert second[second.index("--metrics") + 1] == "dram__bytes_read.sum,gpu__time_duration.sum"
    assert set(rows[0]["metrics"]) == {ncu.DRAM_READ, ncu.TIME}  # what was asked for, and nothing ncu added


def test_profile_without_permission_raises_counters_unavailable(monkeypatch):
    F.install(
        monkeypatch,
        fail_first="==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
        "Performance Counters on the target device 0.\n",
    )
    with pytest.raises(ncu.CountersUnavailable, match="ERR_NVGPUCTRPERM"):
        ncu.profile(FUSION)


def test_profile_reports_an_unknown_failure_with_ncu_lines(monkeypatch):
    F.install(monkeypatch, fail_first="==ERROR== The application returned an error code (1).\n")
    with pytest.raises(RuntimeError, match="returned an error code"):
        ncu.profile(FUSION)
