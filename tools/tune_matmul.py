"""Try gpulab's matmul configs on a GPU and print TFLOP/s and the ratio against torch.matmul (cuBLAS).

    python tools/tune_matmul.py                 # writes $OUT/tune_matmul.json (OUT defaults to /tmp/gpulab-out)
    python tools/tune_matmul.py --budget-s 200  # stop starting new measurements after 200 s
    python tools/tune_matmul.py --stages B,C    # skip stage A; stage B uses --configs (default: DEFAULT_B)
    python tools/tune_matmul.py --stages A --configs "tma:128x256x64 g8 w8 s3 persistent flatten" --with-ws

Stage A: every candidate (TMA path and pointer path) on bf16 4096^3 and 8192^3, with its registers, spills,
shared memory and relative error against torch.matmul. Stage B: the best TMA and pointer candidates on
fp16 4096/8192 and on the awkward sizes 1793, 2049, 4097 (bf16 and fp16): the TMA path pads rows into
aligned buffers (the copy is timed as part of it), the pointer path masks; beside them torch.matmul on
the unpadded tensors, torch.matmul after zero-padding to a multiple of 8 (copy included), and the pad copy
alone. Stage C: the wall-clock cost of one dense-sweep point (do_bench warmup 1 ms, rep 5 ms), to predict
how long the suite's sweep over N = 1024..4352 takes. The JSON is rewritten after every measurement, so a
crash or a timeout keeps what was measured. GPU only. Rates are ``gpulab.bench.lesson07.tflops``; the candidate
lists of ``gpulab.kernels.matmul.CONFIGS`` are what this screen ranks.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import triton  # noqa: E402

import gpulab  # noqa: E402  (sets the mode before triton is imported)
from gpulab.bench.lesson07 import tflops  # noqa: E402
from gpulab.core import dtypes  # noqa: E402
from gpulab.core.timing import time_ms  # noqa: E402
from gpulab.core.tolerances import relative_error  # noqa: E402
from gpulab.kernels import matmul as mm  # noqa: E402
from gpulab.kernels.resources import kernel_resources  # noqa: E402

# Stage B's configs when stage A does not run: the autotuner's first three TMA candidates and the first pointer one.
DEFAULT_B = [("tma", c) for c in mm.CONFIGS["tma"][:3]] + [("pointer", mm.CONFIGS["pointer"][0])]


def candidates(with_ws: bool = False):
    """(path, config) pairs for stage A; warp-specialized ones last and only on request (they compile slowly,
    and a budget cut should drop them first)."""
    cfg = mm.MatmulConfig
    tma = [
        cfg(128, 256, 64, 8, 8, 3, persistent=True, flatten=True),
        cfg(128, 256, 64, 8, 8, 3, persistent=True),
        cfg(128, 256, 64, 8, 8, 4, persistent=True, flatten=True),
        cfg(128, 256, 64, 8, 8, 3),
        cfg(128, 256, 64, 8, 8, 4),
        cfg(128, 128, 64, 8, 4, 4, persistent=True, flatten=True),
        cfg(128, 128, 64, 8, 8, 4, persistent=True, flatten=True),
        cfg(128, 128, 64, 8, 4, 4),
        cfg(256, 128, 64, 8, 8, 3, persistent=True, flatten=True),
        cfg(128, 256, 128, 8, 8, 2, persistent=True, flatten=True),
        cfg(64, 256, 64, 8, 4, 4, persistent=True, flatten=True),
        cfg(128, 256, 64, 16, 8, 3, persistent=True, flatten=True),
    ]
    ptr = [
        cfg(128, 256, 64, 8, 8, 3),
        cfg(128, 128, 64, 8, 4, 4),
        cfg(128, 128, 64, 8, 8, 3),
        cfg(128, 128, 32, 8, 4, 4),
    ]
    ws = [
        cfg(128, 256, 64, 8, 8, 3, persistent=True, warp_specialize=True),
        cfg(128, 128, 64, 8, 4, 4, persistent=True, warp_specialize=True),
        cfg(128, 256, 64, 8, 8, 3, warp_specialize=True),
    ]
    return [("tma", c) for c in tma] + [("pointer", c) for c in ptr] + ([("tma", c) for c in ws] if with_ws else [])


def _parse_configs(spec: str, with_ws: bool):
    """'path:short name;path:short name' (short names as mm.config_label prints them) -> (path, config)."""
    known = {f"{p}:{mm.config_label(c)}": (p, c) for p, c in candidates(with_ws=True)}
    out = []
    for item in [x.strip() for x in spec.replace(";", ",").split(",") if x.strip()]:
        if item not in known:
            raise SystemExit(f"--configs: unknown {item!r}; known:\n  " + "\n  ".join(known))
        out.append(known[item])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget-s", type=float, default=210.0, help="start no new measurement after this (s)")
    ap.add_argument("--top", type=int, default=3, help="TMA configs carried into stage B")
    ap.add_argument("--stages", default="A,B,C", help="which stages to run, e.g. B,C")
    ap.add_argument(
        "--configs",
        default="",
        help="'path:config' items (';' or ',' separated) for stage A and, "
        "when A does not run, stage B; default: all candidates for A, DEFAULT_B for B",
    )
    ap.add_argument("--with-ws", action="store_true", help="add the warp-specialized candidates to stage A")
    args = ap.parse_args(argv)
    if not gpulab.ON_GPU:
        print("tune_matmul.py needs a CUDA GPU", file=sys.stderr)
        return 2
    from gpulab.bench.lesson07 import AWKWARD_NS, HEADLINE_NS, SWEEP

    dev = gpulab.DEVICE
    sizes_a, sizes_awk, (sweep_lo, sweep_hi) = HEADLINE_NS, AWKWARD_NS, SWEEP

    t_start = time.time()
    out_dir = Path(os.environ.get("OUT", "/tmp/gpulab-out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    out_path = out_dir / "tune_matmul.json"
    rec = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "sms": mm.num_sms(),
        "stage_a": [],
        "stage_b": [],
        "sweep_cost": {},
        "notes": [],
    }

    def save():
        out_path.write_text(json.dumps(rec, indent=1))

    def over_budget() -> bool:
        return time.time() - t_start > args.budget_s

    inputs = {}

    def get(n, dname):
        key = (n, dname)
        if key not in inputs:
            inputs.clear()
            torch.cuda.empty_cache()
            a = torch.randn(n, n, device=dev, dtype=dtypes.torch_dtype(dname))
            b = torch.randn(n, n, device=dev, dtype=dtypes.torch_dtype(dname))
            inputs[key] = (a, b, torch.matmul(a.float(), b.float()))
        return inputs[key]

    def rel_err(c, ref):
        return relative_error(ref, c, kind="norm")

    torch_cache = {}

    def torch_ms(n, dname, rep):
        if (n, dname) not in torch_cache:
            a, b, _ = get(n, dname)
            torch_cache[(n, dname)] = time_ms(lambda: torch.matmul(a, b), warmup_ms=25, rep_ms=rep).median_ms
        return torch_cache[(n, dname)]

    def measure(path, cfg, n, dname, rep=100):
        a, b, ref = get(n, dname)
        c = torch.empty(n, n, device=dev, dtype=a.dtype)
        row = {"path": path, "config": mm.config_label(cfg), "n": n, "dtype": dname}
        t0 = time.time()
        try:
            k = mm.launch(a, b, c, cfg, path)
            torch.cuda.synchronize()
            row["compile_s"] = round(time.time() - t0, 2)
            row.update(kernel_resources(k))
            row["rel_err"] = rel_err(c, ref)
            ms = time_ms(lambda: mm.launch(a, b, c, cfg, path), warmup_ms=25, rep_ms=rep).median_ms
            tms = torch_ms(n, dname, rep)
            row.update(ms=ms, tflops=tflops(n, ms), torch_ms=tms, torch_tflops=tflops(n, tms), ratio=tms / ms)
        except Exception as e:  # noqa: BLE001  (record and go on)
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
            row["trace_tail"] = traceback.format_exc().splitlines()[-3:]
        return row

    def show(row):
        if "error" in row:
            print(
                f"  {row['path']:7} {row['config']:42} {row['dtype']} {row['n']:5}: FAILED {row['error']}", flush=True
            )
        else:
            print(
                f"  {row['path']:7} {row['config']:42} {row['dtype']} {row['n']:5}: {row['ms']:8.4f} ms "
                f"{row['tflops']:6.1f} TFLOP/s  torch {row['torch_tflops']:6.1f}  ratio {row['ratio']:5.3f}  "
                f"err {row['rel_err']:.1e} regs {row.get('n_regs')} spills {row.get('n_spills')} "
                f"smem {row.get('shared_bytes')} (compile {row['compile_s']} s)",
                flush=True,
            )

    stages = {x.strip().upper() for x in args.stages.split(",") if x.strip()}
    chosen = _parse_configs(args.configs, args.with_ws) if args.configs else None
    print(f"{rec['gpu']}, torch {rec['torch']}, Triton {rec['triton']}, {rec['sms']} SMs; writing {out_path}")
    if "A" in stages:
        print("Stage A: bf16 4096^3 and 8192^3, every candidate")
    for path, cfg in (chosen or candidates(args.with_ws)) if "A" in stages else []:
        for n in sizes_a:
            if over_budget():
                rec["notes"].append(f"stage A stopped at the time budget before {path} {mm.config_label(cfg)} n={n}")
                break
            row = measure(path, cfg, n, "bf16", rep=100 if n == sizes_a[0] else 200)
            show(row)
            rec["stage_a"].append(row)
            save()

    def best(path, k):
        ok = [r for r in rec["stage_a"] if r["path"] == path and "error" not in r and r["rel_err"] < 2e-2]
        score = {}
        for r in ok:
            score.setdefault(r["config"], []).append(r["ratio"])
        ranked = sorted((sum(v) / len(v), name) for name, v in score.items() if len(v) == 2)
        names = [name for _, name in ranked[::-1][:k]]
        return [cfg for p, cfg in candidates(with_ws=True) if p == path and mm.config_label(cfg) in names]

    if "A" in stages:
        top = [("tma", c) for c in best("tma", args.top)] + [("pointer", c) for c in best("pointer", 1)]
    elif "B" in stages:
        top = chosen or DEFAULT_B
    else:
        top = []
    rec["stage_b_configs"] = [f"{p} {mm.config_label(c)}" for p, c in top]
    if "B" in stages:
        print(
            "Stage B: " + "; ".join(rec["stage_b_configs"]) + " on fp16 4096/8192 and on awkward sizes "
            "(TMA pads, pointer masks)"
        )
    for dname in ("bf16", "fp16") if "B" in stages else []:
        for n in sizes_a + sizes_awk:
            if dname == "bf16" and n in sizes_a and "A" in stages:
                continue  # done in stage A
            for path, cfg in top:
                if over_budget():
                    break
                row = measure(path, cfg, n, dname, rep=100)
                show(row)
                rec["stage_b"].append(row)
                save()
            if n in sizes_awk and not over_budget():
                a, b, ref = get(n, dname)
                np8 = -(-n // 8) * 8

                def torch_padded():
                    ap = torch.zeros(n, np8, device=dev, dtype=a.dtype)
                    bp = torch.zeros(np8, np8, device=dev, dtype=a.dtype)
                    ap[:, :n] = a
                    bp[:n, :n] = b
                    return torch.matmul(ap, bp)[:, :n]

                row = {
                    "path": "torch+zero-pad",
                    "n": n,
                    "dtype": dname,
                    "ms": time_ms(torch_padded, warmup_ms=25, rep_ms=100).median_ms,
                    "pad_copy_ms": time_ms(
                        lambda: (mm.pad_rows(a), mm.pad_rows(b)), warmup_ms=25, rep_ms=100
                    ).median_ms,
                    "torch_ms": torch_ms(n, dname, 100),
                }
                row["rel_err"] = rel_err(torch_padded(), ref)
                row["tflops"] = tflops(n, row["ms"])
                row["ratio"] = row["torch_ms"] / row["ms"]
                print(
                    f"  torch.matmul after zero-padding to {np8}: {row['ms']:.4f} ms ({row['tflops']:.1f} TFLOP/s, "
                    f"ratio {row['ratio']:.3f} vs unpadded torch {row['torch_ms']:.4f} ms); gpulab's row-pad "
                    f"copy of A and B alone {row['pad_copy_ms']:.4f} ms",
                    flush=True,
                )
                rec["stage_b"].append(row)
                save()

    if "C" in stages:
        print("Stage C: cost of one dense-sweep point (do_bench warmup 1 ms, rep 5 ms; torch and gpulab heuristic)")
    if "C" in stages and not over_budget():
        import random

        ns = sorted(random.Random(0).sample(range(sweep_lo, sweep_hi + 1), 24))
        walls = []
        for n in ns:
            a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
            b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
            t0 = time.time()
            try:
                tt = time_ms(lambda: torch.matmul(a, b), warmup_ms=1, rep_ms=5).median_ms
                tg = time_ms(lambda: mm.matmul(a, b, config="heuristic"), warmup_ms=1, rep_ms=5).median_ms
                walls.append(time.time() - t0)
                print(
                    f"  N={n}: torch {tflops(n, tt):6.1f} TFLOP/s, gpulab {tflops(n, tg):6.1f}; wall {walls[-1]:.3f} s",
                    flush=True,
                )
            except Exception as e:  # noqa: BLE001
                print(f"  N={n}: FAILED {type(e).__name__}: {e}")
        if walls:
            walls_sorted = sorted(walls)[1:-1] or walls  # drop the first-compile outliers at both ends
            per = sum(walls_sorted) / len(walls_sorted)
            rec["sweep_cost"] = {
                "ns": ns,
                "wall_s": walls,
                "mean_s_per_point": per,
                "predicted_full_sweep_s": per * (sweep_hi - sweep_lo + 1),
            }
            print(
                f"  mean {per:.3f} s per N -> full sweep over {sweep_hi - sweep_lo + 1} sizes ~ "
                f"{per * (sweep_hi - sweep_lo + 1):.0f} s"
            )
    rec["elapsed_s"] = time.time() - t_start
    save()
    print(f"done in {rec['elapsed_s']:.0f} s; wrote {out_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
