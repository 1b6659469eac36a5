"""The operation recorder: every aten operation of a training step with its shapes, FLOPs and bytes.

``OpRecorder`` is a ``TorchDispatchMode``: inside ``with OpRecorder() as rec:`` every aten operation torch
dispatches (forward, the autograd engine's backward, the optimizer) lands in ``rec.records`` as an
``OpRecord``. It works on any device, the meta device included: there only shapes flow, so the full
GPT-2-small table exists without memory or a GPU.

- FLOPs: torch's own formulas, looked up the way ``torch.utils.flop_counter.FlopCounterMode`` (torch 2.13)
  does: ``flop_registry[func._overloadpacket](*args, **kwargs, out_val=out)``; an operation without a
  formula is first decomposed (``func.decompose``) and, if it has no decomposition, counted as 0 FLOPs. The
  registry covers matrix products (mm, addmm, bmm, baddbmm), convolutions and the fused attention kernels, so
  the elementwise and normalization operations count 0 FLOPs: they are classified by their bytes, which is
  what bounds them (a few FLOPs per element moved, far below any GPU's ridge point). ``EXTRA_FORMULAS`` adds
  SDPA's CPU flash kernel (forward and backward), which torch's registry lacks, with torch's own SDPA
  formulas.
- Bytes: the sum of the input and output tensor sizes at the operation's boundary (each operation reads its
  inputs from memory and writes its outputs there: no fusion, no cache reuse). A view (``func.is_view``,
  and ``_unsafe_view``, which reshapes a fresh tensor), an allocation (``empty``) and scalar bookkeeping
  (every tensor 0-d: the optimizer's step count) move 0 bytes; a broadcast input (stride 0) counts only its
  stored elements.
- Sparse tensors (COO, CSR, CSC, BSR, BSC) are counted by the strided tensors that hold them (``parts``:
  indices and values), since they have neither strides nor a storage of their own.
- Groups: ``GROUPS``; the optimizer's operations are recognised by the phase, and the operations of a module
  with an ``op_group`` attribute (``GPT``'s ``AttentionCore``: "attention") by that module: in forward while
  it runs (global module hooks), in backward by a tag the forward hook puts on the module's autograd nodes
  (``node.metadata``), read from ``torch._C._current_autograd_node()``. A module whose forward raises leaves
  its group on the way out (the hook runs always), so the operations after it are classified as before.

Arithmetic intensity is FLOPs / bytes per operation and per group (``group_totals``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

from ..core import dtypes

aten = torch.ops.aten

GROUPS = ("matmuls", "attention", "layer norm", "GELU", "softmax/cross-entropy", "optimizer", "copies/other")

EXTRA_FORMULAS = {
    aten._scaled_dot_product_flash_attention_for_cpu: flop_registry[aten._scaled_dot_product_flash_attention],
    aten._scaled_dot_product_flash_attention_for_cpu_backward: flop_registry[
        aten._scaled_dot_product_flash_attention_backward
    ],
}
REGISTRY = {**flop_registry, **EXTRA_FORMULAS}

# Metadata queries FlopCounterMode also passes through untouched: they move no data and launch nothing.
_METADATA = {
    aten.sym_is_contiguous.default,
    aten.is_contiguous.default,
    aten.is_contiguous.memory_format,
    aten.is_strides_like_format.default,
    aten.is_non_overlapping_and_dense.default,
    aten.size.default,
    aten.sym_size.default,
    aten.stride.default,
    aten.sym_stride.default,
    aten.storage_offset.default,
    aten.sym_storage_offset.default,
    aten.numel.default,
    aten.sym_numel.default,
    aten.dim.default,
    torch.ops.prim.layout.default,
    torch.ops.prim.device.default,
}
_NO_BYTES = {aten._unsafe_view, aten.empty, aten.empty_like, aten.empty_strided, aten.new_empty, aten.new_empty_strided}
_LAYER_NORM = {aten.native_layer_norm, aten.native_layer_norm_backward}
_GELU = {aten.gelu, aten.gelu_backward}
_SOFTMAX = {
    aten._softmax,
    aten._softmax_backward_data,
    aten._log_softmax,
    aten._log_softmax_backward_data,
    aten.nll_loss_forward,
    aten.nll_loss_backward,
    aten.nll_loss2d_forward,
    aten.nll_loss2d_backward,
}


_SPARSE_PARTS = {  # the dense tensors a sparse layout stores its data in (torch.sparse docs, "Sparse layouts")
    torch.sparse_coo: lambda t: (t._indices(), t._values()),
    torch.sparse_csr: lambda t: (t.crow_indices(), t.col_indices(), t.values()),
    torch.sparse_bsr: lambda t: (t.crow_indices(), t.col_indices(), t.values()),
    torch.sparse_csc: lambda t: (t.ccol_indices(), t.row_indices(), t.values()),
    torch.sparse_bsc: lambda t: (t.ccol_indices(), t.row_indices(), t.values()),
}


def parts(t: torch.Tensor) -> tuple:
    """The strided tensors that hold ``t``'s data: ``(t,)`` for a strided tensor; indices and values for a sparse
    one (COO: indices, values; CSR/BSR: crow_indices, col_indices, values; CSC/BSC: ccol_indices, row_indices,
    values). A sparse tensor has no strides and no storage of its own: its bytes and identities are its parts'."""
    split = _SPARSE_PARTS.get(t.layout)
    return split(t) if split else (t,)


