"""Why the ladder's measurements differ from its predictions: this GPU's ceilings, MFU, and the CPU's share.

- ``ceilings``: the roofline the prediction uses: this GPU's measured profile (lesson 00's
  ``gpulab.measure.device`` profile where one is saved on a GPU, else the ``profile`` recorded in gpulab/data), as
  ``placement.spec_from_profile`` turns it into a ``GPUSpec``; the datasheet only where neither exists.
- ``launch_us``: the per-kernel floor of an eager step: lesson 04's recorded do_bench time of a one-element
  ``torch.sin`` (``lesson04`` / ``launch`` / ``torch_us``: the GPU-side cost of one tiny torch kernel); the
  launch-overhead model's round value (``fusion.LAUNCH_OVERHEAD_US``) only where lesson 04 is not recorded.
- ``model_flops_per_token`` and ``mfu``: the model FLOPs of a token, 6N + 12 n_layer d_model L (PaLM,
  Chowdhery et al. 2022, appendix B; Chinchilla, Hoffmann et al. 2022, appendix F, counts the same terms),
  N the parameters that do matrix products (all but the position embedding: the token embedding is the
  tied output layer; nanoGPT's ``estimate_mfu`` counts so), and MFU = model FLOPs per second over the dense
  bf16 peak of the datasheet. Recomputation does more FLOPs than the model's, which MFU does not credit.
- ``doubling_verdict``: the test of overhead-boundedness: double the batch; a step bound by the GPU takes
  about twice as long, a step whose GPU waits on the CPU (one launch after another from Python) stays flat,
  since the launches are the same in number and the GPU's share of the time was small.
- ``gaps``: one row per measured rung with its prediction on ``ceilings``, its wall time, its GPU-busy time
  (the profiler's kernel time in the step's window), the verdict, the MFU and, for a rung slower than the one
  before, the reason, all read from a lesson09 record; ``MISSING`` names what a record lacks.
"""

from __future__ import annotations

import dataclasses

import gpulab

from ..core import hardware, reference
from ..measure import device, live
from ..models import fusion
from . import ladder, placement

#: GPU busy under this share of the wall time: the step waits on the CPU.
CPU_BOUND_SHARE = 0.8
#: Doubling the batch: under this ratio of step times the step is flat (waits on the CPU); above ``GPU_BOUND_RATIO``
#: the GPU's work sets the time; between, both do.
FLAT_RATIO, GPU_BOUND_RATIO = 1.3, 1.7
#: The fields of a lesson09 ladder row that older records lack, and what each gives.
NEW_FIELDS = {
    "gpu_busy_ms": "GPU-busy time per rung (torch.profiler)",
    "kernels": "kernels launched per step",
    "ms_2x": "the step at twice the batch (the overhead test)",
    "predicted_profile_ms": "the prediction on the measured ceilings, made by the suite",
}


def _recorded(gpu: str) -> dict:
    return reference.load(gpu) if gpu in reference.available() else {}


def ceilings(gpu: str = reference.DEFAULT_GPU, profile: dict | None = None) -> live.Shown:
    """The roofline the prediction uses: ``data`` the ``GPUSpec`` of the measured ceilings, ``where`` whose they
    are, ``live`` True for this GPU's. ``profile``: a ``DeviceProfile.to_json()`` dict to use; default: the profile
    saved on this GPU (``device.load_profile``) where gpulab runs on one, else the ``profile`` of ``gpu``'s
    reference file; the datasheet of ``hardware.get(gpu)`` where neither exists (and the label says so)."""
    if profile is not None:
        return live.Shown(placement.spec_from_profile(profile), "the profile given", False)
    saved = device.load_profile() if gpulab.ON_GPU else None
    if saved is not None:
        return live.Shown(placement.spec_from_profile(saved.to_json()), "this GPU's saved profile (lesson 00)", True)
    profile = _recorded(gpu).get("profile")
    if profile is not None:
        where = f"the profile recorded on {profile['gpu']} (gpulab/data)"
        return live.Shown(placement.spec_from_profile(profile), where, False)
    spec = hardware.get(gpu)
    return live.Shown(spec, f"the {spec.name} datasheet (no measured profile)", False)


