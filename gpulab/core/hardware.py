"""Datasheet numbers for the GPUs learners meet, each with its source.

Every rate is a *dense* peak (no 2:4 structured sparsity) in TFLOP/s (1e12 FLOP/s, decimal); bandwidth is
HBM/GDDR bandwidth in GB/s (1e9 byte/s); shared memory is the most a single SM can hold, in KiB. These
are ceilings printed by the vendor, not measurements: ``gpulab.measure.device`` measures the GPU you are on, and
the lessons draw both.

Units and kinds of peak (the seed lecture's warning: there is no single peak for every operation):

- ``fp32``: FP32 FMA on the CUDA cores (the rate for elementwise code, reductions and non-tensor-core
  matmul). An FMA counts as 2 FLOPs.
- ``tf32``, ``bf16``, ``fp16``, ``fp8``: tensor-core matrix multiply-accumulate with FP32 accumulation,
  dense. ``None`` where the GPU has no such tensor-core path.

Kinds of device memory (``GPUSpec.memory_kind``, as each GPU's datasheet or whitepaper names it, the sources
below): **GDDR** (GDDR6, GDDR6X), graphics DRAM in separate packages on the board around the GPU, each on a
narrow (32-bit) bus at a high rate per pin; **HBM** (HBM2, HBM2e, HBM3, HBM3e), stacks of DRAM dies on the GPU's own
package, each stack on a 1024-bit bus at a lower rate per pin (JEDEC JESD235, JESD238). The field's name
``hbm_gbps`` holds the device memory's bandwidth whichever kind it is.

Sources (vendor documents; the short keys in each entry's ``sources`` point here):
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import dtypes

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
    "TFLOPS dense; 40 GB HBM2 at 1,555 GB/s (40 GB SXM) and 80 GB HBM2e at 2,039 GB/s (80 GB SXM)",
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
    "v100-datasheet": "NVIDIA V100 Tensor Core GPU datasheet (2020): V100 SXM2 FP32 15.7, Tensor Performance "
    "(FP16 with FP32 accumulate) 125 TFLOPS; 32/16 GB HBM2 at 900 GB/s",
    "volta-whitepaper": "NVIDIA Tesla V100 GPU Architecture whitepaper (2017), Table 1: 80 SMs, register file "
    "256 KB per SM, shared memory configurable up to 96 KB of a 128 KB combined L1/shared "
    "array per SM, L2 6144 KB",
    "b200-datasheet": "NVIDIA GB200 NVL72 datasheet (2025), HGX B200 column, per GPU: FP32 75 TFLOPS; TF32 2.2, "
    "FP16/BF16 4.5, FP8 9 PFLOPS *with sparsity* (dense = half: 1,100, 2,250, 4,500); 180 GB "
    "HBM3E at 7.7 TB/s",
    "b200-chipsandcheese": "Chips and Cheese, 'Nvidia's B200: Keeping the CUDA Juggernaut Rolling' (2025), "
    "measured on the device: 2 dies x 74 enabled SMs = 148 SMs; 256 KB L1/shared per SM "
    "as on H100; 126 MB L2 split across the two dies",
    "cuda-guide-cc": "CUDA C++ Programming Guide, Technical Specifications per Compute Capability: 64K 32-bit "
    "registers per SM on every compute capability from 5.0 to 12.x; shared memory per SM up "
    "to 228 KB on 9.0 and 10.0",
    "turing-whitepaper": "NVIDIA Turing GPU Architecture whitepaper (2018): each SM has a 256 KB register file "
    "and 96 KB of L1/shared memory; TU104 has 4096 KB of L2; T4 datasheet: 16 GB GDDR6",
    "ampere-whitepaper": "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020), Table 3: register file "
    "256 KB per SM, 192 KB combined shared memory/L1 per SM, L2 40 MB (40960 KB); A100 "
    "datasheet: 40 GB HBM2 or 80 GB HBM2e",
    "ga102-whitepaper": "NVIDIA Ampere GA102 GPU Architecture whitepaper (2021): 128 KB L1/shared per SM, "
    "256 KB register file per SM, 6144 KB L2; A10 datasheet: 24 GB GDDR6",
    "ada-memory": "NVIDIA Ada GPU Architecture whitepaper v2.1: 128 KB L1/shared per SM, 256 KB register "
    "file per SM; L2 72 MB on RTX 4090 (73728 KB, Appendix A) and 48 MB on L4 (AD104, Appendix "
    "D); 24 GB GDDR6X (RTX 4090), 24 GB GDDR6 (L4 datasheet)",
    "hopper-memory": "NVIDIA H100 Tensor Core GPU Architecture whitepaper v1.04, Table 3 and sec. 'H100 SM': "
    "register file 256 KB per SM, 256 KB combined L1/shared per SM, L2 50 MB (SXM5 and PCIe); "
    "80 GB (H100 datasheet) and 141 GB (H200 datasheet, same GH100 chip as H100 SXM)",
    "h200-l2": "The L2 size the CUDA driver reports for an H200 (cudaDevAttrL2CacheSize, which "
    "torch.cuda.get_device_properties shows as L2_cache_size): 62,914,560 bytes = 60 MiB, the whole "
    "of the GH100 die's L2 (Chips and Cheese, 'Nvidia's H100: Funny L2, and Tons of Bandwidth', 2023: "
    "the die has 60 MB, the H100 enables 50)",
    "tpu-v4-docs": "Google Cloud TPU documentation, 'TPU v4' (cloud.google.com/tpu/docs/v4): two TensorCores "
    "per chip, each with four MXUs, a vector unit and a scalar unit; 275 TFLOPS (bf16) per chip; "
    "HBM2 32 GiB at 1200 GBps",
    "tpu-v5e-docs": "Google Cloud TPU documentation, 'TPU v5e' (cloud.google.com/tpu/docs/v5e): one TensorCore "
    "per chip with four MXUs, a vector unit and a scalar unit; 197 TFLOPS (bf16); HBM2 16 GB at "
    "819 GBps",
    "tpu-v5p-docs": "Google Cloud TPU documentation, 'TPU v5p' (cloud.google.com/tpu/docs/v5p): two "
    "TensorCores per chip, each with four MXUs, a vector unit and a scalar unit; 459 TFLOPS "
    "(bf16); HBM2e 95 GB at 2765 GBps",
    "tpu-v6e-docs": "Google Cloud TPU documentation, 'TPU v6e' (cloud.google.com/tpu/docs/v6e): one TensorCore "
    "per chip with two 256x256 MXUs, a vector unit (VPU), two cross-lane units and a scalar "
    "unit; 918 TFLOPS (bf16); HBM 32 GB at 1638 GBps",
    "scaling-book-tpus": "Austin et al., 'How to Scale Your Model', part 'How to Think About TPUs' "
    "(jax-ml.github.io/scaling-book/tpus): the MXU is a 128x128 systolic array on the "
    "generations before v6e (one bf16[8,128] @ bf16[128,128] every 8 cycles); VMEM is an "
    "on-chip scratchpad in the TensorCore, 128 MiB on TPU v5e; data moves HBM -> VMEM -> MXU",
}

DTYPES = dtypes.MATMUL  # the dtypes a datasheet rates, in the table order of gpulab.core.dtypes


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
    # The memory hierarchy (None where the table has no source): 32-bit registers per SM, the combined
    # L1/shared-memory array per SM in KiB, L2 in KiB (vendors print KB and MB in powers of 2 for caches),
    # device memory in GB as the datasheet prints it, its kind ("GDDR6", "HBM3e": see the module docstring),
    # and the year the GPU was announced.
    regs_per_sm: int | None = None
    l1_smem_per_sm_kib: int | None = None
    l2_kib: int | None = None
    hbm_gb: float | None = None
    year: int | None = None
    memory_kind: str | None = None

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


def _spec(name, sms, smem, gbps, fp32, tf32, bf16, fp16, fp8, cc, sources, note=""):
    peaks = dict(fp32=fp32, tf32=tf32, bf16=bf16, fp16=fp16, fp8=fp8)
    return GPUSpec(name, sms, smem, gbps, peaks, cc, tuple(sources), note)


# One row per GPU: name, SMs, shared KiB per SM, GB/s, fp32, tf32, bf16, fp16, fp8 TFLOP/s, compute
# capability, sources, note (see ``_spec``); kept one row a line for reading, so the formatter leaves it be.
# fmt: off
GPUS: dict[str, GPUSpec] = {
    s.name: s
    for s in [
        _spec("T4", 40, 64, 320, 8.1, None, None, 65.0, None, (7, 5), ["t4-datasheet", "turing-tuning"], "no TF32/BF16/FP8 tensor cores (Turing)"),
        _spec("L4", 58, 100, 300, 30.3, 60.0, 121.0, 121.0, 242.5, (8, 9), ["l4-datasheet", "ada-whitepaper", "ampere-tuning"]),
        _spec("A10", 72, 100, 600, 31.2, 62.5, 125.0, 125.0, None, (8, 6), ["a10-datasheet", "ampere-tuning"]),
        _spec("A100 40GB SXM", 108, 164, 1555, 19.5, 156.0, 312.0, 312.0, None, (8, 0), ["a100-datasheet", "a100-whitepaper", "ampere-tuning"]),
        _spec("A100 80GB SXM", 108, 164, 2039, 19.5, 156.0, 312.0, 312.0, None, (8, 0), ["a100-datasheet", "a100-whitepaper", "ampere-tuning"]),
        _spec("H100 SXM", 132, 228, 3350, 67.0, 494.5, 989.5, 989.5, 1979.0, (9, 0), ["h100-datasheet", "hopper-whitepaper"]),
        _spec("H100 PCIe", 114, 228, 2000, 51.0, 378.0, 756.5, 756.5, 1513.0, (9, 0), ["h100-datasheet", "hopper-whitepaper"]),
        _spec("H200", 132, 228, 4800, 67.0, 494.5, 989.5, 989.5, 1979.0, (9, 0), ["h200-datasheet", "h100-datasheet", "hopper-whitepaper"]),
        _spec("RTX 4090", 128, 100, 1008, 82.6, 82.6, 165.2, 165.2, 330.3, (8, 9), ["ada-whitepaper", "ampere-tuning"], "GeForce: FP16/BF16/FP8 tensor rates with FP32 accumulation are half those with FP16 accumulation"),
        _spec("V100 SXM2", 80, 96, 900, 15.7, None, None, 125.0, None, (7, 0), ["v100-datasheet", "volta-whitepaper"], "no TF32/BF16/FP8 tensor cores (Volta); sold with 16 or 32 GB"),
        _spec("B200", 148, 228, 7700, 75.0, 1100.0, 2250.0, 2250.0, 4500.0, (10, 0), ["b200-datasheet", "b200-chipsandcheese", "cuda-guide-cc"], "HGX B200 board (the GB200 runs faster)"),
        _spec("Seed accelerator", None, None, 1000, 100.0, 100.0, 100.0, 100.0, 100.0, None, ["seed-lecture"], "imaginary: one compute peak C = 100 TFLOP/s for every operation, B = 1 TB/s"),
    ]
}
# fmt: on

# The memory hierarchy of each GPU: (registers per SM, L1/shared KiB per SM, L2 KiB, device memory GB, its kind,
# year announced, extra source keys). Registers: 64K 32-bit registers per SM on every GPU here (cuda-guide-cc).
# The memory's kind as each source names it: t4-datasheet, l4 (ada-memory), a10-datasheet, a100-datasheet,
# h100-datasheet (HBM3 on the SXM board, HBM2e on the PCIe board), h200-datasheet, ada-memory (RTX 4090),
# v100-datasheet, b200-datasheet.
_MEMORY = {
    "T4": (65536, 96, 4096, 16, "GDDR6", 2018, ["turing-whitepaper", "cuda-guide-cc"]),
    "L4": (65536, 128, 49152, 24, "GDDR6", 2023, ["ada-memory", "cuda-guide-cc"]),
    "A10": (65536, 128, 6144, 24, "GDDR6", 2021, ["ga102-whitepaper", "cuda-guide-cc"]),
    "A100 40GB SXM": (65536, 192, 40960, 40, "HBM2", 2020, ["ampere-whitepaper", "cuda-guide-cc"]),
    "A100 80GB SXM": (65536, 192, 40960, 80, "HBM2e", 2020, ["ampere-whitepaper", "cuda-guide-cc"]),
    "H100 SXM": (65536, 256, 51200, 80, "HBM3", 2022, ["hopper-memory", "cuda-guide-cc"]),
    "H100 PCIe": (65536, 256, 51200, 80, "HBM2e", 2022, ["hopper-memory", "cuda-guide-cc"]),
    "H200": (65536, 256, 61440, 141, "HBM3e", 2023, ["hopper-memory", "h200-l2", "cuda-guide-cc"]),
    "RTX 4090": (65536, 128, 73728, 24, "GDDR6X", 2022, ["ada-memory", "cuda-guide-cc"]),
    "V100 SXM2": (65536, 128, 6144, 32, "HBM2", 2017, ["volta-whitepaper", "cuda-guide-cc"]),
    "B200": (65536, 256, 129024, 180, "HBM3e", 2024, []),
}


def _with_memory(s: GPUSpec) -> GPUSpec:
    if s.name not in _MEMORY:
        return s
    regs, l1, l2, hbm, kind, year, extra = _MEMORY[s.name]
    return replace(
        s,
        regs_per_sm=regs,
        l1_smem_per_sm_kib=l1,
        l2_kib=l2,
        hbm_gb=float(hbm),
        memory_kind=kind,
        year=year,
        sources=tuple(dict.fromkeys(s.sources + tuple(extra))),
    )


GPUS = {name: _with_memory(s) for name, s in GPUS.items()}

# Names torch.cuda.get_device_name() reports, and the short names a person types (GPULAB_AS_GPU=A100), mapped to
# table entries (first match of a whole word wins). A bare model name (A100, H100, V100) means the table's SXM board,
# the one the datasheets rate first; a name that says PCIe where the entry is not a PCIe board is refused (``get``).
_ALIASES = [
    ("H200", "H200"),
    ("H100 PCIe", "H100 PCIe"),
    ("H100", "H100 SXM"),
    ("A100-SXM4-80GB", "A100 80GB SXM"),
    ("A100 80GB", "A100 80GB SXM"),
    ("A100", "A100 40GB SXM"),
    ("RTX 4090", "RTX 4090"),
    ("L4", "L4"),
    ("A10", "A10"),
    ("T4", "T4"),
    ("V100-SXM2", "V100 SXM2"),
    ("V100", "V100 SXM2"),
    ("B200", "B200"),
]

#: Every name ``get`` accepts besides the names torch reports that contain one of them: the table's names and the
#: short ones of ``_ALIASES`` (any case).
ACCEPTED_NAMES = tuple(dict.fromkeys([*GPUS, *(needle for needle, _ in _ALIASES)]))


# Variants that share a base name with a table entry but not its numbers: refuse rather than guess.
_OTHER_VARIANTS = ("NVL", "Laptop", "MIG", "Max-Q", "Mobile")
#: Words that may follow a model's name in the name torch reports without making it another model (board, form
#: factor, memory: "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"). Any other word of letters alone after the model
#: ("RTX 4090 D", "RTX 4080 SUPER", "RTX 3090 Ti") names another model, with other numbers.
_DESCRIPTORS = ("GPU", "PCIe", "SXM", "HBM", "Tensor", "Core", "Graphics")


def _next_word(name: str, end: int) -> str:
    """The word of ``name`` after position ``end`` (separated by spaces or hyphens), or ""."""
    m = re.match(r"[\s-]+([^\s-]+)", name[end:])
    return m.group(1) if m else ""


def get(name: str) -> GPUSpec:
    """Look up a GPU by table name (``"H200"``, any case) or by the name torch reports (``"NVIDIA H200"``).

    A table name or a short name matched whole comes first; then the short names (``ACCEPTED_NAMES``: ``"A100"``,
    ``"H100"``, ``"V100"``, which name the table's SXM board) as whole words inside the name, where the word after
    the model, if any, holds a digit ("80GB", "SXM4") or describes the board (``_DESCRIPTORS``). Raises
    ``TypeError`` if ``name`` is not a string and ``KeyError`` listing ``ACCEPTED_NAMES`` when nothing matches,
    including variants with other numbers (NVL, laptop, MIG slices, a PCIe board of an SXM entry: A100 or V100 PCIe;
    a model whose name adds a word to the table's: RTX 4090 D, RTX 3090 Ti).
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a GPU name string, got {type(name).__name__}")
    typed = name.strip().lower()
    for key in GPUS:
        if key.lower() == typed:
            return GPUS[key]
    for needle, key in _ALIASES:
        if needle.lower() == typed:
            return GPUS[key]
    variant = any(re.search(rf"\b{v}\b", name, flags=re.IGNORECASE) for v in _OTHER_VARIANTS)
    pcie = re.search(r"PCIe", name, flags=re.IGNORECASE) is not None
    other = ""
    if not variant:
        for needle, key in _ALIASES:
            m = re.search(rf"(^|[\s-]){re.escape(needle)}($|[\s-])", name, flags=re.IGNORECASE)
            if m:
                word = _next_word(name, m.end() - len(m.group(2)))
                if word.isalpha() and word.lower() not in {d.lower() for d in _DESCRIPTORS}:
                    other = f" ({needle} {word} is another model than the table's {key}, with other numbers)"
                    break
                if pcie and "PCIe" not in key:
                    break  # a PCIe board of a GPU whose entry is the SXM one: other numbers
                return GPUS[key]
    raise KeyError(f"unknown GPU {name!r}{other}; accepted names (any case): {', '.join(ACCEPTED_NAMES)}")


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
        row.update(
            {
                "L1+smem/SM (KiB)": s.l1_smem_per_sm_kib,
                "L2 (MiB)": s.l2_kib / 1024 if s.l2_kib else None,
                "memory (GB)": s.hbm_gb,
                "memory": s.memory_kind,
            }
        )
        row["sources"] = ", ".join(s.sources)
        rows.append(row)
    return rows


# --- Google TPUs -----------------------------------------------------------------------------------------
# A TPU chip holds one or two TensorCores (Google's name for a whole core, not NVIDIA's tensor-core unit),
# each with matrix-multiply units (MXUs, systolic arrays), a vector unit and a scalar unit; data moves from
# HBM into VMEM, a scratchpad the compiler manages, before the MXUs use it (scaling-book-tpus). There are no
# warps or thread blocks: XLA or Pallas schedules whole tiles.


@dataclass(frozen=True)
class TPUSpec:
    """One TPU chip's documented ceilings: bf16 peak in TFLOP/s (dense, per chip), HBM bandwidth in GB/s,
    HBM capacity in GB as Google's page prints it, TensorCores and MXUs per chip, VMEM in MiB (None where
    Google documents none), the year the chip was announced."""

    name: str
    bf16_tflops: float
    hbm_gbps: float
    hbm_gb: float
    tensorcores: int
    mxus_per_chip: int
    mxu_shape: tuple
    vmem_mib: float | None
    year: int
    sources: tuple = field(default_factory=tuple)
    note: str = ""

    @property
    def hbm_tbps(self) -> float:
        return self.hbm_gbps / 1000.0


TPUS: dict[str, TPUSpec] = {
    t.name: t
    for t in [
        TPUSpec(
            "TPU v4", 275.0, 1200, 32, 2, 8, (128, 128), None, 2021, ("tpu-v4-docs", "scaling-book-tpus"), "HBM2 32 GiB"
        ),
        TPUSpec("TPU v5e", 197.0, 819, 16, 1, 4, (128, 128), 128, 2023, ("tpu-v5e-docs", "scaling-book-tpus")),
        TPUSpec("TPU v5p", 459.0, 2765, 95, 2, 8, (128, 128), None, 2023, ("tpu-v5p-docs", "scaling-book-tpus")),
        TPUSpec("TPU v6e", 918.0, 1638, 32, 1, 2, (256, 256), None, 2024, ("tpu-v6e-docs",), "Trillium"),
    ]
}


def get_tpu(name: str) -> TPUSpec:
    """Look up a TPU by name (``"TPU v5e"`` or ``"v5e"``, any case). Raises ``TypeError`` for a non-string and
    ``KeyError`` naming the known TPUs."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a TPU name string, got {type(name).__name__}")
    key = name.strip().lower().removeprefix("tpu").strip()
    for t in TPUS.values():
        if t.name.lower().removeprefix("tpu").strip() == key:
            return t
    raise KeyError(f"unknown TPU {name!r}; known: {', '.join(TPUS)}")


def tpu_rows() -> list[dict]:
    """The TPU table as plain dicts (for display in a notebook)."""
    return [
        {
            "TPU": t.name,
            "bf16 (TFLOP/s)": t.bf16_tflops,
            "HBM (GB/s)": t.hbm_gbps,
            "HBM (GB)": t.hbm_gb,
            "TensorCores": t.tensorcores,
            "MXUs": t.mxus_per_chip,
            "MXU": f"{t.mxu_shape[0]}x{t.mxu_shape[1]}",
            "VMEM (MiB)": t.vmem_mib,
            "sources": ", ".join(t.sources),
        }
        for t in TPUS.values()
    ]


# --- History: host-device links and CPUs ------------------------------------------------------------------
# The seed lecture's history: single-thread speed flattened while transistors kept climbing, and the links
# between chips improved slowly. Link rates are signalling rates times encoding efficiency, per direction.

LINK_SOURCES = {
    "pcie-specs": "PCI-SIG, PCI Express Base Specification revisions 1.0a (2003), 2.0 (2007), 3.0 (2010), 4.0 "
    "(2017), 5.0 (2019), 6.0 (2022): 2.5, 5, 8, 16, 32 and 64 GT/s per lane; 8b/10b encoding up to 2.0, "
    "128b/130b from 3.0 to 5.0, 6.0's FLIT mode carries 242 bytes of payload in each 256-byte FLIT",
    "pascal-whitepaper": "NVIDIA Tesla P100 whitepaper (2016): four NVLink links of 40 GB/s (both directions) "
    "each, 160 GB/s per GPU",
    "nvlink-page": "NVIDIA, 'NVLink and NVLink Switch' (nvidia.com/en-us/data-center/nvlink): total bandwidth "
    "per GPU 300 GB/s (2nd generation, Volta), 600 GB/s (3rd, Ampere), 900 GB/s (4th, Hopper), 1,800 GB/s "
    "(5th, Blackwell); the V100, A100, H100 and B200 datasheets print the same totals",
}
SOURCES.update(LINK_SOURCES)


@dataclass(frozen=True)
class LinkSpec:
    """One generation of a link between chips: ``gbps`` is GB/s (1e9 byte/s) per direction, x16 for PCIe,
    all of one GPU's links for NVLink; ``year`` the year the specification or first GPU was published."""

    name: str
    kind: str
    year: int
    gbps: float
    sources: tuple


def _pcie(version: str, year: int, gt_per_s: float, efficiency: float) -> LinkSpec:
    return LinkSpec(f"PCIe {version} x16", "PCIe", year, gt_per_s * 16 * efficiency / 8, ("pcie-specs",))


def _nvlink(gen: int, gpu: str, year: int, total_gbps: float, source: str) -> LinkSpec:
    return LinkSpec(f"NVLink {gen} ({gpu})", "NVLink", year, total_gbps / 2, (source,))


LINKS: dict[str, LinkSpec] = {
    s.name: s
    for s in [
        _pcie("1.0", 2003, 2.5, 8 / 10),
        _pcie("2.0", 2007, 5.0, 8 / 10),
        _pcie("3.0", 2010, 8.0, 128 / 130),
        _pcie("4.0", 2017, 16.0, 128 / 130),
        _pcie("5.0", 2019, 32.0, 128 / 130),
        _pcie("6.0", 2022, 64.0, 242 / 256),
        _nvlink(1, "P100", 2016, 160.0, "pascal-whitepaper"),
        _nvlink(2, "V100", 2017, 300.0, "nvlink-page"),
        _nvlink(3, "A100", 2020, 600.0, "nvlink-page"),
        _nvlink(4, "H100", 2022, 900.0, "nvlink-page"),
        _nvlink(5, "B200", 2024, 1800.0, "nvlink-page"),
    ]
}

CPU_TRENDS_FILE = Path(__file__).resolve().parents[1] / "data" / "history-cpus.json"
CPU_SERIES = ("transistors", "frequency", "single_thread", "cores", "watts")


def cpu_trends() -> dict:
    """Rupp's microprocessor trend data (``gpulab/data/history-cpus.json``: its ``source`` and ``license``
    say where from): ``series`` maps each of ``CPU_SERIES`` to [year, value] points, one per processor
    (units in the file's ``what``)."""
    return json.loads(CPU_TRENDS_FILE.read_text())


def best_by_year(points: list, years: list, window: float = 1.0) -> list:
    """For each year of ``years``, the largest value among ``points`` ([year, value] pairs) dated within
    ``window`` years of it (inclusive), or None where there is none: the fastest chip of its time. Raises
    ``ValueError`` naming ``window`` if it is negative."""
    if window < 0:
        raise ValueError(f"window must be >= 0 years, got {window!r}")
    out = []
    for y in years:
        near = [v for t, v in points if abs(t - y) <= window]
        out.append(max(near) if near else None)
    return out
