"""gpulab.kernels.pad: the row-padding copy that makes any fp16/bf16 matrix readable by TMA. Random inputs are
seeded (fresh each run, the seed in a failure's report)."""

import gpulab  # first: it picks the mode before triton is imported  # isort: skip
import pytest
import torch

from gpulab.kernels import pad as P

pytestmark = pytest.mark.usefixtures("seed")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (17, 1), (33, 1793), (9, 257), (300, 513)])
def test_pad_rows_copies_every_element_into_aligned_rows(shape, dtype, monkeypatch):
    t = torch.randn(shape, dtype=torch.float64).to(dtype).to(gpulab.DEVICE)
    real = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *a, **kw: real(*a, **kw).fill_(float("nan")))  # poison
    v = P.pad_rows(t)
    assert v.shape == t.shape and P.aligned16(v)
    assert torch.equal(v.cpu(), t.cpu()), "an element was not copied (NaN poison) or copied wrong"
    if P.aligned16(t):
        assert v is t, "an aligned matrix is used as it is, not copied"
    else:
        assert v.data_ptr() != t.data_ptr() and (v.stride(0) * v.element_size()) % 16 == 0


def test_pad_rows_handles_views_and_bad_input():
    base = torch.randn(40, 50, device=gpulab.DEVICE).half()
    t = base[3:20, 5:36]  # unaligned base pointer and a row stride of 50 elements
    v = P.pad_rows(t)
    assert P.aligned16(v) and torch.equal(v.cpu(), t.cpu())
    tt = base.t()  # last dimension not contiguous
    assert torch.equal(P.pad_rows(tt).cpu(), tt.cpu())
    with pytest.raises(ValueError, match="t must have 2 dimension"):
        P.pad_rows(torch.randn(3, device=gpulab.DEVICE))
    with pytest.raises(TypeError, match="t must be a torch.Tensor"):
        P.pad_rows([[1.0]])


@pytest.mark.parametrize(
    "dtype", [torch.complex64, torch.complex128, torch.bool, torch.int8, torch.float64, torch.float8_e4m3fn]
)
def test_pad_rows_any_dtype_is_copied_bit_for_bit(dtype):
    # "any dtype": Triton has no complex pointers, so the copy moves the bits as integers of the same width
    t = (
        torch.randn(5, 7, dtype=torch.complex128).to(dtype)
        if dtype.is_complex
        else (torch.randn(5, 7) > 0)
        if dtype == torch.bool
        else torch.randn(5, 7).mul(10).to(dtype)
    )
    base = torch.zeros(5, 9, dtype=dtype)
    base[:, 1:8] = t
    for src in (t, base[:, 1:8], t[:1].t()):  # contiguous; offset view, odd row stride; (7, 1) of strides (1, 7)
        v = P.pad_rows(src.to(gpulab.DEVICE))
        assert v.shape == src.shape and v.dtype == dtype and P.aligned16(v)
        bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64, 16: torch.int64}[src.element_size()]
        assert torch.equal(v.cpu().view(bits), src.clone(memory_format=torch.contiguous_format).view(bits))


def test_pad_rows_copies_overlapping_rows():
    # a row stride of 0 (expand) or below the row length passes the 16-byte test but is no TMA-ready matrix
    # (each row must start past the previous one's end): such views are copied into their own rows
    base = torch.randn(64, dtype=torch.float64).half().to(gpulab.DEVICE)
    for t in (base[:8].expand(5, 8), base.as_strided((5, 16), (8, 1))):
        assert t.stride(0) < t.shape[1] and not P.aligned16(t)
        v = P.pad_rows(t)
        assert P.aligned16(v) and v.stride(0) >= v.shape[1] and torch.equal(v.cpu(), t.cpu())


def test_copy_rows_checks_its_arguments_and_copies_into_a_view():
    src = torch.randn(5, 9, device=gpulab.DEVICE).half()
    buf = torch.full((5, 16), float("nan"), device=gpulab.DEVICE).half()
    P.copy_rows(src, buf[:, :9])
    assert torch.equal(buf[:, :9].cpu(), src.cpu()) and torch.isnan(buf[:, 9:].float()).all()
    with pytest.raises(ValueError, match="one shape and element size"):
        P.copy_rows(src, buf[:, :8])
    with pytest.raises(ValueError, match="dst must be 2D with unit column stride"):
        P.copy_rows(src[:, :5], buf[:, ::2][:, :5])


def test_pad_rows_many_copies_two_matrices_of_different_shapes_in_one_launch(monkeypatch):
    real, launches = torch.empty, []
    monkeypatch.setattr(torch, "empty", lambda *a, **kw: real(*a, **kw).fill_(float("nan")))  # poison
    kernel = P.pad_rows_kernel
    monkeypatch.setattr(
        P,
        "pad_rows_kernel",
        type("Spy", (), {"__getitem__": lambda self, grid: (launches.append(grid), kernel[grid])[1]})(),
    )
    a = torch.randn(37, 1793 % 300, dtype=torch.float64).half().to(gpulab.DEVICE)  # 293 columns
    b = torch.randn(293, 9, dtype=torch.float64).half().to(gpulab.DEVICE)  # more rows, fewer columns
    aligned = torch.randn(8, 16, dtype=torch.float64).half().to(gpulab.DEVICE)
    pa, pal, pb = P.pad_rows_many([a, aligned, b])
    assert pal is aligned and len(launches) == 1 and launches[0][1] == 2, launches
    for src, v in ((a, pa), (b, pb)):
        assert P.aligned16(v) and torch.equal(v.cpu(), src.cpu()), "an element of one of the two was not copied"
    launches.clear()
    c32 = torch.randn(5, 7, device=gpulab.DEVICE)  # another element size:
    pc, pa2 = P.pad_rows_many([c32, a])  # a launch of its own
    assert len(launches) == 2 and torch.equal(pc.cpu(), c32.cpu()) and torch.equal(pa2.cpu(), a.cpu())
    with pytest.raises(ValueError, match=r"ts\[1\] must have 2 dimension"):
        P.pad_rows_many([a, torch.randn(3, device=gpulab.DEVICE)])


