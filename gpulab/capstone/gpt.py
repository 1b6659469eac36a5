"""A GPT-2-small-shaped decoder in plain torch and one training step with a switch per rung of the ladder.

The model follows GPT-2 (Radford et al., 2019) as nanoGPT writes it: token and position embeddings, ``n_layer``
pre-norm blocks (layer norm, causal self-attention, residual add; layer norm, MLP with tanh-GELU, residual
add), a final layer norm and an output projection tied to the token embedding. Weights are random (normal,
std 0.02): nothing is downloaded, and the counts and times do not depend on the values.

Shapes: ``idx, targets: (B, L)`` int64 token ids; hidden states ``(B, L, d_model)``; attention heads
``(B, n_head, L, d_model / n_head)``; logits ``(B, L, vocab)``, where vocab is ``vocab_size`` or, with
``pad_vocab``, ``vocab_size`` rounded up to a multiple of 64 (50257 -> 50304; nanoGPT's habit, the padded
rows are never a target).

``Options`` holds the ladder's switches, each from one lesson:

- ``bf16``: ``torch.autocast(dtype=bfloat16)`` around forward and loss (lesson 03, precision);
- ``fused``: residual add + layer norm, bias + GELU, the naive attention's scale + mask + softmax and the
  loss as ``torch.compile``d functions, AdamW ``fused=True`` (lesson 04, fusion); only on a GPU where
  torch.compile works: elsewhere the eager functions run and ``fusion_available()`` says why;
- ``attention``: ``"naive"`` (matmul, mask, softmax, matmul: S and P in memory), ``"sdpa"``
  (``F.scaled_dot_product_attention``) or ``"flash"`` (gpulab's Triton FlashAttention; lesson 08);
- ``recompute``: ``torch.utils.checkpoint`` around each block (lesson 05, recomputation); no RNG state is
  saved (the model has no dropout), which keeps the step capturable in a CUDA graph;
- ``pad_vocab``: the vocabulary padded to a multiple of 64 (lesson 07, tile quantization and alignment);
- ``bias_gelu``: a fused bias + GELU kernel of your own, ``fn(x, bias, out)`` with x, out: (M, 4D) and bias:
  (4D,), used in the MLP's forward (its backward is torch's); lesson 09's exercise swaps it in;
- ``graphs``: the whole step captured in a CUDA graph (``gpulab.core.timing.time_ms(graph=True)``; AdamW with
  ``capturable=True``) to remove the CPU's per-kernel launch cost (lesson 04, launch overhead).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..core import plan, validate
from ..models.waves import cdiv

ATTENTION = ("naive", "sdpa", "flash")
PAD_MULTIPLE = 64


@dataclass(frozen=True)
class GPTConfig:
    """Model shape. Defaults are GPT-2 small (124M parameters with the tied output projection) and a batch of
    8 sequences of 1024 tokens. Raises ``ValueError`` naming the field for a bad value."""

    n_layer: int = 12
    d_model: int = 768
    n_head: int = 12
    vocab_size: int = 50257
    seq_len: int = 1024
    batch: int = 8

    def __post_init__(self):
        for name in ("n_layer", "d_model", "n_head", "vocab_size", "seq_len", "batch"):
            validate.positive_int(name, getattr(self, name))
        if self.d_model % self.n_head:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of n_head ({self.n_head})")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    def vocab(self, pad: bool) -> int:
        """The embedding's rows: ``vocab_size``, or rounded up to a multiple of 64 when ``pad``."""
        return cdiv(self.vocab_size, PAD_MULTIPLE) * PAD_MULTIPLE if pad else self.vocab_size

    def n_params(self, pad: bool = False) -> int:
        """Parameters, counted by hand: embeddings V*D + L*D; per block 12 D^2 + 13 D (qkv 3D^2 + 3D, proj
        D^2 + D, fc 4D^2 + 4D, proj 4D^2 + D, two layer norms 4D); final layer norm 2D; head tied."""
        D = self.d_model
        return self.vocab(pad) * D + self.seq_len * D + self.n_layer * (12 * D * D + 13 * D) + 2 * D


TINY = GPTConfig(n_layer=2, d_model=128, n_head=2, vocab_size=1000, seq_len=128, batch=2)
GPT2_SMALL = GPTConfig()


@dataclass(frozen=True)
class Options:
    """The ladder's switches (see the module docstring). ``Options()`` is the baseline: fp32, eager, naive
    attention, no recomputation, vocabulary unpadded, no graphs."""

    bf16: bool = False
    fused: bool = False
    attention: str = "naive"
    recompute: bool = False
    pad_vocab: bool = False
    graphs: bool = False
    bias_gelu: object = None

    def __post_init__(self):
        validate.one_of("attention", self.attention, ATTENTION)

    def replace(self, **kw) -> Options:
        return dataclasses.replace(self, **kw)