def footprint(t: torch.Tensor) -> int:
    """Bytes a tensor occupies as an operation sees it: itemsize x the elements along the dimensions with a
    nonzero stride (a broadcast input is stored once); a sparse tensor: the sum over its ``parts``."""
    if t.layout != torch.strided:
        return sum(footprint(p) for p in parts(t))
    n = 1
    for size, stride in zip(t.shape, t.stride()):
        if stride != 0:
            n *= size
    return 0 if t.numel() == 0 else n * t.element_size()


@dataclass
class OpRecord:
    """One aten operation. ``inputs``/``outputs``: (shape, dtype name) per tensor; ``flops``: torch's formula
    (0 without one); ``bytes_read``/``bytes_written``: sizes at the boundary (0 for a view); ``phase``:
    "forward", "backward" or "optimizer"; ``group``: one of ``GROUPS``; ``reads``/``writes``: storage
    (identity, bytes) pairs (for the fusion model of ``gpulab.capstone.ladder``)."""

    index: int
    name: str
    phase: str
    group: str
    inputs: tuple
    outputs: tuple
    flops: int
    bytes_read: int
    bytes_written: int
    is_view: bool = False
    reads: tuple = field(default=(), repr=False)
    writes: tuple = field(default=(), repr=False)

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """FLOP/byte (0 for an operation that moves no bytes)."""
        return self.flops / self.bytes if self.bytes else 0.0

    @property
    def dtype(self) -> str:
        """The dtype name of the first floating-point input (else output): what sets the peak; without one,
        the first tensor's dtype (``"int64"``, ``"bool"``)."""
        for _, d in self.inputs + self.outputs:
            if d in ("fp32", "bf16", "fp16", "fp64"):
                return d
        return (self.inputs + self.outputs)[0][1] if self.inputs or self.outputs else "fp32"

    @property
    def is_kernel(self) -> bool:
        """True for an operation that moves bytes or does FLOPs (a kernel launch on a GPU)."""
        return not self.is_view and (self.bytes > 0 or self.flops > 0)


def classify(packet, phase: str, module_group: str | None = None) -> str:
    """The group of an operation: optimizer by phase, then the group of the module it runs in, then by the
    operation itself."""
    if phase == "optimizer":
        return "optimizer"
    if module_group:
        return module_group
    if "attention" in packet.__name__:
        return "attention"
    if packet in REGISTRY:
        return "matmuls"
    if packet in _LAYER_NORM:
        return "layer norm"
    if packet in _GELU:
        return "GELU"
    if packet in _SOFTMAX:
        return "softmax/cross-entropy"
    return "copies/other"


