"""Lesson 04 (fusion) benchmark suite: ``python -m gpulab.bench --only lesson04``.

GPU only. Measures sin(x)^2 + cos(x)^2 in fp32, in one run:

- copy bandwidth (``device.measure_copy_tbps``) and the cost of one tiny launch: ``time_ms`` of a 1-element
  Triton kernel and of ``torch.sin`` on 1 element (the same do_bench method as the sweep, so GPU-side time),
  and the CPU time per Triton launch (wall clock over many back-to-back launches);
- at n = 2^28: five Triton kernels, the fused kernel autotuned (precise tl.sin/tl.cos; precise sin and cos
  from one shared range reduction; fast approximate sin/cos), the naive fused kernel (BLOCK 4096, default warps), torch eager, torch.compile: ms and effective
  TB/s on the fused bytes 8n; ratio = torch.compile ms / ours (target >= 1.0); ours / copy bandwidth
  (target >= 0.9);
- accuracy against float64 on 2^24 normal inputs: max |y - 1|-style error of each method in fp32, and in
  fp16/bf16 how many elements of torch eager and the fused kernel differ;
- a size sweep, n = 2^10 .. 2^28, every method (the model line is drawn from the launch cost and bandwidth);
- resource pressure: registers and spills from the compiled kernel, and time at 2^28, against BLOCK
  (num_warps 4) and against REPEAT (the sin/cos chain applied R times, autotune's best shape).

Each part is a step (``STEPS``; ``--steps sweep`` runs one, merged into the record by ``--record``); the headline that
``make gpu-check`` runs is the copy bandwidth and every method at 2^28 (``HEADLINE_STEPS``).
"""

from __future__ import annotations

import time

import torch
from tqdm.auto import tqdm

from ..core import timing
from ..core.dtypes import torch_dtype
from ..kernels import sincos
from ..kernels.resources import kernel_resources
from ..measure import device, live
from ..models import fusion

KEY = "lesson04"
N = 2**28
SWEEP = tuple(2**e for e in range(10, 29, 2))  # 2^10 .. 2^28
ACCURACY_N = 2**24
PRESSURE_BLOCKS = (1024, 4096, 8192, 16384)  # num_warps 4: 8 .. 128 elements per thread
PRESSURE_REPEATS = (1, 2, 4, 8)
NAIVE_BLOCK = 4096
TARGET_VS_COMPILE = 1.0  # gpulab's targets for the fused kernels: torch.compile ms / ours ms, at least
TARGET_VS_COPY = 0.9  # and ours TB/s / copy TB/s, at least
METHODS = ("unfused", "fused", "fused shared", "fused fast", "eager", "compile")
#: The suite's steps (``run(steps=...)``, ``python -m gpulab.bench --only lesson04 --steps headline``), in the order
#: they run. ``headline`` is the copy bandwidth and every method at N (the ratios the lesson is about: torch.compile
#: ms / ours and ours / copy bandwidth), what ``make gpu-check`` runs (``HEADLINE_STEPS``).
STEPS = ("headline", "launch", "accuracy", "sweep", "pressure")
HEADLINE_STEPS = ("headline",)
#: do_bench's budgets for each method at N (ms): 0.5 to 3 ms a launch at 2^28 on an H200, a hundred launches or more.
HEADLINE_TIMING = dict(warmup_ms=25, rep_ms=100)
# What notebook 04 measures live: the headline at N (every method; the fused kernel autotuned, its shared and fast
# variants at the fused kernel's tuned shape, as in the suite), three
# sizes of the sweep (two below the autotuner's TUNE_MIN_N, which take its first config untimed, and N), the fp32
# accuracy on 2^15 inputs (below TUNE_MIN_N too; the notebook shows fp16 against eager on its own), two BLOCKs (the
# naive one is compiled by the headline) and two REPEATs, and torch.compile at N alone (its one graph: a second size
# compiles another, with dynamic shapes, seconds). The full suite (python -m gpulab.bench --only lesson04) is the
# recording.
LIVE = dict(
    progress=False,
    sweep=(2**10, 2**14, N),
    accuracy_n=2**15,
    accuracy_16bit=False,
    blocks=(1024, NAIVE_BLOCK),
    repeats=(1, 4),
    tune_variants=False,
    compile_at_n_only=True,
)


