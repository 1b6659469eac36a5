"""gpulab.kernels.matmul: both tiled paths against float64 on seeded random inputs (fresh
each run, the seed in a failure's report) of awkward shapes, per dtype and input precision, within
gpulab.core.tolerances' matmul bound, outputs (and padding buffers) poisoned with NaN; the padding path, persistence,
configs, bad input; on a GPU the autotuner and the Hopper path."""

import gpulab  # first: it sets TRITON_INTERPRET=1 before triton is imported  # isort: skip
import pytest
import torch

from gpulab.core.tolerances import matmul_mismatch
from gpulab.kernels import matmul as mm

pytestmark = pytest.mark.usefixtures("seed")

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
PATHS = ["pointer", "tma"]
SHAPES = [(1, 1, 1), (17, 33, 70), (65, 47, 129), (3, 100, 1)]
if gpulab.ON_GPU:
    SHAPES += [(1000, 999, 1001), (1793, 1793, 1793), (257, 4097, 64)]
SMALL = mm.MatmulConfig(16, 32, 16, GROUP_M=2, num_warps=4, num_stages=2)  # many tiles and groups on small shapes
_EMPTY = torch.empty  # unpoisoned: a huge buffer must stay untouched (see test_k_offsets_past_2_31_elements)


def _rand(*shape, dtype):
    return torch.randn(*shape, dtype=torch.float64).to(dtype).to(gpulab.DEVICE)


def assert_matmul_close(c, a, b, tf32=False):
    """c: (M, N) in a's dtype, every element within ``gpulab.core.tolerances.matmul_bound`` of float64 ``a @ b`` (of the
    rounded inputs; ``tf32``: fp32 inputs rounded to TF32 on a GPU). NaN (an unwritten element) fails."""
    assert c.dtype == a.dtype and c.shape == (a.shape[0], b.shape[1]), (c.dtype, tuple(c.shape))
    msg = matmul_mismatch(c, a, b, mm.matmul_ref(a, b).cpu(), tf32)
    assert msg is None, msg


