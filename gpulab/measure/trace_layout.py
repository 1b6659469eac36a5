"""Which thread of which warp holds each element of a traced load or store, and how wide an access it issues
(``gpulab.measure.trace`` counts requests and sectors with it).

Triton gives every tensor a *blocked layout* (``#ttg.blocked<{sizePerThread, threadsPerWarp, warpsPerCTA,
order}>`` in the TTGIR): along each dimension, each thread holds ``sizePerThread`` consecutive elements, the
lanes of a warp then the warps of the program tile the dimension, and the tile repeats (more registers a thread)
until the tensor is covered; a tensor smaller than the tile is held by several threads at once (replicated).
``order`` lists the dimensions from the fastest (in memory and over the lanes) to the slowest. ``Layout.slots``
turns a layout into the elements of each warp's memory instructions: a thread's ``vec`` consecutive elements along
the fastest dimension are one access (``ld.global.v4.b32`` moves 16 bytes: 4 fp32 or 8 fp16), and the warp's
32 lanes issue one instruction per access together.

Where the layout and the access width come from, best first:

1. **The compiler, ahead of time** (``compile_kernel``): the traced kernel compiled for the planned GPU's target
   (``triton.compile`` with ``GPUTarget``, no GPU needed; in a process of its own, ``trace_compile.py``, since
   this process runs kernels in the interpreter), with the argument specialization a launch on the same
   arguments gets (pointers 16-byte aligned, integers divisible by 16 or equal to 1: ``specialize``). The TTGIR
   gives each load's and store's layout, the PTX each one's instructions and their width (``ld.global.v4.b32``:
   16 bytes), both located by source line and column; registers (ptxas's report) and shared memory per block
   come with them. A load the PTX issues as ``cp.async`` (to shared memory, for ``tl.dot``) or through TMA, and an
   atomic, are marked as such. Results are cached per kernel source, specialization, target and Triton version.
2. **The compiler's rule, emulated** (``coalesced_layout``), where no compile is possible (the compile fails, the
   kernel's source cannot be gathered, or the target is not one ``gpulab.measure.targets`` compiles for): Triton's
   coalesce pass (lib/Dialect/TritonGPU/Transforms/CoalesceUtils.cpp, ``buildCoalescedEncoding``) on the
   contiguity, alignment and mask constancy read from the addresses the interpreter computed. Those are at
   least what the compiler proves, so this can give wider accesses than the compiled kernel.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import types
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .device import cache_dir, write_json_atomic

WARP = 32
MAX_ACCESS_BYTES = 16  # the widest global access one thread issues (128 bits: ld/st.global.v4.b32)
COMPILE_TIMEOUT_S = 60.0  # a compile that takes longer is abandoned for the emulated layout
_WORKER = Path(__file__).with_name("trace_compile.py")
_CACHE_VERSION = "2"

# ---- the layout ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """A blocked layout (Triton's ``#ttg.blocked``), one entry a tensor dimension; ``order`` fastest first."""

    size_per_thread: tuple
    threads_per_warp: tuple
    warps_per_cta: tuple
    order: tuple

    def __str__(self) -> str:
        return (
            f"sizePerThread {list(self.size_per_thread)}, threadsPerWarp {list(self.threads_per_warp)}, "
            f"warpsPerCTA {list(self.warps_per_cta)}, order {list(self.order)}"
        )

    def slots(self, shape: tuple, vec: int) -> np.ndarray:
        """The elements of each warp's memory instructions for a tensor of ``shape`` (a power of two a
        dimension; ``()`` for a scalar) accessed ``vec`` elements a thread at a time: an int64 array
        ``(warps, instructions, 32, vec)`` of row-major flat element indices. Instruction k of every lane is the
        same registers, so ``slots[w, k]`` is one warp request. ``vec`` must divide the thread's run along the
        fastest dimension (``size_per_thread[order[0]]``, repeats included); raises ValueError otherwise."""
        spt, tpw, wpc, order = self.size_per_thread, self.threads_per_warp, self.warps_per_cta, self.order
        rank = len(shape)
        warps = int(np.prod(wpc)) if wpc else 1
        if rank == 0:
            return np.zeros((warps, 1, WARP, 1), dtype=np.int64)
        tile = [spt[d] * tpw[d] * wpc[d] for d in range(rank)]
        regs = [spt[d] * max(1, shape[d] // tile[d]) for d in range(rank)]
        lane, warp = np.arange(WARP), np.arange(warps)
        lane_c, warp_c, div_l, div_w = {}, {}, 1, 1
        for d in order:  # fastest dimension first: lane = sum lane_c[d] * (threads of the faster dims)
            lane_c[d], warp_c[d] = (lane // div_l) % tpw[d], (warp // div_w) % wpc[d]
            div_l, div_w = div_l * tpw[d], div_w * wpc[d]
        # element coordinate along d of (warp, lane, register r_d): the register's repeat, then warp, lane, offset
        coords = []
        for d in range(rank):
            r = np.arange(regs[d])
            e = (
                (r // spt[d]) * tile[d]
                + warp_c[d][:, None, None] * spt[d] * tpw[d]
                + lane_c[d][None, :, None] * spt[d]
                + r % spt[d]
            ) % shape[d]  # (warps, 32, regs[d]); a tensor smaller than the tile wraps: replicated
            coords.append(e)
        # registers: one axis per dimension, the fastest dimension last, split into (accesses, vec)
        fast = order[0]
        slow = [d for d in reversed(order[1:])]
        if regs[fast] % vec:
            raise ValueError(f"vec {vec} does not divide the {regs[fast]} elements a thread holds along dim {fast}")
        flat = np.zeros((warps, WARP) + tuple(regs[d] for d in slow) + (regs[fast],), dtype=np.int64)
        stride = 1
        for d in reversed(range(rank)):  # row-major flat index
            e = coords[d]
            if d == fast:
                view = e.reshape(warps, WARP, *([1] * len(slow)), regs[fast])
            else:
                k = slow.index(d)
                shape_k = [1] * len(slow)
                shape_k[k] = regs[d]
                view = e.reshape(warps, WARP, *shape_k, 1)
            flat = flat + view * stride
            stride *= shape[d]
        flat = flat.reshape(warps, WARP, -1, vec)  # (warps, lanes, instructions, vec)
        return np.ascontiguousarray(flat.transpose(0, 2, 1, 3))


def owners(slots: np.ndarray) -> np.ndarray:
    """Which slots own their element: the first thread (warp-major, then lane, then register) that holds it. A
    store writes each element once (the compiler predicates the replicas off); a load is issued by every
    replica. ``slots`` as ``Layout.slots`` gives it; returns a bool array of its shape."""
    order = slots.transpose(0, 2, 1, 3).reshape(-1)  # warp, lane, instruction, element
    first = np.zeros(order.shape, dtype=bool)
    first[np.unique(order, return_index=True)[1]] = True
    w, k, lanes, v = slots.shape
    return np.ascontiguousarray(first.reshape(w, lanes, k, v).transpose(0, 2, 1, 3))


def default_layout(shape: tuple, num_warps: int, order: tuple, per_thread: int = 1) -> Layout:
    """Triton's ``BlockedEncodingAttr::get(shape, sizePerThread, order, numWarps, 32)``: ``per_thread``
    elements a thread along ``order[0]``; lanes, then warps, spread over the dimensions fastest first, as far as
    each dimension has room, and the rest on the slowest."""
    rank = len(shape)
    spt = [1] * rank
    if rank:
        spt[order[0]] = per_thread
    tpw, wpc = [1] * rank, [1] * rank
    lanes, threads, warps, prev_lanes, prev_warps = WARP, num_warps * WARP, num_warps, 1, 1
    for d in order[:-1]:
        per_cta = min(max(threads, 1), max(1, shape[d] // spt[d]))
        tpw[d] = min(max(per_cta, 1), lanes)
        wpc[d] = min(max(per_cta // tpw[d], 1), warps)
        warps, lanes, threads = warps // wpc[d], lanes // tpw[d], threads // per_cta
        prev_lanes, prev_warps = prev_lanes * tpw[d], prev_warps * wpc[d]
    if rank:
        tpw[order[-1]], wpc[order[-1]] = WARP // prev_lanes, num_warps // prev_warps
    return Layout(tuple(spt), tuple(tpw), tuple(wpc), tuple(order))


# ---- the emulated coalesce pass (no compile) ---------------------------------------------------------------


@dataclass(frozen=True)
class AxisFacts:
    """What the interpreter's addresses say of one load's or store's pointer tensor, over every execution:
    ``contiguity`` per dimension (elements, a power of two), ``divisibility`` (bytes: the largest power of two,
    at most 16, dividing the address of every contiguous group's first element) and ``mask_constancy`` along the
    most contiguous dimension (elements)."""

    contiguity: tuple
    divisibility: int
    mask_constancy: int

    def order(self) -> tuple:
        """Dimensions by contiguity, most contiguous first (ties: the last dimension first, as Triton's argSort)."""
        rank = len(self.contiguity)
        return tuple(sorted(range(rank), key=lambda d: (-self.contiguity[d], -d)))


def _lowbit(x: np.ndarray, cap: int) -> int:
    """The largest power of two, at most ``cap``, dividing every value of ``x`` (int64)."""
    g = cap
    while g > 1 and np.any(x % g):
        g //= 2
    return g


def _run_length(values: np.ndarray, axis: int, equal_step) -> int:
    """The largest power of two c such that, along ``axis``, every aligned group of c entries satisfies
    ``equal_step`` between neighbours (a bool array of the neighbours' relation, one shorter along axis)."""
    n = values.shape[axis]
    ok = equal_step
    c = 1
    while c * 2 <= n:
        c2 = c * 2
        # neighbours i, i+1 inside a group of c2: every i with (i + 1) % c2 != 0
        idx = np.arange(n - 1)
        inside = ((idx + 1) % c2) != 0
        if not np.all(np.compress(inside, ok, axis=axis)):
            break
        c = c2
    return c


def axis_facts(offsets: np.ndarray, masks: np.ndarray, bases: np.ndarray, itemsize: int) -> AxisFacts:
    """``AxisFacts`` of an access pattern: ``offsets`` (its shape, int64 bytes from the first element), one
    ``masks`` entry per distinct mask (bool, ``(k,) + shape``) and the ``bases`` (int64 bytes) it ran at."""
    shape = offsets.shape
    if not shape:
        return AxisFacts((), _lowbit(bases, MAX_ACCESS_BYTES), 1)
    contiguity = tuple(
        _run_length(offsets, d, np.diff(offsets, axis=d) == itemsize) if shape[d] > 1 else 1 for d in range(len(shape))
    )
    facts = AxisFacts(contiguity, 1, 1)
    fast = facts.order()[0]
    starts = np.take(offsets, np.arange(0, shape[fast], contiguity[fast]), axis=fast)
    div = min(_lowbit(starts.reshape(-1), MAX_ACCESS_BYTES), _lowbit(bases, MAX_ACCESS_BYTES))
    const = min(
        (_run_length(m, fast, np.diff(m.astype(np.int8), axis=fast) == 0) if shape[fast] > 1 else 1 for m in masks),
        default=shape[fast],
    )
    return AxisFacts(contiguity, div, const)


def elements_per_thread(facts: AxisFacts, shape: tuple, itemsize: int) -> int:
    """Triton's ``getNumElementsPerThread``: the alignment (divisibility in elements, capped by the contiguity
    along the fastest dimension) and at most 128 bits."""
    if not shape:
        return 1
    fast = facts.order()[0]
    multiple = max(facts.divisibility // itemsize, 1)
    contig = min(facts.contiguity[fast], shape[fast])
    return max(1, min(multiple, contig, MAX_ACCESS_BYTES // itemsize))


def coalesced_layout(site, group: list, num_warps: int) -> tuple[Layout, int]:
    """The emulated coalesce pass for ``site`` (an object with ``kind`` "load"/"store", ``shape``, ``itemsize`` and
    ``facts``: ``AxisFacts``) among ``group`` (every site of the launch; those of the same shape and order share a
    width): ``(layout, vec)``, vec the access width in elements the lowering then issues (the thread's run
    along the fastest dimension, capped by this site's own alignment and its mask's constancy)."""
    shape, facts = site.shape, site.facts
    if not shape:
        return default_layout((), num_warps, ()), 1
    order = facts.order()
    own = elements_per_thread(facts, shape, site.itemsize)
    same = [s for s in group if s.shape == shape and s.facts is not None and s.facts.order() == order]
    per = max([own] + [elements_per_thread(s.facts, shape, s.itemsize) for s in same])
    per = min(per, max(int(np.prod(shape)) // (num_warps * WARP), 1))
    if site.kind != "load":
        per = min(per, own)
    layout = default_layout(shape, num_warps, order, per)
    vec = math.gcd(per, own, max(1, facts.mask_constancy))
    return layout, vec


# ---- the kernel's source, for a compile in another process -----------------------------------------------------


class SourceUnavailable(Exception):
    """The kernel's module cannot be rebuilt from what it reads (a name of a kind the compile step cannot carry)."""


@dataclass
class Block:
    """One function of the rebuilt module: its ``def`` line there (``line``) and in its own file (``file``,
    ``orig_line``)."""

    name: str
    line: int
    file: str
    orig_line: int
    n_lines: int


def _py_fn(obj):
    """The Python function of a ``@triton.jit`` object (JITFunction or InterpretedFunction), else None."""
    fn = getattr(obj, "fn", None)
    return (
        fn
        if isinstance(fn, types.FunctionType) and type(obj).__name__ in ("JITFunction", "InterpretedFunction")
        else None
    )


def _names_read(src: str) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in names:
            names.append(node.id)
    return names


def _constant(name: str, value) -> str | None:
    """The line that rebuilds the global ``name`` = ``value``, or None when the compile step cannot carry it."""
    import triton.language as tl

    if value is None or isinstance(value, (bool, int, float, str)):
        return f"{name} = {value!r}"
    if isinstance(value, tl.constexpr):
        inner = _constant("_", value.value)
        return None if inner is None else f"{name} = triton.language.constexpr({inner[4:]})"
    if isinstance(value, tl.dtype):
        return f"{name} = triton.language.dtype({value.name!r})"
    if isinstance(value, types.ModuleType):
        return f"import {value.__name__} as {name}" if value.__name__ != name else f"import {name}"
    return None


def kernel_source(fn) -> tuple[str, list[Block]]:
    """A module that defines ``fn`` (a ``@triton.jit`` kernel's Python function) as ``@triton.jit``, with every
    ``@triton.jit`` function it calls and every global it reads (constants, modules), for a compile in another
    process; each function dedented, as Triton and its interpreter parse it. Returns ``(text, blocks)``. Raises
    SourceUnavailable naming a global it cannot carry (a tensor, an object) or a function without source."""
    header = ["import triton", "import triton.language", ""]
    defs, consts, seen, blocks = [], {}, set(), []

    def visit(pyfn, name):
        if pyfn in seen:
            return
        seen.add(pyfn)
        try:
            lines, first = inspect.getsourcelines(pyfn)
        except (OSError, TypeError) as e:
            raise SourceUnavailable(f"no source for {pyfn.__name__} ({e})") from None
        src = textwrap.dedent("".join(lines))
        src_lines = src.splitlines()
        at = next(i for i, ln in enumerate(src_lines) if ln.startswith("def "))
        body = "\n".join(src_lines[at:])
        for g in _names_read(body):
            if g in pyfn.__code__.co_varnames or g in consts:
                continue
            if g not in pyfn.__globals__:
                continue  # a builtin (range, min) or a local name
            v = pyfn.__globals__[g]
            inner = _py_fn(v)
            if inner is not None:
                visit(inner, g)
                continue
            line = _constant(g, v)
            if line is None:
                raise SourceUnavailable(f"{pyfn.__name__} reads the global {g!r}, a {type(v).__name__}")
            consts[g] = line
        defs.append((name, pyfn, body, pyfn.__code__.co_filename, first + at))

    visit(fn, fn.__name__)
    out = header + sorted(set(consts.values())) + [""]
    for name, pyfn, body, file, orig in defs:  # helpers before their callers (visited depth first)
        out += ["", "@triton.jit"]
        blocks.append(Block(pyfn.__name__, len(out) + 1, file, orig, body.count("\n") + 1))
        out += body.splitlines()
        if name != pyfn.__name__:
            out.append(f"{name} = {pyfn.__name__}")
    return "\n".join(out) + "\n", blocks


# ---- the launch's specialization ------------------------------------------------------------------------------

TORCH_TYPES = {
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": "bf16",
    "float64": "fp64",
    "float8_e4m3fn": "fp8e4nv",
    "float8_e5m2": "fp8e5",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "bool": "i1",
}
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "launch_cooperative_grid")


def specialize(pyfn, bound: dict, do_not_specialize=()) -> tuple[dict, dict, dict]:
    """``triton.compile``'s ``(signature, constexprs, attrs)`` by parameter name for a launch of ``pyfn`` on the
    arguments ``bound`` (every parameter by name), as Triton's launcher specializes them: a tensor is ``*<dtype>``
    with ``tt.divisibility`` 16 where its address is a multiple of 16 bytes; an int equal to 1 is the constant 1,
    else ``i32`` (``i64`` when it does not fit) with ``tt.divisibility`` 16 where divisible by 16; a float is
    ``fp32``, a bool ``i1``; a parameter annotated ``tl.constexpr`` (or None) is a constant. ``do_not_specialize``:
    parameter names left unspecialized. Raises SourceUnavailable for an argument it cannot type."""
    params = inspect.signature(pyfn).parameters
    signature, constexprs, attrs = {}, {}, {}
    for name, p in params.items():
        v = bound[name]
        ann = p.annotation
        is_constexpr = "constexpr" in (ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann)))
        if is_constexpr or v is None:
            v = getattr(v, "value", v)
            if not (v is None or isinstance(v, (bool, int, float, str))):
                raise SourceUnavailable(f"the constexpr {name} is a {type(v).__name__}")
            signature[name], constexprs[name] = "constexpr", v
            continue
        spec = name not in do_not_specialize
        if hasattr(v, "data_ptr") and hasattr(v, "dtype"):
            t = TORCH_TYPES.get(str(v.dtype).replace("torch.", ""))
            if t is None:
                raise SourceUnavailable(f"{name}: tensors of {v.dtype} are not typed here")
            signature[name] = f"*{t}"
            if spec and v.data_ptr() % 16 == 0:
                attrs[name] = [["tt.divisibility", 16]]
        elif isinstance(v, bool):
            signature[name] = "i1"
        elif isinstance(v, int):
            if spec and v == 1:
                signature[name], constexprs[name] = "constexpr", 1
                continue
            signature[name] = "i32" if -(2**31) <= v < 2**31 else ("u64" if v >= 2**63 else "i64")
            if spec and v % 16 == 0:
                attrs[name] = [["tt.divisibility", 16]]
        elif isinstance(v, float):
            signature[name] = "fp32"
        else:
            raise SourceUnavailable(f"{name} is a {type(v).__name__}, which the trace cannot type")
    return signature, constexprs, attrs


# ---- the compiled kernel: parsed --------------------------------------------------------------------------------


@dataclass
class CompiledSite:
    """One global memory operation of the compiled kernel: ``kind`` ("load", "store", "async": a copy to shared
    memory, "tma", "atomic"), where it is (``file``, ``line``, ``col``: the call's column + 1, as Triton's
    locations give it), its ``layout`` (None for a scalar pointer or a layout other than blocked), ``shape``, and
    the PTX instructions at that location: ``ptx`` ({instruction: count}) and ``width`` (bytes a thread moves in
    one, the widest; None without any)."""

    kind: str
    file: str
    line: int
    col: int
    layout: Layout | None
    shape: tuple
    ptx: dict = field(default_factory=dict)
    width: int | None = None


@dataclass
class Compiled:
    """The compile of one launch: ``cc`` (target), ``triton`` (version), ``regs`` per thread, ``spill_bytes``,
    ``smem`` (bytes per block), ``num_warps``, ``sites``; or ``error`` (one line) when it failed."""

    cc: int
    num_warps: int
    triton: str = ""
    regs: int | None = None
    spill_bytes: int | None = None
    smem: int | None = None
    sites: list = field(default_factory=list)
    error: str | None = None


_BLOCKED = re.compile(
    r"^(#\w+) = #ttg\.blocked<\{sizePerThread = \[([\d, ]+)\], threadsPerWarp = \[([\d, ]+)\], "
    r"warpsPerCTA = \[([\d, ]+)\], order = \[([\d, ]+)\]"
)
_LOC_DEF = re.compile(r"^#(loc\d*) = loc\((.*)\)\s*$")
_LOC_FILE = re.compile(r'^"([^"]+)":(\d+):(\d+)$')
_LOC_REF = re.compile(r"^#(loc\d*)$")
_LOC_NAMED = re.compile(r'^"[^"]*"\(#(loc\d*)\)$')
_LOC_CALLSITE = re.compile(r"^callsite\(#(loc\d*) at #(loc\d*)\)$")
_TRAILING_LOC = re.compile(r"\bloc\((.*)\)\s*$")
_PTR_TENSOR = re.compile(r"tensor<((?:\d+x)+)!tt\.ptr<[\w]+>, (#\w+)>")
_OPS = {
    "tt.load": "load",
    "tt.store": "store",
    "ttg.async_copy_global_to_local": "async",
    "tt.descriptor_load": "tma",
    "tt.descriptor_store": "tma",
    "tt.descriptor_gather": "tma",
    "tt.descriptor_scatter": "tma",
    "ttng.async_tma_copy_global_to_local": "tma",
    "ttng.async_tma_copy_local_to_global": "tma",
    "tt.atomic_rmw": "atomic",
    "tt.atomic_cas": "atomic",
}
_OP = re.compile(r"\b(" + "|".join(re.escape(k) for k in _OPS) + r")\b")


def _ints(text: str) -> tuple:
    return tuple(int(v) for v in text.split(","))


def _resolve(expr: str, locs: dict, depth: int = 0):
    """``(file, line, col)`` of a location expression: a file location, a reference, a named location, or a call
    site (the callee's location: the operation inside an inlined helper)."""
    expr = expr.strip()
    if depth > 50:
        return None
    for pattern in (_LOC_REF, _LOC_NAMED):
        m = pattern.match(expr)
        if m:
            inner = locs.get(m.group(1))
            return None if inner is None else _resolve(inner, locs, depth + 1)
    m = _LOC_CALLSITE.match(expr)
    if m:
        inner = locs.get(m.group(1))
        return None if inner is None else _resolve(inner, locs, depth + 1)
    m = _LOC_FILE.match(expr)
    return (m.group(1), int(m.group(2)), int(m.group(3))) if m else None


def parse_ttgir(text: str) -> list[CompiledSite]:
    """The global memory operations of a TTGIR module (``asm["ttgir"]``), with their blocked layouts and source
    locations. Operations without a location are left out."""
    layouts, locs, ops = {}, {}, []
    for line in text.splitlines():
        m = _BLOCKED.match(line)
        if m:
            layouts[m.group(1)] = Layout(*(_ints(m.group(i)) for i in range(2, 6)))
            continue
        m = _LOC_DEF.match(line)
        if m:
            locs[m.group(1)] = m.group(2)
            continue
        m = _OP.search(line)
        if m:
            ops.append((_OPS[m.group(1)], line))
    sites = []
    for kind, line in ops:
        lm = _TRAILING_LOC.search(line)
        where = _resolve(lm.group(1), locs) if lm else None
        if where is None:
            continue
        tm = _PTR_TENSOR.search(line)
        shape = tuple(int(v) for v in tm.group(1).rstrip("x").split("x")) if tm else ()
        layout = layouts.get(tm.group(2)) if tm else None
        sites.append(CompiledSite(kind, where[0], where[1], where[2], layout, shape))
    return sites


_PTX_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]+)"')
_PTX_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)")
_PTX_MEM = re.compile(
    r"\b((?:ld|st)\.global[\w.:]*|cp\.async\.(?:ca|cg)\.shared\.global[\w.:]*|cp\.async\.bulk[\w.:]*|"
    r"(?:atom|red)\.global[\w.:]*)([^;]*);"
)
_WIDTH = re.compile(r"\.(?:v(\d+)\.)?[bsuf](\d+)$")


def ptx_width(op: str, operands: str = "") -> int | None:
    """Bytes one thread moves in the PTX memory instruction ``op`` (``ld.global.v4.b32`` -> 16): for ``cp.async``,
    its size operand; None where it cannot tell."""
    if op.startswith("cp.async.") and "bulk" not in op:
        m = re.search(r",\s*(0x[0-9a-fA-F]+|\d+)\s*(?:,|$)", operands)
        return int(m.group(1), 0) if m else None
    m = _WIDTH.search(op)
    if not m:
        return None
    return int(m.group(1) or 1) * int(m.group(2)) // 8


def parse_ptx(text: str) -> dict:
    """``{(file, line, col): {(instruction, operands): count}}`` of the PTX's global memory instructions by the
    source location (``.loc``) before each. Triton issues loads and stores as inline assembly, inside which LLVM
    counts the assembly's own lines on from the call's location (``.loc 1 13 28``, ``14 28``, ...): an instruction
    there takes the location before ``// begin inline asm``."""
    files, where, asm, out = {}, None, None, {}
    for line in text.splitlines():
        m = _PTX_FILE.match(line)
        if m:
            files[m.group(1)] = m.group(2)
            continue
        if "// begin inline asm" in line:
            asm = where
            continue
        if "// end inline asm" in line:
            asm = None
            continue
        m = _PTX_LOC.match(line)
        if m:
            if asm is None:
                where = (m.group(1), int(m.group(2)), int(m.group(3)))
            continue
        m = _PTX_MEM.search(line)
        at = asm if asm is not None else where
        if m and at is not None:
            op = re.sub(r"\.(L1|L2)::[\w:]+", "", m.group(1))  # cache hints do not change the width
            ops = out.setdefault(at, {})
            ops[(op, m.group(2))] = ops.get((op, m.group(2)), 0) + 1
    resolved = {}
    for (fid, ln, col), ops in out.items():
        merged = resolved.setdefault((files.get(fid, fid), ln, col), {})
        for k, n in ops.items():
            merged[k] = merged.get(k, 0) + n
    return resolved


_KIND_OPS = {
    "load": ("ld.", "cp.async"),
    "store": ("st.",),
    "async": ("cp.async",),
    "tma": ("cp.async.bulk",),
    "atomic": ("atom.", "red."),
}


def read_compiled(result: dict, blocks: list[Block], cc: int, num_warps: int) -> Compiled:
    """A worker's result (``trace_compile.compile_job``) as a ``Compiled``, every location mapped back from the
    rebuilt module to the kernel's own files (``blocks``)."""
    if "error" in result:
        return Compiled(cc, num_warps, error=result["error"])
    path = result["path"]

    def original(file, line):
        if file != path and Path(file).name != Path(path).name:
            return file, line
        for b in blocks:
            if b.line <= line < b.line + b.n_lines:
                return b.file, b.orig_line + line - b.line
        return file, line

    ptx = {}
    for (f, ln, col), ops in parse_ptx(result["ptx"]).items():
        ptx[(*original(f, ln), col)] = ops
    sites = []
    for s in parse_ttgir(result["ttgir"]):
        s.file, s.line = original(s.file, s.line)
        ops = {k: n for k, n in ptx.get((s.file, s.line, s.col), {}).items() if k[0].startswith(_KIND_OPS[s.kind])}
        s.ptx = {op: n for (op, _), n in ops.items()}
        widths = [w for (op, args) in ops for w in [ptx_width(op, args)] if w]
        s.width = max(widths) if widths else None
        if s.kind == "load" and any(op.startswith("cp.async") for op, _ in ops):
            s.kind = "async"
        sites.append(s)
    return Compiled(
        cc,
        num_warps,
        triton=result.get("triton", ""),
        regs=result.get("regs"),
        spill_bytes=result.get("spill_bytes"),
        smem=result.get("smem"),
        sites=sites,
    )


# ---- the compile: cached, in a process of its own ----------------------------------------------------------------


def _cache_file(key: str) -> Path:
    return cache_dir() / "trace" / f"{key}.json"


class PendingCompile:
    """A compile under way (or answered from the cache): ``result(timeout)`` waits for it and returns the
    ``Compiled`` (with ``error`` set when it failed or ran past the time), never raises."""

    def __init__(self, job: dict, blocks: list[Block], key: str):
        self.job, self.blocks, self.key = job, blocks, key
        self.proc, self.done, self._tmp = None, None, None
        cached = _read_cache(key)
        if cached is not None:
            self.done = read_compiled(cached, blocks, job["cc"], job["num_warps"])
            return
        self._tmp = tempfile.TemporaryDirectory(prefix="gpulab-trace-job-")
        jp, self._out = Path(self._tmp.name) / "job.json", Path(self._tmp.name) / "out.json"
        jp.write_text(json.dumps(job))
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env["TRITON_CACHE_DIR"] = str(Path(self._tmp.name) / "triton")  # ptxas runs (and reports) every time
        self.proc = subprocess.Popen(
            [sys.executable, str(_WORKER), str(jp), str(self._out)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    def cancel(self) -> None:
        """Stop a compile still under way (the trace that wanted it failed) and remove its files."""
        if self.proc is not None and self.done is None:
            self.proc.kill()
            self.proc.communicate()
            self.done = Compiled(self.job["cc"], self.job["num_warps"], error="cancelled")
            self._tmp.cleanup()

    def result(self, timeout: float = COMPILE_TIMEOUT_S) -> Compiled:
        if self.done is not None:
            return self.done
        cc, warps = self.job["cc"], self.job["num_warps"]
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            self.done = Compiled(cc, warps, error=f"the compile took over {timeout:g} s (stopped)")
        else:
            if self.proc.returncode != 0 or not self._out.exists():
                last = (err or "").strip().splitlines()[-1:] or ["no message"]
                self.done = Compiled(
                    cc, warps, error=f"the compile worker failed (exit {self.proc.returncode}): {last[0][:200]}"
                )
            else:
                raw = json.loads(self._out.read_text())
                self.done = read_compiled(raw, self.blocks, cc, warps)
                if self.done.error is None:
                    _write_cache(self.key, raw)
        self._tmp.cleanup()
        return self.done


def _read_cache(key: str) -> dict | None:
    """The worker's result cached under ``key`` (its TTGIR and PTX, parsed afresh on every read), or None."""
    try:
        raw = json.loads(_cache_file(key).read_text())
    except (OSError, ValueError):
        return None
    return raw if isinstance(raw, dict) and {"ttgir", "ptx", "path"} <= set(raw) else None


def _write_cache(key: str, raw: dict) -> None:
    try:
        write_json_atomic(_cache_file(key), raw)
    except OSError:  # an unwritable cache costs a compile next time, nothing else
        pass


def start_compile(pyfn, bound: dict, num_warps: int, num_stages: int, cc: int, do_not_specialize=()) -> PendingCompile:
    """Start compiling ``pyfn`` (a ``@triton.jit`` kernel's Python function) for compute capability ``cc`` as
    launched on ``bound`` (its arguments by name) with ``num_warps`` and ``num_stages``. Returns a
    ``PendingCompile``; raises SourceUnavailable when the kernel's module cannot be rebuilt or an argument typed."""
    import triton

    source, blocks = kernel_source(pyfn)
    signature, constexprs, attrs = specialize(pyfn, bound, do_not_specialize)
    job = {
        "source": source,
        "kernel": pyfn.__name__,
        "signature": signature,
        "constexprs": constexprs,
        "attrs": attrs,
        "cc": cc,
        "num_warps": num_warps,
        "num_stages": num_stages,
    }
    blob = json.dumps([job, [asdict(b) for b in blocks], triton.__version__, _CACHE_VERSION], sort_keys=True)
    return PendingCompile(job, blocks, hashlib.sha256(blob.encode()).hexdigest()[:32])