def _methods(x, compiled_eager, variant_config=None):
    """Each method of ``METHODS`` as a call on x (torch.compile's left out where ``compiled_eager`` is None).
    ``variant_config`` (BLOCK, num_warps): the shared and fast variants launch that shape instead of autotuning their
    own."""
    b, w = variant_config or (None, None)
    fns = {
        "unfused": lambda: sincos.sincos_unfused(x),
        "fused": lambda: sincos.sincos(x),
        "fused shared": lambda: sincos.sincos(x, shared=True, block=b, num_warps=w),
        "fused fast": lambda: sincos.sincos(x, fast=True, block=b, num_warps=w),
        "eager": lambda: sincos.sincos_eager(x),
        "compile": lambda: compiled_eager(x),
    }
    if compiled_eager is None:
        del fns["compile"]
    return fns


def launch_costs(launches: int = 1000) -> dict:
    """Tiny-launch costs in µs: do_bench time of a 1-element Triton kernel and of torch.sin (GPU side), and
    the CPU time per Triton launch (``launches`` back-to-back launches, wall clock)."""
    x1 = torch.randn(1, device=timing.device())
    y1 = torch.empty_like(x1)
    launch = lambda: sincos.sin_kernel[(1,)](x1, y1, 1, BLOCK=1024)  # noqa: E731
    triton_us = timing.time_ms(launch, warmup_ms=10, rep_ms=100).median_ms * 1e3
    torch_us = timing.time_ms(lambda: torch.sin(x1), warmup_ms=10, rep_ms=100).median_ms * 1e3
    timing.synchronize()
    t0 = time.perf_counter()
    for _ in range(launches):
        launch()
    timing.synchronize()
    cpu_us = (time.perf_counter() - t0) / launches * 1e6
    return {"triton_us": triton_us, "torch_us": torch_us, "triton_cpu_us": cpu_us}


def accuracy(n: int = ACCURACY_N, compiled_eager=sincos.sincos_eager, variant_config=None, dtypes16=("fp16", "bf16")):
    """Max absolute error against the float64 reference on normal inputs (fp32), per method (torch.compile's left
    out where ``compiled_eager`` is None); and, per 16-bit dtype of ``dtypes16``, the fraction of elements where torch
    eager and the fused kernel differ. ``variant_config``: as ``_methods``'s. Returns a JSON-able dict."""
    x = torch.randn(n, device=timing.device(), generator=torch.Generator(timing.device()).manual_seed(0))
    ref = sincos.sincos_ref(x)
    out = {"n": n, "fp32_max_abs_error": {}, "fast_math": sincos.FAST_MATH_AVAILABLE}
    for name, fn in _methods(x, compiled_eager, variant_config).items():
        out["fp32_max_abs_error"][name] = float((fn().double() - ref).abs().max())
    for dname in dtypes16:
        xd = x.to(torch_dtype(dname))
        eager, fused = sincos.sincos_eager(xd), sincos.sincos(xd)
        r = sincos.sincos_ref(xd)
        out[dname] = {
            "eager_fused_differ": float((eager != fused).double().mean()),
            "eager_max_abs_error": float((eager.double() - r).abs().max()),
            "fused_max_abs_error": float((fused.double() - r).abs().max()),
        }
    return out