def fusion_available(device) -> tuple[bool, str]:
    """(True, "") where ``Options(fused=True)`` compiles its fused functions, else (False, the reason)."""
    if torch.device(device).type != "cuda":
        return (
            False,
            f"torch.compile's fused Triton kernels need a CUDA GPU; on {torch.device(device).type} the eager functions run",
        )
    try:
        import triton  # noqa: F401
    except ImportError:  # pragma: no cover - triton ships with gpulab
        return False, "triton is not installed"
    return True, ""


# ---- the pieces that fusion replaces (eager form) ----------------------------------------------------------


def add_layer_norm(x, y, weight, bias):
    """(x + y, layer_norm(x + y)): the residual add and the next block's layer norm. x, y: (B, L, D)."""
    s = x + y
    return s, F.layer_norm(s, (s.shape[-1],), weight, bias)


def bias_gelu(h, bias):
    """tanh-GELU(h + bias): h (..., 4D) from a matmul without bias, bias (4D,)."""
    return F.gelu(h + bias, approximate="tanh")


class _KernelBiasGelu(torch.autograd.Function):
    """tanh-GELU(h + bias) with the forward by ``kernel(x, bias, out)`` (x, out: (M, N), bias: (N,)) and the
    backward by torch's own formula."""

    @staticmethod
    def forward(ctx, h, bias, kernel):
        ctx.save_for_backward(h, bias)
        x = h.contiguous()
        out = torch.empty_like(x)
        kernel(x.view(-1, x.shape[-1]), bias.to(x.dtype).contiguous(), out.view(-1, x.shape[-1]))
        return out

    @staticmethod
    def backward(ctx, grad):
        h, bias = ctx.saved_tensors
        with torch.enable_grad():
            hb = (h + bias).detach().requires_grad_()
            (dh,) = torch.autograd.grad(F.gelu(hb, approximate="tanh"), hb, grad)
        return dh, dh.reshape(-1, dh.shape[-1]).sum(0).to(bias.dtype), None


def scale_mask_softmax(s, scale: float):
    """softmax(scale * s) with the causal mask; s: (B, H, L, L) scores."""
    L = s.shape[-1]
    mask = torch.ones(L, L, dtype=torch.bool, device=s.device).triu(1)
    return torch.softmax((s * scale).masked_fill(mask, float("-inf")), dim=-1)


def loss_fn(logits, targets):
    """Mean cross-entropy over (B*L) tokens, in fp32 (autocast runs it in fp32 too)."""
    return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


_COMPILED: dict = {}


def _piece(fn, opts: Options, device):
    """``fn`` compiled by torch.compile when ``opts.fused`` and fusion is available, else ``fn`` itself."""
    if not opts.fused or not fusion_available(device)[0]:
        return fn
    if fn not in _COMPILED:
        _COMPILED[fn] = torch.compile(fn, dynamic=False)
    return _COMPILED[fn]


# ---- the model ---------------------------------------------------------------------------------------------


class AttentionCore(nn.Module):
    """softmax(q k^T / sqrt(d) + causal mask) v for q, k, v: (B, H, L, d); a module of its own so that the
    operation recorder can tell the attention core's operations (forward and backward) from the rest."""

    op_group = "attention"  # read by gpulab.capstone.recorder

    def __init__(self, impl: str, opts: Options):
        super().__init__()
        self.impl, self.opts = impl, opts

    def forward(self, q, k, v):
        if self.impl == "sdpa":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if self.impl == "flash":
            from ..kernels.flash_attention import flash_attention

            return flash_attention(q, k, v, causal=True)
        p = _piece(scale_mask_softmax, self.opts, q.device)(q @ k.transpose(-2, -1), 1.0 / math.sqrt(q.shape[-1]))
        return p.to(v.dtype) @ v  # (B, H, L, d)


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig, opts: Options):
        super().__init__()
        D = cfg.d_model
        self.cfg, self.opts = cfg, opts
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc, self.fc_proj = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        self.core = AttentionCore(opts.attention, opts)

    def attn(self, h):
        B, L, D = h.shape
        H = self.cfg.n_head
        q, k, v = self.qkv(h).split(D, dim=-1)  # (B, L, D) each
        q, k, v = (t.view(B, L, H, D // H).transpose(1, 2) for t in (q, k, v))  # (B, H, L, d)
        o = self.core(q, k, v).transpose(1, 2).reshape(B, L, D)
        return self.proj(o)

    def mlp(self, h):
        if self.opts.bias_gelu is not None:
            g = _KernelBiasGelu.apply(F.linear(h, self.fc.weight), self.fc.bias, self.opts.bias_gelu)
        elif self.opts.fused:
            g = _piece(bias_gelu, self.opts, h.device)(F.linear(h, self.fc.weight), self.fc.bias)
        else:
            g = F.gelu(self.fc(h), approximate="tanh")
        return self.fc_proj(g)

    def forward(self, x):
        a = self.attn(self.ln1(x))
        x, h = _piece(add_layer_norm, self.opts, x.device)(x, a, self.ln2.weight, self.ln2.bias)
        return x + self.mlp(h)


class GPT(nn.Module):
    """The decoder: ``GPT(cfg, opts)(idx) -> logits`` with idx: (B, L) int64, logits: (B, L, vocab)."""

    def __init__(self, cfg: GPTConfig, opts: Options = Options()):
        super().__init__()
        self.cfg, self.opts = cfg, opts
        V, D = cfg.vocab(opts.pad_vocab), cfg.d_model
        self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(cfg.seq_len, D)
        self.blocks = nn.ModuleList(Block(cfg, opts) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(D)
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx):
        L = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(L, device=idx.device))  # (B, L, D)
        for block in self.blocks:
            if self.opts.recompute and torch.is_grad_enabled():
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False, preserve_rng_state=False)
            else:
                x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # (B, L, vocab), head tied to the embedding