def _paths(dtype):
    return [p for p in PATHS if p == "pointer" or (dtype in mm.TMA_DTYPES and mm.tma_available())]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_matches_float64(M, N, K, dtype, poisoned):
    a, b = _rand(M, K, dtype=dtype), _rand(K, N, dtype=dtype)
    for path in _paths(dtype):  # the heuristic's tiles (on a GPU the big ones); every candidate is tested below
        assert_matmul_close(mm.matmul(a, b, path=path, input_precision="ieee", config="heuristic"), a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("persistent", [False, True])
def test_many_tiles_groups_and_persistent_programs(dtype, persistent, poisoned):
    a, b = _rand(70, 45, dtype=dtype), _rand(45, 99, dtype=dtype)  # 5 x 4 tiles of 16 x 32; groups of 2 rows
    cfg = mm.with_config(SMALL, persistent=persistent)
    for path in _paths(dtype):
        assert_matmul_close(mm.matmul(a, b, path=path, config=cfg, input_precision="ieee"), a, b)


def test_fp16_1000_999_1001_matches_torch():
    """An awkward fp16 case (no dimension a multiple of a tile): gpulab and torch.matmul both within the bound of float64, and within two
    fp16 ulps of each other."""
    a, b = _rand(1000, 1001, dtype=torch.float16), _rand(1001, 999, dtype=torch.float16)
    cfg = (
        None if gpulab.ON_GPU else mm.MatmulConfig(128, 128, 64, num_stages=1, persistent=True)
    )  # fast in the interpreter
    for path in _paths(torch.float16):
        ours = mm.matmul(a, b, path=path, config=cfg)
        assert_matmul_close(ours, a, b)
        theirs = torch.matmul(a, b)
        assert_matmul_close(theirs, a, b)
        diff = (ours.double() - theirs.double()).abs()
        assert (diff <= 2 * 2.0**-10 * theirs.double().abs() + 1e-3).all(), diff.max()


@pytest.mark.parametrize("dtype", DTYPES)
def test_strided_and_transposed_inputs(dtype, poisoned):
    a = _rand(40, 24, dtype=dtype).t()  # (24, 40), column-major
    b = _rand(66, 40, dtype=dtype)[::2].t()  # (40, 33), every other row, transposed
    for path in _paths(dtype):
        assert_matmul_close(mm.matmul(a, b, path=path, config=SMALL, input_precision="ieee"), a, b)


def test_tf32_and_ieee():
    a, b = _rand(64, 300, dtype=torch.float32), _rand(300, 48, dtype=torch.float32)
    c_tf32 = mm.matmul(a, b, input_precision="tf32")
    c_ieee = mm.matmul(a, b, input_precision="ieee")
    assert_matmul_close(c_tf32, a, b, tf32=True)  # declared TF32: its bound on any machine
    assert_matmul_close(c_ieee, a, b)
    # TF32 inputs miss fp32's bound, on a GPU and in the interpreter (which cuts them too: gpulab.core.triton_compat)
    assert matmul_mismatch(c_tf32, a, b, mm.matmul_ref(a, b).cpu()) is not None


def test_pad_rows_copies_only_misaligned_rows(poisoned):
    aligned = _rand(5, 64, dtype=torch.float16)
    assert mm.pad_rows(aligned) is aligned
    odd = _rand(5, 33, dtype=torch.bfloat16)
    p = mm.pad_rows(odd)
    assert p.shape == odd.shape and torch.equal(p, odd) and p.data_ptr() != odd.data_ptr()
    assert p.stride() == (40, 1) and (p.stride(0) * p.element_size()) % 16 == 0
    t = _rand(64, 8, dtype=torch.float16).t()  # last dim not contiguous
    assert torch.equal(mm.pad_rows(t), t) and mm.pad_rows(t).stride(1) == 1


def test_tma_path_never_reads_the_padding(poisoned):
    """K = 33 fp16: rows of A are 66 bytes, so A is copied into 80-byte rows whose last 7 columns are NaN
    (poisoned); a result free of NaN shows the descriptor stops at K."""
    if not mm.tma_available():
        pytest.skip("no TMA path on this GPU")
    a, b = _rand(20, 33, dtype=torch.float16), _rand(33, 9, dtype=torch.float16)
    assert_matmul_close(mm.matmul(a, b, path="tma", config=SMALL), a, b)


@pytest.mark.parametrize("N", [40, 48, 7])
def test_tma_output_through_a_row_padded_buffer(N, poisoned):
    """N = 40 and 7: rows of C are not a multiple of 16 elements, so the TMA kernel stores into a poisoned
    row-padded buffer that is copied back; N = 48 stores straight into C."""
    if not mm.tma_available():
        pytest.skip("no TMA path on this GPU")
    a, b = _rand(37, 50, dtype=torch.float16), _rand(50, N, dtype=torch.float16)
    c = mm.matmul(a, b, path="tma", config=SMALL)
    assert c.is_contiguous() and mm._store_aligned(c) == (N % 16 == 0)
    assert_matmul_close(c, a, b)


def test_empty_and_k0():
    z = mm.matmul(torch.empty(0, 5, device=gpulab.DEVICE), torch.empty(5, 3, device=gpulab.DEVICE))
    assert z.shape == (0, 3)
    c = mm.matmul(torch.empty(4, 0, device=gpulab.DEVICE), torch.empty(0, 3, device=gpulab.DEVICE))
    assert c.shape == (4, 3) and (c == 0).all()


def test_counts():
    assert mm.counts(4096, 4096, 4096, 2) == (2 * 4096**3, 3 * 4096**2 * 2)


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda a, b: mm.matmul(a.tolist(), b), "a"),
        (lambda a, b: mm.matmul(a, b.double()), "b"),
        (lambda a, b: mm.matmul(a, b.half()), "dtype"),
        (lambda a, b: mm.matmul(a, b.t()), "K"),
        (lambda a, b: mm.matmul(a[None], b), "a"),
        (lambda a, b: mm.matmul(a, b, input_precision="tf32x3"), "input_precision"),
        (lambda a, b: mm.matmul(a, b, path="cuda"), "path"),
        (lambda a, b: mm.matmul(a, b, path="tma"), "path"),  # fp32 has no TMA path here
        (lambda a, b: mm.matmul(a, b, config="fast"), "config"),
        (lambda a, b: mm.matmul(a, b, config=mm.MatmulConfig(48, 32, 16)), "BLOCK_M"),
        (lambda a, b: mm.matmul(a, b, config=mm.MatmulConfig(32, 32, 8)), "BLOCK_K"),
        (lambda a, b: mm.matmul(a, b, config=mm.MatmulConfig(32, 32, 16, num_warps=3)), "num_warps"),
        (lambda a, b: mm.matmul(a, b, config=mm.MatmulConfig(32, 32, 16, GROUP_M=0)), "GROUP_M"),
        (lambda a, b: mm.matmul(a, b, config=mm.MatmulConfig(32, 32, 16, num_stages=0)), "num_stages"),
        (lambda a, b: mm.matmul(a, b, config=mm.MatmulConfig(32, 32, 16, GROUP_M=True)), "GROUP_M"),  # bool is an int
        (lambda a, b: mm.matmul(a, b, config=mm.MatmulConfig(32, 32, 16, num_warps=4.0)), "num_warps"),  # 4.0 == 4
        (lambda a, b: mm.matmul(a, b, config=mm.MatmulConfig(32, 32, 16, num_stages=2.0)), "num_stages"),
        (lambda a, b: mm.matmul(a, b, config=mm.MatmulConfig(32, 32, 16, num_stages=True)), "num_stages"),
        (lambda a, b: mm.matmul(a.requires_grad_(), b), "a requires grad.*torch.matmul.*detach"),  # no backward
        (lambda a, b: mm.matmul(a, b.requires_grad_()), "b requires grad.*torch.matmul.*detach"),
    ],
)
def test_bad_input_names_the_argument(call, word):
    a, b = torch.randn(8, 16, device=gpulab.DEVICE), torch.randn(16, 4, device=gpulab.DEVICE)
    with pytest.raises((TypeError, ValueError), match=word):
        call(a, b)


