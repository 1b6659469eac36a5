"""Lesson 06 (coalescing) benchmark suite: ``python -m gpulab.bench --only lesson06``.

GPU only. In one run:

- copy bandwidth (``device.measure_copy_tbps``, torch ``y.copy_(x)`` of 4 GiB fp32), the model's input;
- headline: the coalesced Triton copy (``strided_copy`` at stride 1, autotuned) against torch's
  ``y.copy_(x)`` at n = 2^28 fp32; ratio = torch ms / ours (target >= 0.95);
- stride sweep: ``y[k] = x[k * stride]`` for ``STRIDES``, n = 2^25 fp32 outputs, ours and torch's
  ``y.copy_(x[::stride])``; effective TB/s on useful bytes (2ns); the model is drawn from ``copy_tbps`` by
  ``gpulab.models.sectors.predicted_tbps`` (at report time, so the record holds measurements only);
- offsets: the stride-1 copy starting ``OFFSETS`` elements past an aligned base;
- traversal: a 16384 x 16384 fp32 matrix copied by programs that walk rows, or columns; and torch's copy;
- transpose: naive, tiled (autotuned; the best tile is recorded), torch ``x.t().contiguous()`` at
  16384 x 16384 fp32, with effective TB/s over the torch copy of the same matrix in the same run (target for
  tiled >= 0.8); and fp16 tiled (the fp32 best tile) against torch fp16.
"""

from __future__ import annotations

import torch
from tqdm.auto import tqdm

from ..core import plan, timing
from ..core.dtypes import torch_dtype
from ..kernels import strided, transpose
from ..measure import device
from ..models.sectors import effective_tbps, stride_model_rows
from . import planned

KEY = "lesson06"
N = 2**28  # headline copy, fp32 elements
SWEEP_N = 2**25  # outputs of the strided copy (the input is stride times longer: 8 GiB at stride 64)
STRIDES = (1, 2, 4, 8, 16, 32, 64)
OFFSETS = (0, 1, 4)  # elements of fp32 past a 256-byte-aligned base
MATRIX = 16384  # square fp32 matrix side for the traversal and transpose studies
TARGET_COPY, TARGET_TRANSPOSE = 0.95, 0.8
SWEEP_BENCH = dict(warmup_ms=10, rep_ms=80)
#: What notebook 06 runs live (``run(**LIVE)``): the whole suite, as ``make gpu-check`` does (no ``STEPS``: it fits
#: the 30 s of a suite's headline).
LIVE: dict = dict(progress=False)


def _stride_bytes(stride: int, n: int = SWEEP_N, offsets=OFFSETS) -> int:
    """Bytes the stride sweep allocates to reach ``stride``: the input (n * stride + max offset fp32) and y."""
    return 4 * (n * stride + max(offsets, default=0)) + 4 * n


def choices(p, sweep_n: int = SWEEP_N, strides=STRIDES, offsets=OFFSETS) -> dict:
    """What the suite runs on ``p`` (a ``gpulab.core.plan.Plan``): the strides whose input fits the plan's memory
    (``strides_kept``) and a record ``{"stride", "skipped"}`` per stride that does not (``strides_skipped``)."""
    kept, skipped = planned.split(p, strides, lambda s: _stride_bytes(s, sweep_n, offsets), key="stride")
    return dict(strides_kept=kept, strides_skipped=skipped)


def headline(n: int = N) -> dict:
    """Triton stride-1 copy against torch's copy at n fp32: ms, TB/s, ratio = torch / ours."""
    x = torch.randn(n, device=timing.device())
    y = torch.empty_like(x)
    strided.strided_copy(x, 1)  # autotune outside the timing
    ours, theirs = timing.time_ms(lambda: strided.strided_copy(x, 1)), timing.time_ms(lambda: y.copy_(x))
    return {
        "n": n,
        "dtype": "fp32",
        "ours_ms": ours.median_ms,
        "torch_ms": theirs.median_ms,
        "ours_tbps": effective_tbps(n, 4, ours.median_ms),
        "torch_tbps": effective_tbps(n, 4, theirs.median_ms),
        "ratio": theirs.median_ms / ours.median_ms,
        "best_config": strided.best_config(),
    }


