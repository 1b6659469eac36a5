"""Nsight Compute (``ncu``) plumbing for ``gpulab.measure.counters``: the metric names, whether counters can be read here,
the ncu command line, running it, and parsing the CSV it prints. The lesson cases that say what to run and which
model to set beside each counter live in ``gpulab.measure.counter_cases``; the report and the command line in
``gpulab.measure.counters``.

How a case is measured. The runner starts ``ncu`` on a child process, ``python -m gpulab.measure.counters --child
<case>``, which builds the case's inputs, calls every kernel once to compile it (outside any NVTX range), then
calls each kernel of interest exactly once inside an NVTX push/pop range named ``gpulab:<case>:<label>``. ncu
profiles only the kernels inside those ranges (``--nvtx --nvtx-include "gpulab:<case>:<label>/"``; the
trailing slash selects a push/pop range, Nsight Compute CLI documentation, "NVTX Filtering"). Launch
shapes are fixed (no autotuning in the child). ncu's defaults stay: kernel replay, and every cache flushed
before each replay pass (``--cache-control all``), so each kernel starts from a cold L2, as the byte models
assume; ``--clock-control none`` leaves the GPU's clocks as they are. The report is read back twice with
``ncu --import R --csv --page raw --print-units base``: once with the kernels' names and once with
``--print-nvtx-rename kernel`` (each kernel named by its innermost push/pop range); rows are matched by ID.

``parse_csv`` turns that CSV into rows ``{"id", "kernel", "range", "block", "grid", "metrics": {name: value in
base units}, "units", "attributes"}`` (bytes, ns, sectors, %, counts). It is strict: a value is a number
(thousands commas in their places), "n/a" or empty, in a unit of ``TIME_UNITS``, ``BASE_UNITS`` or a decimal
prefix of ``SCALED_UNITS``; anything else, and a record with fields missing (a truncated report), raises
ValueError naming the metric and the row.
"""

from __future__ import annotations

import csv
import functools
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import gpulab

# ---- metric names (Nsight Compute, "Metrics Reference" and the sections' metrics; Hopper) -------------------

DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
TIME = "gpu__time_duration.sum"
LD_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
LD_REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
ST_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"
ST_REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"
L2_HIT = "lts__t_sector_hit_rate.pct"
L2_READ_SECTORS = "lts__t_sectors_srcunit_tex_op_read.sum"  # sectors the SMs' L1/TEX units read from L2
L2_WRITE_SECTORS = "lts__t_sectors_srcunit_tex_op_write.sum"  # sectors the SMs' L1/TEX units write to L2
THREADS_PER_INST = "smsp__thread_inst_executed_per_inst_executed.ratio"  # active threads per warp instruction
WARP_INST = "smsp__inst_executed.sum"
THREAD_INST = "smsp__thread_inst_executed.sum"  # active threads summed over warp instructions (/ WARP_INST: per inst)
REGISTERS = "launch__registers_per_thread"
BLOCK_LIMIT_REGISTERS = "launch__occupancy_limit_registers"
THEORETICAL_OCCUPANCY = "sm__maximum_warps_per_active_cycle_pct"
ACHIEVED_OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"

NCU_TIMEOUT_S = 240  # seconds for one ncu command (a case profiles a few kernels of at most a few ms each)
PERMISSION_ERROR = "ERR_NVGPUCTRPERM"
DRIVER_PARAMS = Path("/proc/driver/nvidia/params")  # the NVIDIA driver's module parameters (Linux)
CHILD_MODULE = "gpulab.measure.counters"  # ``python -m CHILD_MODULE --child <case>`` runs a case's kernels under ncu


class CountersUnavailable(RuntimeError):
    """Raised when ncu cannot read counters here (interpreter mode, no ncu, no permission)."""


# ---- can counters be read here? ------------------------------------------------------------------------------


def ncu_path() -> str | None:
    """The ``ncu`` executable on PATH, or None."""
    return shutil.which("ncu")


def _profiling_admin_only() -> bool:
    """True when the driver restricts counters to administrators (``RmProfilingAdminOnly: 1`` in
    ``DRIVER_PARAMS``; NVIDIA's ERR_NVGPUCTRPERM page) and this process is not root."""
    try:
        text = DRIVER_PARAMS.read_text()
    except OSError:
        return False
    m = re.search(r"RmProfilingAdminOnly:\s*(\d+)", text)
    return bool(m and m.group(1) == "1" and hasattr(os, "geteuid") and os.geteuid() != 0)