def pressure(n: int = N, blocks=PRESSURE_BLOCKS, repeats=PRESSURE_REPEATS) -> dict:
    """Registers, spills and ms at n for the fused kernel against BLOCK (num_warps 4, REPEAT 1) and against
    REPEAT (the autotuner's best BLOCK and num_warps at n)."""
    x = torch.randn(n, device=timing.device(), generator=torch.Generator(timing.device()).manual_seed(0))
    rows = []
    for b in blocks:
        _, k = sincos.sincos_launch(x, block=b, num_warps=4)
        t = timing.time_ms(lambda: sincos.sincos(x, block=b, num_warps=4), warmup_ms=10, rep_ms=100)
        rows.append(
            {
                "study": "block",
                "block": b,
                "num_warps": 4,
                "repeat": 1,
                "ms": t.median_ms,
                "elements_per_thread": fusion.elements_per_thread(b, 4),
                **_resources(k),
            }
        )
    sincos.sincos(x)
    b, w = _best(sincos.best_config(), sincos.INTERPRETER_BLOCK)
    for r in repeats:
        _, k = sincos.sincos_launch(x, block=b, num_warps=w, repeat=r)
        t = timing.time_ms(lambda: sincos.sincos(x, block=b, num_warps=w, repeat=r), warmup_ms=10, rep_ms=100)
        rows.append(
            {
                "study": "repeat",
                "block": b,
                "num_warps": w,
                "repeat": r,
                "ms": t.median_ms,
                "elements_per_thread": fusion.elements_per_thread(b, w),
                **_resources(k),
            }
        )
    for row in rows:
        if row["n_regs"]:
            row["resident_warps"] = fusion.resident_warps(row["n_regs"], row["num_warps"])
    return {"n": n, "rows": rows}


def _resources(compiled) -> dict:
    """``kernel_resources`` of a launch, less its num_warps: a row keeps the num_warps it asked for (the
    interpreter compiles nothing and reports None)."""
    res = kernel_resources(compiled)
    res.pop("num_warps")
    return res


def _best(cfg, interpreter_block: int) -> tuple[int, int]:
    """(BLOCK, num_warps) of an autotuner's choice; the interpreter's fixed BLOCK and 4 warps when there is none."""
    return (cfg.kwargs["BLOCK"], cfg.num_warps) if cfg is not None else (interpreter_block, 4)


def run(
    progress: bool = True,
    n: int = N,
    sweep=SWEEP,
    accuracy_n: int = ACCURACY_N,
    blocks=PRESSURE_BLOCKS,
    repeats=PRESSURE_REPEATS,
    copy_bytes: int | None = None,
    launches: int = 1000,
    compile_backend: str = "inductor",
    tune_variants: bool = False,
    accuracy_16bit: bool = True,
    compile_at_n_only: bool = False,
    steps=None,
) -> dict:
    """Measure everything in the module docstring; returns a JSON-able dict. GPU (or test clock) only.
    ``copy_bytes``: one buffer of the copy (``device.measure_copy_tbps``'s default if None); ``launches``: of
    the CPU launch-cost loop; ``compile_backend``: torch.compile's (inductor's C++ build on a CPU takes longer
    than a test, so the tests pass "eager"); ``tune_variants``: the shared and fast variants autotune their own
    (BLOCK, num_warps); by default they run at the fused kernel's tuned shape, so that each step of the build changes
    one thing (and two autotuner keys fewer are timed; the record then holds ``variants_tuned: False``, and their
    ``best_config_*`` is that shape); ``accuracy_16bit=False``: the
    accuracy in fp32 only; ``compile_at_n_only``: torch.compile timed at n alone (the sweep's other sizes and the
    accuracy leave it out: each new size would compile it again); ``steps``: a subset of ``STEPS`` (default all).
    Raises ValueError naming an unknown step."""
    unknown = set(steps or ()) - set(STEPS)
    if unknown:
        raise ValueError(f"steps must be drawn from {STEPS}, got unknown {sorted(unknown)}")
    timing.require_gpu("the lesson04 suite")
    compiled_eager = torch.compile(sincos.sincos_eager, backend=compile_backend)
    elsewhere = None if compile_at_n_only else compiled_eager  # torch.compile at sizes other than n
    dev = timing.device()
    gen = torch.Generator(dev).manual_seed(0)
    todo = [s for s in STEPS if steps is None or s in steps]
    bar = tqdm(todo, desc="lesson04", disable=not progress)
    out = {"n": n, "dtype": "fp32"} | ({} if tune_variants or "headline" not in todo else {"variants_tuned": False})
    variant_config = None
    for step in bar:
        bar.set_postfix_str(step)
        if step == "headline":
            out["copy_tbps"] = device.measure_copy_tbps(copy_bytes)
            x = torch.randn(n, device=dev, generator=gen)
            if not tune_variants:
                sincos.sincos(x)  # tunes the fused kernel at n: its shape is the variants'
                variant_config = _best(sincos.best_config(), sincos.INTERPRETER_BLOCK)
            out |= _headline(x, compiled_eager, variant_config)
            del x
        elif step == "launch":
            out["launch"] = launch_costs(launches)
        elif step == "accuracy":
            dtypes16 = ("fp16", "bf16") if accuracy_16bit else ()
            out["accuracy"] = accuracy(
                accuracy_n, compiled_eager if accuracy_n == n else elsewhere, variant_config, dtypes16
            )
        elif step == "sweep":
            out["sweep"] = []
            for m in sweep:
                x = torch.randn(m, device=dev, generator=gen)
                for name, fn in _methods(x, compiled_eager if m == n else elsewhere, variant_config).items():
                    fn()
                    out["sweep"].append(
                        {"n": m, "method": name, "ms": timing.time_ms(fn, warmup_ms=10, rep_ms=60).median_ms}
                    )
            del x
        else:
            out["pressure"] = pressure(n, blocks, repeats)
        timing.empty_cache()
    return timing.stamp(out)


