"""Lesson 09 (the builder test) benchmark suite: ``python -m gpulab.bench --only lesson09``.

GPU only. The GPT-2-small training step of ``gpulab.capstone`` (12 layers, d_model 768, 12 heads, vocabulary
50257, 8 sequences of 1024 tokens):

- ``ladder``: every rung of ``gpulab.capstone.ladder.RUNGS`` (cumulative: fp32 eager naive attention, then
  bf16 autocast, fused kernels, FlashAttention, recomputation, the padded vocabulary, CUDA graphs): the
  predicted step time on the H200's datasheet roofline (``predicted_ms``) and on this GPU's measured ceilings
  with lesson 04's measured launch cost (``predicted_profile_ms``, ``gpulab.capstone.explain``), the measured
  median step time (``gpulab.core.timing.time_ms``), the peak memory, the loss; the GPU-busy time of one step
  (``gpu_busy_ms``: torch.profiler's device kernel time over profiled steps, the graph's replay for the
  graphs rung) and the kernels it launches (``kernels``); the step at twice the batch (``ms_2x``, the
  overhead test of ``explain.doubling_verdict``);
- ``ops``: the first and the last eager rung's step, each operation's GPU time summed into the recorder's
  groups (``group_of``) per step; ``op_times``: the same two rungs per operation (``op_times``);
- ``bias_gelu``: gpulab's fused bias + GELU (``kernels.bias_gelu``) and torch's eager one on the MLP's
  (8192, 3072) activations, and the copy bandwidth: what ``exercises.race`` recalls for lesson 09.

About 4 minutes on an H200 (most of it torch.compile and the FlashAttention autotuner, for both batches).
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import profiler
from torch.autograd import DeviceType
from tqdm.auto import tqdm

import gpulab

from ..capstone import explain, ladder
from ..capstone.gpt import GPT2_SMALL
from ..core import hardware, plan, timing
from ..kernels.bias_gelu import bias_gelu as fused_bias_gelu  # ``run``'s flag is named bias_gelu

KEY = "lesson09"
PROFILED_STEPS = 3

# Operation names (aten ops and torch.compile's generated kernels) -> the recorder's groups, first match wins.
# The naive attention's batched matmuls and softmax are the only bmm and _softmax of the step.
_NAME_GROUPS = (
    ("flash", "attention"),
    ("attention", "attention"),
    ("bmm", "attention"),
    ("nll_loss", "softmax/cross-entropy"),
    ("log_softmax", "softmax/cross-entropy"),
    ("softmax", "attention"),
    ("masked_fill", "attention"),
    ("layer_norm", "layer norm"),
    ("gelu", "GELU"),
    ("foreach", "optimizer"),
    ("adam", "optimizer"),
    ("addmm", "matmuls"),
    ("aten::mm", "matmuls"),
    ("gemm", "matmuls"),
)


def group_of(name: str) -> str:
    """The recorder's group for a profiler event name (``"aten::mm"``, ``"triton_poi_fused_gelu_0"``)."""
    low = name.lower()
    for needle, group in _NAME_GROUPS:
        if needle in low:
            return group
    return "copies/other"


def profile_step(fn, steps: int = PROFILED_STEPS) -> dict:
    """One step ``fn()`` (a ``Trainer.step``, or a CUDA graph's ``replay``) under torch.profiler over ``steps``
    steps after one unprofiled: ``groups`` (``group_times``), ``op_times`` (``op_times``), ``gpu_busy_ms`` and
    ``kernels`` per step (``device_totals``). GPU only; under the test clock the profiler sees the CPU alone,
    so ``gpu_busy_ms`` is the clock's fake time and ``kernels`` 0."""
    fn()
    timing.synchronize()
    activities = [profiler.ProfilerActivity.CPU] + ([profiler.ProfilerActivity.CUDA] if gpulab.ON_GPU else [])
    with profiler.profile(activities=activities) as prof:
        for _ in range(steps):
            fn()
        timing.synchronize()
    events = prof.key_averages()
    busy, kernels = device_totals(events, steps)
    if timing.is_fake():
        busy = timing.time_ms(fn).median_ms
    return dict(groups=group_times(events, steps), op_times=op_times(events, steps), gpu_busy_ms=busy, kernels=kernels)


