"""Communication models (pure): the α-β cost of a message, the bytes each rank of a ring collective sends, bus
bandwidth as nccl-tests define it, the links between memories with their ridge points, data-parallel gradient
traffic, ZeRO/FSDP memory per GPU and a tensor-parallel MLP's FLOPs per communicated byte.

Units: bytes, seconds, bytes per second (``beta_Bps``: the link's bandwidth, one direction), FLOP/s. Every
collective here is the ring algorithm over ``p`` ranks; ``n_bytes`` is the size of the whole array a rank
holds (all-reduce, broadcast), of the whole output (all-gather) or of the whole input (reduce-scatter), as
nccl-tests count ``S``.

Sources (the short keys in ``LINK_SOURCES`` and the docstrings point here):

- α-β model: Hockney, "The communication challenge for MPP: Intel Paragon and Meiko CS-2", Parallel Computing
  20(3), 1994: t = α + n/β for one message of n bytes. Ring collectives: Patarasuk and Yuan, "Bandwidth optimal
  all-reduce algorithms for clusters of workstations", JPDC 69(2), 2009; Thakur, Rabenseifner and Gropp,
  "Optimization of collective communication operations in MPICH", IJHPCA 19(1), 2005.
- Bus bandwidth: nccl-tests, doc/PERFORMANCE.md
  (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md): busbw = algbw x 2(n-1)/n for
  all-reduce, x (n-1)/n for reduce-scatter and all-gather, x 1 for broadcast, with algbw = S/t.
- ZeRO: Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", SC 2020,
  sec. 5 and Figure 1 (mixed-precision Adam: 2Ψ + 2Ψ + KΨ bytes, K = 12; stage 3 moves 1.5x the data of
  data parallelism). FSDP's FULL_SHARD is stage 3 (Zhao et al., "PyTorch FSDP", VLDB 2023).
- DDP buckets: PyTorch DistributedDataParallel documentation, ``bucket_cap_mb`` (default 25 MiB); Li et al.,
  "PyTorch Distributed: Experiences on Accelerating Data Parallel Training", VLDB 2020 (gradient buckets
  all-reduced while the backward still runs).
- Tensor parallelism: Shoeybi et al., "Megatron-LM", 2019, sec. 3: the MLP's first weight split by columns,
  the second by rows, one all-reduce forward and one backward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core import hardware
from ..core import validate as V

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast")

#: nccl-tests' correction factor from algorithm to bus bandwidth (doc/PERFORMANCE.md, "Summary").
_BUS_FACTOR = {
    "all_reduce": lambda p: 2 * (p - 1) / p,
    "reduce_scatter": lambda p: (p - 1) / p,
    "all_gather": lambda p: (p - 1) / p,
    "broadcast": lambda p: 1.0,
}


def _check(collective: str, p) -> int:
    V.one_of("collective", collective, COLLECTIVES)
    return V.positive_int("p", p)


def alpha_beta_s(n_bytes, alpha_s, beta_Bps) -> float:
    """Time of one message of ``n_bytes`` (s): α + n/β (Hockney 1994). ``alpha_s``: the latency of a message
    (s, >= 0); ``beta_Bps``: the bandwidth (bytes/s, > 0). Raises TypeError/ValueError naming the argument."""
    n = V.nonnegative("n_bytes", n_bytes)
    return V.nonnegative("alpha_s", alpha_s) + n / V.positive("beta_Bps", beta_Bps)


def ring_steps(collective: str, p) -> int:
    """Messages each rank sends one after another in the ring algorithm: 2(p-1) for all-reduce (reduce-scatter,
    then all-gather), p-1 for reduce-scatter, all-gather and a pipelined broadcast's chunks (Patarasuk and Yuan
    2009). 0 for p = 1."""
    p = _check(collective, p)
    return 2 * (p - 1) if collective == "all_reduce" else p - 1


def bytes_per_rank(collective: str, p, n_bytes) -> float:
    """Bytes each rank sends in the ring algorithm, with ``n_bytes`` the size nccl-tests call S (module
    docstring): all-reduce 2(p-1)/p · S, reduce-scatter and all-gather (p-1)/p · S, broadcast S (the root's
    share, the bottleneck). With S not divisible by p the chunks differ by one element and a rank sends within
    one chunk of this; summed over ranks it is exact (``total_bytes``)."""
    p = _check(collective, p)
    n = V.nonnegative("n_bytes", n_bytes)
    if p == 1:
        return 0.0
    return n * _BUS_FACTOR[collective](p)


def total_bytes(collective: str, p, n_bytes) -> float:
    """Bytes all ranks send together in the ring: every chunk travels p-1 hops in each phase, so all-reduce
    sends 2(p-1) · S, reduce-scatter and all-gather (p-1) · S, broadcast (p-1) · S. Exact for any S."""
    p = _check(collective, p)
    n = V.nonnegative("n_bytes", n_bytes)
    return (2 if collective == "all_reduce" else 1) * (p - 1) * n


def ring_time_s(collective: str, p, n_bytes, alpha_s, beta_Bps) -> float:
    """α-β time of a ring collective (s): ``ring_steps`` messages of S/p bytes each, t = steps · α +
    ``bytes_per_rank``/β (Thakur et al. 2005, the ring's cost). Broadcast is taken as the pipelined ring: p-1
    latencies and S/β."""
    steps = ring_steps(collective, p)
    return steps * V.nonnegative("alpha_s", alpha_s) + bytes_per_rank(collective, p, n_bytes) / V.positive(
        "beta_Bps", beta_Bps
    )


def algbw(n_bytes, t_s) -> float:
    """Algorithm bandwidth S/t in bytes/s (nccl-tests doc/PERFORMANCE.md)."""
    return V.nonnegative("n_bytes", n_bytes) / V.positive("t_s", t_s)


def busbw(collective: str, p, n_bytes, t_s) -> float:
    """Bus bandwidth in bytes/s as nccl-tests define it: algbw x 2(p-1)/p (all-reduce), x (p-1)/p
    (reduce-scatter, all-gather), x 1 (broadcast). Comparable with a link's peak whatever p is."""
    p = _check(collective, p)
    return algbw(n_bytes, t_s) * _BUS_FACTOR[collective](p)


def fit_alpha_beta(n_bytes, t_s, collective: str = "all_reduce", p: int = 2) -> tuple[float, float]:
    """(α in s, β in bytes/s) of the least-squares line t = steps · α + bytes_per_rank / β through measured
    points (sequences of equal length >= 2, sizes not all equal). α is clipped at 0 (a fit through noise
    can cross below it). Raises ValueError on too few points, one size, or times that do not grow with the size
    (a slope of 0 or below: no finite bandwidth explains them)."""
    if len(n_bytes) != len(t_s) or len(n_bytes) < 2:
        raise ValueError(f"n_bytes and t_s must be sequences of one length >= 2, got {len(n_bytes)} and {len(t_s)}")
    steps = max(ring_steps(collective, p), 1)
    xs = [bytes_per_rank(collective, p, n) if p > 1 else float(n) for n in n_bytes]
    ys = [V.positive("t_s", t) for t in t_s]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError("n_bytes must hold at least two different sizes")
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    if not slope > 0:
        raise ValueError(
            f"t_s does not grow with n_bytes (the least-squares slope is {slope:.3g} s per byte): no bandwidth "
            "explains such times; measure sizes far enough apart that the larger take longer (the byte term "
            "above the noise of the per-message cost α)"
        )
    intercept = my - slope * mx
    return max(intercept, 0.0) / steps, 1.0 / slope


# ---- links between memories ------------------------------------------------------------------------------

LINK_SOURCES = {
    "pcie-spec": "PCI-SIG, PCI Express Base Specification 3.0 (2010), 4.0 (2017), 5.0 (2019): 8, 16, 32 GT/s per "
    "lane with 128b/130b encoding, so a x16 link carries 15.75, 31.5, 63 GB/s each way",
    "v100-datasheet-io": "NVIDIA V100 Tensor Core GPU datasheet (2020), 'Interconnect Bandwidth': NVLink 300 GB/s, "
    "PCIe 32 GB/s (both directions together; NVLink 2, six links of 25 GB/s each way)",
    "a100-datasheet-io": "NVIDIA A100 Tensor Core GPU datasheet (2021), 'Interconnect': NVLink 600 GB/s, PCIe Gen4 "
    "64 GB/s (both directions together; NVLink 3, twelve links)",
    "h100-datasheet-io": "NVIDIA H100 / H200 Tensor Core GPU datasheets (2023, 2024), 'Interconnect': NVLink "
    "900 GB/s, PCIe Gen5 128 GB/s (both directions together; NVLink 4, eighteen links)",
    "b200-datasheet-io": "NVIDIA HGX B200 datasheet (2025): fifth-generation NVLink 1.8 TB/s per GPU (both "
    "directions together; eighteen links of 50 GB/s each way)",
}


@dataclass(frozen=True)
class Link:
    """A link between memories: ``gbps_each_way`` (GB/s, 1e9 bytes/s, one direction: what a one-way copy or a
    ring step can use), the GPU it came with (a ``gpulab.core.hardware`` name, for the HBM and peak beside it), the
    year, and its sources (keys of ``LINK_SOURCES``)."""

    name: str
    gbps_each_way: float
    gpu: str
    year: int
    sources: tuple


LINKS = (
    Link("PCIe 3.0 x16", 15.75, "V100 SXM2", 2010, ("pcie-spec", "v100-datasheet-io")),
    Link("PCIe 4.0 x16", 31.5, "A100 80GB SXM", 2017, ("pcie-spec", "a100-datasheet-io")),
    Link("PCIe 5.0 x16", 63.0, "H200", 2019, ("pcie-spec", "h100-datasheet-io")),
    Link("NVLink 2 (V100)", 150.0, "V100 SXM2", 2017, ("v100-datasheet-io",)),
    Link("NVLink 3 (A100)", 300.0, "A100 80GB SXM", 2020, ("a100-datasheet-io",)),
    Link("NVLink 4 (H100, H200)", 450.0, "H200", 2022, ("h100-datasheet-io",)),
    Link("NVLink 5 (B200)", 900.0, "B200", 2024, ("b200-datasheet-io",)),
)


def get_link(name: str) -> Link:
    """The link of ``LINKS`` whose name starts with ``name`` (case-insensitive: "PCIe 5", "NVLink 4"); KeyError
    naming the known links otherwise."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a link name string, got {type(name).__name__}")
    for link in LINKS:
        if link.name.lower().startswith(name.strip().lower()):
            return link
    raise KeyError(f"unknown link {name!r}; known: {', '.join(k.name for k in LINKS)}")


def _peak_tflops(spec) -> float:
    """The GPU's densest tensor-core rate of bf16 or fp16 (fp16 on Volta, which has no bf16), TFLOP/s."""
    return spec.peak_tflops.get("bf16") or spec.peak_tflops["fp16"]


def ridge(flops_per_s, bytes_per_s) -> float:
    """FLOPs a kernel must do per byte that crosses a link of ``bytes_per_s`` to keep a ``flops_per_s`` peak
    busy: C / B (the roofline's ridge, lesson 01, with the link in place of HBM)."""
    return V.positive("flops_per_s", flops_per_s) / V.positive("bytes_per_s", bytes_per_s)


def link_rows() -> list[dict]:
    """One dict per link: its bandwidth each way (GB/s), its GPU's HBM (GB/s) and bf16 (fp16 on V100) dense
    tensor peak (TFLOP/s) from ``gpulab.core.hardware``, HBM / link, and the link's ridge (FLOP per byte crossing
    it) beside HBM's."""
    rows = []
    for link in LINKS:
        spec = hardware.get(link.gpu)
        peak = _peak_tflops(spec) * 1e12
        rows.append(
            dict(
                link=link.name,
                year=link.year,
                gbps=link.gbps_each_way,
                gpu=spec.name,
                hbm_gbps=spec.hbm_gbps,
                peak_tflops=peak / 1e12,
                hbm_over_link=spec.hbm_gbps / link.gbps_each_way,
                link_ridge=ridge(peak, link.gbps_each_way * 1e9),
                hbm_ridge=ridge(peak, spec.hbm_gbps * 1e9),
                sources=", ".join(link.sources),
            )
        )
    return rows


# ---- data parallel ---------------------------------------------------------------------------------------

DDP_BUCKET_BYTES = 25 * 2**20  # DistributedDataParallel's bucket_cap_mb default (module docstring)


def dp_gradient_bytes(n_params, p, grad_bytes: int = 4) -> float:
    """Bytes each of ``p`` data-parallel ranks sends per step to all-reduce ``n_params`` gradients of
    ``grad_bytes`` bytes each (4: fp32, as DDP reduces the gradients of fp32 parameters): 2(p-1)/p · n · e."""
    n = V.positive_int("n_params", n_params)
    return bytes_per_rank("all_reduce", p, n * V.positive_int("grad_bytes", grad_bytes))


def dp_exposed_s(t_backward_s, t_comm_s, bucket_fraction) -> float:
    """Communication time left after overlap with the backward (s), as DDP overlaps it (Li et al. 2020):
    buckets are all-reduced while the backward still runs, but the last bucket only after it ends, so
    exposed = max(t_comm - t_backward, t_comm · bucket_fraction). ``bucket_fraction``: one bucket's share of
    the gradient bytes, in (0, 1]; 1 is no bucketing (the whole all-reduce after the backward)."""
    tb = V.nonnegative("t_backward_s", t_backward_s)
    tc = V.nonnegative("t_comm_s", t_comm_s)
    f = V.positive("bucket_fraction", bucket_fraction)
    if f > 1:
        raise ValueError(f"bucket_fraction must be in (0, 1], got {f}")
    return max(tc - tb, tc * f)


#: ZeRO's stages: which of (parameters, gradients, optimizer states) each shards over the ranks.
ZERO_STAGES = {
    "DDP (no sharding)": (False, False, False),
    "ZeRO-1 (optimizer states)": (False, False, True),
    "ZeRO-2 (+ gradients)": (False, True, True),
    "ZeRO-3 / FSDP (+ parameters)": (True, True, True),
}


def zero_memory_bytes(n_params, p, *, param_bytes: int = 2, grad_bytes: int = 2, optim_bytes: int = 12,
                      activation_bytes: float = 0.0) -> list[dict]:  # fmt: skip
    """Per-GPU memory of each stage of ``ZERO_STAGES`` (Rajbhandari et al. 2020, sec. 5, Figure 1): parameters
    2Ψ, gradients 2Ψ and Adam's states KΨ (K = 12: fp32 master weights, momentum, variance) in mixed precision,
    each divided by ``p`` where the stage shards it. ``activation_bytes`` (per GPU) is added unsharded:
    ZeRO and FSDP shard the model state, not the activations. Each dict: stage, params, grads, optim,
    activations, total (bytes), comm_factor (bytes moved per step over those of DDP's all-reduce: 1, 1, 1, 1.5)."""
    n = V.positive_int("n_params", n_params)
    p = V.positive_int("p", p)
    act = V.nonnegative("activation_bytes", activation_bytes)
    sizes = [n * V.positive_int(k, v) for k, v in (("param_bytes", param_bytes), ("grad_bytes", grad_bytes))]
    sizes.append(n * V.positive_int("optim_bytes", optim_bytes))
    rows = []
    for stage, sharded in ZERO_STAGES.items():
        params, grads, optim = (s / p if sh else float(s) for s, sh in zip(sizes, sharded))
        rows.append(
            dict(
                stage=stage,
                params=params,
                grads=grads,
                optim=optim,
                activations=act,
                total=params + grads + optim + act,
                comm_factor=1.5 if sharded[0] else 1.0,
            )
        )
    return rows


# ---- tensor parallel -------------------------------------------------------------------------------------


def tp_mlp_counts(tokens, d_model, t, elem_bytes: int = 2, hidden_mult: int = 4) -> dict:
    """One tensor-parallel MLP forward (Megatron-LM sec. 3): X (tokens, d) @ A (d, 4d) split by columns over
    ``t`` GPUs, GELU, then @ B (4d, d) split by rows, one all-reduce of the (tokens, d) output. Per GPU:
    ``flops`` = 2 · 2 · tokens · d · 4d / t; ``bytes`` sent = 2(t-1)/t · tokens · d · e (the ring all-reduce);
    ``intensity`` = flops / bytes = 8d / ((t-1) e) for hidden_mult 4 (infinite for t = 1): independent of the
    batch. ``steps``: the all-reduce's 2(t-1) latencies."""
    T = V.positive_int("tokens", tokens)
    d = V.positive_int("d_model", d_model)
    t = V.positive_int("t", t)
    e = V.positive_int("elem_bytes", elem_bytes)
    flops = 2 * 2 * T * d * V.positive_int("hidden_mult", hidden_mult) * d / t
    nbytes = bytes_per_rank("all_reduce", t, T * d * e)
    return dict(
        flops=flops, bytes=nbytes, intensity=flops / nbytes if nbytes else math.inf, steps=ring_steps("all_reduce", t)
    )


def tp_min_tokens(d_model, t, flops_per_s, beta_Bps, alpha_s, elem_bytes: int = 2) -> float | None:
    """The fewest tokens (batch x sequence) for which a tensor-parallel MLP forward's compute time reaches its
    all-reduce time, t_compute = F/C >= 2(t-1) α + bytes/β (both grow with the tokens, α does not); None when
    the MLP's intensity ``tp_mlp_counts`` is at or below the link's ridge C/β: then no batch makes it
    compute-bound. 0 for t = 1."""
    c = tp_mlp_counts(1, d_model, t, elem_bytes)
    if c["steps"] == 0:
        return 0.0
    C, B, a = (
        V.positive("flops_per_s", flops_per_s),
        V.positive("beta_Bps", beta_Bps),
        V.nonnegative("alpha_s", alpha_s),
    )
    per_token = c["flops"] / C - c["bytes"] / B  # compute minus transfer time per token
    if per_token <= 0:
        return None
    return c["steps"] * a / per_token