def _headline(x, compiled_eager, variant_config) -> dict:
    """Every method and the naive fused kernel at x's size (``HEADLINE_TIMING``): the record's ``headline`` rows and
    the autotuner's shapes (``best_config``, ``best_config_fast``, ``best_config_shared``)."""
    n = x.numel()
    fns = _methods(x, compiled_eager, variant_config)
    fns["naive fused"] = lambda: sincos.sincos(x, block=NAIVE_BLOCK)
    rows = []
    for name, fn in fns.items():
        fn()  # compile / autotune outside the timing
        t = timing.time_ms(fn, **HEADLINE_TIMING)
        fused = name not in ("unfused", "eager")
        rows.append(
            {
                "method": name,
                "ms": t.median_ms,
                "p20_ms": t.p20_ms,
                "p80_ms": t.p80_ms,
                "eff_tbps": fusion.effective_tbps(n, t.median_ms),
                "bytes_model": fusion.bytes_moved(n, "fp32", fused),
            }
        )
    out = {"headline": rows}
    for key, fast, shared in (
        ("best_config", False, False),
        ("best_config_fast", True, False),
        ("best_config_shared", False, True),
    ):
        if variant_config is not None and (fast or shared):
            b, w = variant_config
        else:
            sincos.sincos(x, fast=fast, shared=shared)  # cached: sets the autotuner's best_config for this key
            b, w = _best(sincos.best_config(), sincos.INTERPRETER_BLOCK)
        out[key] = {"BLOCK": b, "num_warps": w}
    return out


def headline_ratios(data: dict) -> dict:
    """Per method at n: ratio = torch.compile ms / method ms, and effective TB/s / copy TB/s."""
    ms = {r["method"]: r["ms"] for r in data["headline"]}
    return {
        r["method"]: {"vs_compile": ms["compile"] / r["ms"], "vs_copy": r["eff_tbps"] / data["copy_tbps"]}
        for r in data["headline"]
    }