def test_inputs_that_require_grad_are_fine_without_grad_mode():
    a, b = _rand(5, 7, dtype=torch.float32).requires_grad_(), _rand(7, 3, dtype=torch.float32)
    with torch.no_grad():
        c = mm.matmul(a, b, input_precision="ieee")
    assert_matmul_close(c, a.detach(), b)
    assert_matmul_close(mm.matmul(a.detach(), b, input_precision="ieee"), a.detach(), b)


def test_k_offsets_past_2_31_elements(poisoned):
    """K-side offsets in int64: B (17, 16) and a transposed A (3, 17) are views of one fp16 buffer with a K stride
    S where both 15 S (the last row of the first K tile) and 16 S (the step to the next tile, BLOCK_K = 16) pass
    2^31 elements. The buffer is 4.6 GB of address space, but only the 17 rows of 16 + 3 elements are written
    (pages never written take no memory on the CPU). In int32 the offsets wrap: a crash or garbage."""
    S = 2**31 // 15 + 1
    try:
        big = _EMPTY(16 * S + 32, dtype=torch.float16, device=gpulab.DEVICE)
    except (RuntimeError, MemoryError) as e:
        pytest.skip(f"cannot reserve 4.6 GB of address space: {e}")
    b = big.as_strided((17, 16), (S, 1))
    a = big.as_strided((3, 17), (1, S), 16)  # column-major: A's K stride is S too; disjoint from b
    b.copy_(_rand(17, 16, dtype=torch.float16))
    a.copy_(_rand(3, 17, dtype=torch.float16))
    assert 15 * b.stride(0) >= 2**31 and 16 * a.stride(1) >= 2**31
    cfg = mm.MatmulConfig(16, 16, 16, GROUP_M=1, num_stages=1)
    for path in _paths(torch.float16):  # TMA: these rows are not 16-byte aligned, so both are copied first
        assert_matmul_close(mm.matmul(a, b, path=path, config=cfg), a, b)
    del big


