"""Lesson 09's capstone: the operation recorder against torch's FLOP counter and hand counts, the GPT step,
the GPT-2-small table on the meta device, the roofline classes on the H200, and the exercise checkers."""

import functools
import itertools
import math

import pytest
import torch
import torch.nn.functional as F

import gpulab
from gpulab.capstone import ladder, placement, recorder
from gpulab.capstone.gpt import GPT2_SMALL, TINY, GPTConfig, Options, Trainer
from gpulab.core import hardware
from gpulab.exercises import ex09

pytestmark = pytest.mark.usefixtures("seed")  # random inputs: fresh each run, the seed in a failure's report


def _kernels(fn):
    with recorder.OpRecorder() as rec:
        fn()
    return [r for r in rec.records if r.is_kernel]


@functools.lru_cache(maxsize=1)
def _gpt2_small_table():
    return recorder.record_gpt(GPT2_SMALL, Options(), device="meta")


def test_flops_agree_with_flop_counter_mode_on_a_training_step(seed):
    from torch.utils.flop_counter import FlopCounterMode  # here: it imports triton, which gpulab must precede

    rec = recorder.record_step(Trainer(TINY, seed=seed), warmup=False)
    with FlopCounterMode(display=False) as fc:
        Trainer(TINY, seed=seed).step()
    assert fc.get_total_flops() > 0
    assert sum(r.flops for r in rec) == fc.get_total_flops()


def test_bytes_match_hand_counts_for_matmul_layer_norm_softmax_and_a_view():
    M, K, N = 37, 53, 29  # awkward sizes
    a, b = torch.randn(M, K), torch.randn(K, N)
    (mm,) = _kernels(lambda: torch.mm(a, b))
    assert mm.flops == 2 * 37 * 53 * 29
    assert (mm.bytes_read, mm.bytes_written) == (4 * (37 * 53 + 53 * 29), 4 * 37 * 29)

    rows, D = 19, 33
    x, w, bias = torch.randn(rows, D), torch.randn(D), torch.randn(D)
    (ln,) = _kernels(lambda: F.layer_norm(x, (D,), w, bias))
    assert ln.group == "layer norm"
    assert ln.bytes_read == 4 * (19 * 33 + 33 + 33)  # x, weight, bias
    assert ln.bytes_written == 4 * (19 * 33 + 19 + 19)  # y, mean and rstd (fp32, one per row)

    s = torch.randn(7, 11, 13, dtype=torch.bfloat16)
    (sm,) = _kernels(lambda: torch.softmax(s, dim=-1))
    assert (sm.bytes_read, sm.bytes_written, sm.flops) == (2 * 7 * 11 * 13, 2 * 7 * 11 * 13, 0)

    with recorder.OpRecorder() as rec:
        x.t()
    assert rec.records and all(r.bytes == 0 and not r.is_kernel for r in rec.records)


def test_broadcast_input_counts_its_stored_elements_once():
    x, bias = torch.randn(64, 10), torch.randn(10)
    (add,) = _kernels(lambda: x + bias.expand(64, 10))
    assert add.bytes_read == 4 * (640 + 10) and add.bytes_written == 4 * 640


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch's notes on sparse invariant checks and CSR's beta state
def test_sparse_ops_are_recorded_by_their_indices_and_values():
    n, nnz = 9, 5
    idx = torch.stack([torch.randperm(n)[:nnz], torch.randperm(n)[:nnz]])  # (2, nnz) int64, distinct rows
    coo = torch.sparse_coo_tensor(idx, torch.randn(nnz), (n, n)).coalesce()
    coo_bytes = 2 * nnz * 8 + nnz * 4  # indices int64, values fp32
    (add,) = _kernels(lambda: coo + coo)
    assert (add.bytes_read, add.bytes_written) == (2 * coo_bytes, coo_bytes)
    csr = coo.to_sparse_csr()
    dense = torch.randn(n, 3)
    with recorder.OpRecorder() as rec:
        y = csr @ dense
    torch.testing.assert_close(y, coo.to_dense() @ dense)  # the recorder changes nothing it observes
    (mm,) = [r for r in rec.records if "mm" in r.name]
    csr_bytes = (n + 1) * 8 + nnz * 8 + nnz * 4  # crow_indices, col_indices, values
    assert mm.bytes_read == csr_bytes + 4 * n * 3 and mm.bytes_written == 4 * n * 3