def report(data: dict, full: bool = False) -> str:
    """A short table (at most 15 lines) of the steps the record holds: times, effective TB/s on 8n bytes, ratios vs
    torch.compile and copy bandwidth at n with the targets flagged, fp32 accuracy and the launch costs. ``full=True``
    adds the 16-bit accuracy, the size sweep and the resource-pressure rows."""
    lines = []
    if "headline" in data:
        rat = headline_ratios(data)
        lines += [
            f"sin^2 + cos^2, fp32, n = {data['n']:,}; copy bandwidth {data['copy_tbps']:.3f} TB/s; "
            f"best config {data['best_config']}",
            f"  {'method':12} {'ms':>8} {'TB/s(8n)':>9} {'compile/ours':>13} {'ours/copy':>10}",
        ]
        flagged = False
        for r in data["headline"]:
            q = rat[r["method"]]
            flag = ""
            if r["method"] in ("fused", "fused shared", "fused fast"):
                met = q["vs_compile"] >= TARGET_VS_COMPILE and q["vs_copy"] >= TARGET_VS_COPY
                flag, flagged = ("  target met" if met else "  BELOW TARGET"), True
            lines.append(
                f"  {r['method']:12} {r['ms']:8.4f} {r['eff_tbps']:9.3f} {q['vs_compile']:13.3f} {q['vs_copy']:10.3f}"
                + flag
            )
        if flagged:
            lines.append(
                f"  gpulab's targets for the fused kernels: torch.compile ms / ours >= {TARGET_VS_COMPILE:.1f} "
                f"and ours / copy bandwidth >= {TARGET_VS_COPY:.1f}"
            )
    a = data.get("accuracy")
    if a:
        lines.append(
            f"max abs error vs float64 (fp32, n = {a['n']:,}; fast math "
            f"{'on' if a['fast_math'] else 'unavailable'}): "
            + ", ".join(f"{k} {v:.1e}" for k, v in a["fp32_max_abs_error"].items())
        )
    if "launch" in data:
        L = data["launch"]
        lines.append(
            f"launch: tiny Triton kernel {L['triton_us']:.2f} µs, torch.sin(1 elt) {L['torch_us']:.2f} µs "
            f"(do_bench, GPU side); Triton CPU launch {L['triton_cpu_us']:.2f} µs"
        )
    if not full:
        return "\n".join(lines)
    if "best_config_fast" in data:
        lines.append(
            f"best configs: shared {data.get('best_config_shared')}, fast {data['best_config_fast']}"
            + ("" if data.get("variants_tuned", True) else " (the fused kernel's: the variants were not tuned here)")
        )
    for d in ("fp16", "bf16"):
        if a and d in a:
            lines.append(
                f"  {d}: eager and fused differ on {a[d]['eager_fused_differ']:.1%} of elements; max abs error "
                f"eager {a[d]['eager_max_abs_error']:.2e}, fused {a[d]['fused_max_abs_error']:.2e}"
            )
    if data.get("sweep"):
        ns = sorted({r["n"] for r in data["sweep"]})
        lines.append("sweep (ms): " + " ".join(f"{m:>10}" for m in METHODS))
        for m in ns:
            ms = {r["method"]: r["ms"] for r in data["sweep"] if r["n"] == m}
            lines.append(
                f"  2^{m.bit_length() - 1:<2}     " + " ".join(f"{ms.get(k, float('nan')):10.4f}" for k in METHODS)
            )
    if "pressure" in data:
        lines.append("resource pressure (n_regs/thread, n_spills = local-memory use, resident warps/SM, ms):")
        for r in data["pressure"]["rows"]:
            lines.append(
                f"  {r['study']:6} BLOCK {r['block']:6} warps {r['num_warps']:2} R {r['repeat']:2} "
                f"elt/thread {r['elements_per_thread']:4}: regs {r['n_regs']}, n_spills {r['n_spills']}, "
                f"warps/SM {r.get('resident_warps')}, {r['ms']:.4f} ms"
            )
    return "\n".join(lines)


# ---- what notebook 04 shows from a record (measured now, or recorded: ``live``) -------------------------------

#: The steps of notebook 04's build, in order: (label, method of the record's ``headline``).
BUILD_STEPS = (
    (f"naive fused (BLOCK {NAIVE_BLOCK}, 4 warps)", "naive fused"),
    ("+ autotuned BLOCK, num_warps", "fused"),
    ("+ shared range reduction", "fused shared"),
    ("fast sin/cos instead", "fused fast"),
    ("torch.compile", "compile"),
)


#: The fused forms of the headline: its method, the variant tools/count_sass.py counts, and the record's key holding
#: the autotuner's choice (BLOCK, num_warps) for it.
FUSED_FORMS = (
    ("fused", "precise", "best_config"),
    ("fused shared", "shared", "best_config_shared"),
    ("fused fast", "fast", "best_config_fast"),
)


def instruction_room(data: dict, fp32_tflops: float) -> dict:
    """What each fused form's measured time leaves room for (lesson 01's second roof): ``n``, ``copy_ms`` (the
    8n bytes at the copy bandwidth of the same run) and ``rows``, per form of ``FUSED_FORMS``: ``method``, ``ms``,
    ``of_copy`` (copy_ms / ms) and ``room``, the FP32 instructions per element ``fp32_tflops`` (the FP32
    instruction rate, 1e12/s) issues in that time."""
    n = data["n"]
    copy_ms = fusion.bytes_moved(n, "fp32", True) / (data["copy_tbps"] * 1e12) * 1e3
    forms = [m for m, _, _ in FUSED_FORMS]
    rows = [
        {"method": r["method"], "ms": r["ms"], "of_copy": copy_ms / r["ms"], "room": fp32_tflops * r["ms"] * 1e9 / n}
        for r in data["headline"]
        if r["method"] in forms
    ]
    return {"n": n, "copy_ms": copy_ms, "rows": rows}


