"""Frequency schedules and column layouts (SPEC §1), each against its formula written out here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from posenc import spectrum


@pytest.mark.parametrize("dim", [1, 2, 7, 64, 513])
@pytest.mark.parametrize("base", [10000.0, 1000.0, 2.5])
def test_geometric_is_base_to_minus_2i_over_d(dim, base):
    expected = [base ** (-2.0 * i / dim) for i in range(math.ceil(dim / 2))]
    np.testing.assert_allclose(spectrum.geometric(dim, base), expected, rtol=1e-14, atol=0)


def test_largest_period_for_d512_is_the_published_60611():
    w = spectrum.geometric(512)
    assert 2 * math.pi / w[-1] == pytest.approx(60611.477, abs=1e-3)  # seed notes-*


def get_timing_signal_1d_frequencies(
    channels: int, min_timescale: float, max_timescale: float
) -> list[float]:
    """tensor2tensor's ``get_timing_signal_1d`` (common_attention.py) transcribed: ``inv_timescales``."""
    num_timescales = channels // 2
    log_timescale_increment = math.log(float(max_timescale) / float(min_timescale)) / max(
        num_timescales - 1, 1
    )
    return [min_timescale * math.exp(k * -log_timescale_increment) for k in range(num_timescales)]


@pytest.mark.parametrize("dim", [2, 4, 8, 512])
@pytest.mark.parametrize(("lo", "hi"), [(1.0, 10000.0), (2.0, 500.0), (0.5, 1e4)])
def test_tensor2tensor_follows_its_code(dim, lo, hi):
    got = spectrum.tensor2tensor(dim, min_timescale=lo, max_timescale=hi)
    np.testing.assert_allclose(got, get_timing_signal_1d_frequencies(dim, lo, hi), rtol=1e-14, atol=0)
    if dim > 2:
        assert got[-1] == pytest.approx(lo * lo / hi, rel=1e-14)  # 1/max only when min = 1
    # the docstring's grid (timescales min … max) through the documented mapping
    docstring = np.exp(-np.arange(dim // 2) * math.log(hi / lo) / max(dim // 2 - 1, 1)) / lo
    np.testing.assert_allclose(spectrum.tensor2tensor(dim, max_timescale=hi / lo) / lo, docstring, rtol=1e-14)


def test_tensor2tensor_odd_dim_uses_ceil_pairs():
    np.testing.assert_allclose(
        spectrum.tensor2tensor(9), get_timing_signal_1d_frequencies(10, 1.0, 1e4), rtol=1e-14
    )


def test_tensor2tensor_differs_from_the_paper_for_the_same_d():
    t2t, paper = spectrum.tensor2tensor(512), spectrum.geometric(512)
    assert t2t[0] == paper[0] == 1.0
    rel = np.abs(t2t[1:] / paper[1:] - 1)
    assert rel.min() > 0 and rel.max() > 0.03  # the last frequency: 1e-4 vs 10000^(-510/512)


def test_tensor2tensor_single_pair_is_min_timescale():
    assert spectrum.tensor2tensor(2, min_timescale=3.0).tolist() == [
        3.0
    ]  # divisor max(n − 1, 1), as the code


@pytest.mark.parametrize("dim", [6, 64, 65])
def test_su_schedules(dim):
    x = np.array([2.0 * i / dim for i in range(math.ceil(dim / 2))])
    np.testing.assert_allclose(spectrum.exponential(dim, 1000.0), 1000.0**-x, rtol=1e-14)
    np.testing.assert_allclose(spectrum.power_law(dim, 3.0), x**3.0, rtol=1e-14, atol=0)
    np.testing.assert_allclose(spectrum.linear(dim), x, rtol=0, atol=0)
    np.testing.assert_allclose(spectrum.su(dim, np.cos), np.cos(x), rtol=0, atol=0)


def test_su_checks_theta():
    with pytest.raises(TypeError, match="theta"):
        spectrum.su(8, 3.0)
    with pytest.raises(ValueError, match="theta"):
        spectrum.su(8, lambda x: x[:2])
    with pytest.raises(ValueError, match="theta"):
        spectrum.su(8, lambda x: np.full_like(x, np.inf))


@pytest.mark.parametrize("dim", [1, 2, 7, 64])
def test_dft_frequencies(dim):
    expected = [2 * math.pi * k / dim for k in range(dim // 2 + 1)]
    np.testing.assert_allclose(spectrum.dft(dim), expected, rtol=1e-15, atol=0)


def test_schedule_by_name_and_unknown_name():
    np.testing.assert_array_equal(
        spectrum.schedule("geometric", 16, base=100.0), spectrum.geometric(16, 100.0)
    )
    with pytest.raises(ValueError, match="schedule.*'geometric'"):
        spectrum.schedule("cosine", 16)


def test_custom_frequencies_are_validated():
    np.testing.assert_array_equal(spectrum.custom([1.0, 0.5], 4), [1.0, 0.5])
    with pytest.raises(ValueError, match="frequencies"):
        spectrum.custom([1.0, 0.5, 0.1], 4)
    with pytest.raises(ValueError, match="frequencies"):
        spectrum.custom([[1.0, 0.5]])
    with pytest.raises(ValueError, match="frequencies.*nan"):
        spectrum.custom([1.0, float("nan")])
    with pytest.raises(ValueError, match="frequencies"):
        spectrum.custom([])


@pytest.mark.parametrize("bad", [4.0, "8", None, True])
def test_dim_must_be_an_int(bad):
    with pytest.raises(TypeError, match="dim"):
        spectrum.geometric(bad)


@pytest.mark.parametrize("bad", [0, -4])
def test_dim_must_be_positive(bad):
    with pytest.raises(ValueError, match=f"dim.*{bad}"):
        spectrum.n_pairs(bad)


def test_layout_drawings_for_d6():
    # the drawings of spectrum.LAYOUTS, written out
    expected = {
        "interleaved": ([0, 2, 4], [1, 3, 5]),
        "interleaved_cos_first": ([1, 3, 5], [0, 2, 4]),
        "split": ([0, 1, 2], [3, 4, 5]),
    }
    for layout, (sin_cols, cos_cols) in expected.items():
        got = spectrum.layout_columns(6, layout)
        assert got[0].tolist() == sin_cols and got[1].tolist() == cos_cols, layout


def test_odd_dim_drops_the_last_cosine():
    assert [c.tolist() for c in spectrum.layout_columns(5, "interleaved")] == [[0, 2, 4], [1, 3]]
    assert [c.tolist() for c in spectrum.layout_columns(5, "interleaved_cos_first")] == [[1, 3, 4], [0, 2]]
    assert [c.tolist() for c in spectrum.layout_columns(5, "split")] == [[0, 1, 2], [3, 4]]


@pytest.mark.parametrize("dim", [1, 2, 5, 6, 33])
@pytest.mark.parametrize("layout", spectrum.LAYOUTS)
def test_layout_columns_partition_the_table(dim, layout):
    sin_cols, cos_cols = spectrum.layout_columns(dim, layout)
    assert len(sin_cols) == math.ceil(dim / 2) and len(cos_cols) == dim // 2
    assert sorted(np.concatenate([sin_cols, cos_cols]).tolist()) == list(range(dim))


@pytest.mark.parametrize("dim", [5, 6])
@pytest.mark.parametrize("source", spectrum.LAYOUTS)
@pytest.mark.parametrize("target", spectrum.LAYOUTS)
def test_layout_permutation_maps_named_columns(dim, source, target):
    names = np.empty(dim, dtype=object)
    src_sin, src_cos = spectrum.layout_columns(dim, source)
    names[src_sin] = [f"sin{i}" for i in range(len(src_sin))]
    names[src_cos] = [f"cos{i}" for i in range(len(src_cos))]
    dst_sin, dst_cos = spectrum.layout_columns(dim, target)
    moved = names[spectrum.layout_permutation(dim, source, target)]
    assert moved[dst_sin].tolist() == [f"sin{i}" for i in range(len(dst_sin))]
    assert moved[dst_cos].tolist() == [f"cos{i}" for i in range(len(dst_cos))]


def test_unknown_layout_names_the_parameter():
    with pytest.raises(ValueError, match="layout.*'interleaved'.*got 'sincos'"):
        spectrum.layout_columns(8, "sincos")


def test_alibi_slopes():
    np.testing.assert_allclose(spectrum.alibi_slopes(8), [2.0**-k for k in range(1, 9)], rtol=0)
    # 6 heads: the 4 slopes of 4 heads, then slopes 1 and 3 of 8 heads (Press et al. reference code)
    four = [2.0 ** (-8.0 * h / 4) for h in range(1, 5)]
    eight = [2.0 ** (-8.0 * h / 8) for h in range(1, 9)]
    np.testing.assert_allclose(spectrum.alibi_slopes(6), four + [eight[0], eight[2]], rtol=0)