@pytest.mark.gpu
@pytest.mark.skipif(not gpulab.ON_GPU, reason="needs a GPU (a 5.4 GB operand)")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gpu_b_rows_past_2_31_elements(dtype, poisoned):
    """A dense row-major B of (80, 2^25 + 17) on the pointer path with the GPU's tiles (BLOCK_K = 64): the rows
    k >= 64 start past 2^31 elements, reached by one step of BLOCK_K * N > 2^31, which wraps in int32.
    Checked on the first and last column tiles."""
    N = 2**25 + 17
    a = _rand(40, 80, dtype=dtype)
    b = _EMPTY((80, N), device=gpulab.DEVICE, dtype=dtype).normal_()
    cfg = mm.heuristic_config(40, N, 80, dtype, "pointer")
    assert cfg.BLOCK_K < 80 and cfg.BLOCK_K * N >= 2**31
    c = mm.matmul(a, b, path="pointer", config=cfg)
    for cols in (slice(0, 300), slice(N - 300, N)):
        assert_matmul_close(c[:, cols], a, b[:, cols])


def test_heuristic_and_path_choice():
    assert mm.choose_path(torch.float32) == "pointer"
    cfg = mm.heuristic_config(4096, 4096, 4096, torch.bfloat16, mm.choose_path(torch.bfloat16))
    assert cfg.check() is cfg
    if not gpulab.ON_GPU:
        assert mm.choose_path(torch.bfloat16) == "pointer" and cfg == mm.INTERPRETER_CONFIG
    for configs in mm.CONFIGS.values():
        for c in configs:
            c.check()


@pytest.mark.gpu
@pytest.mark.skipif(not gpulab.ON_GPU, reason="needs a GPU")
def test_gpu_autotune_picks_a_config_and_hopper_takes_the_tma_path():
    a, b = _rand(1024, 1024, dtype=torch.bfloat16), _rand(1024, 1024, dtype=torch.bfloat16)
    c = mm.matmul(a, b)
    assert_matmul_close(c, a, b)
    assert any(k.startswith(mm.choose_path(torch.bfloat16)) for k in mm.tuned_configs())
    if torch.cuda.get_device_capability(0)[0] >= 9:
        assert mm.choose_path(torch.bfloat16) == "tma" and mm.choose_path(torch.float16) == "tma"


@pytest.mark.gpu
@pytest.mark.skipif(not gpulab.ON_GPU, reason="needs a GPU")
@pytest.mark.parametrize("key", sorted(mm.CONFIGS))
def test_gpu_every_autotune_candidate_is_correct(key, poisoned):
    """Autotuning may pick any candidate at run time: each must be right on an awkward shape."""
    dtypes = {"pointer_fp32": [torch.float32], "pointer_small": DTYPES}.get(key, [torch.bfloat16, torch.float16])
    path = "tma" if key == "tma" else "pointer"
    if path == "tma" and not mm.tma_available():
        pytest.skip("no TMA path on this GPU")
    for dt in dtypes:
        a, b = _rand(1000, 1001, dtype=dt), _rand(1001, 999, dtype=dt)
        for cfg in mm.CONFIGS[key]:
            assert_matmul_close(mm.matmul(a, b, path=path, config=cfg, input_precision="ieee"), a, b)


@pytest.mark.gpu
@pytest.mark.skipif(not gpulab.ON_GPU, reason="needs a GPU")
def test_gpu_tf32_is_less_precise_than_ieee():
    a, b = _rand(512, 512, dtype=torch.float32), _rand(512, 512, dtype=torch.float32)
    ref = mm.matmul_ref(a, b)
    err = {p: float((mm.matmul(a, b, input_precision=p).double() - ref).norm() / ref.norm()) for p in ("tf32", "ieee")}
    assert err["tf32"] > 20 * err["ieee"] and err["ieee"] < 1e-6, err


