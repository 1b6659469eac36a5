"""The ladder of habits: each rung's predicted step time from the counts, and its measured time on a GPU.

Rungs are cumulative (each keeps the ones before it), in ``RUNGS`` order, each from one lesson. The
prediction starts from the recorded operations of the step (``gpulab.capstone.recorder``, on the meta
device: the structural switches, recomputation and vocabulary padding, are recorded as they run) and
rewrites them for the other switches by the rule of the lesson the rung comes from:

- bf16 autocast (lesson 03): matrix products read and write bf16 (bytes halved) at the bf16 tensor-core
  peak; GELU and the other activations between them are bf16 too (bytes halved); layer norm, softmax, the
  loss and the optimizer stay fp32 (autocast runs them so); each forward casts every weight matrix to bf16
  (read 4 + write 2 bytes per weight);
- fused kernels (lesson 04): every run of consecutive non-matmul kernels of one phase becomes one kernel
  that reads each input from outside the run once and writes only what outlives the run: an intermediate
  made and consumed inside the run stays in registers (the seed's sin^2 + cos^2 accounting, 44n -> 8n bytes);
  AdamW's whole update is then one run, as ``fused=True`` does it;
- FlashAttention (lesson 08): the attention core's kernels (two matmuls, scale, mask, softmax and their
  backward) are replaced by one forward kernel (``gpulab.models.attention.attention_flops`` causal,
  ``flash_bytes``) and one backward (2.5x the forward FLOPs; Q, K, V, O, dO read, dQ, dK, dV written, plus the
  forward's K/V re-reads): the L^2 bytes are gone;
- recomputation (lesson 05): recorded: each block's forward runs again inside backward (more FLOPs); it buys
  memory, which the roofline does not see;
- vocabulary padded to a multiple of 64 (lesson 07): recorded: 0.09% more FLOPs in the output layer, so the
  count predicts no gain; the gain on a GPU comes from aligned rows and full tiles, which the count does not
  see: measure it;
- CUDA graphs (lesson 04, launch overhead): eager, each kernel costs at least the launch overhead
  (``placement.LAUNCH_OVERHEAD_US``); replayed from a graph only its bound.

On a GPU, ``measure`` times a rung's step with ``gpulab.core.timing.time_ms`` (graph replay for the graphs rung)
and reads its peak memory with ``gpulab.core.timing.max_memory_allocated``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..core import hardware
from ..models import attention
from . import placement, recorder
from .gpt import GPT2_SMALL, GPTConfig, Options, Trainer


@dataclass(frozen=True)
class Rung:
    """One rung: its name, the cumulative ``Options``, the habit and the lesson it comes from."""

    name: str
    options: Options
    habit: str
    lesson: str


def _rungs() -> tuple:
    o = Options()
    steps = [
        ("fp32 eager, naive attention", {}, "the baseline", "01 roofline"),
        ("+ bf16 autocast", dict(bf16=True), "precision", "03 precision"),
        ("+ fused kernels", dict(fused=True), "fusion", "04 fusion"),
        ("+ FlashAttention", dict(attention="flash"), "tiling, online softmax, recomputation", "08 FlashAttention"),
        ("+ recomputation", dict(recompute=True), "recomputation", "05 recomputation"),
        ("+ vocab 50257 -> 50304", dict(pad_vocab=True), "a tile that fits the hardware", "07 tiling and waves"),
        ("+ CUDA graphs", dict(graphs=True), "launch overhead", "04 fusion"),
    ]
    out = []
    for name, kw, habit, lesson in steps:
        o = o.replace(**kw)
        out.append(Rung(name, o, habit, lesson))
    return tuple(out)


RUNGS = _rungs()


@dataclass(frozen=True)
class Kernel:
    """A kernel of the predicted step: name, group, phase, FLOPs, bytes, dtype, storage reads/writes."""

    name: str
    group: str
    phase: str
    flops: float
    bytes: float
    dtype: str
    reads: tuple = ()
    writes: tuple = ()


@functools.lru_cache(maxsize=16)
def recorded(cfg: GPTConfig, recompute: bool, pad_vocab: bool) -> tuple:
    """The recorded kernels of one fp32 eager step with naive attention on the meta device (cached)."""
    recs = recorder.record_gpt(cfg, Options(recompute=recompute, pad_vocab=pad_vocab), device="meta")
    return tuple(
        Kernel(r.name, r.group, r.phase, r.flops, r.bytes, r.dtype, r.reads, r.writes) for r in recs if r.is_kernel
    )


def _bf16(ks, cfg: GPTConfig, pad: bool) -> list:
    keep_fp32 = {"layer norm", "softmax/cross-entropy", "optimizer"}
    out = []
    for k in ks:
        if k.flops > 0:
            out.append(Kernel(k.name, k.group, k.phase, k.flops, k.bytes / 2, "bf16"))
        elif k.group in keep_fp32 or k.group == "attention":
            out.append(k)
        else:
            out.append(Kernel(k.name, k.group, k.phase, k.flops, k.bytes / 2, k.dtype, k.reads, k.writes))
    D = cfg.d_model
    weights = [3 * D * D, D * D, 4 * D * D, 4 * D * D] * cfg.n_layer + [cfg.vocab(pad) * D]
    return out + [Kernel("cast weight to bf16", "copies/other", "forward", 0, 6 * n, "fp32") for n in weights]


def _flash(ks, cfg: GPTConfig, bf16: bool, recompute: bool) -> list:
    B, H, L, d = cfg.batch, cfg.n_head, cfg.seq_len, cfg.head_dim
    s = 2 if bf16 else 4
    dt = "bf16" if bf16 else "fp32"
    f_fwd = attention.attention_flops(B, H, L, L, d, causal=True)
    b_fwd = attention.flash_bytes(B, H, L, d, s, causal=True)
    b_bwd = b_fwd + 6 * B * H * L * d * s + 8 * B * H * L  # + dO, O read; dQ, dK, dV written; lse, delta
    fwd = Kernel("flash attention forward", "attention", "forward", f_fwd, b_fwd, dt)
    bwd = Kernel("flash attention backward", "attention", "backward", 2.5 * f_fwd, b_bwd, dt)
    out, placed = [], {"forward": 0, "backward": 0}
    for k in ks:
        if k.group != "attention":
            out.append(k)
        elif placed[k.phase] < cfg.n_layer * (2 if k.phase == "backward" and recompute else 1):
            if k.phase == "backward" and recompute and placed["backward"] % 2 == 0:
                out.append(Kernel(fwd.name + " (recomputed)", "attention", "backward", f_fwd, b_fwd, dt))
            else:
                out.append(bwd if k.phase == "backward" else fwd)
            placed[k.phase] += 1
    return out


def _fuse(ks) -> list:
    """One kernel per run of consecutive non-matmul kernels of one phase (see the module docstring)."""
    later_reads: dict = {}
    for i, k in enumerate(ks):
        for key, _ in k.reads:
            later_reads[key] = i  # the last kernel that reads each storage
    out, i = [], 0
    while i < len(ks):
        k = ks[i]
        if k.flops > 0 or not k.reads and not k.writes:
            out.append(k)
            i += 1
            continue
        j = i
        while j < len(ks) and ks[j].flops == 0 and ks[j].phase == k.phase and (ks[j].reads or ks[j].writes):
            j += 1
        run = ks[i:j]
        created, consumed, seen_read, written, nbytes = set(), set(), set(), {}, 0
        for r in run:
            for key, b in r.reads:
                if key in created:
                    consumed.add(key)  # made and read inside the run: may stay in registers
                elif key not in seen_read:
                    seen_read.add(key)
                    nbytes += b
            for key, b in r.writes:
                if key not in seen_read and key not in written:
                    created.add(key)
                written[key] = max(b, written.get(key, 0))
        # a write stays unless it is an intermediate: made and consumed in the run and not read after it
        nbytes += sum(
            b for key, b in written.items() if not (key in created and key in consumed and later_reads.get(key, -1) < j)
        )
        groups = [r.group for r in run]
        group = max(set(groups), key=groups.count)
        out.append(Kernel(f"fused run of {len(run)}", group, k.phase, 0, nbytes, k.dtype))
        i = j
    return out


def predicted_kernels(cfg: GPTConfig, opts: Options) -> list:
    """The kernels of one step of ``GPT(cfg, opts)`` as the counts predict them (see the module docstring)."""
    ks = list(recorded(cfg, opts.recompute, opts.pad_vocab))
    if opts.attention != "naive":
        ks = _flash(ks, cfg, opts.bf16, opts.recompute)
    if opts.bf16:
        ks = _bf16(ks, cfg, opts.pad_vocab)
    if opts.fused:
        ks = _fuse(ks)
    return ks


def predict(
    cfg: GPTConfig,
    opts: Options,
    spec: hardware.GPUSpec,
    *,
    overhead_us: float = placement.LAUNCH_OVERHEAD_US,
    tf32: bool = False,
) -> dict:
    """Predicted step of ``GPT(cfg, opts)`` on ``spec``: ``ms``, ``kernels``, ``flops``, ``bytes``, the
    per-group table (``placement.by_group``) and the split by class (``placement.kind_split``)."""
    ks = predicted_kernels(cfg, opts)
    ps = [
        placement.place_one(k.name, k.group, k.flops, k.bytes, k.dtype, spec, overhead_us=overhead_us, tf32=tf32)
        for k in ks
        if k.bytes > 0
    ]
    kw = dict(overhead_us=overhead_us, graphs=opts.graphs)
    return dict(
        ms=placement.step_ms(ps, **kw),
        kernels=len(ps),
        flops=sum(p.flops for p in ps),
        bytes=sum(p.bytes for p in ps),
        groups=placement.by_group(ps, **kw),
        kinds=placement.kind_split(ps, **kw),
        placements=ps,
    )


def predict_ladder(spec: hardware.GPUSpec, cfg: GPTConfig = GPT2_SMALL, **kw) -> list[dict]:
    """One row per rung of ``RUNGS``: name, habit, lesson, predicted ms, kernels, FLOPs, bytes, and the
    speed-up over the rung before (``predict_split``: from one- and two-layer recordings)."""
    rows, prev = [], None
    for r in RUNGS:
        p = predict_split(cfg, r.options, spec, **kw)
        rows.append(
            dict(
                rung=r.name,
                habit=r.habit,
                lesson=r.lesson,
                predicted_ms=p["ms"],
                kernels=p["kernels"],
                flops=p["flops"],
                bytes=p["bytes"],
                speedup=prev / p["ms"] if prev else 1.0,
            )
        )
        prev = p["ms"]
    return rows


def measure(cfg: GPTConfig, opts: Options, *, rep_ms: float = 300, probe=None) -> dict:
    """Measured step of ``GPT(cfg, opts)`` on this GPU: median ``ms`` (``gpulab.core.timing.time_ms``; with
    ``opts.graphs`` the replay of one step captured by ``timing.capture_graph``), ``p20_ms``, ``p80_ms``,
    ``peak_mem_gib`` (``timing.max_memory_allocated`` over the timed steps) and the final loss; with ``probe``
    (a function of the timed step function, e.g. ``gpulab.bench.lesson09.profile_step``) its result as
    ``probe``. Raises ``gpulab.core.timing.NoGPUTimingError`` without a GPU."""
    from ..core import timing
    from ..core.timing import require_gpu, time_ms

    require_gpu("the ladder's step time")
    trainer = Trainer(cfg, opts, device=timing.device())
    trainer.step()  # compiles, autotunes, creates AdamW's state outside the timing
    timing.synchronize()
    fn = timing.capture_graph(trainer.step).replay if opts.graphs else trainer.step
    timing.reset_peak_memory()
    t = time_ms(fn, warmup_ms=25, rep_ms=rep_ms)
    peak = timing.max_memory_allocated()
    out = dict(ms=t.median_ms, p20_ms=t.p20_ms, p80_ms=t.p80_ms, peak_mem_gib=peak / 2**30)
    if probe is not None:
        out["probe"] = probe(fn)
    out["loss"] = float(trainer.step())
    del trainer, fn
    timing.empty_cache()
    return out


def predict_split(cfg: GPTConfig, opts: Options, spec: hardware.GPUSpec, **kw) -> dict:
    """Predicted ``ms``, ``kernels``, ``flops``, ``bytes``, ms per class (``kinds``) and per group (``group_ms``)
    of ``GPT(cfg, opts)``, from
    recordings of one and two layers: every block repeats the same operations, so each total is
    T(n) = T(1) + (n - 1) (T(2) - T(1)). Fast for any depth (the explorer's slider)."""
    import dataclasses

    def split(n):
        p = predict(dataclasses.replace(cfg, n_layer=n), opts, spec, **kw)
        return dict(
            ms=p["ms"],
            kernels=p["kernels"],
            flops=p["flops"],
            bytes=p["bytes"],
            **{f"kind:{k}": v for k, v in p["kinds"].items()},
            **{f"group:{g}": v["ms"] for g, v in p["groups"].items()},
        )

    if cfg.n_layer <= 2:
        s = split(cfg.n_layer)
    else:
        one, two = split(1), split(2)
        s = {k: one.get(k, 0.0) + (cfg.n_layer - 1) * (two.get(k, 0.0) - one.get(k, 0.0)) for k in one | two}
    return dict(
        ms=s["ms"],
        kernels=round(s["kernels"]),
        flops=s["flops"],
        bytes=s["bytes"],
        kinds={k: s.get(f"kind:{k}", 0.0) for k in placement.KINDS},
        group_ms={g: s[f"group:{g}"] for g in recorder.GROUPS if f"group:{g}" in s},
    )


def measured_ops(data: dict | None) -> dict:
    """The per-group GPU ms of each profiled rung of a lesson09 record (``gpulab.bench.lesson09.run``: its
    ``ops``, {rung: {group: ms}}, as ``group_times`` summed them); ``{}`` for None or a record without."""
    return (data or {}).get("ops") or {}