# ---- one training step -------------------------------------------------------------------------------------


def autocast_dtype(kind: str, plan_=None) -> torch.dtype:
    """The 16-bit dtype of the ``bf16`` rung on device type ``kind``: bf16, except on a CUDA GPU whose plan has
    no bf16 tensor cores (``plan.Plan.dtype("bf16")``, e.g. a T4 or GPULAB_AS_GPU=T4), where fp16 takes its
    place (same bytes, fp16 tensor cores). ``plan_``: default ``plan.current()``."""
    if kind != "cuda":
        return torch.bfloat16
    return torch.bfloat16 if (plan_ or plan.current()).dtype("bf16") == "bf16" else torch.float16


def _autocast(opts: Options, device):
    """16-bit autocast (``autocast_dtype``) on CUDA and CPU when ``opts.bf16``; none on the meta device (no
    autocast there)."""
    kind = torch.device(device).type
    if not opts.bf16 or kind not in ("cuda", "cpu"):
        return contextlib.nullcontext()
    return torch.autocast(device_type=kind, dtype=autocast_dtype(kind))


class Trainer:
    """A ``GPT`` with random weights, AdamW and one fixed batch of random tokens on ``device``.

    ``step()`` runs forward, the cross-entropy loss, backward and ``AdamW.step`` and returns the loss (a 0-d
    fp32 tensor; not synchronized, so a CUDA graph can capture the step). On the meta device nothing is
    computed and only shapes flow (the operation recorder counts the full GPT-2-small step that way).
    ``seed`` fixes the weights and the batch. AdamW: lr 6e-4, betas (0.9, 0.95), weight decay 0.1 (nanoGPT's
    GPT-2 settings); ``fused=True`` with ``opts.fused`` on a GPU, else ``foreach=True`` (torch's default on a
    GPU: one multi-tensor operation per step of the update, for all parameters); ``capturable=True`` with
    ``opts.graphs`` on a GPU.
    """

    def __init__(self, cfg: GPTConfig = TINY, opts: Options = Options(), device="cpu", seed: int = 0, lr: float = 6e-4):
        self.cfg, self.opts, self.device = cfg, opts, torch.device(device)
        torch.manual_seed(seed)
        with torch.device(self.device):
            self.model = GPT(cfg, opts)
        shape = (cfg.batch, cfg.seq_len)
        if self.device.type == "meta":
            self.idx = torch.empty(shape, dtype=torch.long, device="meta")
            self.targets = torch.empty(shape, dtype=torch.long, device="meta")
        else:
            g = torch.Generator().manual_seed(seed)
            self.idx = torch.randint(cfg.vocab_size, shape, generator=g).to(self.device)
            self.targets = torch.randint(cfg.vocab_size, shape, generator=g).to(self.device)
        kw = {}
        if opts.fused and fusion_available(self.device)[0]:
            kw["fused"] = True
        else:
            kw["foreach"] = True
        if opts.graphs and self.device.type == "cuda":  # CUDA-graph capture; torch's AdamW refuses it on a CPU
            kw["capturable"] = True
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1, **kw)

    def step(self, mark=None):
        """One training step; ``mark(phase)`` is called with "forward", "backward" and "optimizer" as each
        begins (the recorder tags operations with it). Returns the loss."""
        mark = mark or (lambda phase: None)
        self.opt.zero_grad(set_to_none=True)
        mark("forward")
        with _autocast(self.opts, self.device):
            logits = self.model(self.idx)
            loss = _piece(loss_fn, self.opts, self.device)(logits, self.targets)
        mark("backward")
        loss.backward()
        mark("optimizer")
        self.opt.step()
        return loss.detach()
