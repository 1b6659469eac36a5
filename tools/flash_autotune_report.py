"""What Triton's autotuner picks for gpulab's FlashAttention forward, against every candidate timed alone.

    python tools/flash_autotune_report.py [--settings 128:1024,64:1024] [--json PATH]

For each (d, L) and both causal flags, at the suite's shape (bf16, B*L = 16384, H*d = 2048): every candidate
of ``FWD_CONFIGS`` (after the causal prune) launched with a fixed config and timed with ``time_ms``, then the
autotuned launch, the config it chose and the autotuner's own timings of each candidate. GPU only.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gpulab  # noqa: E402  (before triton)
import torch  # noqa: E402

from gpulab.timing import require_gpu, time_ms  # noqa: E402
from gpulab.bench.lesson08 import _sdpa, setting_shape  # noqa: E402
from gpulab.kernels import flash_attention as F  # noqa: E402


def short(cfg) -> str:
    kw = cfg.kwargs
    return f"{kw['BLOCK_M']}x{kw['BLOCK_N']} w{cfg.num_warps} s{cfg.num_stages}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", default="128:1024,64:1024,128:4096", help="d:L pairs, comma separated")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    require_gpu("the autotune report")
    out = []
    for item in args.settings.split(","):
        d, L = (int(x) for x in item.split(":"))
        B, H, _, _ = setting_shape(L, d)
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(B, H, L, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
        for causal in (False, True):
            flops = 4.0 * B * H * L * L * d * (0.5 if causal else 1.0)
            row = {"d": d, "L": L, "B": B, "H": H, "causal": causal, "fixed": {}}
            for cfg in F._prune_fwd(F.FWD_CONFIGS, {"Q": q, "CAUSAL": causal}):
                try:
                    t = time_ms(lambda: F.flash_attention_forward(q, k, v, causal, config=cfg), warmup_ms=25, rep_ms=100)
                    row["fixed"][short(cfg)] = t.rate(flops)
                except Exception as e:  # noqa: BLE001
                    row["fixed"][short(cfg)] = repr(e)[:120]
            t = time_ms(lambda: F.flash_attention_forward(q, k, v, causal), warmup_ms=25, rep_ms=100)
            row["autotuned_tflops"] = t.rate(flops)
            at = F.fwd_autotuned
            row["cache"] = {str(key): short(c) for key, c in at.cache.items()}
            row["autotuner_timings_ms"] = {short(c): (list(v) if hasattr(v, "__iter__") else v)
                                          for c, v in (getattr(at, "configs_timings", None) or {}).items()}
            sdpa = _sdpa("FLASH_ATTENTION", causal)
            ts = time_ms(lambda: sdpa(q, k, v), warmup_ms=25, rep_ms=100)
            row["sdpa_flash_tflops"] = ts.rate(flops)
            print(json.dumps(row), flush=True)
            out.append(row)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