def profile_groups(trainer, steps: int = PROFILED_STEPS) -> dict:
    """GPU ms per group of one ``trainer.step()`` (``profile_step``'s ``groups``). GPU only."""
    return profile_step(trainer.step, steps)["groups"]


def device_totals(events, steps: int) -> tuple[float, float]:
    """(GPU-busy ms, kernels) per step from torch.profiler's averaged events: the device-side events' time
    (``device_time_total``, µs: kernels, memcpy, memset, each once) and their ``count``, divided by ``steps``.
    The operators (CPU-side events) are left out: their device time is these kernels again."""
    us = n = 0.0
    for ev in events:
        if getattr(ev, "device_type", DeviceType.CPU) == DeviceType.CPU:
            continue
        us += getattr(ev, "device_time_total", 0) or 0
        n += getattr(ev, "count", 0) or 0
    return us * 1e-3 / steps, n / steps


def group_times(events, steps: int) -> dict:
    """GPU ms per group (``group_of``) and step from torch.profiler's averaged events: each operator's self
    device time (the kernels it launched itself), divided by ``steps``. Only the operators (CPU-side events)
    count: the kernels appear again as device-side events of their own, and adding those too would count
    each kernel twice. ``events``: items with ``key``, ``device_type`` and ``self_device_time_total`` (µs)."""
    out: dict = {}
    for row in op_times(events, steps):
        g = group_of(row["op"])
        out[g] = out.get(g, 0.0) + row["ms"]
    return out


def op_times(events, steps: int) -> list[dict]:
    """Per operator (CPU-side event with device time): ``op``, ``group`` (``group_of``), ``calls`` and ``ms``
    (its self device time) per step, and ``us_per_call``; the longest first. ``events`` as ``group_times``."""
    rows = []
    for ev in events:
        if getattr(ev, "device_type", DeviceType.CPU) != DeviceType.CPU:
            continue
        t = getattr(ev, "self_device_time_total", 0) or 0  # µs
        if t > 0:
            calls = (getattr(ev, "count", 0) or 0) / steps
            us_call = t / (calls * steps) if calls else t
            rows.append(dict(op=ev.key, group=group_of(ev.key), calls=calls, ms=t * 1e-3 / steps, us_per_call=us_call))
    return sorted(rows, key=lambda r: -r["ms"])


