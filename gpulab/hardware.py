"""Datasheet numbers for the GPUs learners meet, each with its source.

Every rate is a *dense* peak (no 2:4 structured sparsity) in TFLOP/s (1e12 FLOP/s, decimal); bandwidth is
HBM/GDDR bandwidth in GB/s (1e9 byte/s); shared memory is the most a single SM can hold, in KiB. These
are ceilings printed by the vendor, not measurements: ``gpulab.device`` measures the GPU you are on, and
the lessons draw both.

Units and kinds of peak (the seed lecture's warning: there is no single peak for every operation):

- ``fp32``: FP32 FMA on the CUDA cores (the rate for elementwise code, reductions and non-tensor-core
  matmul). An FMA counts as 2 FLOPs.
- ``tf32``, ``bf16``, ``fp16``, ``fp8``: tensor-core matrix multiply-accumulate with FP32 accumulation,
  dense. ``None`` where the GPU has no such tensor-core path.

Sources (vendor documents; the short keys in each entry's ``sources`` point here):
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

SOURCES = {
    "t4-datasheet": "NVIDIA T4 Tensor Core GPU datasheet (2019): 8.1 TFLOPS single precision, 65 TFLOPS "
                    "mixed precision (FP16/FP32), 320+ GB/s GDDR6; 2,560 CUDA cores and 320 Turing Tensor "
                    "Cores, i.e. 40 SMs of 64 cores / 8 Tensor Cores each (TU104 as configured for T4)",
    "turing-tuning": "NVIDIA Turing Tuning Guide, sec. 1.4.3.1 (Unified Shared Memory/L1/Texture Cache) and "
                     "Turing architecture whitepaper: the 96 KB L1/shared array can give 64 KB to shared "
                     "memory, the most per SM on compute capability 7.5",
    "l4-datasheet": "NVIDIA L4 Tensor Core GPU datasheet (2023): FP32 30.3 TFLOPS; TF32 120, FP16/BF16 242, "
                    "FP8 485 TFLOPS *with sparsity* (dense = half: 60, 121, 242.5); 300 GB/s",
    "ada-whitepaper": "NVIDIA Ada GPU Architecture whitepaper v2.1, Appendix A (RTX 4090: 128 SMs, 82.6 "
                      "TFLOPS FP32, 1008 GB/s; dense/sparse tensor TF32 82.6/165.2, FP16 and BF16 with "
                      "FP32 accumulate 165.2/330.4 (FP16 with FP16 accumulate 330.3/660.6), FP8 with FP32 "
                      "accumulate 330.3/660.6 (footnote 4: 'changed to proper number in v.2.02', so cite "
                      "v2.02 or later)) and Appendix D (L4: 58 SMs)",
    "a10-datasheet": "NVIDIA A10 Tensor Core GPU datasheet (2021): FP32 31.2, TF32 62.5 | 125*, BF16/FP16 "
                     "125 | 250* TFLOPS (* = with sparsity); 600 GB/s GDDR6; 72 RT Cores, one per GA10x "
                     "SM, so 72 SMs (GA102 as configured for A10)",
    "ampere-tuning": "NVIDIA Ampere Tuning Guide sec. 1.4.2.3 ('The NVIDIA A100 GPU supports shared memory "
                     "capacity of 0, 8, 16, 32, 64, 100, 132 or 164 KB per SM. GPUs with compute "
                     "capability 8.6 support ... 0, 8, 16, 32, 64 or 100 KB per SM'); Ada Tuning Guide "
                     "sec. 1.4.1.1 and CUDA C++ Programming Guide, Technical Specifications per Compute "
                     "Capability: 100 KB per SM on 8.9. So 164 KB on 8.0, 100 KB on 8.6 and 8.9",
    "a100-datasheet": "NVIDIA A100 Tensor Core GPU datasheet (2021): FP32 19.5, TF32 156, BF16/FP16 312 "
                      "TFLOPS dense; 1,555 GB/s (40 GB SXM) and 2,039 GB/s (80 GB SXM)",
    "a100-whitepaper": "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): 108 SMs",
    "h100-datasheet": "NVIDIA H100 Tensor Core GPU datasheet (2023): SXM FP32 67, TF32 989, BF16/FP16 "
                      "1,979, FP8 3,958 TFLOPS *with sparsity* (dense = half), 80 GB HBM3 at 3.35 TB/s; "
                      "PCIe FP32 51, TF32 756, BF16/FP16 1,513, FP8 3,026 with sparsity, 80 GB HBM2e at "
                      "2.0 TB/s (not the H100 NVL, a different board)",
    "hopper-whitepaper": "NVIDIA H100 Tensor Core GPU Architecture whitepaper v1.04, Table 3: 132 SMs "
                         "(SXM5), 114 SMs (PCIe), shared memory per SM 'configurable up to 228 KB'",
    "h200-datasheet": "NVIDIA H200 Tensor Core GPU datasheet (2024): SXM 4.8 TB/s HBM3e, 141 GB; compute "
                      "rates as H100 SXM (FP32 67, TF32 989, BF16/FP16 1,979, FP8 3,958 with sparsity)",
    "seed-lecture": "Stanford CS336 Spring 2026, Lecture 5 notes (shared/seeds): an imaginary "
                    "accelerator with C = 100 TFLOP/s and B = 1 TB/s, decimal units",
}

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")


@dataclass(frozen=True)
class GPUSpec:
    """One GPU's datasheet ceilings. Rates in TFLOP/s (dense), bandwidth in GB/s, shared memory in KiB."""

    name: str
    sms: int | None
    smem_per_sm_kib: int | None
    hbm_gbps: float
    peak_tflops: dict  # dtype -> TFLOP/s or None (see module docstring for which unit each means)
    compute_capability: tuple | None
    sources: tuple = field(default_factory=tuple)
    note: str = ""
    memory_gb: float | None = None  # HBM/GDDR capacity in GB (1e9 bytes), from ``MEMORY_GB``

    @property
    def hbm_tbps(self) -> float:
        return self.hbm_gbps / 1000.0

    def peak(self, dtype: str) -> float:
        """Peak rate in TFLOP/s for ``dtype`` (one of ``DTYPES``).

        Raises ``ValueError`` for an unknown dtype and ``LookupError`` where this GPU has no such path
        (for example bf16 on a T4, fp8 before compute capability 8.9).
        """
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
        rate = self.peak_tflops.get(dtype)
        if rate is None:
            raise LookupError(f"{self.name} has no {dtype} tensor-core path (datasheet)")
        return rate