@pytest.mark.gpu
@pytest.mark.skipif(not gpulab.ON_GPU, reason="needs a GPU")
@pytest.mark.parametrize("N", [1793, 2048])
def test_gpu_matmul_replays_from_a_cuda_graph(N):
    """The awkward-size path (pad A and B, TMA matmul, copy C back) is capturable: replaying the graph on new
    values written into the captured inputs gives their product (what lesson 07's graphed timing relies on)."""
    from gpulab.core.timing import capture_graph

    a, b = _rand(N, N, dtype=torch.bfloat16), _rand(N, N, dtype=torch.bfloat16)
    out = {}
    g = capture_graph(lambda: out.__setitem__("c", mm.matmul(a, b)))
    a.copy_(_rand(N, N, dtype=torch.bfloat16))
    b.copy_(_rand(N, N, dtype=torch.bfloat16))
    out["c"].fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    assert_matmul_close(out["c"], a, b)


def test_power_of_two_check_bounds_and_types():
    from gpulab.kernels._checks import check_power_of_two

    for ok in (1, 2, 64, 4096):
        check_power_of_two("block", ok, 1, 4096)
    for bad in (0, 3, 24, 8192, -4, True, 4.0, "16", None):
        with pytest.raises(ValueError, match=r"block must be a power of two in \[1, 4096\]"):
            check_power_of_two("block", bad, 1, 4096)
    check_power_of_two("x", 2**40, 16)  # no upper bound
    with pytest.raises(ValueError, match="x must be a power of two >= 16"):
        check_power_of_two("x", 8, 16)


def test_autotune_ranks_by_graph_replay_and_falls_back_to_eager(monkeypatch):
    """matmul's autotuner through the shared one (``kernels._autotune``): candidates are ranked by CUDA-graph time
    (GPU time, not the CPU cost of an eager call); where any capture fails, all by eager time; a candidate that
    cannot launch is skipped. Clock and launches are fake (interpreter): the logic is under test, not a speed."""
    import gpulab.core.timing as timing

    a, b = _rand(40, 24, dtype=torch.float16), _rand(24, 33, dtype=torch.float16)
    cands = [mm.INTERPRETER_CONFIG, mm.MatmulConfig(32, 32, 16, 4, 4, 1), mm.MatmulConfig(32, 64, 16, 4, 4, 1)]
    bad = mm.MatmulConfig(32, 32, 16, 4, 4, 1, persistent=True)
    graph_ms = {cands[0]: 3.0, cands[1]: 1.0, cands[2]: 2.0, bad: 0.1}  # the graph clock ranks cands[1] first
    eager_ms = {cands[0]: 0.5, cands[1]: 9.0, cands[2]: 0.7, bad: 0.1}  # the eager clock would rank cands[0] first
    launched, seen = [], []

    def fake_launch(a_, b_, c_, cfg, path, input_precision="tf32"):
        if cfg is bad:
            raise RuntimeError("out of shared memory")
        assert a_ is a and b_ is b and c_.shape == (40, 33) and path == "tma"
        launched.append(cfg)

    def fake_time_ms(fn, warmup_ms=0, rep_ms=0, graph=False):
        fn()  # the candidate that fn launches is the one the clock reads
        seen.append(graph)
        return timing.Timing((graph_ms if graph else eager_ms)[launched[-1]], 0.0, 0.0)

    monkeypatch.setattr(mm, "launch", fake_launch)
    monkeypatch.setattr(timing, "time_ms", fake_time_ms)
    assert mm.autotune(a, b, "tma", configs=cands) == cands[1] and set(seen) == {True}

    def no_graph(fn, warmup_ms=0, rep_ms=0, graph=False):
        if graph:
            raise RuntimeError("capture failed")
        return fake_time_ms(fn, warmup_ms, rep_ms, graph)

    monkeypatch.setattr(timing, "time_ms", no_graph)
    assert mm.autotune(a, b, "tma", configs=cands) == cands[0]

    def graph_fails_for_one(fn, warmup_ms=0, rep_ms=0, graph=False):  # one ranking never mixes the two clocks
        fn()
        if graph and launched[-1] is cands[2]:
            raise RuntimeError("capture failed")
        return fake_time_ms(fn, warmup_ms, rep_ms, graph)

    monkeypatch.setattr(timing, "time_ms", graph_fails_for_one)
    assert mm.autotune(a, b, "tma", configs=cands) == cands[0]
    with pytest.raises(RuntimeError, match="no tma config .* could run"):
        mm.autotune(a, b, "tma", configs=[])
    with pytest.raises(RuntimeError, match="no tma config .* could run"):
        mm.autotune(a, b, "tma", configs=[bad])
    monkeypatch.setattr(timing, "time_ms", fake_time_ms)
    assert mm.autotune(a, b, "tma", configs=[bad] + cands) == cands[1]  # the fastest on the graph clock fails


