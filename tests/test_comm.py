"""gpulab.models.comm: the α-β model, ring bytes, bus bandwidth (nccl-tests doc/PERFORMANCE.md), the links and their
ridge points, data-parallel gradient bytes, ZeRO memory (the ZeRO paper's Figure 1) and the tensor-parallel MLP,
each against values computed by hand."""

import math

import pytest

from gpulab.models import comm


def test_alpha_beta_one_message():
    assert comm.alpha_beta_s(1e6, 1e-5, 1e9) == pytest.approx(1e-5 + 1e-3)
    assert comm.alpha_beta_s(0, 2e-6, 1e9) == 2e-6


@pytest.mark.parametrize(
    "collective, p, n, want",
    [
        ("all_reduce", 4, 1024, 1536),  # 2 * 3/4 * 1024
        ("reduce_scatter", 4, 1024, 768),
        ("all_gather", 4, 1024, 768),
        ("broadcast", 4, 1024, 1024),
        ("all_reduce", 2, 1000, 1000),
        ("all_reduce", 1, 1000, 0),
        ("broadcast", 1, 1000, 0),
    ],
)
def test_bytes_per_rank_by_hand(collective, p, n, want):
    assert comm.bytes_per_rank(collective, p, n) == pytest.approx(want)


def test_total_bytes_and_steps():
    assert comm.total_bytes("all_reduce", 3, 10) == 40
    assert comm.total_bytes("all_gather", 3, 10) == 20
    assert comm.ring_steps("all_reduce", 4) == 6 and comm.ring_steps("reduce_scatter", 4) == 3
    assert comm.ring_steps("all_reduce", 1) == 0


def test_ring_time():
    # 6 latencies of 10 µs and 2 * 3/4 * 4 MB over 1 GB/s
    assert comm.ring_time_s("all_reduce", 4, 4e6, 1e-5, 1e9) == pytest.approx(6e-5 + 6e-3)
    assert comm.ring_time_s("broadcast", 4, 4e6, 1e-5, 1e9) == pytest.approx(3e-5 + 4e-3)


def test_bus_bandwidth_as_nccl_tests_define_it():
    assert comm.algbw(1e9, 2.0) == 5e8
    assert comm.busbw("all_reduce", 8, 1e9, 1.0) == pytest.approx(1.75e9)  # x 2*7/8
    assert comm.busbw("reduce_scatter", 8, 1e9, 1.0) == pytest.approx(0.875e9)
    assert comm.busbw("all_gather", 8, 1e9, 1.0) == pytest.approx(0.875e9)
    assert comm.busbw("broadcast", 8, 1e9, 1.0) == 1e9


def test_fit_recovers_alpha_and_beta():
    alpha, beta, sizes = 2e-5, 5e9, [1e3, 1e5, 1e7]
    times = [6 * alpha + 1.5 * s / beta for s in sizes]  # p = 4: 6 steps, 2*3/4 of S
    a, b = comm.fit_alpha_beta(sizes, times, "all_reduce", 4)
    assert a == pytest.approx(alpha, rel=1e-6) and b == pytest.approx(beta, rel=1e-6)
    with pytest.raises(ValueError, match="two different sizes"):
        comm.fit_alpha_beta([1e3, 1e3], [1.0, 2.0])
    with pytest.raises(ValueError, match="length"):
        comm.fit_alpha_beta([1e3], [1.0])


@pytest.mark.parametrize("times", [[1e-3, 1e-3, 1e-3], [3e-3, 2e-3, 1e-3]], ids=["flat", "falling"])
def test_fit_refuses_times_that_do_not_grow_with_the_size(times):
    with pytest.raises(ValueError, match="does not grow with n_bytes"):
        comm.fit_alpha_beta([1e3, 1e5, 1e7], times, "all_reduce", 4)


def test_links_ridge_points():
    rows = {r["link"]: r for r in comm.link_rows()}
    assert rows["PCIe 5.0 x16"]["link_ridge"] == pytest.approx(989.5e12 / 63e9)
    assert rows["NVLink 4 (H100, H200)"]["link_ridge"] == pytest.approx(989.5e12 / 450e9)
    assert rows["PCIe 5.0 x16"]["hbm_over_link"] == pytest.approx(4800 / 63)
    assert rows["PCIe 3.0 x16"]["peak_tflops"] == 125.0  # V100: fp16, it has no bf16
    assert all(r["sources"] for r in rows.values())
    assert all(k in comm.LINK_SOURCES for link in comm.LINKS for k in link.sources)
    assert comm.get_link("nvlink 5").gbps_each_way == 900.0
    with pytest.raises(KeyError, match="known"):
        comm.get_link("InfiniBand")


def test_data_parallel():
    assert comm.dp_gradient_bytes(124_439_808, 8) == 2 * 7 / 8 * 4 * 124_439_808
    assert comm.dp_exposed_s(1.0, 0.5, 0.1) == pytest.approx(0.05)  # hidden but the last bucket
    assert comm.dp_exposed_s(1.0, 3.0, 0.1) == pytest.approx(2.0)  # longer than the backward
    assert comm.dp_exposed_s(1.0, 0.5, 1.0) == 0.5  # one bucket: nothing hides
    with pytest.raises(ValueError, match="bucket_fraction"):
        comm.dp_exposed_s(1.0, 0.5, 1.5)


def test_zero_memory_matches_the_paper():
    rows = comm.zero_memory_bytes(7_500_000_000, 64)
    assert [round(r["total"] / 1e9, 1) for r in rows] == [120.0, 31.4, 16.6, 1.9]
    assert [r["comm_factor"] for r in rows] == [1, 1, 1, 1.5]
    with_act = comm.zero_memory_bytes(1000, 10, activation_bytes=500)
    assert all(r["activations"] == 500 for r in with_act)
    assert with_act[-1]["total"] == 16 * 1000 / 10 + 500


def test_tensor_parallel_mlp():
    c = comm.tp_mlp_counts(1024, 768, 8)
    assert c["flops"] == 16 * 1024 * 768**2 / 8
    assert c["bytes"] == pytest.approx(2 * 7 / 8 * 1024 * 768 * 2)
    assert c["intensity"] == pytest.approx(8 * 768 / (7 * 2))
    assert comm.tp_mlp_counts(1024, 768, 1)["intensity"] == math.inf
    per_token = 16 * 8192**2 / 8 / 989.5e12 - 1.75 * 8192 * 2 / 450e9
    assert comm.tp_min_tokens(8192, 8, 989.5e12, 450e9, 1e-5) == pytest.approx(14 * 1e-5 / per_token)
    assert comm.tp_min_tokens(768, 8, 989.5e12, 450e9, 1e-5) is None  # below the ridge: never compute-bound
    assert comm.tp_min_tokens(768, 1, 989.5e12, 450e9, 1e-5) == 0.0


@pytest.mark.parametrize(
    "call, arg",
    [
        (lambda: comm.bytes_per_rank("allreduce", 2, 10), "collective"),
        (lambda: comm.bytes_per_rank("all_reduce", 0, 10), "p"),
        (lambda: comm.bytes_per_rank("all_reduce", 2, -1), "n_bytes"),
        (lambda: comm.alpha_beta_s(10, 1e-6, 0), "beta_Bps"),
        (lambda: comm.zero_memory_bytes(0, 8), "n_params"),
        (lambda: comm.tp_mlp_counts(1, 768, 0), "t"),
    ],
)
def test_bad_input_names_the_argument(call, arg):
    with pytest.raises((TypeError, ValueError), match=arg):
        call()