def stride_sweep(n: int = SWEEP_N, strides=STRIDES, offsets=OFFSETS) -> dict:
    """ms and effective TB/s (2 n * 4 useful bytes) of y[k] = x[k * stride], ours and torch's, per stride;
    and of the stride-1 copy from a base ``offset`` elements past alignment."""
    ch = choices(plan.current(), n, strides, offsets)
    x = torch.randn(n * max(ch["strides_kept"], default=1) + max(offsets), device=timing.device())
    y = torch.empty(n, device=timing.device())
    rows = []
    for s in ch["strides_kept"]:
        xs = x[: n * s]
        strided.strided_copy(xs, s)
        ours = timing.time_ms(lambda: strided.strided_copy(xs, s), **SWEEP_BENCH).median_ms
        theirs = timing.time_ms(lambda: strided.strided_copy_torch(xs, y, s), **SWEEP_BENCH).median_ms
        rows.append(
            {
                "stride": s,
                "ours_ms": ours,
                "torch_ms": theirs,
                "ours_tbps": effective_tbps(n, 4, ours),
                "torch_tbps": effective_tbps(n, 4, theirs),
                "best_config": strided.best_config(),
            }
        )
    off_rows = []
    for o in offsets:
        xo = x[o : o + n]
        strided.strided_copy(xo, 1)
        ms = timing.time_ms(lambda: strided.strided_copy(xo, 1), **SWEEP_BENCH).median_ms
        off_rows.append({"offset": o, "offset_bytes": 4 * o, "ms": ms, "tbps": effective_tbps(n, 4, ms)})
    return {"n": n, "itemsize": 4, "rows": rows, "offsets": off_rows, "skipped": ch["strides_skipped"]}


def traversal(side: int = MATRIX) -> dict:
    """A (side, side) fp32 matrix copied by rows, by columns, and by torch: ms and effective TB/s."""
    a = torch.randn(side, side, device=timing.device())
    b = torch.empty_like(a)
    fns = {
        "by rows": lambda: strided.matrix_copy(a, "rows"),
        "by columns": lambda: strided.matrix_copy(a, "columns"),
        "torch copy": lambda: b.copy_(a),
    }
    rows = []
    for name, fn in fns.items():
        fn()
        ms = timing.time_ms(fn, **SWEEP_BENCH).median_ms
        rows.append({"method": name, "ms": ms, "tbps": effective_tbps(side * side, 4, ms)})
    return {"m": side, "n": side, "dtype": "fp32", "rows": rows}


def transposes(side: int = MATRIX) -> dict:
    """Transposes of a (side, side) matrix: fp32 torch copy (the reference bandwidth), naive, tiled
    (autotuned), torch; then fp16 tiled (with the fp32 best tile) and torch. ms, TB/s and TB/s / copy."""
    out = {"m": side, "n": side, "rows": []}
    for dname in ("fp32", "fp16"):
        a = torch.randn(side, side, device=timing.device(), dtype=torch_dtype(dname))
        b = torch.empty_like(a)
        if dname == "fp32":
            transpose.transpose(a)  # autotune outside the timing
            best = out["best_config"] = transpose.best_config()
            fns = {
                "copy (torch)": lambda: b.copy_(a),
                "naive": lambda: transpose.transpose_naive(a),
                "tiled": lambda: transpose.transpose(a),
                "torch": lambda: transpose.transpose_torch(a),
            }
        else:
            # the fp32 choice; none where nothing was tuned (the interpreter's fixed tile)
            kw = dict(block_m=best["BLOCK_M"], block_n=best["BLOCK_N"], num_warps=best["num_warps"]) if best else {}
            fns = {
                "copy (torch)": lambda: b.copy_(a),
                "tiled": lambda: transpose.transpose(a, **kw),
                "torch": lambda: transpose.transpose_torch(a),
            }
        copy_tbps = None
        for name, fn in fns.items():
            fn()
            ms = timing.time_ms(fn, **SWEEP_BENCH).median_ms
            tbps = effective_tbps(side * side, a.element_size(), ms)
            copy_tbps = copy_tbps or tbps  # the first row is the copy
            out["rows"].append({"dtype": dname, "method": name, "ms": ms, "tbps": tbps, "vs_copy": tbps / copy_tbps})
        a = b = fns = None  # free this dtype's matrices before the next one's
        timing.empty_cache()
    return out