class OpRecorder(TorchDispatchMode):
    """Record every aten operation run inside ``with OpRecorder() as rec:`` into ``rec.records``.

    ``rec.mark(phase)`` sets the phase of what follows (``gpulab.capstone.gpt.Trainer.step(mark=rec.mark)``
    calls it). Storages seen are kept alive until the recorder is dropped, so their identities stay unique
    within one recording (use it on small configs or the meta device).
    """

    def __init__(self):
        super().__init__()
        self.records: list[OpRecord] = []
        self.phase = "forward"
        self._inside: list[str] = []  # op_group of the modules running now (forward)
        self._hooks: list = []
        self._depth = 0  # entries of ``with self`` now open (the dispatch re-enters it to decompose)
        self._keep: list = []

    def mark(self, phase: str) -> None:
        self.phase = phase

    def _pre(self, mod, args):
        if getattr(mod, "op_group", None):
            self._inside.append((mod, mod.op_group))

    def _post(self, mod, args, out):
        """Leave ``mod``'s group. Registered with ``always_call=True``: torch runs it when the forward raises too
        (``out`` is then None), so the group never outlives its module."""
        group = getattr(mod, "op_group", None)
        if not group:
            return
        for i in range(len(self._inside) - 1, -1, -1):  # this module's entry, and any left above it
            if self._inside[i][0] is mod:
                del self._inside[i:]
                break
        stop = {a.grad_fn for a in tree_flatten(args)[0] if isinstance(a, torch.Tensor)}
        todo = [o.grad_fn for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        seen = set()
        while todo:  # tag the module's autograd nodes, from its outputs back to its inputs
            node = todo.pop()
            if node is None or node in seen or node in stop:
                continue
            seen.add(node)
            node.metadata["op_group"] = group
            todo.extend(n for n, _ in node.next_functions)

    def __enter__(self):
        from torch.nn.modules.module import (
            register_module_forward_hook,
            register_module_forward_pre_hook,
        )

        # re-entered while decomposing (``__torch_dispatch__``): the hooks are registered by the outermost entry only
        if self._depth == 0:
            self._inside = []
            self._hooks = [
                register_module_forward_pre_hook(self._pre),
                register_module_forward_hook(self._post, always_call=True),
            ]
        self._depth += 1
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            self._depth -= 1
            if self._depth == 0:
                for h in self._hooks:
                    h.remove()
                self._hooks, self._inside = [], []

    def _module_group(self) -> str | None:
        if self._inside:
            return self._inside[-1][1]
        node = torch._C._current_autograd_node()
        return node.metadata.get("op_group") if node is not None else None

    def _keys(self, t: torch.Tensor) -> tuple:
        """(storage identity, bytes) of each of ``t``'s ``parts`` (one for a strided tensor)."""
        keys = []
        for p in parts(t):
            s = p.untyped_storage()
            self._keep.append(s)
            keys.append((s._cdata, footprint(p)))
        return tuple(keys)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _METADATA:
            return func(*args, **kwargs)
        packet = func._overloadpacket
        if packet not in REGISTRY:  # as FlopCounterMode: decompose what has no formula, if it decomposes
            with self:
                r = func.decompose(*args, **kwargs)
            if r is not NotImplemented:
                return r
        out = func(*args, **kwargs)
        ins = [
            a
            for a in tree_flatten((args, {k: v for k, v in kwargs.items() if k != "out"}))[0]
            if isinstance(a, torch.Tensor)
        ]
        outs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        no_bytes = func.is_view or packet in _NO_BYTES or all(t.dim() == 0 for t in ins + outs)
        flops = int(REGISTRY[packet](*args, **kwargs, out_val=out)) if packet in REGISTRY else 0
        self.records.append(
            OpRecord(
                index=len(self.records),
                name=str(func),
                phase=self.phase,
                group=classify(packet, self.phase, self._module_group()),
                inputs=tuple((tuple(t.shape), dtypes.name_of(t.dtype)) for t in ins),
                outputs=tuple((tuple(t.shape), dtypes.name_of(t.dtype)) for t in outs),
                flops=flops,
                bytes_read=0 if no_bytes else sum(map(footprint, ins)),
                bytes_written=0 if no_bytes else sum(map(footprint, outs)),
                is_view=func.is_view,
                reads=tuple(k for t in ins for k in self._keys(t)),
                writes=tuple(k for t in outs for k in self._keys(t)),
            )
        )
        return out


def record_step(trainer, warmup: bool = True) -> list[OpRecord]:
    """The operations of one ``trainer.step()`` (a ``gpulab.capstone.gpt.Trainer``), phases marked. With
    ``warmup`` one step runs unrecorded first, so the table is the steady state (AdamW's state exists)."""
    if warmup:
        trainer.step()
    with OpRecorder() as rec:
        trainer.step(mark=rec.mark)
    return rec.records


def record_gpt(cfg=None, opts=None, device="meta") -> list[OpRecord]:
    """The operations of one training step of ``GPT(cfg, opts)`` on ``device`` (default the meta device:
    shapes only, any size). ``cfg`` defaults to GPT-2 small, ``opts`` to the baseline ``Options()``."""
    from .gpt import GPT2_SMALL, Options, Trainer

    return record_step(Trainer(cfg or GPT2_SMALL, opts or Options(), device=device))


def group_totals(records) -> dict:
    """Per group (in ``GROUPS`` order, empty groups left out): operations (kernels only), FLOPs, bytes and
    intensity (FLOP/byte)."""
    out = {}
    for g in GROUPS:
        rs = [r for r in records if r.group == g and r.is_kernel]
        if rs:
            f, b = sum(r.flops for r in rs), sum(r.bytes for r in rs)
            out[g] = dict(ops=len(rs), flops=f, bytes=b, intensity=f / b if b else 0.0)
    return out


def table(records, limit: int | None = None) -> list[dict]:
    """Plain rows for display: index, op, phase, group, input shapes, FLOPs, bytes, FLOP/B (kernels only)."""
    rows = [
        dict(
            i=r.index,
            op=r.name.removeprefix("aten."),
            phase=r.phase,
            group=r.group,
            inputs=" ".join("x".join(map(str, s)) or "()" for s, _ in r.inputs),
            dtype=r.dtype,
            GFLOP=r.flops / 1e9,
            MB=r.bytes / 1e6,
            **{"FLOP/B": round(r.intensity, 3)},
        )
        for r in records
        if r.is_kernel
    ]
    return rows[:limit] if limit else rows