def issued_per_element(data: dict, sass: dict) -> list[dict]:
    """Instructions a thread issues per element in each fused form at the launch shape the autotuner chose in the
    record ``data`` (``FUSED_FORMS``), from ``sass`` (``gpulab.core.reference.sass()``): ``method``, ``variant``,
    ``block``, ``num_warps``, ``per_element`` and ``sfu_per_element`` (MUFU instructions). Raises KeyError naming
    a shape the SASS counts lack."""
    out = []
    for method, variant, key in FUSED_FORMS:
        block, warps = data[key]["BLOCK"], data[key]["num_warps"]
        rows = [r for r in sass["rows"] if r["variant"] == variant and (r["block"], r["num_warps"]) == (block, warps)]
        if not rows:
            raise KeyError(
                f"no SASS count for {variant} at BLOCK {block}, {warps} warps: run tools/count_sass.py --write"
            )
        r = rows[0]
        sfu = r["by_opcode"].get("MUFU", 0) / r["elements_per_thread"]
        out.append(
            dict(
                method=method,
                variant=variant,
                block=block,
                num_warps=warps,
                per_element=r["per_element"],
                sfu_per_element=sfu,
            )
        )
    return out


def launch_and_copy(data: dict) -> tuple[float, float]:
    """The launch-overhead model's inputs from a lesson04 record: Triton's launch cost (us) and the copy
    bandwidth (TB/s) measured in the same run."""
    return data["launch"]["triton_us"], data["copy_tbps"]


def steps_table(data: dict) -> str:
    """The build's steps (``BUILD_STEPS``) from a lesson04 record, one line each: ms, torch.compile ms / ours, copy
    bound ms / ours and the max |error| in fp32, then the copy bound of 8n bytes (``fusion.bytes_moved``)."""
    ms = {r["method"]: r["ms"] for r in data["headline"]}
    err = data["accuracy"]["fp32_max_abs_error"]
    copy_ms = fusion.bytes_moved(data["n"], "fp32", True) / (data["copy_tbps"] * 1e12) * 1e3
    lines = [f"{'version':36} {'ms':>7} {'compile/ours':>12} {'ours/copy':>9} {'max |err|':>9}"]
    for label, key in BUILD_STEPS:
        e = f"{err[key]:9.1e}" if key in err else f"{'-':>9}"
        lines.append(f"{label:36} {ms[key]:7.3f} {ms['compile'] / ms[key]:12.2f} {copy_ms / ms[key]:9.2f} {e}")
    lines.append(f"{'copy bound (8n bytes)':36} {copy_ms:7.3f}")
    return "\n".join(lines)


def launch_model_inputs(shown: live.Shown) -> live.Shown:
    """What the launch-model explorer draws: ``data`` holds ``overhead_us`` and ``tbps`` and the ``measured``
    unfused and fused rows of the sweep, ``where`` says where they come from. ``shown``: lesson04's result
    (``live.measure_or_recall``: measured now or recorded); where it holds no record (the recording has no
    lesson04), the overhead is the recorded time of the smallest vector add of the roofline points and the
    bandwidth the recorded copy (``live.recall``)."""
    if shown.data is not None:
        us, tbps = launch_and_copy(shown.data)
        measured = [r for r in shown.data["sweep"] if r["method"] in ("unfused", "fused")]
        return live.Shown(dict(overhead_us=us, tbps=tbps, measured=measured), shown.where, shown.live)
    rec = live.recall(None)
    adds = [p for p in rec.data["roofline_points"] if p["name"].startswith("vector add")]
    small = min(adds, key=lambda p: p["bytes_moved"])
    data = dict(overhead_us=small["time_ms"] * 1e3, tbps=rec.data["profile"]["copy_tbps"], measured=[])
    return live.Shown(data, f"overhead = {small['name']} time, bandwidth = copy; {rec.where}", False)