def available() -> tuple[bool, str]:
    """``(True, "")`` where ncu can read this GPU's counters, else ``(False, reason)`` with a one-line reason:
    gpulab in interpreter mode, no ``ncu`` on PATH, or counters restricted to administrators
    (ERR_NVGPUCTRPERM). A run that still meets the permission error raises ``CountersUnavailable``."""
    if not gpulab.ON_GPU:
        return False, f"gpulab runs in {gpulab.MODE} mode (no CUDA GPU), so there are no hardware counters to read"
    if ncu_path() is None:
        return False, "Nsight Compute's `ncu` is not on PATH (it ships with the CUDA toolkit)"
    if _profiling_admin_only():
        return False, (
            f"the driver lets only administrators read GPU counters ({PERMISSION_ERROR}: "
            "RmProfilingAdminOnly=1 and this process is not root)"
        )
    return True, ""


@functools.cache
def ncu_version(ncu: str | None = None) -> str:
    """ncu's version line, e.g. "Version 2025.2.1.0 (build ...)", or "unknown"."""
    ncu = ncu or ncu_path()
    if ncu is None:
        return "unknown"
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return next((ln for ln in lines if ln.lower().startswith("version")), lines[-1] if lines else "unknown")


def ncu_short(version: str) -> str:
    """``ncu_version``'s line in a few words: "Version 2025.3.1.0 (build 36398880) (public-release)" ->
    "ncu 2025.3.1"; a line without a dotted version number is returned as ``"ncu " + version``."""
    m = re.search(r"\d+(?:\.\d+){1,2}", version)
    return f"ncu {m.group(0) if m else version}"


# ---- ncu's CSV (raw page) ------------------------------------------------------------------------------------

#: Time units ncu prints, to ns.
TIME_UNITS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}
#: Units a value keeps as it is ("" for a plain count or ratio): the units of ``--print-units base`` for the
#: metrics above (Nsight Compute, "Metrics Reference").
BASE_UNITS = frozenset(
    {"", "byte", "sector", "request", "inst", "thread", "warp", "block", "cycle", "%", "register/thread"}
)
#: Units that ncu's ``--print-units auto`` scales by a decimal prefix ("Kbyte" is 1e3 bytes, "Msector" 1e6 sectors).
SCALED_UNITS = frozenset({"byte", "sector", "request", "inst", "thread", "warp", "cycle"})
PREFIXES = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
# digits with thousands commas in their places (ncu groups digits that way), a decimal part, an exponent
_NUMBER = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_NUMBER_LIKE = re.compile(r"[\d,.+\-eE ]+")
MISSING = ("", "n/a", "N/A")
ID_COLUMNS = (
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
)


def base_unit(unit: str) -> tuple[float, str]:
    """``(scale, base unit)`` of a unit ncu prints: ``"usecond" -> (1e3, "ns")``, ``"Kbyte" -> (1e3, "byte")``,
    ``"%" -> (1.0, "%")``. Raises ValueError naming ``unit`` and the units known."""
    unit = unit.strip()
    if unit in TIME_UNITS:
        return TIME_UNITS[unit], "ns"
    if unit in BASE_UNITS:
        return 1.0, unit
    if unit[:1] in PREFIXES and unit[1:] in SCALED_UNITS:
        return PREFIXES[unit[0]], unit[1:]
    raise ValueError(
        f"unit {unit!r} is not one gpulab reads: known are {sorted(TIME_UNITS)}, {sorted(BASE_UNITS)} and "
        f"{sorted(SCALED_UNITS)} with a prefix {sorted(PREFIXES)}"
    )


def to_base(text: str, unit: str) -> tuple[float | None, str]:
    """One value of ncu's CSV in base units: ``("1,234.5", "Kbyte") -> (1234500.0, "byte")``,
    ``("2.5", "usecond") -> (2500.0, "ns")``; "n/a" or an empty field gives None. Raises ValueError for a unit
    ``base_unit`` does not know and for text that is not a number with its thousands commas in their places
    ("1,5" and "12,34" are refused, not read as 15 and 1234)."""
    scale, base = base_unit(unit)
    t = text.strip()
    if t in MISSING:
        return None, base
    if not _NUMBER.fullmatch(t):
        raise ValueError(f"value {text!r} is not a number (digits, thousands commas every three digits, '.')")
    return float(t.replace(",", "")) * scale, base


def _is_header(line: str) -> bool:
    if not line.startswith('"'):
        return False
    fields = next(csv.reader([line]), [])
    return "ID" in fields and "Kernel Name" in fields