def bias_gelu_times(M: int = 8192, N: int = 3072, rep_ms: float = 100) -> dict:
    """gpulab's fused bias + GELU (``kernels.bias_gelu``, exercise 09's solution) and torch's eager
    ``gelu(x + b)`` on (M, N) fp32, and the copy bandwidth (``out.copy_(x)``, 8 M N bytes) on the same buffers:
    ``M``, ``N``, ``gpulab_ms``, ``torch_ms``, ``copy_tbps``. GPU only (or the test clock)."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(M, N, generator=gen).to(timing.device())
    b = torch.randn(N, generator=gen).to(timing.device())
    out = torch.empty_like(x)
    ms = {
        "gpulab_ms": timing.time_ms(lambda: fused_bias_gelu(x, b, out), rep_ms=rep_ms).median_ms,
        "torch_ms": timing.time_ms(lambda: F.gelu(x + b, approximate="tanh"), rep_ms=rep_ms).median_ms,
    }
    copy = timing.time_ms(lambda: out.copy_(x), rep_ms=rep_ms).median_ms
    return dict(M=M, N=N, **ms, copy_tbps=8 * M * N / (copy * 1e-3) / 1e12)


STEPS = ("ladder", "bias_gelu", "headline")
#: The ladder's first step, fp32 eager to bf16 autocast: its largest predicted gain, and the step
#: ``tools/gpu_check.py`` runs. It compiles nothing; every rung above it does (torch.compile's fused functions, the
#: FlashAttention autotuner: tens of seconds on a cold cache) and is measured by the whole suite.
HEADLINE_RUNGS = (ladder.RUNGS[0].name, ladder.RUNGS[1].name)


def run(
    progress: bool = True,
    cfg=None,
    rep_ms: float = 300,
    rungs=None,
    ops: bool = True,
    need_bytes=None,
    doubled: bool | tuple = True,
    bias_gelu: bool = True,
    steps=None,
) -> dict:
    """Measure the ladder and the profiled groups of the module docstring for ``cfg`` (a ``GPTConfig``, default
    GPT-2 small); returns a JSON-able dict. ``rep_ms``: do_bench's repeat budget per rung; ``rungs``: names of
    ``ladder.RUNGS`` to measure (default all); ``ops``: whether to keep the profiled groups and operators;
    ``need_bytes``: ``{rung name: bytes}`` a rung needs (a recording's peak), and a rung that does not fit the
    plan's memory is recorded as ``{"rung", "skipped": reason}``, not run (its doubled batch needs twice, and is
    None where that does not fit); ``doubled``: measure ``ms_2x`` (True: every rung; a tuple: those rungs);
    ``bias_gelu``: time ``bias_gelu_times`` at (batch x seq_len, 4 d_model), the MLP's activations. ``steps``: a
    subset of ``STEPS`` (default all): ``ladder`` as above, ``bias_gelu``, and ``headline``, the rows of
    ``HEADLINE_RUNGS`` (read from the ladder where it ran them, else measured alone, profiled, without the doubled
    batch; without ``steps``, only read, and left out where ``rungs`` leaves one out).
    Raises ValueError naming an unknown step. GPU only."""
    timing.require_gpu("lesson 09's suite")
    unknown = set(steps or ()) - set(STEPS)
    if unknown:
        raise ValueError(f"steps must be drawn from {STEPS}, got unknown {sorted(unknown)}")
    cfg = cfg or GPT2_SMALL
    spec = hardware.get("H200")
    ceilings, launch = explain.ceilings(), explain.launch_us()
    mine, us = ceilings.data, launch.data
    out = dict(config=dataclasses.asdict(cfg), spec=spec.name, profile=ceilings.where, launch_us=us)
    out.update(launch_where=launch.where, ops_counting=OPS_COUNTING)
    measure = dict(cfg=cfg, spec=spec, mine=mine, us=us, rep_ms=rep_ms, need_bytes=need_bytes or {})
    if steps is None or "ladder" in steps:
        kept = (ladder.RUNGS[0].name, ladder.RUNGS[-2].name) if ops else ()
        rows, profiled, table = [], {}, {}
        for rung in tqdm(ladder.RUNGS, desc="lesson09 ladder", disable=not progress):
            if rungs is not None and rung.name not in rungs:
                continue
            twice = doubled is True or rung.name in (doubled or ())
            row, prof = _rung_row(rung, profile=True, doubled=twice, **measure)
            if rung.name in kept and prof:
                profiled[rung.name], table[rung.name] = prof["groups"], prof["op_times"]
            rows.append(row)
        out.update(ladder=rows, ops=profiled, op_times=table)
    if (steps is None or "bias_gelu" in steps) and bias_gelu:
        out["bias_gelu"] = bias_gelu_times(cfg.batch * cfg.seq_len, 4 * cfg.d_model, rep_ms=min(rep_ms, 100))
    have = {r["rung"]: r for r in out.get("ladder", ())}
    if steps is not None and "headline" in steps:
        out["headline"] = [
            have.get(name) or _rung_row(_RUNG[name], profile=True, doubled=False, **measure)[0]
            for name in HEADLINE_RUNGS
        ]
    elif all(name in have for name in HEADLINE_RUNGS):
        out["headline"] = [have[name] for name in HEADLINE_RUNGS]
    return out


_RUNG = {r.name: r for r in ladder.RUNGS}


def _rung_row(rung, cfg, spec, mine, us, rep_ms, need_bytes, profile: bool, doubled: bool) -> tuple[dict, dict]:
    """One rung of the ladder: ``(row, profile_step's result or {})``; the row says ``skipped`` (and nothing is
    run) where the rung's ``need_bytes`` do not fit the plan."""
    need = need_bytes.get(rung.name, 0)
    if not plan.current().fits(need):
        return dict(rung=rung.name, skipped=plan.current().skip_reason(need)), {}
    row = dict(
        rung=rung.name,
        habit=rung.habit,
        lesson=rung.lesson,
        predicted_ms=ladder.predict(cfg, rung.options, spec)["ms"],
        predicted_profile_ms=ladder.predict(cfg, rung.options, mine, overhead_us=us)["ms"],
    )
    m = ladder.measure(cfg, rung.options, rep_ms=rep_ms, probe=profile_step if profile else None)
    prof = m.pop("probe", {})
    row.update(m)
    if profile:
        row.update(gpu_busy_ms=prof["gpu_busy_ms"], kernels=prof["kernels"])
    if doubled:
        twice = dataclasses.replace(cfg, batch=2 * cfg.batch)
        fits = plan.current().fits(2 * need)
        row["ms_2x"] = ladder.measure(twice, rung.options, rep_ms=rep_ms)["ms"] if fits else None
    return row, prof


