"""The lesson-00 probes: read_sum (repeated reads of a working set, one partial sum per program) and
copy_persistent (a copy on a fixed number of programs), in the interpreter on small sizes (and on a GPU when
present), against float64 references and hand counts, with poisoned outputs."""

import pytest
import torch

import gpulab
from gpulab.kernels import read_bw

pytestmark = pytest.mark.usefixtures("seed")  # fresh inputs each run, the seed in a failure's report


def _x(n):
    return (torch.randn(n, dtype=torch.float64) * 3).float().to(gpulab.DEVICE)


def test_read_sum_by_hand():
    x = torch.arange(1, 11, dtype=torch.float32, device=gpulab.DEVICE)  # parts of 4: sums 10, 26, 19
    # 3 programs, 3 parts: one part each, read twice
    assert read_bw.read_sum(x, programs=3, part=4, passes=2, block=16).tolist() == [20.0, 52.0, 38.0]
    # 5 programs, 3 parts: programs 3 and 4 read parts 0 and 1 again
    assert read_bw.read_sum(x, programs=5, part=4, block=16).tolist() == [10.0, 26.0, 19.0, 10.0, 26.0]
    # 2 programs, 5 parts of 2 (sums 3, 7, 11, 15, 19): program 0 reads parts 0, 2, 4, program 1 parts 1, 3
    assert read_bw.read_sum(x, programs=2, part=2, block=16).tolist() == [33.0, 22.0]


def test_counts_by_hand():
    assert read_bw.read_sum_counts(10, programs=3, part=4, passes=2) == (20, 80)
    # parts of 4, 4, 2 read by 2, 2, 1 programs: 8 + 8 + 2 = 18 elements
    assert read_bw.read_sum_counts(10, programs=5, part=4) == (18, 72)
    assert read_bw.read_sum_counts(1024, programs=8, part=1024, passes=3) == (3 * 8 * 1024, 4 * 3 * 8 * 1024)
    assert read_bw.copy_counts(1000) == 8000


@pytest.mark.parametrize(
    "n, programs, part, passes, block, l2_only",
    [
        (1000, 4, 256, 1, 64, False),  # parts >= programs, ragged last part
        (1000, 7, 128, 3, 128, True),  # 8 parts on 7 programs: program 0 reads two
        (300, 9, 512, 2, 256, False),  # one part (the whole working set), read by every program
        (2053, 5, 200, 2, 64, True),  # part not a multiple of block, odd n
    ],
)
def test_read_sum_matches_float64(n, programs, part, passes, block, l2_only, poisoned):
    x = _x(n)
    got = read_bw.read_sum(x, programs, part, passes, block, l2_only)
    ref = read_bw.read_sum_ref(x, programs, part, passes)
    # a float32 sum of k terms: |error| <= k 2^-24 sum|terms| (Higham, gamma_k), k = the elements one program adds
    k = passes * n
    bound = k * 2.0**-24 * read_bw.read_sum_ref(x.abs(), programs, part, passes) + 1e-30
    err = (got.double().cpu() - ref).abs()
    assert torch.all(err <= bound), f"got {got.tolist()}, expected {ref.tolist()}"


def test_copy_persistent_writes_every_element(poisoned):
    n, block = 1000, 64  # 16 tiles, the last ragged
    x = _x(n)
    for programs in (1, 3, 16, 40):
        out = torch.full((n,), float("nan"), device=gpulab.DEVICE)
        y = read_bw.copy_persistent(x, programs, block=block, out=out)
        assert y is out and torch.equal(y, x), f"programs={programs}"
    assert torch.equal(read_bw.copy_persistent(x, 5, block=block), x)  # its own (poisoned) output


def test_copy_persistent_stops_at_n():
    n, block = 100, 64
    x = _x(n)
    buf = torch.full((3 * block,), -7.0, device=gpulab.DEVICE)
    read_bw.copy_persistent_kernel[(2,)](x, buf, n, BLOCK=block)
    assert torch.equal(buf[:n], x) and torch.all(buf[n:] == -7.0), "the mask must stop writes beyond n"


def test_launchers_name_bad_arguments():
    x = _x(64)
    with pytest.raises(ValueError, match="programs"):
        read_bw.read_sum(x, programs=0, part=16)
    with pytest.raises(TypeError, match="part"):
        read_bw.read_sum(x, programs=1, part=16.0)
    with pytest.raises(ValueError, match="passes"):
        read_bw.read_sum(x, programs=1, part=16, passes=0)
    with pytest.raises(ValueError, match="at least one element"):
        read_bw.read_sum(x[:0], programs=1, part=16)
    with pytest.raises(TypeError, match="x must have dtype"):
        read_bw.read_sum(x.half(), programs=1, part=16)
    with pytest.raises(TypeError, match="l2_only"):
        read_bw.read_sum(x, programs=1, part=16, l2_only=1)
    with pytest.raises(ValueError, match="block"):
        read_bw.copy_persistent(x, 1, block=48)
    with pytest.raises(ValueError, match="out must have the shape"):
        read_bw.copy_persistent(x, 1, out=torch.empty(65, device=gpulab.DEVICE))