# Memory capacity in GB, from the same datasheets as each entry's rates (T4 16 GB GDDR6, L4 24 GB GDDR6, A10
# 24 GB GDDR6, A100 40/80 GB HBM2/HBM2e, H100 80 GB, H200 141 GB HBM3e, RTX 4090 24 GB GDDR6X in the Ada
# whitepaper's Appendix A). Problem sizes scale to it (``gpulab.plan``).
MEMORY_GB = {"T4": 16, "L4": 24, "A10": 24, "A100 40GB SXM": 40, "A100 80GB SXM": 80, "H100 SXM": 80,
             "H100 PCIe": 80, "H200": 141, "RTX 4090": 24}


def _spec(name, sms, smem, gbps, fp32, tf32, bf16, fp16, fp8, cc, sources, note=""):
    peaks = dict(fp32=fp32, tf32=tf32, bf16=bf16, fp16=fp16, fp8=fp8)
    return GPUSpec(name, sms, smem, gbps, peaks, cc, tuple(sources), note, memory_gb=MEMORY_GB.get(name))


GPUS: dict[str, GPUSpec] = {s.name: s for s in [
    _spec("T4", 40, 64, 320, 8.1, None, None, 65.0, None, (7, 5), ["t4-datasheet", "turing-tuning"],
          "no TF32/BF16/FP8 tensor cores (Turing)"),
    _spec("L4", 58, 100, 300, 30.3, 60.0, 121.0, 121.0, 242.5, (8, 9),
          ["l4-datasheet", "ada-whitepaper", "ampere-tuning"]),
    _spec("A10", 72, 100, 600, 31.2, 62.5, 125.0, 125.0, None, (8, 6), ["a10-datasheet", "ampere-tuning"]),
    _spec("A100 40GB SXM", 108, 164, 1555, 19.5, 156.0, 312.0, 312.0, None, (8, 0),
          ["a100-datasheet", "a100-whitepaper", "ampere-tuning"]),
    _spec("A100 80GB SXM", 108, 164, 2039, 19.5, 156.0, 312.0, 312.0, None, (8, 0),
          ["a100-datasheet", "a100-whitepaper", "ampere-tuning"]),
    _spec("H100 SXM", 132, 228, 3350, 67.0, 494.5, 989.5, 989.5, 1979.0, (9, 0),
          ["h100-datasheet", "hopper-whitepaper"]),
    _spec("H100 PCIe", 114, 228, 2000, 51.0, 378.0, 756.5, 756.5, 1513.0, (9, 0),
          ["h100-datasheet", "hopper-whitepaper"]),
    _spec("H200", 132, 228, 4800, 67.0, 494.5, 989.5, 989.5, 1979.0, (9, 0),
          ["h200-datasheet", "h100-datasheet", "hopper-whitepaper"]),
    _spec("RTX 4090", 128, 100, 1008, 82.6, 82.6, 165.2, 165.2, 330.3, (8, 9),
          ["ada-whitepaper", "ampere-tuning"],
          "GeForce: FP16/BF16/FP8 tensor rates with FP32 accumulation are half those with FP16 accumulation"),
    _spec("Seed accelerator", None, None, 1000, 100.0, 100.0, 100.0, 100.0, 100.0, None, ["seed-lecture"],
          "imaginary: one compute peak C = 100 TFLOP/s for every operation, B = 1 TB/s"),
]}