def test_a_module_that_raises_leaves_its_op_group():
    class Grouped(torch.nn.Module):
        op_group = "attention"

        def forward(self, x, fail):
            y = x * 2  # recorded in "attention"
            if fail:
                raise RuntimeError("boom")
            return y

    m, x = Grouped(), torch.randn(8)
    with recorder.OpRecorder() as rec:
        with pytest.raises(RuntimeError, match="boom"):
            m(x, True)
        x + 1  # after the failed module: not attention
        m(x, False)
        x - 1
    groups = [r.group for r in rec.records if r.is_kernel]
    assert groups == ["attention", "copies/other", "attention", "copies/other"], groups


def test_the_recorder_removes_its_module_hooks_even_after_decomposing():
    from torch.nn.modules import module

    before = (len(module._global_forward_pre_hooks), len(module._global_forward_hooks))
    lin = torch.nn.Linear(8, 8)
    with recorder.OpRecorder() as rec:  # Linear's init and the backward hold operations that decompose
        F.gelu(lin(torch.randn(4, 8))).sum().backward()
    assert rec.records
    assert (len(module._global_forward_pre_hooks), len(module._global_forward_hooks)) == before


def test_gpt_step_on_cpu_lowers_the_loss(seed):
    t = Trainer(TINY, seed=seed)
    losses = [float(t.step()) for _ in range(4)]
    assert all(b < a for a, b in itertools.pairwise(losses)), str(losses)
    assert abs(losses[0] - torch.log(torch.tensor(1000.0)).item()) < 0.5  # random init: about ln(vocab)


def test_config_counts_gpt2_small_parameters_and_pads_the_vocabulary():
    assert GPT2_SMALL.n_params() == 124_439_808  # GPT-2 small with the tied head (Radford et al. 2019: "117M")
    assert GPT2_SMALL.vocab(pad=True) == 50304 and GPT2_SMALL.vocab(pad=False) == 50257
    with pytest.raises(ValueError, match="n_head"):
        GPTConfig(d_model=100, n_head=12)
    with pytest.raises(ValueError, match="attention"):
        Options(attention="fast")


def test_gpt2_small_meta_table_has_the_hand_counted_matmul_flops():
    recs = _gpt2_small_table()
    tot = recorder.group_totals(recs)
    # By hand: T = 8 x 1024 = 8192 tokens. Matrix weights 12 D^2 per layer x 12 + the tied head V D
    # = 12 x 768^2 x 12 + 50257 x 768 = 84,934,656 + 38,597,376 = 123,532,032. Forward 2 T W, backward 4 T W.
    assert tot["matmuls"]["flops"] == 6 * 8192 * 123_532_032
    # Naive attention: QK^T and PV, 2 B H L^2 d each forward = 4 B L^2 D per layer; backward twice that.
    assert tot["attention"]["flops"] == 12 * 8 * 1024**2 * 768 * 12
    # The 6 N T estimate with all 124,439,808 parameters: the matmuls within 1% (the rest are embeddings,
    # biases and norms, which do no matmul FLOPs).
    assert abs(tot["matmuls"]["flops"] / (6 * 124_439_808 * 8192) - 1) < 0.01


def test_h200_puts_big_matmuls_compute_bound_and_layer_norm_memory_bound():
    ps = placement.place(_gpt2_small_table(), hardware.get("H200"))
    big = [p for p in ps if p.flops > 1e10]
    assert len(big) >= 100 and all(p.kind == "compute" for p in big)
    lns = [p for p in ps if p.group == "layer norm"]
    assert lns and all(p.kind == "memory" for p in lns)
    assert all(p.peak_tflops == 67.0 for p in big)  # fp32 matmuls: the CUDA-core rate, not the tensor cores


def test_tiny_kernels_are_overhead_bound():
    p = placement.place_one("bias", "copies/other", 0, 4 * 768, "fp32", hardware.get("H200"))
    assert p.kind == "overhead" and p.memory_ms == pytest.approx(6.4e-7)  # 3072 bytes at 4.8 TB/s: 0.64 ns


def test_fusion_model_reproduces_the_seed_sincos_bytes():
    n = 1000
    x = torch.randn(n)
    recs = _kernels(lambda: torch.sin(x) ** 2 + torch.cos(x) ** 2)
    ks = [ladder.Kernel(r.name, r.group, r.phase, r.flops, r.bytes, r.dtype, r.reads, r.writes) for r in recs]
    assert sum(k.bytes for k in ks) == 44 * n  # five kernels: 11n transfers of 4 bytes
    (fused,) = ladder._fuse(ks)
    assert fused.bytes == 8 * n  # read x, write y


def test_builder_test_checker():
    assert ex09.check_builder_test(ex09.check_builder_test.solution).ok
    rep = ex09.check_builder_test(lambda op: ("precision", 2.0))
    assert not rep.ok and "flash gives" in str(rep) and "no habit gains" in str(rep)