def run(
    progress: bool = True,
    n: int = N,
    sweep_n: int = SWEEP_N,
    strides=STRIDES,
    offsets=OFFSETS,
    side: int = MATRIX,
    copy_bytes: int | None = None,
) -> dict:
    """Measure everything in the module docstring; returns a JSON-able dict. GPU only. ``copy_bytes``: the
    buffer of the copy-bandwidth step (``device.measure_copy_tbps``; default 4 GiB or an eighth of free memory)."""
    timing.require_gpu("the lesson06 suite")
    steps = ["copy bandwidth", "headline", "stride sweep", "traversal", "transpose"]
    bar = tqdm(steps, desc="lesson06", disable=not progress)
    out = {"dtype": "fp32"}
    for step in bar:
        bar.set_postfix_str(step)
        if step == "copy bandwidth":
            out["copy_tbps"] = device.measure_copy_tbps(copy_bytes)
        elif step == "headline":
            out["headline"] = headline(n)
        elif step == "stride sweep":
            out["stride"] = stride_sweep(sweep_n, strides, offsets)
        elif step == "traversal":
            out["traversal"] = traversal(side)
        else:
            out["transpose"] = transposes(side)
        timing.empty_cache()
    return out


def report(data: dict, full: bool = False) -> str:
    """A short table (15 lines): the copy ratio, offsets, traversal and transposes with their ratios to the copy
    bandwidth of the same run; ``full`` adds the stride sweep beside the model, stride by stride (which
    ``gpulab.figures.lesson06.stride_table`` prints on its own)."""
    h, st = data["headline"], data["stride"]
    flag = "target met" if h["ratio"] >= TARGET_COPY else f"BELOW TARGET (>= {TARGET_COPY})"
    lines = [
        f"copy bandwidth {data['copy_tbps']:.3f} TB/s",
        f"coalesced copy, fp32 n = {h['n']:,}: Triton {h['ours_ms']:.4f} ms ({h['ours_tbps']:.3f} TB/s), torch "
        f"{h['torch_ms']:.4f} ms ({h['torch_tbps']:.3f} TB/s); torch/ours {h['ratio']:.3f}  {flag}; "
        f"config {h['best_config']}",
        f"strided copy y[k] = x[k*stride], n = {st['n']:,} fp32 outputs; effective TB/s on 2n*4 useful bytes; "
        f"model = copy x sector efficiency",
        f"  {'stride':>6} {'ours':>7} {'torch':>7} {'model32':>8} {'model64':>8} {'model128':>8} {'ours/m32':>8}",
    ]
    if not full:
        lines[-2:] = [
            f"strided copy y[k] = x[k*stride], n = {st['n']:,} fp32 outputs, strides "
            f"{', '.join(str(r['stride']) for r in st['rows'])}: report(data, full=True) prints them"
        ]
    for r, m in zip(st["rows"] if full else [], stride_model_rows(data)):
        lines.append(
            f"  {r['stride']:6} {r['ours_tbps']:7.3f} {r['torch_tbps']:7.3f} {m['model_tbps'][32]:8.3f} "
            f"{m['model_tbps'][64]:8.3f} {m['model_tbps'][128]:8.3f} {m['ours_over_model']:8.3f}"
        )
    lines += [f"  stride {r['stride']} not run: {r['skipped']}" for r in st.get("skipped", [])]
    lines.append(
        "stride-1 copy from an offset base: "
        + ", ".join(f"+{r['offset']} elt ({r['offset_bytes']} B) {r['tbps']:.3f} TB/s" for r in st["offsets"])
    )
    tr = data["traversal"]
    lines.append(
        f"matrix copy {tr['m']}x{tr['n']} fp32: "
        + ", ".join(f"{r['method']} {r['ms']:.4f} ms ({r['tbps']:.3f} TB/s)" for r in tr["rows"])
    )
    t = data["transpose"]
    lines.append(
        f"transpose {t['m']}x{t['n']} (ratio = TB/s / torch copy TB/s, same run; best tile {t['best_config']}):"
    )
    for r in t["rows"]:
        flag = ""
        if r["method"] == "tiled" and r["dtype"] == "fp32":
            flag = "  target met" if r["vs_copy"] >= TARGET_TRANSPOSE else f"  BELOW TARGET (>= {TARGET_TRANSPOSE})"
        lines.append(
            f"  {r['dtype']} {r['method']:13} {r['ms']:8.4f} ms {r['tbps']:7.3f} TB/s  x{r['vs_copy']:.3f}{flag}"
        )
    return "\n".join(lines)