def test_tuned_config_caches_per_bucket_and_first_takes_the_first_candidate(monkeypatch):
    """``tuned_config`` tunes once per size bucket (then reads the shared cache), and with
    ``GPULAB_AUTOTUNE=first`` takes the list's first candidate without timing anything. Fake clock."""
    import gpulab.core.timing as timing
    from gpulab.core import settings
    from gpulab.kernels import _autotune

    monkeypatch.setattr(_autotune, "_CACHE", {})
    launched, timed = [], []
    monkeypatch.setattr(mm, "launch", lambda a_, b_, c_, cfg, *args: launched.append(cfg))
    fast = mm.CONFIGS["tma"][2]

    def fake_time_ms(fn, warmup_ms=0, rep_ms=0, graph=False):
        fn()
        timed.append(launched[-1])
        return timing.Timing(1.0 if launched[-1] is fast else 2.0, 0.0, 0.0)

    monkeypatch.setattr(timing, "time_ms", fake_time_ms)
    monkeypatch.setattr(settings, "SETTINGS", settings.read({}))
    a, b = _rand(40, 24, dtype=torch.float16), _rand(24, 33, dtype=torch.float16)
    assert mm.tuned_config(a, b, "tma") is fast and len(timed) == len(mm.CONFIGS["tma"])
    a2, b2 = _rand(60, 20, dtype=torch.float16), _rand(20, 50, dtype=torch.float16)  # same buckets 64x64x32
    assert mm.tuned_config(a2, b2, "tma") is fast and len(timed) == len(mm.CONFIGS["tma"])  # not timed again
    assert mm.tuned_configs() == {"tma float16 tf32 64x64x32 aligned=False": mm.config_label(fast)}
    monkeypatch.setattr(settings, "SETTINGS", settings.read({"GPULAB_AUTOTUNE": "first"}))
    a3 = _rand(200, 24, dtype=torch.float16)  # a new bucket: 256x64x32
    assert mm.tuned_config(a3, b, "tma") is mm.CONFIGS["tma"][0] and len(timed) == len(mm.CONFIGS["tma"])


@pytest.mark.parametrize("path", ["pointer", "tma"])
def test_negative_views_are_refused_by_name(path):
    """A negative view's memory holds -a (``z.conj().imag``); a kernel reads memory, so it must be refused, not
    multiplied with the wrong sign (found by a hostile test: the aligned TMA path and the pointer path read it)."""
    dt = torch.float32 if path == "pointer" else torch.float16
    a, b = _rand(5, 16, dtype=dt), _rand(16, 7, dtype=dt)
    with pytest.raises(ValueError, match=r"^a is a negative view.*a\.resolve_neg\(\)"):
        mm.matmul(torch._neg_view(a), b, path=path)
    with pytest.raises(ValueError, match=r"^b is a negative view"):
        mm.matmul(a, torch._neg_view(b), path=path)
    assert_matmul_close(mm.matmul(torch._neg_view(a).resolve_neg(), b, path=path, input_precision="ieee"), -a, b)
    if path == "pointer":  # the public way to get one
        z = torch.complex(_rand(5, 16, dtype=dt), a)
        with pytest.raises(ValueError, match="negative view"):
            mm.matmul(z.conj().imag, b, path=path)
    with pytest.raises(ValueError, match="dense"):
        mm.matmul(a.to_sparse(), b, path=path)