def launch_us(gpu: str = reference.DEFAULT_GPU, record: dict | None = None) -> live.Shown:
    """The per-kernel floor of an eager step: ``data`` in µs, from a lesson04 record (``record``, default the one
    in ``gpu``'s reference file): its ``launch.torch_us``; without one, ``fusion.LAUNCH_OVERHEAD_US``. ``where``
    says which."""
    rec = record if record is not None else _recorded(gpu).get("lesson04")
    us = ((rec or {}).get("launch") or {}).get("torch_us")
    if us is None:
        return live.Shown(fusion.LAUNCH_OVERHEAD_US, "a round launch cost (lesson 04 not recorded)", False)
    return live.Shown(float(us), "lesson 04's recorded tiny torch kernel (do_bench, GPU side)", False)


def model_flops_per_token(cfg) -> float:
    """6N + 12 n_layer d_model L model FLOPs per token (see the module docstring); ``cfg`` a ``GPTConfig``,
    the vocabulary unpadded (padding adds work, not model FLOPs)."""
    n = cfg.n_params(pad=False) - cfg.seq_len * cfg.d_model  # the position embedding does no matmul
    return 6 * n + 12 * cfg.n_layer * cfg.d_model * cfg.seq_len


def mfu(cfg, ms: float, peak_tflops: float) -> float:
    """Model FLOPs utilization of one step of ``ms`` milliseconds: batch x seq_len tokens x
    ``model_flops_per_token`` / (ms 1e-3 s) / (``peak_tflops`` 1e12). Raises ValueError for a non-positive
    ``ms`` or peak."""
    if not (ms > 0 and peak_tflops > 0):
        raise ValueError(f"ms and peak_tflops must be positive, got ms={ms!r}, peak_tflops={peak_tflops!r}")
    return cfg.batch * cfg.seq_len * model_flops_per_token(cfg) / (ms * 1e-3) / (peak_tflops * 1e12)


def doubling_verdict(ms: float, ms_doubled: float) -> dict:
    """The overhead test on two step times (ms): at the batch and at twice it. Returns ``ratio`` (doubled /
    single) and ``verdict``: "flat: the step waits on the CPU" below ``FLAT_RATIO``, "doubles: the GPU's work
    sets the time" above ``GPU_BOUND_RATIO``, else "partly: both". Raises ValueError for a non-positive time."""
    if not (ms > 0 and ms_doubled > 0):
        raise ValueError(f"ms and ms_doubled must be positive, got {ms!r} and {ms_doubled!r}")
    ratio = ms_doubled / ms
    if ratio < FLAT_RATIO:
        verdict = "flat: the step waits on the CPU"
    elif ratio > GPU_BOUND_RATIO:
        verdict = "doubles: the GPU's work sets the time"
    else:
        verdict = "partly: the CPU and the GPU both"
    return dict(ratio=ratio, verdict=verdict)


def double_the_batch(cfg, opts, *, rep_ms: float = 100) -> dict:
    """Measure one step of ``GPT(cfg, opts)`` at ``cfg.batch`` and at twice it (``ladder.measure``) and apply
    ``doubling_verdict``: ``ms``, ``ms_2x``, ``ratio``, ``verdict``. GPU only (or the test clock)."""
    one = ladder.measure(cfg, opts, rep_ms=rep_ms)["ms"]
    two = ladder.measure(dataclasses.replace(cfg, batch=2 * cfg.batch), opts, rep_ms=rep_ms)["ms"]
    return dict(ms=one, ms_2x=two, **doubling_verdict(one, two))


def _busy(row: dict, data: dict) -> tuple[float | None, str]:
    """A rung's GPU-busy ms and its source: the row's ``gpu_busy_ms``, else the sum of its profiled groups
    (``ops``: each kernel counted once, so their sum is the kernels' time)."""
    if row.get("gpu_busy_ms") is not None:
        return row["gpu_busy_ms"], "profiler"
    groups = (data.get("ops") or {}).get(row["rung"])
    return (sum(groups.values()), "profiled groups") if groups else (None, "")


def _slower(row, prev, pred, prev_pred, busy, prev_busy) -> str:
    """Why ``row`` measured slower than ``prev``: within the spread; else what the counts add (more FLOPs by
    design, more kernels) in ms, and the rest split into GPU work and CPU wait where both GPU-busy times exist."""
    dt = row["ms"] - prev["ms"]
    if row.get("p20_ms", row["ms"]) <= prev.get("p80_ms", prev["ms"]):
        return f"slower by {dt:.1f} ms, within the spread (p20 {row['p20_ms']:.1f} <= p80 before): no difference"
    why = []
    if pred["flops"] > prev_pred["flops"] * 1.01:
        why.append(f"+{(pred['flops'] - prev_pred['flops']) / 1e12:.2f} TFLOP by design")
    if pred["kernels"] > prev_pred["kernels"]:
        why.append(f"+{pred['kernels'] - prev_pred['kernels']} kernels")
    counted = f"the counts add {pred['ms'] - prev_pred['ms']:.1f} ms" + (f" ({', '.join(why)})" if why else "")
    if busy is not None and prev_busy is not None:
        rest = f"GPU busy {busy - prev_busy:+.1f} ms, CPU wait {(row['ms'] - busy) - (prev['ms'] - prev_busy):+.1f} ms"
    else:
        rest = "the rest awaits GPU-busy times"
    return f"slower by {dt:.1f} ms: {counted}; {rest}"