def _csv_lines(text: str) -> list[str]:
    """The CSV part of ncu's output: from the header line (with "ID" and "Kernel Name") on, the lines that are
    CSV records (ncu quotes every field); "==PROF==", "==WARNING==" and the program's own output are dropped.
    Raises ValueError when there is no header, and for a record cut short (its last field not closed)."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if _is_header(ln)), None)
    if start is None:
        raise ValueError(
            'no ncu CSV header (a line with "ID" and "Kernel Name") in the output; first lines: '
            + " | ".join(lines[:5])
        )
    records = [ln for ln in lines[start:] if ln.startswith('"')]
    for n, ln in enumerate(records):
        if not ln.rstrip().endswith('"') or ln.rstrip() == '"':
            raise ValueError(f"ncu CSV record {n} is cut short (a truncated report?): {ln[:160]!r}")
    return records


def _where(rec: list[str], header: list[str], n: int) -> str:
    cell = dict(zip(header, rec))
    what = f"record {n}"
    if cell.get("ID", "").strip():
        what += f" (ID {cell['ID'].strip()}, kernel {cell.get('Kernel Name', '?')[:60]!r})"
    return what


def parse_csv(text: str, metrics=None) -> list[dict]:
    """Rows of ``ncu --csv --page raw`` output (any ``--print-units``): one dict per profiled kernel,
    ``{"id": int, "kernel": str, "range": None, "block": str, "grid": str, "metrics": {name: float | None},
    "units": {name: base unit}, "attributes": {name: str}}``, values in base units (``to_base``). The record
    after the header holds the units (its ID is empty).

    ``metrics``: the metric columns to read, each of which must be there and hold numbers; other columns are
    not read. None reads every column but the ``ID_COLUMNS``: a unitless column of text (ncu adds device
    attributes such as ``device__attribute_display_name``) goes to ``"attributes"``, every other value must be
    a number. Raises ValueError when there is no CSV header, for a record with a field missing or cut short,
    for a missing or empty ID, for a metric column not in the header, and for a value or unit ``to_base``
    refuses, naming the metric and the record."""
    lines = _csv_lines(text)
    try:
        records = list(csv.reader(io.StringIO("\n".join(lines)), strict=True))
    except csv.Error as e:  # a quote left open: the report was cut short
        raise ValueError(f"ncu CSV is truncated or malformed ({e}); its last line: {lines[-1][:160]!r}") from None
    header, body = records[0], records[1:]
    id_col = header.index("ID")
    units = body.pop(0) if body and len(body[0]) > id_col and not body[0][id_col].strip() else [""] * len(header)
    if len(units) != len(header):
        raise ValueError(f"ncu CSV units record has {len(units)} fields where the header has {len(header)}")
    if metrics is None:
        wanted = [i for i, h in enumerate(header) if h not in ID_COLUMNS]
    else:
        absent = [m for m in metrics if m not in header]
        if absent:
            raise ValueError(f"ncu CSV has no column for metric(s) {absent}; its columns: {header}")
        wanted = [header.index(m) for m in metrics]
    rows = []
    for n, rec in enumerate(body):
        where = _where(rec, header, n)
        if len(rec) != len(header):
            raise ValueError(
                f"ncu CSV {where} has {len(rec)} fields where the header has {len(header)} (a truncated report?)"
            )
        cell = dict(zip(header, rec))
        if not cell["ID"].strip().isdigit():
            raise ValueError(f"ncu CSV {where} has no kernel ID (got {cell['ID']!r})")
        values, base_units, attributes = {}, {}, {}
        for i in wanted:
            name, raw = header[i], rec[i]
            if metrics is None and not units[i].strip() and raw.strip() not in MISSING:
                if not _NUMBER_LIKE.fullmatch(raw.strip()):  # text, such as the device's name
                    attributes[name] = raw
                    continue
            try:
                values[name], base_units[name] = to_base(raw, units[i])
            except ValueError as e:
                raise ValueError(f"ncu CSV metric {name!r}, {where}: {e}") from None
        rows.append(
            {
                "id": int(cell["ID"]),
                "kernel": cell.get("Kernel Name", ""),
                "range": None,
                "block": cell.get("Block Size", ""),
                "grid": cell.get("Grid Size", ""),
                "metrics": values,
                "units": base_units,
                "attributes": attributes,
            }
        )
    return rows


def match_range(renamed: str, ranges) -> str | None:
    """The range of ``ranges`` that ncu's NVTX-renamed kernel name refers to: the longest range name found in
    it (so "gpulab:c:stride1" never claims a kernel of "gpulab:c:stride16"), or None."""
    found = [r for r in ranges if r in renamed]
    return max(found, key=len) if found else None


def attach_ranges(rows: list[dict], renamed_rows: list[dict], ranges) -> str:
    """Set each row's ``"range"`` from the NVTX-renamed export of the same report (matched by ID). When no name
    matches and there are as many kernels as ranges, each range launched one kernel, in order (the child runs
    the ranges in the case's order), so the kernels are given to the ranges by ID. Returns how: "nvtx",
    "launch order" or "none"."""
    names = {r["id"]: r["kernel"] for r in renamed_rows}
    for row in rows:
        row["range"] = match_range(names.get(row["id"], ""), ranges)
    if any(row["range"] for row in rows):
        return "nvtx"
    if rows and len(rows) == len(ranges):
        for row, rng in zip(sorted(rows, key=lambda r: r["id"]), ranges):
            row["range"] = rng
        return "launch order"
    return "none"


# ---- running ncu -----------------------------------------------------------------------------------------------


def _repo_root() -> Path:
    return Path(gpulab.__file__).resolve().parents[1]


def _child_env() -> dict:
    env = dict(os.environ)
    root = str(_repo_root())
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def ncu_command(case, ncu: str, export: str, metrics=None) -> list[str]:
    """The ncu command line that profiles ``case``'s ranges (a ``gpulab.measure.counter_cases.CounterCase``) in a child
    process and writes report ``export``; ``metrics`` (default the case's) are the metrics collected."""
    cmd = [ncu, "--clock-control", "none", "--target-processes", "all", "--nvtx"]
    for r in case.ranges:
        cmd += ["--nvtx-include", f"{r.name}/"]
    cmd += ["--metrics", ",".join(metrics or case.metrics), "--export", export, "--force-overwrite"]
    return cmd + [sys.executable, "-m", CHILD_MODULE, "--child", case.name]


def _import(ncu: str, report_path: str, rename: bool) -> str:
    cmd = [ncu, "--import", report_path, "--csv", "--page", "raw", "--print-units", "base"]
    if rename:
        cmd += ["--print-nvtx-rename", "kernel"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=NCU_TIMEOUT_S, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {r.returncode}): {_tail(r.stdout + r.stderr)}")
    return r.stdout


def _tail(text: str, n: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def profile(case, ncu: str | None = None) -> tuple[list[dict], dict]:
    """Run ``case`` (a ``gpulab.measure.counter_cases.CounterCase``) under ncu and return ``(rows, info)``: the parsed
    rows (``parse_csv`` of the metrics collected) with their ranges, and ``info`` (``metrics`` collected,
    ``dropped`` metrics this ncu does not know, ``command``, ``ranges_by``: how kernels were given to ranges, see
    ``attach_ranges``). GPU only. Raises ``CountersUnavailable`` (no GPU, no ncu, ERR_NVGPUCTRPERM),
    RuntimeError with ncu's last lines, or ValueError for CSV that ``parse_csv`` refuses."""
    ok, why = available()
    if not ok:
        raise CountersUnavailable(why)
    ncu = ncu or ncu_path()
    metrics, dropped = list(case.metrics), []
    with tempfile.TemporaryDirectory(prefix="gpulab-ncu-") as tmp:
        export = str(Path(tmp) / case.name)
        for _attempt in range(2):
            cmd = ncu_command(case, ncu, export, metrics)
            r = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=NCU_TIMEOUT_S,
                env=_child_env(),
                cwd=_repo_root(),
                check=False,
            )
            out = r.stdout + r.stderr
            if PERMISSION_ERROR in out:
                raise CountersUnavailable(f"ncu has no permission to read this GPU's counters ({PERMISSION_ERROR})")
            report_file = export + ".ncu-rep"
            if r.returncode == 0 and Path(report_file).exists():
                break
            errors = "\n".join(ln for ln in out.splitlines() if "==ERROR==" in ln)
            unknown = [m for m in metrics if m in errors]
            if not unknown or len(unknown) == len(metrics):
                raise RuntimeError(f"ncu failed on case {case.name!r} (exit {r.returncode}): {_tail(out)}")
            dropped += unknown
            metrics = [m for m in metrics if m not in unknown]
        else:
            raise RuntimeError(f"ncu failed on case {case.name!r} twice: {_tail(out)}")
        rows = parse_csv(_import(ncu, report_file, rename=False), metrics)
        renamed = parse_csv(_import(ncu, report_file, rename=True), ())  # only the kernels' range names
    matched = attach_ranges(rows, renamed, [rg.name for rg in case.ranges])
    command = " ".join(ncu_command(case, "ncu", "<report>", metrics))
    return rows, {"metrics": metrics, "dropped": dropped, "command": command, "ranges_by": matched}