def test_pad_rows_many_mixed_element_sizes_and_lookalike_entries():
    # three unaligned matrices, two element sizes: pairing must go by position, never by comparing tensors
    # (a list.remove on tuples of tensors once raised here, and could drop a copy whose bits compared equal)
    u = lambda dt, r, c: torch.randn(r, c + 1, dtype=torch.float64).to(dt).to(gpulab.DEVICE)[:, 1:]
    for shapes in (((3, 5), (3, 5), (3, 5)), ((3, 5), (2, 7), (3, 5)), ((1, 1), (1, 1), (1, 1))):
        ts = [u(torch.float16, *shapes[0]), u(torch.float32, *shapes[1]), u(torch.float16, *shapes[2])]
        outs = P.pad_rows_many(ts)
        for t, o in zip(ts, outs):
            assert P.aligned16(o) and o.dtype == t.dtype and torch.equal(o.cpu(), t.cpu())


def test_conjugate_negative_and_one_column_views_copy_their_values():
    z = torch.randn(3, 4, dtype=torch.complex64).to(gpulab.DEVICE)[:, 1:]
    assert torch.equal(P.pad_rows(z.conj()).cpu(), z.conj().resolve_conj().cpu())
    x = torch.randn(3, 6).to(gpulab.DEVICE)[:, 1:]
    assert torch.equal(P.pad_rows(torch._neg_view(x)).cpu(), (-x).cpu())
    s = torch.randn(3, 21, dtype=torch.complex128).to(gpulab.DEVICE).as_strided((3, 1), (7, 5))  # one column, stride 5
    d = torch.zeros(3, 1, dtype=torch.complex128, device=gpulab.DEVICE)
    P.copy_rows(s, d)
    assert torch.equal(d.cpu(), s.cpu())
    with pytest.raises(ValueError, match=r"^dst is a negative view"):  # writing bits would store -values
        P.copy_rows(x, torch._neg_view(torch.zeros_like(x)))
    with pytest.raises(ValueError, match=r"^dst is a conjugate view"):
        P.copy_rows(z, torch.zeros_like(z).conj())


def test_pad_rows_many_and_copy_rows_name_bad_arguments():
    x = torch.randn(3, 5, device=gpulab.DEVICE)
    with pytest.raises(TypeError, match="ts must be a list or tuple"):
        P.pad_rows_many(t for t in [x])
    with pytest.raises(TypeError, match="ts must be a list or tuple"):
        P.pad_rows_many(None)
    with pytest.raises(TypeError, match=r"ts\[0\] must be a torch.Tensor"):
        P.pad_rows_many([[1, 2]])
    with pytest.raises(TypeError, match="src must be a torch.Tensor"):
        P.copy_rows([1], x)
    with pytest.raises(ValueError, match="dst must be on device"):
        P.copy_rows(x, torch.empty(3, 5, device="meta"))


def test_pad_refuses_grad_and_copy_rows_refuses_overlapping_rows():
    t = torch.randn(3, 3, device=gpulab.DEVICE, dtype=torch.float16, requires_grad=True)
    with pytest.raises(ValueError, match=r"^t requires grad"):
        P.pad_rows(t)
    with pytest.raises(ValueError, match=r"^ts\[1\] requires grad"):
        P.pad_rows_many([t.detach(), t])
    with torch.no_grad():
        assert not P.pad_rows(t).requires_grad
    src = torch.randn(8, 5, device=gpulab.DEVICE)
    with pytest.raises(ValueError, match="dst's rows must not overlap"):
        P.copy_rows(src, torch.zeros(1, 5, device=gpulab.DEVICE).expand(8, 5))
    with pytest.raises(ValueError, match="dense"):
        P.pad_rows(src.to_sparse())


def test_copy_rows_refuses_src_and_dst_that_share_memory():
    # tiles run in no fixed order: b[:-1] into b[1:] would read rows another tile has already overwritten
    b = torch.randn(20, 9, device=gpulab.DEVICE)
    wide = torch.randn(6, 16, device=gpulab.DEVICE)
    for src, dst in (
        (b[:-1], b[1:]),
        (b[1:], b[:-1]),
        (b, b),
        (b[2:5], b[4:7]),
        (wide[:, :8], wide[:, 8:]),
    ):  # interleaved rows never meet, but byte ranges intersect
        before = b.clone(), wide.clone()
        with pytest.raises(ValueError, match=r"^src and dst must not share memory, got byte ranges"):
            P.copy_rows(src, dst)
        assert torch.equal(b, before[0]) and torch.equal(wide, before[1]), "nothing is written before the check"
    ref = b.clone()
    P.copy_rows(b[:10], b[10:])  # one storage, disjoint halves: allowed, and copied
    assert torch.equal(b[10:].cpu(), ref[:10].cpu()) and torch.equal(b[:10].cpu(), ref[:10].cpu())
    P.copy_rows(b[:0], b[:0])  # empty: nothing shared