def gaps(data: dict | None, cfg=None, spec: hardware.GPUSpec | None = None, overhead_us: float | None = None) -> list:
    """One dict per rung of a lesson09 record ``data`` (``gpulab.bench.lesson09.run``): ``rung``,
    ``predicted_ms`` (``ladder.predict_split`` on ``spec`` with ``overhead_us``: default ``ceilings()`` and
    ``launch_us()``), ``ms``, ``gpu_busy_ms`` and its ``busy_source`` (None where the record lacks it),
    ``cpu_wait_ms``, ``verdict``, ``mfu`` (dense bf16 datasheet peak of the record's ``spec``), ``ratio_2x``
    (the overhead test, None without ``ms_2x``), ``slower`` (the reason, "" unless slower than the rung before)
    and ``missing`` (``NEW_FIELDS`` the row lacks). ``[]`` for None; skipped rungs are left out."""
    if not data:
        return []
    from .gpt import GPTConfig

    cfg = cfg or GPTConfig(**data["config"])
    spec = spec or ceilings().data
    overhead_us = launch_us().data if overhead_us is None else overhead_us
    peak = hardware.get(data.get("spec", "H200")).peak("bf16")
    opts = {r.name: r.options for r in ladder.RUNGS}
    out, prev, prev_pred, prev_busy = [], None, None, None
    for row in data["ladder"]:
        if "skipped" in row or row["rung"] not in opts:
            continue
        pred = ladder.predict_split(cfg, opts[row["rung"]], spec, overhead_us=overhead_us)
        busy, source = _busy(row, data)
        g = dict(rung=row["rung"], predicted_ms=pred["ms"], ms=row["ms"], gpu_busy_ms=busy, busy_source=source)
        g["cpu_wait_ms"] = row["ms"] - busy if busy is not None else None
        if busy is None:
            g["verdict"] = "GPU-busy time not recorded"
        elif busy < CPU_BOUND_SHARE * row["ms"]:
            g["verdict"] = f"CPU-bound: GPU busy {busy:.1f} ms, it waits {row['ms'] - busy:.1f} ms"
        else:
            g["verdict"] = f"GPU-bound: GPU busy {busy:.1f} ms, {busy - pred['ms']:+.1f} ms on the model"
        groups = (data.get("ops") or {}).get(row["rung"]) or {}
        if groups and busy is not None and busy >= CPU_BOUND_SHARE * row["ms"]:
            name = max(groups, key=lambda k: groups[k] - pred["group_ms"].get(k, 0.0))
            g["verdict"] += f"; most in {name} ({groups[name] - pred['group_ms'].get(name, 0.0):+.1f} ms)"
        g["mfu"] = mfu(cfg, row["ms"], peak)
        g["ratio_2x"] = row["ms_2x"] / row["ms"] if row.get("ms_2x") else None
        slower = prev and row["ms"] > prev["ms"]
        g["slower"] = _slower(row, prev, pred, prev_pred, busy, prev_busy) if slower else ""
        g["missing"] = [k for k in NEW_FIELDS if row.get(k) is None]
        out.append(g)
        prev, prev_pred, prev_busy = row, pred, busy
    return out


def report(rows: list) -> str:
    """``gaps`` rows as a short table (one line a rung, one more for each slower rung)."""
    lines = [f"  {'rung':28} {'model':>7} {'wall':>7} {'busy':>7} {'MFU':>5}  verdict"]
    for g in rows:
        busy = f"{g['gpu_busy_ms']:7.1f}" if g["gpu_busy_ms"] is not None else f"{'-':>7}"
        lines.append(f"  {g['rung']:28} {g['predicted_ms']:7.1f} {g['ms']:7.1f} {busy} {g['mfu']:5.0%}  {g['verdict']}")
        if g["slower"]:
            lines.append(f"  {'':28} {g['slower']}")
    return "\n".join(lines)
