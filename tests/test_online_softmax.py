"""The online softmax model: the seed's worked example exactly, the masked-row example, merges in any order and
any tile width against the direct softmax in float64, empty states without NaN, and the slider."""

import math
import random

import numpy as np
import pytest

from gpulab import figures
from gpulab.models import online_softmax as O

pytestmark = pytest.mark.usefixtures("seed")  # random inputs: fresh each run, the seed in a failure's report


def test_seed_worked_example():
    got = O.check_seed_example()
    assert got["out"] == pytest.approx(2.5, rel=1e-15) and got["exact"] == pytest.approx(2.5, rel=1e-15)
    assert (
        got["m_A"] == pytest.approx(math.log(2))
        and got["l_A"] == pytest.approx(1.5)
        and got["u_A"] == pytest.approx(4.5)
    )
    assert (
        got["m_B"] == pytest.approx(math.log(3))
        and got["l_B"] == pytest.approx(1.0)
        and got["u_B"] == pytest.approx(2.0)
    )
    assert got["alpha"] == pytest.approx(2 / 3) and got["beta"] == pytest.approx(1.0)
    assert got["l"] == pytest.approx(2.0) and got["u"] == pytest.approx(5.0)


def test_fully_masked_tile_is_skipped_without_nan():
    scores = [-math.inf] * 4 + [1.0, 2.0]
    p = O.softmax_online(scores, 4)
    assert np.allclose(p, [0, 0, 0, 0, 0.269, 0.731], atol=5e-4)
    assert np.allclose(p[4:], np.exp([1, 2]) / np.exp([1, 2]).sum(), rtol=1e-15)
    steps = O.walk_row(scores, np.arange(6.0), 4)
    assert steps[0].skipped and steps[0].state.empty and not steps[1].skipped
    assert all(np.isfinite(st.state.l) for st in steps)


def _direct(s, v):
    s = np.asarray(s, dtype=np.float64)
    ok = s > -np.inf
    w = np.zeros_like(s)
    w[ok] = np.exp(s[ok] - s[ok].max())
    return (w / w.sum()) @ v


@pytest.mark.parametrize("trial", range(5))
def test_every_tile_width_gives_the_direct_softmax(trial, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    s = rng.normal(0, 3, n)
    s[rng.random(n) < 0.3] = -np.inf
    s[rng.integers(n)] = rng.normal()  # at least one valid score
    v = rng.normal(size=(n, 3))
    ref = _direct(s, v)
    for tile in range(1, n + 1):
        assert np.allclose(O.attention_row(s, v, tile), ref, rtol=1e-12, atol=1e-14), (n, tile)


def test_merge_is_associative_and_commutative(seed):
    rng = np.random.default_rng(seed)
    tiles = [O.tile_state(rng.normal(0, 4, k), rng.normal(size=(k, 2))) for k in (3, 5, 1, 7)]
    a, b, c, d = tiles
    left = O.merge(O.merge(O.merge(a, b), c), d)
    tree = O.merge(O.merge(a, b), O.merge(c, d))
    swapped = O.merge(d, O.merge(c, O.merge(b, a)))
    for s in (tree, swapped):
        assert s.m == left.m and math.isclose(s.l, left.l, rel_tol=1e-13)
        assert np.allclose(s.u, left.u, rtol=1e-13)


def test_empty_states_never_make_nan():
    e = O.empty_state(2)
    t = O.tile_state([0.5, -1.0], [[1, 2], [3, 4]])
    assert O.rescale(e, e) == (-math.inf, 0.0, 0.0)
    both = O.merge(e, e)
    assert both.empty and both.l == 0 and not np.isnan(both.u).any()
    for s in (O.merge(e, t), O.merge(t, e)):
        assert s.m == t.m and s.l == t.l and np.array_equal(s.u, t.u)
    assert O.tile_state([-math.inf, -math.inf], [1, 2]).empty
    with pytest.raises(ValueError, match="empty state has no output"):
        e.output()
    with pytest.raises(ValueError, match="every score is masked"):
        O.softmax_online([-math.inf] * 3, 2)


def test_rescale_factors_are_exp_of_the_max_differences():
    a = O.tile_state([1.0, 3.0], [1.0, 1.0])
    b = O.tile_state([2.0], [5.0])
    m, alpha, beta = O.rescale(a, b)
    assert m == 3.0 and alpha == 1.0 and beta == pytest.approx(math.exp(-1.0))
    merged = O.merge(a, b)
    assert merged.l == pytest.approx(math.exp(-2) + 1 + math.exp(-1))


def test_bad_inputs():
    with pytest.raises(ValueError, match="tile must be >= 1"):
        O.walk_row([1.0, 2.0], [1.0, 2.0], 0)
    with pytest.raises(TypeError, match="tile must be an integer"):
        O.walk_row([1.0, 2.0], [1.0, 2.0], 2.0)
    with pytest.raises(ValueError, match="one row per score"):
        O.tile_state([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="finite or -inf"):
        O.tile_state([1.0, math.nan], [1.0, 2.0])


def test_states_of_different_value_widths_do_not_broadcast():
    # numpy would broadcast a width-1 u into a width-3 one: a silently wrong merge. Only an empty state (which
    # holds nothing, e.g. empty_state() with its default width 1) may meet a state of another width.
    a = O.tile_state([1.0], [2.0])
    b = O.tile_state([0.5, 3.0], np.ones((2, 3)))
    for x, y in ((a, b), (b, a)):
        with pytest.raises(ValueError, match="value width"):
            O.merge(x, y)
    with pytest.raises(ValueError, match="value width"):
        O.update(a, [0.5, 3.0], np.ones((2, 3)))
    s = O.update(O.empty_state(), [0.5, 3.0], [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert s.u.shape == (3,) and np.allclose(s.output(), _direct([0.5, 3.0], np.array([[1, 2, 3], [4, 5, 6.0]])))
    # values of width 0 give an output of width 0, not a made-up width-1 zero
    assert O.attention_row([1.0, 2.0], np.ones((2, 0)), 1).shape == (0,)


def test_explorer_slider_changes_the_figure():
    ex = figures.lesson08.RowWalkExplorer(tile=4)
    title = ex.live.fig.layout.title.text
    assert "1 skipped" in title  # the default row starts with a fully masked tile of 4
    ys = list(ex.live.fig.data[3].y)
    assert ys[-1] == pytest.approx(ex.exact, rel=1e-12)
    ex.tile.value = random.choice([1, 2, 3, 5, 7])
    assert ex.live.fig.layout.title.text != title
    assert list(ex.live.fig.data[3].y)[-1] == pytest.approx(ex.exact, rel=1e-12)
    assert all(isinstance(x, (int, float)) for x in ex.live.fig.data[1].y)  # plain lists in the traces
