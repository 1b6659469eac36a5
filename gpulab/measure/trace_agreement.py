"""The trace held against hardware: every recorded counter case whose kernels are Triton kernels, traced in the
interpreter with the same kernels and launch settings at a size the interpreter affords, each count scaled to the
recorded size, and set beside what Nsight Compute counted on the H200 (``gpulab/data/reference-h200.json``,
"counters"; the cases are ``gpulab.measure.counter_cases``).

    python -m gpulab.measure.trace_agreement            # the table (about a minute on 2 cores)
    python -m gpulab.measure.trace_agreement --case coalescing

A row: case, range (the recorded NVTX range), quantity, traced (scaled), recorded, recorded / traced, and whether
they agree within ``TOLERANCE``. DRAM bytes are traced as a range (every granule once .. every request's granules,
``gpulab.measure.trace``): a recording agrees when it lies within the range widened by the tolerance, and the ratio
is to the range's low end. What each case traces, and how each count scales:

- ``coalescing``: the strided copies at n = 2^16 (recorded 2^24: requests and bytes x 256) and the transposes of
  a 1024^2 matrix (recorded 8192^2: x 64); sectors per request need no scaling.
- ``fusion``, ``precision``: n = 2^18 (recorded 2^26: bytes x 256).
- ``divergence``: the Triton kernel of each range at n = 2^16 (recorded 2^20; the same block, fractions and
  seed; the torch reduction in the loop ranges is not traced): threads per instruction, and the loop's steps
  beside the warp instructions of the loop ranges, each as a share of ``loop-full`` above ``loop-zero`` (lesson
  02's model, with the steps counted instead of modelled).
- ``occupancy``: registers and residency of the compiled kernel (n does not matter; traced at 2^16).
- ``tiling``: the tiled kernel at N = 512 (recorded 4096) and the no-reuse kernel at N = 128 (recorded 2048): L2
  bytes x (N / n)^3; DRAM's low end (each input once) x (N / n)^2, its high end x (N / n)^3.
- ``flash``: the forward at the recorded B and d, one head of 16 and L = 512 (recorded 4096): bytes x 16 heads,
  and per load or store x (L / 512) where a program runs it once (Q, O) or x (L / 512)^2 where the key loop runs it
  (K, V); DRAM's low end (each tensor once) x 16 x (L / 512). Naive attention is torch's matmuls and softmax, not
  traced.
- ``lane_branch``: a CUDA C++ kernel, not traced.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

from . import counter_cases as cc
from . import ncu
from .counters import aggregate
from .trace import THREADS_PER_INST, TraceError, recording, residency, trace

TOLERANCE = 0.05  # traced and recorded agree when within 5%
NOT_TRACED = {
    "lane_branch": "a CUDA C++ kernel (kernels/lane_branch.py): the interpreter runs Triton only",
}


@dataclass
class Row:
    """One quantity of one recorded range: ``traced`` (a number, or (low, high) for DRAM bytes), ``recorded``,
    ``ratio`` (recorded / traced, or / low), ``agree`` (within TOLERANCE, or inside the widened range) and
    ``note``."""

    case: str
    label: str
    quantity: str
    traced: object
    recorded: float | None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        t = self.traced[0] if isinstance(self.traced, tuple) else self.traced
        return None if self.recorded is None or not t else self.recorded / t

    @property
    def verdict(self) -> str:
        """ "yes"/"no" (within TOLERANCE) for a number; "in range", "below" or "above" for a range; "-" untraced."""
        if self.agree is None:
            return "-"
        if isinstance(self.traced, tuple):
            return "in range" if self.agree else ("below" if self.recorded < self.traced[0] else "above")
        return "yes" if self.agree else "no"

    @property
    def agree(self) -> bool | None:
        if self.recorded is None or self.traced is None:
            return None
        if isinstance(self.traced, tuple):
            lo, hi = self.traced
            return (1 - TOLERANCE) * lo <= self.recorded <= (1 + TOLERANCE) * hi
        return abs(self.recorded / self.traced - 1) <= TOLERANCE if self.traced else self.recorded == 0


def _metrics(rec: dict, label: str, case: str, kernel: str | None = None) -> dict:
    """The recorded range's metrics (summed over its kernels, ``counters.aggregate``), or one kernel's whose name
    starts with ``kernel``."""
    rows = rec["rows"]
    name = f"{cc.RANGE_PREFIX}:{case}:{label}"
    if kernel is not None:
        rows = [r for r in rows if r.get("range") == name and r["kernel"].startswith(kernel)]
    return aggregate(rows, name)[0]


def _div(a, b):
    return None if a is None or not b else a / b


def _scaled(pair, lo_scale, hi_scale=None):
    lo, hi = pair
    return (None if lo is None else lo * lo_scale, hi * (lo_scale if hi_scale is None else hi_scale))


def _sum_pairs(a, b):
    return (None if a[0] is None or b[0] is None else a[0] + b[0], a[1] + b[1])


def _runs(case) -> list:
    return case.setup(case)


def _traced(fn, rec: dict, case: str, label: str, **kw):
    """``trace(fn)`` with only the launches of kernels the recorded range ran: a launch the launcher makes in the
    interpreter alone (the bf16 dot probe of ``kernels.matmul_precision``) is left out."""
    t = trace(fn, **kw)
    names = {r["kernel"] for r in rec["rows"] if r.get("range") == f"{cc.RANGE_PREFIX}:{case}:{label}"}
    mine = [lc for lc in t.launches if lc.kernel in names]
    if mine:
        t.launches = mine
    return t


def _coalescing(rec) -> list[Row]:
    n, matrix = 2**16, 1024
    small = cc.coalescing_case(n=n, strides=tuple(rec["params"]["strides"]), matrix=matrix)
    rows = []
    for rng, fn in _runs(small):
        s = rec["params"]["n"] / n if "stride" in rng.params else (rec["params"]["matrix"] / matrix) ** 2
        t = _traced(fn, rec, "coalescing", rng.label)
        m = _metrics(rec, rng.label, "coalescing")
        for side, sec, req in (("ld", ncu.LD_SECTORS, ncu.LD_REQUESTS), ("st", ncu.ST_SECTORS, ncu.ST_REQUESTS)):
            kind = "load" if side == "ld" else "store"
            rows.append(
                Row(
                    "coalescing",
                    rng.label,
                    f"{side} sectors/request",
                    t.per_request(kind),
                    _div(m.get(sec), m.get(req)),
                )
            )
            rows.append(Row("coalescing", rng.label, f"{side} requests", t.total(kind, "requests") * s, m.get(req)))
        rows.append(Row("coalescing", rng.label, "DRAM read bytes", _scaled(t.dram("read"), s), m.get(ncu.DRAM_READ)))
        rows.append(
            Row("coalescing", rng.label, "DRAM write bytes", _scaled(t.dram("write"), s), m.get(ncu.DRAM_WRITE))
        )
    return rows


def _bytes_case(name, small, rec, scale) -> list[Row]:
    rows = []
    for rng, fn in _runs(small):
        t = _traced(fn, rec, name, rng.label)
        m = _metrics(rec, rng.label, name)
        l2 = (t.total("load", "moved") + t.total("store", "moved")) * scale
        rec_l2 = None if m.get(ncu.L2_READ_SECTORS) is None else (m[ncu.L2_READ_SECTORS] + m[ncu.L2_WRITE_SECTORS]) * 32
        rows.append(Row(name, rng.label, "SM<->L2 bytes", l2, rec_l2))
        dram = _scaled(_sum_pairs(t.dram("read"), t.dram("write")), scale)
        rec_dram = None if m.get(ncu.DRAM_READ) is None else m[ncu.DRAM_READ] + m[ncu.DRAM_WRITE]
        rows.append(Row(name, rng.label, "DRAM bytes", dram, rec_dram))
        if name == "fusion":
            kernels = [r for r in rec["rows"] if r.get("range") == rng.name]
            rows.append(Row(name, rng.label, "kernels", float(len(t.launches)), float(len(kernels))))
    return rows


def _fusion(rec) -> list[Row]:
    n = 2**18
    return _bytes_case("fusion", cc.fusion_case(n=n), rec, rec["params"]["n"] / n)


def _precision(rec) -> list[Row]:
    n = 2**18
    return _bytes_case(
        "precision", cc.precision_case(n=n, dtypes=tuple(rec["params"]["dtypes"])), rec, rec["params"]["n"] / n
    )


def _divergence(rec) -> list[Row]:
    p = rec["params"]
    kernels = {
        "path-a": "path_kernel",
        "path-b": "path_kernel",
        "where": "branch_where_kernel",
        "uniform": "branch_uniform_kernel",
    }
    small = cc.divergence_case(**dict(p, n=2**14))
    full = cc.divergence_case(**p)
    full_runs = dict((r.label, fn) for r, fn in _runs(full) if r.label in ("loop-interleaved", "loop-sorted"))
    steps, inst, rows = {}, {}, []
    for rng, fn in _runs(small):
        kernel = kernels.get(rng.label, "loop_cost_kernel")
        # the mixed loops at the recorded n (their steps depend on the draw): the sorted one whole, the
        # interleaved one on 64 programs (every block there holds an expensive element)
        t = (
            trace(full_runs[rng.label], max_programs=64 if rng.label == "loop-interleaved" else 2**20)
            if rng.label in full_runs
            else trace(fn)
        )
        m = _metrics(rec, rng.label, "divergence", kernel)
        rows.append(
            Row(
                "divergence",
                rng.label,
                "threads/inst",
                float(THREADS_PER_INST),
                m.get(ncu.THREADS_PER_INST),
                f"{kernel} alone",
            )
        )
        wheres = [s for lc in t.launches for s in lc.sites if s.kind == "where"]
        steps[rng.label] = sum(s.per_program for s in wheres)  # loop steps a program
        inst[rng.label] = m.get(ncu.WARP_INST)
    z, full_inst = inst.get("loop-zero"), inst.get("loop-full")
    for label in ("loop-interleaved", "loop-sorted"):
        traced = _div(steps[label] - steps["loop-zero"], steps["loop-full"] - steps["loop-zero"])
        got = None if None in (z, full_inst, inst.get(label)) else (inst[label] - z) / (full_inst - z)
        rows.append(
            Row(
                "divergence", label, "loop steps / loop-full", traced, got, "steps a program; warp inst above loop-zero"
            )
        )
    return rows


def _occupancy(rec) -> list[Row]:
    p = rec["params"]
    small = cc.occupancy_case(n=2**16, blocks=tuple(p["blocks"]), num_warps=p["num_warps"])
    rows = []
    for rng, fn in _runs(small):
        t = _traced(fn, rec, "occupancy", rng.label)
        lc = t.launches[0]
        m = _metrics(rec, rng.label, "occupancy")
        regs = float(lc.regs) if lc.regs is not None else None
        by_regs = None
        if lc.regs is not None:
            from ..core import hardware

            by_regs = residency(lc.regs, 0, lc.num_warps, hardware.get(lc.gpu))
        note = f"compiled by Triton {t.launches[0].layout_source.split('Triton ')[-1].rstrip(')')}, recorded with 3.6"
        rows.append(Row("occupancy", rng.label, "registers/thread", regs, m.get(ncu.REGISTERS), note))
        rows.append(
            Row(
                "occupancy",
                rng.label,
                "programs/SM (registers)",
                None if by_regs is None else float(by_regs[0]),
                m.get(ncu.BLOCK_LIMIT_REGISTERS),
            )
        )
        warps = None if lc.residency is None else float(lc.residency[0] * lc.num_warps)
        theo = m.get(ncu.THEORETICAL_OCCUPANCY)
        rows.append(Row("occupancy", rng.label, "resident warps/SM", warps, None if theo is None else theo / 100 * 64))
    return rows


def _tiling(rec) -> list[Row]:
    import torch

    from ..kernels import matmul as mm
    from ..kernels import matmul_steps as ms

    p = rec["params"]
    n_nr, n_t = 128, 512
    gen = torch.Generator().manual_seed(0)
    a0, b0 = (torch.randn(n_nr, n_nr, generator=gen) for _ in range(2))
    a, b = (torch.randn(n_t, n_t, generator=gen) for _ in range(2))
    runs = [
        (
            "noreuse",
            n_nr,
            p["n_noreuse"],
            lambda: ms.matmul_step(a0, b0, "no reuse", ms.StepConfig(BLOCK=128, BLOCK_K=32)),
        )
    ]
    for label, group in (("tiled-group8", 8), ("tiled-group1", 1)):
        cfg = mm.MatmulConfig(**cc.TILED_CONFIG, GROUP_M=group)
        runs.append((label, n_t, p["n_tiled"], lambda cfg=cfg: mm.matmul(a, b, path="pointer", config=cfg)))
    rows = []
    for label, n, big, fn in runs:
        t = _traced(fn, rec, "tiling", label)  # no-reuse: recorded as matmul_noreuse_kernel, now naive_kernel
        m = _metrics(rec, label, "tiling")
        s = big / n
        rec_l2 = None if m.get(ncu.L2_READ_SECTORS) is None else m[ncu.L2_READ_SECTORS] * 32
        rows.append(Row("tiling", label, "L2 read bytes", t.total("load", "moved") * s**3, rec_l2))
        rows.append(Row("tiling", label, "DRAM read bytes", _scaled(t.dram("read"), s**2, s**3), m.get(ncu.DRAM_READ)))
    return rows


def _site_scaled(t, kind: str, what: str, s: float) -> float:
    """``what`` summed over the ``kind`` sites of a trace at 1/s of the sequence length: a site run once a program
    scales as the programs (s), one run in the key loop as programs x loop steps (s^2)."""
    total = 0.0
    for lc in t.launches:
        for site in lc.sites:
            if site.kind == kind:
                once = site.executions <= lc.programs
                total += getattr(site, what) * (s if once else s * s)
    return total


def _flash(rec) -> list[Row]:
    p = rec["params"]
    L = 512
    small = cc.flash_case(B=p["B"], H=1, L=L, d=p["d"], dtype=p["dtype"])
    rows = [Row("flash", "naive", "DRAM bytes", None, None, "not traced: torch's matmuls and softmax (cuBLAS, aten)")]
    for rng, fn in _runs(small):
        if rng.label != "flash":
            continue
        t = _traced(fn, rec, "flash", "flash")
        m = _metrics(rec, rng.label, "flash")
        s, heads = p["L"] / L, p["H"]
        rec_l2 = None if m.get(ncu.L2_READ_SECTORS) is None else m[ncu.L2_READ_SECTORS] * 32
        rows.append(Row("flash", "flash", "L2 read bytes", _site_scaled(t, "load", "moved", s) * heads, rec_l2))
        low = sum(x for x in (t.dram("read")[0], t.dram("write")[0]))
        high = (_site_scaled(t, "load", "granules64", s) * 64 + _site_scaled(t, "store", "moved", s)) * heads
        rows.append(Row("flash", "flash", "DRAM bytes", (low * s * heads, high), m[ncu.DRAM_READ] + m[ncu.DRAM_WRITE]))
    return rows


CASES = {
    "coalescing": _coalescing,
    "fusion": _fusion,
    "precision": _precision,
    "divergence": _divergence,
    "occupancy": _occupancy,
    "tiling": _tiling,
    "flash": _flash,
}


def agreement(cases=None) -> list[Row]:
    """The rows of every case in ``cases`` (names of ``CASES``; default all) that has a recording. A case that
    cannot be traced here gives one row naming why (its quantities None)."""
    out = []
    for name in cases or list(CASES) + list(NOT_TRACED):
        if name in NOT_TRACED:
            out.append(Row(name, "-", "-", None, None, f"not traced: {NOT_TRACED[name]}"))
            continue
        if name not in CASES:
            raise ValueError(f"case must be one of {sorted(CASES) + sorted(NOT_TRACED)}, got {name!r}")
        rec, _ = recording(name)
        if rec is None or not rec.get("rows"):
            out.append(Row(name, "-", "-", None, None, "no recording"))
            continue
        try:
            out.extend(CASES[name](rec))
        except (TraceError, RuntimeError, ValueError, AttributeError) as e:
            out.append(Row(name, "-", "-", None, None, f"could not trace: {type(e).__name__}: {e}"))
    return out


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, tuple):
        return f"{_fmt(v[0])} .. {_fmt(v[1])}"
    if abs(v) >= 1e6:
        return f"{v:.4g}"
    return f"{v:.4g}"


def table(rows: list[Row], markdown: bool = False) -> str:
    """The rows as text (or a Markdown table): traced, recorded, recorded / traced, within 5%."""
    head = ("case", "range", "quantity", "traced", "recorded (H200, ncu)", "recorded / traced", "agree")
    body = []
    for r in rows:
        agree = r.verdict
        ratio = "-" if r.ratio is None else f"{r.ratio:.3f}"
        body.append(
            (
                r.case,
                r.label,
                r.quantity + (f" ({r.note})" if r.note else ""),
                _fmt(r.traced),
                _fmt(r.recorded),
                ratio,
                agree,
            )
        )
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(b) + " |" for b in body]
        return "\n".join(lines)
    widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)) for line in [head] + body)


def summary(rows: list[Row]) -> str:
    """How many counts agree within TOLERANCE, and how many DRAM recordings lie inside the traced range."""
    numbers = [r for r in rows if r.agree is not None and not isinstance(r.traced, tuple)]
    ranges = [r for r in rows if r.agree is not None and isinstance(r.traced, tuple)]
    return (
        f"{sum(r.agree for r in numbers)} of {len(numbers)} counts within {TOLERANCE:.0%}; "
        f"{sum(r.agree for r in ranges)} of {len(ranges)} DRAM recordings inside the traced range"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpulab.measure.trace_agreement", description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", action="append", help="one case (repeatable); default every case")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table (docs/trace.md)")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    rows = agreement(args.case)
    print(table(rows, args.markdown))
    print(summary(rows) + f"; {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