#: What notebook 09 runs live (``run(**LIVE, need_bytes=...)``): the first two rungs, which compile nothing, and the
#: second also at twice the batch (the overhead test; the suite doubles every rung, the fp32 one at 0.4 s a step).
LIVE = dict(
    rungs=("fp32 eager, naive attention", "+ bf16 autocast"), ops=False, bias_gelu=False, doubled=("+ bf16 autocast",)
)
OPS_COUNTING = "operators"  # how ``ops`` was summed: ``group_times`` (each kernel once)


def report(data: dict) -> str:
    """The suite's record as a short table: per rung the predictions (datasheet; measured ceilings where the
    record has them), the wall time, the GPU-busy time, the doubled batch's time and the peak memory; the rows of
    the ``headline`` where the record has no ``ladder`` (``--steps headline``); then the headline's speed-up,
    measured and predicted, where both its rows ran."""
    lines = [
        f"GPT-2 small step, {data['config']['batch']}x{data['config']['seq_len']} tokens; predicted on the "
        f"{data['spec']} datasheet and on {data.get('profile') or 'no measured profile'}",
        f"  {'rung':28} {'datasheet':>9} {'ceilings':>8} {'wall':>7} {'GPU busy':>8} {'2x batch':>8} {'peak':>8}",
    ]

    def ms(v):
        return f"{v:.2f}" if v is not None else "-"

    for r in data.get("ladder") or data.get("headline") or []:
        if "skipped" in r:
            lines.append(f"  {r['rung']:28} out of memory, not run: {r['skipped']}")
            continue
        lines.append(
            f"  {r['rung']:28} {ms(r['predicted_ms']):>9} {ms(r.get('predicted_profile_ms')):>8} {ms(r['ms']):>7} "
            f"{ms(r.get('gpu_busy_ms')):>8} {ms(r.get('ms_2x')):>8} {r['peak_mem_gib']:4.1f} GiB"
        )
    for name, groups in ladder.measured_ops(data).items():
        if not groups:
            continue
        top = sorted(groups.items(), key=lambda kv: -kv[1])[:4]
        lines.append(f"  profiled ({name}): " + ", ".join(f"{g} {ms:.1f} ms" for g, ms in top))
    ends = [r for r in data.get("headline", []) if "skipped" not in r]
    if len(ends) == 2:
        first, last = ends
        lines.append(
            f"  headline: {first['rung']} -> {last['rung']}: x{first['ms'] / last['ms']:.2f} measured, "
            f"x{first['predicted_ms'] / last['predicted_ms']:.2f} predicted"
        )
    return "\n".join(lines)