def _unmasked():
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(x_ptr, b_ptr, y_ptr, n, N, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        h = tl.load(x_ptr + offs) + tl.load(b_ptr + offs % N)
        z = 0.7978845608028654 * (h + 0.044715 * h * h * h)
        tl.store(y_ptr + offs, 0.5 * h * (2.0 * tl.sigmoid(2.0 * z)))

    return lambda x, b, out: kernel[(triton.cdiv(x.numel(), 256),)](x, b, out, x.numel(), x.shape[-1], BLOCK=256)


def test_bias_gelu_checker_right_wrong_and_unmasked():
    assert ex09.check_bias_gelu(ex09.check_bias_gelu.solution).ok
    rep = ex09.check_bias_gelu(lambda x, b, out: out.copy_(F.gelu(x + b)))  # torch writes out: no Triton kernel
    assert not rep.ok and "launched no Triton kernel" in str(rep)
    rep = ex09.check_bias_gelu(_unmasked())
    assert not rep.ok and "mask the store" in str(rep)
    rep = ex09.check_bias_gelu(lambda x, b, out: 1 / 0)
    assert not rep.ok and "ZeroDivisionError" in str(rep)


def test_swap_in_trains_with_the_learner_kernel():
    res = ex09.swap_in(ex09.check_bias_gelu.solution, steps=2)
    assert res["max_diff"] < 1e-4, res


def test_predicted_ladder_on_h200():
    cfg = GPTConfig(n_layer=2)  # GPT-2 small's widths and batch, two layers: the same balance, recorded faster
    rows = ladder.predict_ladder(hardware.get("H200"), cfg)
    ms = {r["rung"]: r["predicted_ms"] for r in rows}
    assert [r.name for r in ladder.RUNGS] == list(ms)
    assert ms["+ bf16 autocast"] < ms["fp32 eager, naive attention"] / 2  # the matmuls move to the tensor cores
    assert ms["+ FlashAttention"] < ms["+ fused kernels"]
    assert ms["+ recomputation"] > ms["+ FlashAttention"]  # recomputation buys memory with time
    assert ms["+ CUDA graphs"] <= ms["+ vocab 50257 -> 50304"]


def test_measure_refuses_without_gpu():
    if gpulab.ON_GPU:
        pytest.skip("on a GPU the ladder is measured by the benchmark suite")
    from gpulab.core.timing import NoGPUTimingError

    with pytest.raises(NoGPUTimingError):
        ladder.measure(TINY, Options())


def _fake_suite_data():
    rows = [
        dict(
            rung=r.name,
            habit=r.habit,
            lesson=r.lesson,
            predicted_ms=10.0 + i,
            predicted_profile_ms=None,
            ms=12.0 + i,
            p20_ms=11.0,
            p80_ms=13.0,
            peak_mem_gib=20.0 - i,
            loss=10.9,
        )
        for i, r in enumerate(ladder.RUNGS)
    ]
    ops = {
        ladder.RUNGS[0].name: {"matmuls": 90.0, "attention": 25.0, "optimizer": 5.0, "layer norm": 1.0, "GELU": 1.0},
        ladder.RUNGS[-2].name: {"matmuls": 6.0, "attention": 3.0},
    }
    return dict(
        config=dict(batch=8, seq_len=1024), spec="H200", profile=None, ladder=rows, ops=ops, ops_counting="operators"
    )


def test_suite_report_is_short_and_groups_profiler_names_like_the_recorder():
    from gpulab.bench import lesson09

    text = lesson09.report(_fake_suite_data())
    assert len(text.splitlines()) <= 15 and "+ CUDA graphs" in text and "matmuls 90.0 ms" in text
    names = {
        "aten::mm": "matmuls",
        "aten::addmm": "matmuls",
        "aten::bmm": "attention",
        "aten::_log_softmax": "softmax/cross-entropy",
        "aten::native_layer_norm": "layer norm",
        "triton_poi_fused_gelu_add_3": "GELU",
        "aten::_foreach_addcdiv_": "optimizer",
        "aten::add": "copies/other",
    }
    assert {n: lesson09.group_of(n) for n in names} == names
    if not gpulab.ON_GPU:
        from gpulab.core.timing import NoGPUTimingError

        with pytest.raises(NoGPUTimingError):
            lesson09.run(progress=False)


def test_figures_build_at_both_ends_of_the_explorer(seed):
    from gpulab.figures import lesson09 as fig09

    fig = fig09.op_roofline(recorder.record_step(Trainer(TINY, seed=seed)), "H200")
    assert {t.name for t in fig.data} >= {"matmuls", "attention", "layer norm", "optimizer"}
    assert all(len(t.x) > 0 for t in fig.data)
    legend = fig.layout.legend  # in rows under the plot, pinned to the figure's bottom (not beside it)
    assert legend.orientation == "h" and (legend.yref, legend.y, legend.yanchor) == ("container", 0, "bottom")
    assert (
        fig.layout.legend.itemsizing == "constant"
        and min(s for t in fig.data if t.name in recorder.GROUPS for s in t.marker.size) >= 7
    )  # no marker a mere dot
    kernels = [t for t in fig.data if t.name in recorder.GROUPS]
    assert all(x > 0 and y > 0 for t in kernels for x, y in zip(t.x, t.y))  # in-place updates and sums: on the plot
    lo_x, hi_x = fig.layout.xaxis.range
    assert all(lo_x <= math.log10(x) <= hi_x for t in kernels for x in t.x)
    rates = [y for t in kernels for y in t.y]
    assert fig.layout.yaxis.range[0] == pytest.approx(math.log10(min(rates)) - 0.5)  # half a decade under the kernels
    ex = fig09.ModelSizeExplorer("H200", n_layer=1, d_model=256, seq_len=128)
    small = ex.split["ms"]
    assert ex.split["kinds"]["overhead"] > 0 and sum(sum(t.x) for t in ex.live.fig.data) > 0  # bars read across
    ex.layers.value, ex.d_model.value, ex.seq.value = 48, 1600, 4096
    assert ex.split["ms"] > 100 * small and "48 layers" in ex.live.fig.layout.title.text
    assert ex.live.fig.layout.legend.orientation == "h"
    bd = fig09.breakdown(GPTConfig(n_layer=1), "H200")
    title = bd.layout.title.text
    assert ("no recording" in title) == (fig09.recorded().data is None), title
    for f in (bd, fig09.ladder_figure(GPTConfig(n_layer=1), "H200")):  # the source in a subtitle: no clipped title
        assert f.layout.legend.orientation == "h" and "<br><sup>" in f.layout.title.text
    for f in (bd, fig09.ladder_figure(GPTConfig(n_layer=1), "H200"), ex.live.fig):  # names read across, none turns
        assert {tr.orientation for tr in f.data} == {"h"} and f.layout.yaxis.autorange == "reversed"


@pytest.mark.parametrize("name, want", [("T4", torch.float16), ("L4", torch.bfloat16), ("H200", torch.bfloat16)])
def test_the_bf16_rung_takes_fp16_where_the_plan_has_no_bf16_tensor_cores(name, want):
    from gpulab.capstone.gpt import autocast_dtype
    from gpulab.core import plan

    p = plan.for_gpu(plan.as_gpu_spec(name))
    assert autocast_dtype("cuda", p) == want
    assert autocast_dtype("cpu", p) == torch.bfloat16  # CPU autocast: bf16 whatever the GPU plan


def test_group_times_counts_each_kernel_once():
    """An operator's self device time is its kernels' time; the kernel events themselves come back as
    device-side events and must not be added again (the sum would be twice the step)."""
    from types import SimpleNamespace as E

    from torch.autograd import DeviceType

    from gpulab.bench import lesson09

    events = [
        E(key="aten::mm", device_type=DeviceType.CPU, self_device_time_total=3000.0),
        E(key="sm90_xmma_gemm_f32", device_type=DeviceType.CUDA, self_device_time_total=3000.0),
        E(key="aten::gelu", device_type=DeviceType.CPU, self_device_time_total=600.0),
        E(key="aten::matmul", device_type=DeviceType.CPU, self_device_time_total=0.0),  # its kernels are mm's
    ]
    got = lesson09.group_times(events, steps=3)
    assert got == pytest.approx({"matmuls": 1.0, "GELU": 0.2})


def test_recorded_profiler_groups_are_read_as_recorded():
    from gpulab.bench import lesson09

    rec = {"ops": {"r": {"matmuls": 4.0}}, "ops_counting": lesson09.OPS_COUNTING}
    assert ladder.measured_ops(rec) == {"r": {"matmuls": 4.0}}
    assert ladder.measured_ops(None) == {}


def test_the_recorded_profiler_groups_count_each_kernel_once():
    """The recording's ``ops`` were summed by ``group_times`` (each kernel once): a record without the mark
    counted every kernel twice and must be re-recorded (``python -m gpulab.bench --only lesson09 --record``)."""
    from gpulab.bench import lesson09
    from gpulab.core import reference

    rec = reference.load(reference.DEFAULT_GPU).get(lesson09.KEY)
    assert rec is None or rec.get("ops_counting") == lesson09.OPS_COUNTING