# Names torch.cuda.get_device_name() reports, mapped to table entries (first substring match wins).
_ALIASES = [
    ("H200", "H200"), ("H100 PCIe", "H100 PCIe"), ("H100", "H100 SXM"),
    ("A100-SXM4-80GB", "A100 80GB SXM"), ("A100 80GB", "A100 80GB SXM"), ("A100", "A100 40GB SXM"),
    ("RTX 4090", "RTX 4090"), ("L4", "L4"), ("A10", "A10"), ("T4", "T4"),
]


# Variants that share a base name with a table entry but not its numbers: refuse rather than guess.
_OTHER_VARIANTS = ("NVL", "Laptop", "MIG", "Max-Q", "Mobile")


def get(name: str) -> GPUSpec:
    """Look up a GPU by table name (``"H200"``, any case) or by the name torch reports (``"NVIDIA H200"``).

    Raises ``TypeError`` if ``name`` is not a string and ``KeyError`` naming the known GPUs when nothing
    matches, including variants with other numbers (NVL, laptop, MIG slices, A100 PCIe).
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a GPU name string, got {type(name).__name__}")
    for key in GPUS:
        if key.lower() == name.strip().lower():
            return GPUS[key]
    variant = any(re.search(rf"\b{v}\b", name, flags=re.IGNORECASE) for v in _OTHER_VARIANTS) or \
        (re.search(r"A100", name) and re.search(r"PCIe", name, flags=re.IGNORECASE))
    if not variant:
        for needle, key in _ALIASES:
            if re.search(rf"(^|[\s-]){re.escape(needle)}($|[\s-])", name, flags=re.IGNORECASE):
                return GPUS[key]
    raise KeyError(f"unknown GPU {name!r}; known: {', '.join(GPUS)}")


def find(name: str) -> GPUSpec | None:
    """Like ``get``, but ``None`` for a GPU the table does not know (lessons then skip the datasheet)."""
    try:
        return get(name)
    except KeyError:
        return None


def table_rows() -> list[dict]:
    """The table as a list of plain dicts (for display in a notebook)."""
    rows = []
    for s in GPUS.values():
        row = {"GPU": s.name, "SMs": s.sms, "smem/SM (KiB)": s.smem_per_sm_kib, "HBM (GB/s)": s.hbm_gbps}
        row.update({f"{d} (TFLOP/s)": s.peak_tflops[d] for d in DTYPES})
        row["sources"] = ", ".join(s.sources)
        rows.append(row)
    return rows
