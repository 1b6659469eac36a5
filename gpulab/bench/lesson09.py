"""Lesson 09 (the builder test) benchmark suite: ``python -m gpulab.bench --only lesson09``.

GPU only. The GPT-2-small training step of ``gpulab.capstone`` (12 layers, d_model 768, 12 heads, vocabulary
50257, 8 sequences of 1024 tokens):

- ``ladder``: every rung of ``gpulab.capstone.ladder.RUNGS`` (cumulative: fp32 eager naive attention, then
  bf16 autocast, fused kernels, FlashAttention, recomputation, the padded vocabulary, CUDA graphs): the
  predicted step time on the H200's datasheet roofline and on this GPU's measured profile when one is saved,
  the measured median step time (``gpulab.timing.time_ms``), the peak memory and the loss;
- ``ops``: the first and the last rung's step under ``torch.profiler``, each operation's GPU time summed into
  the recorder's groups (``group_of``) and divided by the profiled steps.

About 2 minutes on an H200 (most of it torch.compile and the FlashAttention autotuner on their first call).
"""

from __future__ import annotations

import dataclasses

from torch import profiler
from torch.autograd import DeviceType
from tqdm.auto import tqdm

import gpulab

from .. import hardware, plan, timing
from ..capstone import ladder, placement
from ..capstone.gpt import GPT2_SMALL, Trainer
from ..device import load_profile

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


def profile_groups(trainer, steps: int = PROFILED_STEPS) -> dict:
    """GPU ms per group of one ``trainer.step()``, from torch.profiler (``group_times`` of its averaged events
    over ``steps`` steps). GPU only."""
    trainer.step()
    timing.synchronize()
    activities = [profiler.ProfilerActivity.CPU] + ([profiler.ProfilerActivity.CUDA] if gpulab.ON_GPU else [])
    with profiler.profile(activities=activities) as prof:
        for _ in range(steps):
            trainer.step()
        timing.synchronize()
    return group_times(prof.key_averages(), steps)


def group_times(events, steps: int) -> dict:
    """GPU ms per group (``group_of``) and step from torch.profiler's averaged events: each operator's self
    device time (the kernels it launched itself), divided by ``steps``. Only the operators (CPU-side events)
    count: the kernels appear again as device-side events of their own, and adding those too would count
    each kernel twice. ``events``: items with ``key``, ``device_type`` and ``self_device_time_total`` (µs)."""
    out: dict = {}
    for ev in events:
        if getattr(ev, "device_type", DeviceType.CPU) != DeviceType.CPU:
            continue
        t = getattr(ev, "self_device_time_total", 0) or 0  # µs
        if t > 0:
            g = group_of(ev.key)
            out[g] = out.get(g, 0.0) + t * 1e-3 / steps
    return out


def run(progress: bool = True, cfg=None, rep_ms: float = 300, rungs=None, ops: bool = True, need_bytes=None) -> dict:
    """Measure the ladder and the profiled groups of the module docstring for ``cfg`` (a ``GPTConfig``, default
    GPT-2 small); returns a JSON-able dict. ``rep_ms``: do_bench's repeat budget per rung; ``rungs``: names of
    ``ladder.RUNGS`` to measure (default all); ``ops``: whether to profile the groups; ``need_bytes``: ``{rung
    name: bytes}`` a rung needs (a recording's peak), and a rung that does not fit the plan's memory is recorded
    as ``{"rung", "skipped": reason}``, not run. GPU only."""
    timing.require_gpu("lesson 09's suite")
    cfg = cfg or GPT2_SMALL
    spec = hardware.get("H200")
    profile = load_profile() if not timing.is_fake() else None  # the test clock has no GPU to have profiled
    mine = placement.spec_from_profile(profile.to_json()) if profile else None
    rows = []
    for rung in tqdm(ladder.RUNGS, desc="lesson09 ladder", disable=not progress):
        if rungs is not None and rung.name not in rungs:
            continue
        need = (need_bytes or {}).get(rung.name, 0)
        if not plan.current().fits(need):
            rows.append(dict(rung=rung.name, skipped=plan.current().skip_reason(need)))
            continue
        row = dict(
            rung=rung.name,
            habit=rung.habit,
            lesson=rung.lesson,
            predicted_ms=ladder.predict(cfg, rung.options, spec)["ms"],
            predicted_profile_ms=ladder.predict(cfg, rung.options, mine)["ms"] if mine else None,
        )
        row.update(ladder.measure(cfg, rung.options, rep_ms=rep_ms))
        rows.append(row)
    profiled = {}
    for rung in (ladder.RUNGS[0], ladder.RUNGS[-2]) if ops else ():  # the last eager rung: a graph has no op events
        trainer = Trainer(cfg, rung.options, device=timing.device())
        profiled[rung.name] = profile_groups(trainer)
        del trainer
        timing.empty_cache()
    return dict(
        config=dataclasses.asdict(cfg),
        spec=spec.name,
        profile=profile.gpu if profile else None,
        ladder=rows,
        ops=profiled,
        ops_counting=OPS_COUNTING,
    )


#: What notebook 09 runs live (``run(**LIVE, need_bytes=...)``): the first two rungs, which compile nothing.
LIVE = dict(rungs=("fp32 eager, naive attention", "+ bf16 autocast"), ops=False)
OPS_COUNTING = "operators"  # how ``ops`` was summed: ``group_times`` (each kernel once)


def report(data: dict) -> str:
    lines = [
        f"GPT-2 small step, {data['config']['batch']}x{data['config']['seq_len']} tokens; predicted on the "
        f"{data['spec']} datasheet roofline",
        f"  {'rung':30} {'predicted':>10} {'measured':>10} {'peak mem':>9}",
    ]
    for r in data["ladder"]:
        if "skipped" in r:
            lines.append(f"  {r['rung']:30} out of memory, not run: {r['skipped']}")
            continue
        lines.append(f"  {r['rung']:30} {r['predicted_ms']:8.2f} ms {r['ms']:8.2f} ms {r['peak_mem_gib']:6.1f} GiB")
    for name, groups in ladder.measured_ops(data).items():
        top = sorted(groups.items(), key=lambda kv: -kv[1])[:4]
        lines.append(f"  profiled ({name}): " + ", ".join(f"{g} {ms:.1f} ms" for g, ms in top))
    return "\n".join(lines)
