"""Input encodings (posenc.nn.input) and their functional core (posenc.nn.functional).

The NumPy tables are checked against SPEC's formulas in tests/test_tables.py; the PyTorch
modules are a different implementation (shift identity, caching) and are checked against them
and, at large positions, against mpmath.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import torch

import posenc
from posenc import spectrum
from posenc.nn import DFTEncoding, LearnableFrequencyEncoding, LearnedEncoding, SinusoidalEncoding
from posenc.nn import functional as F

ALL = [
    lambda d, **kw: SinusoidalEncoding(d, **kw),
    lambda d, **kw: DFTEncoding(d, **kw),
    lambda d, **kw: LearnedEncoding(d, max_len=64, **kw),
    lambda d, **kw: LearnableFrequencyEncoding(d, **kw),
]
IDS = ["sinusoidal", "dft", "learned", "learnable_frequency"]


def as_np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float64).numpy()


# -- the functional core ----------------------------------------------------------------------------


def mp_sincos(t: int, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mpmath.mp.dps = 40
    a = [mpmath.mpf(t) * mpmath.mpf(float(x)) for x in w]
    return np.array([float(mpmath.sin(x)) for x in a]), np.array([float(mpmath.cos(x)) for x in a])


@pytest.mark.parametrize("start", [10**6 - 100, 10**7 - 300])
def test_sincos_range_is_exact_in_float32_at_large_positions(start):
    w = spectrum.geometric(128)
    sin, cos = F.sincos(400, torch.from_numpy(w), dtype=torch.float32, offset=start)  # shift-identity path
    assert sin.shape == cos.shape == (400, 64) and sin.dtype == torch.float32
    for r in (0, 157, 300, 399):
        ref_sin, ref_cos = mp_sincos(start + r, w)
        err = max(np.abs(as_np(sin[r]) - ref_sin).max(), np.abs(as_np(cos[r]) - ref_cos).max())
        assert err < 1e-7, (start + r, err)  # the issue asks < 1e-6; correctly rounded float32 gives ≤ 3e-8


def test_sincos_range_path_equals_direct_angles():
    w = torch.from_numpy(spectrum.geometric(64))
    t = torch.arange(5000, 8000, dtype=torch.float64)
    fast = F.sincos(t.to(torch.int64), w, dtype=torch.float64)  # an integer range: shift identity
    direct = (torch.sin(torch.outer(t, w)), torch.cos(torch.outer(t, w)))
    for got, ref in zip(fast, direct):
        torch.testing.assert_close(got, ref, rtol=0, atol=1e-12)
    # fractional positions take the direct path
    frac = F.sincos(t + 0.5, w, dtype=torch.float64)
    torch.testing.assert_close(frac[0], torch.sin(torch.outer(t + 0.5, w)), rtol=0, atol=0)


def test_sincos_gradient_reaches_frequencies():
    w = torch.tensor([1.0, 0.1], dtype=torch.float64, requires_grad=True)
    sin, cos = F.sincos(100, w, dtype=torch.float64)
    (sin.sum() + cos.sum()).backward()
    t = torch.arange(100, dtype=torch.float64)[:, None]
    expected = (t * torch.cos(t * w.detach()) - t * torch.sin(t * w.detach())).sum(0)
    torch.testing.assert_close(w.grad, expected)


# -- modules: values ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [7, 64])
@pytest.mark.parametrize("layout", spectrum.LAYOUTS)
def test_sinusoidal_module_adds_the_table(dim, layout):
    m = SinusoidalEncoding(dim, layout=layout, base=500.0)
    x = torch.randn(2, 3000, dim, dtype=torch.float64)  # long enough for the shift-identity path
    ref = posenc.sinusoidal(3000, dim, base=500.0, layout=layout)
    np.testing.assert_allclose(as_np(m(x) - x), np.broadcast_to(ref, x.shape), rtol=0, atol=1e-11)
    np.testing.assert_allclose(as_np(m.table(3000)), ref, rtol=0, atol=1e-11)


def test_sinusoidal_module_offset_and_positions():
    m = SinusoidalEncoding(16)
    x = torch.zeros(1, 5, 16, dtype=torch.float64)
    np.testing.assert_allclose(
        as_np(m(x, offset=100)[0]), posenc.sinusoidal(np.arange(100, 105), 16), atol=1e-13
    )
    p = torch.tensor([0.5, -2.0, 7.0, 1e7, 3.0])
    np.testing.assert_allclose(
        as_np(m(x, positions=p)[0]), posenc.sinusoidal(p.numpy(), 16), rtol=0, atol=1e-12
    )


def test_sinusoidal_module_custom_frequencies():
    w = spectrum.tensor2tensor(16)
    m = SinusoidalEncoding(16, frequencies=w, layout="split")
    np.testing.assert_allclose(
        as_np(m.table(10)), posenc.sinusoidal(10, 16, frequencies=w, layout="split"), atol=1e-14
    )
    np.testing.assert_array_equal(m.frequencies.numpy(), w)


def test_sinusoidal_module_float32_is_exact_at_ten_million():
    m = SinusoidalEncoding(64)
    x = torch.zeros(1, 200, 64)
    got = m(x, offset=10**7 - 200)[0]  # past the cache limit: this window is computed on its own
    for r in (0, 199):
        s, c = mp_sincos(10**7 - 200 + r, spectrum.geometric(64))
        ref = np.stack([s, c], axis=1).reshape(-1)  # interleaved
        assert np.abs(as_np(got[r]) - ref).max() < 1e-7


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sinusoidal_module_range_is_correctly_rounded_up_to_ten_million(dtype):
    # the interleaved table's complex-product path, over 3000 rows just below 1e7, every column
    m = SinusoidalEncoding(130)
    got = as_np(m(torch.zeros(1, 3000, 130, dtype=dtype), offset=10**7 - 3000)[0])
    t = np.arange(10**7 - 3000, 10**7, dtype=np.float64)
    a = np.multiply.outer(t, spectrum.geometric(130))  # direct float64 angles: off by ≤ 9.3e-10 here
    ref = np.stack([np.sin(a), np.cos(a)], axis=2).reshape(3000, 130)
    # vs the exact value: half a float32 ulp (2.98e-8) plus the float64 rounding of the angle (≤ 9.3e-10)
    tol = 3.1e-8 if dtype == torch.float32 else 9.4e-10
    assert np.abs(got - ref).max() <= tol + 9.3e-10
    for r in (0, 1234, 2999):
        s, c = mp_sincos(10**7 - 3000 + r, spectrum.geometric(130))
        assert np.abs(got[r] - np.stack([s, c], axis=1).reshape(-1)).max() <= tol


@pytest.mark.parametrize("dim", [1, 2, 9, 32])
def test_dft_module_adds_the_table(dim):
    m = DFTEncoding(dim)
    x = torch.randn(3, dim, dim, dtype=torch.float64)
    np.testing.assert_allclose(
        as_np(m(x) - x), np.broadcast_to(posenc.dft(dim, dim), x.shape), rtol=0, atol=1e-14
    )
    np.testing.assert_allclose(as_np(torch.linalg.vector_norm(m.table(dim), dim=1)), 1.0, atol=1e-14)


def test_dft_module_positions_and_alias():
    m = DFTEncoding(8, alias=True)
    x = torch.zeros(1, 20, 8, dtype=torch.float64)
    np.testing.assert_allclose(as_np(m(x)[0]), posenc.dft(np.arange(20) % 8, 8), atol=1e-15)
    p = torch.tensor([7, 0, 3])
    np.testing.assert_allclose(
        as_np(DFTEncoding(8)(x[:, :3], positions=p)[0]), posenc.dft([7, 0, 3], 8), atol=1e-15
    )


def test_learned_module_rows_are_its_weight():
    m = LearnedEncoding(8, max_len=10)
    x = torch.randn(2, 4, 8)
    torch.testing.assert_close(m(x, offset=3) - x, m.weight[3:7].expand(2, -1, -1), rtol=0, atol=1e-6)
    torch.testing.assert_close(
        m(x, positions=torch.tensor([9, 0, 0, 2])) - x,
        m.weight[[9, 0, 0, 2]].expand(2, -1, -1),
        rtol=0,
        atol=1e-6,
    )
    assert abs(m.weight.std().item() - 0.02) < 0.01


@pytest.mark.parametrize("schedule", ["geometric", "power_law", "tensor2tensor"])
def test_learnable_frequency_starts_as_its_schedule(schedule):
    m = LearnableFrequencyEncoding(12, schedule=schedule, layout="split")
    w = spectrum.schedule(schedule, 12, **({"base": 10000.0} if schedule == "geometric" else {}))
    np.testing.assert_array_equal(m.frequencies.detach().numpy(), w)
    np.testing.assert_allclose(
        as_np(m.table(50)), posenc.sinusoidal(50, 12, frequencies=w, layout="split"), atol=1e-13
    )


@pytest.mark.parametrize("make", ALL, ids=IDS)
def test_scale_and_unit_norm(make):
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    torch.manual_seed(0)
    plain = make(16).double()
    torch.manual_seed(0)
    scaled = make(16, scale=2.5).double()
    torch.testing.assert_close(scaled(x) - x, 2.5 * (plain(x) - x))
    torch.manual_seed(0)
    normed = make(16, unit_norm=True, scale=3.0).double()
    rows = normed(x) - x
    torch.testing.assert_close(
        torch.linalg.vector_norm(rows, dim=-1), torch.full((2, 6), 3.0, dtype=torch.float64)
    )
    raw = plain(x) - x
    torch.testing.assert_close(rows, 3.0 * raw / torch.linalg.vector_norm(raw, dim=-1, keepdim=True))


@pytest.mark.parametrize("make", ALL, ids=IDS)
def test_concat_mode(make):
    m = make(6, mode="concat", dim=10)
    assert m.out_features == 16
    x = torch.randn(3, 5, 6)
    y = m(x)
    assert y.shape == (3, 5, 16)
    torch.testing.assert_close(y[..., :6], x, rtol=0, atol=0)
    torch.testing.assert_close(y[..., 6:], m.table(5, dtype=torch.float32).expand(3, -1, -1))


# -- modules: dtype, device, cache, state ---------------------------------------------------------------


@pytest.mark.parametrize("make", ALL, ids=IDS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_output_follows_input_dtype(make, dtype):
    m = make(8)
    x = torch.randn(2, 5, 8).to(dtype)
    y = m(x)
    assert y.dtype == dtype and y.device == x.device
    expected = x.double() + m.table(5, dtype=torch.float64)
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(y.double(), expected, rtol=0, atol=4 * eps * (1 + x.abs().max().item()))


@pytest.mark.parametrize("make", ALL, ids=IDS)
def test_output_follows_input_device_meta(make):
    m = make(8).to("meta")
    y = m(torch.empty(2, 5, 8, device="meta"))
    assert y.device.type == "meta" and y.shape == (2, 5, 8)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
@pytest.mark.parametrize("make", ALL, ids=IDS)
def test_output_follows_input_device_cuda(make):
    m = make(16).cuda()
    x = torch.randn(2, 16, 16, device="cuda")  # 16 steps: within the DFT encoding's lattice of 16
    y = m(x)
    assert y.device == x.device
    torch.testing.assert_close(y.cpu(), m.cpu()(x.cpu()), rtol=0, atol=1e-6)


def test_cache_grows_on_demand_and_is_not_persistent():
    m = SinusoidalEncoding(8)
    m(torch.zeros(1, 10, 8))
    assert [tuple(b.shape) for b in m.buffers()] == [(10, 8)]
    y = m(torch.zeros(1, 5000, 8))  # far longer than any first guess: never fails
    assert [b.shape[0] >= 5000 for b in m.buffers()] == [True]
    np.testing.assert_allclose(as_np(y[0]), posenc.sinusoidal(5000, 8), atol=1e-6)
    assert m.state_dict() == {}


def test_cache_is_rebuilt_for_a_new_dtype_not_converted():
    m = SinusoidalEncoding(8)
    m(torch.zeros(1, 3000, 8))  # float32 cache
    m.double()  # casts the float32 cache to float64: must not be used as if exact
    y = m(torch.zeros(1, 3000, 8, dtype=torch.float64))
    np.testing.assert_allclose(as_np(y[0]), posenc.sinusoidal(3000, 8), rtol=0, atol=1e-12)


def test_windows_beyond_the_cache_limit_are_computed_not_cached():
    m = SinusoidalEncoding(8)
    m.max_cached_elements = 8 * 100
    y = m(torch.zeros(1, 50, 8, dtype=torch.float64), offset=1000)
    np.testing.assert_allclose(as_np(y[0]), posenc.sinusoidal(np.arange(1000, 1050), 8), atol=1e-12)
    assert list(m.buffers()) == []  # nothing cached


@pytest.mark.parametrize(
    ("make", "keys"),
    [
        (lambda: SinusoidalEncoding(8), []),
        (lambda: DFTEncoding(8), []),
        (lambda: LearnedEncoding(8, max_len=4), ["weight"]),
        (lambda: LearnableFrequencyEncoding(8), ["frequencies"]),
        (lambda: SinusoidalEncoding(8, learn_scale=True), ["scale"]),
        (lambda: DFTEncoding(8, learn_scale=True, scale=2.0), ["scale"]),
    ],
)
def test_state_dict_holds_only_learned_parameters(make, keys):
    m = make()
    m(torch.zeros(1, 4, 8))
    assert sorted(m.state_dict()) == sorted(keys)
    assert sorted(name for name, _ in m.named_parameters()) == sorted(keys)


def test_gradients_reach_learnable_parameters():
    x = torch.randn(2, 7, 8)
    for m, name in [
        (LearnedEncoding(8, max_len=10), "weight"),
        (LearnableFrequencyEncoding(8), "frequencies"),
        (SinusoidalEncoding(8, learn_scale=True), "scale"),
        (LearnableFrequencyEncoding(8, unit_norm=True, learn_scale=True), "frequencies"),
    ]:
        (m(x) ** 2).sum().backward()
        grad = dict(m.named_parameters())[name].grad
        assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0, name
    # the frequency gradient is d/dw of the table: check one entry against the formula
    m = LearnableFrequencyEncoding(2)
    m(torch.zeros(1, 5, 2)).sum().backward()  # Σ_t sin(t·w) + cos(t·w), w = 1
    t = torch.arange(5.0)
    assert m.frequencies.grad.item() == pytest.approx((t * torch.cos(t) - t * torch.sin(t)).sum().item())


@pytest.mark.slow
def test_torch_compile_fullgraph_runs_every_encoding():
    class All(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encodings = torch.nn.ModuleList(
                [
                    SinusoidalEncoding(16),
                    DFTEncoding(16, mode="concat", dim=32, learn_scale=True),
                    LearnedEncoding(16, max_len=40),
                    LearnableFrequencyEncoding(16, unit_norm=True),
                ]
            )

        def forward(self, x, offset: int = 0):
            return sum(e(x, offset=offset)[..., :16] for e in self.encodings)

    model = All()
    compiled = torch.compile(model, fullgraph=True)  # fullgraph: any graph break raises
    for s, offset in [(8, 0), (12, 3)]:
        x = torch.randn(2, s, 16)
        y = compiled(x, offset=offset)
        torch.testing.assert_close(y, model(x, offset=offset))
        y.sum().backward()
    assert model.encodings[3].frequencies.grad is not None and model.encodings[1].scale.grad is not None


# -- bad input ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", ALL, ids=IDS)
def test_bad_constructor_arguments(make):
    with pytest.raises(TypeError, match="d_model.*4.5"):
        make(4.5)
    with pytest.raises(ValueError, match="d_model.*0"):
        make(0)
    with pytest.raises(ValueError, match="mode.*'add'.*got 'sum'"):
        make(8, mode="sum")
    with pytest.raises(ValueError, match="dim must equal d_model=8 in mode='add'.*dim=4"):
        make(8, dim=4)
    with pytest.raises(ValueError, match="scale.*-1"):
        make(8, scale=-1.0)
    with pytest.raises(TypeError, match="dim"):
        make(8, mode="concat", dim=2.0)


@pytest.mark.parametrize("make", ALL, ids=IDS)
def test_bad_forward_arguments(make):
    m = make(8)
    with pytest.raises(ValueError, match=r"x must have shape \[b, s, d_model=8\], got \[2, 5, 7\]"):
        m(torch.zeros(2, 5, 7))
    with pytest.raises(ValueError, match=r"x must have shape .*\[5, 8\]"):
        m(torch.zeros(5, 8))
    with pytest.raises(TypeError, match="x must be floating point"):
        m(torch.zeros(2, 5, 8, dtype=torch.int64))
    x = torch.zeros(1, 3, 8)
    with pytest.raises(ValueError, match=r"positions must have shape \[3\] or \[b, 3\].*\[2, 3\]"):
        m(x, positions=torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"positions must have shape \[3\] or \[b, 3\].*\[1, 1, 3\]"):
        m(x, positions=torch.zeros(1, 1, 3))
    with pytest.raises(ValueError, match="positions must be finite.*nan"):
        m(x, positions=torch.tensor([0.0, float("nan"), 1.0]))
    with pytest.raises(ValueError, match="offset.*-1"):
        m(x, offset=-1)
    with pytest.raises(ValueError, match="positions or offset"):
        m(x, positions=torch.arange(3), offset=2)


def test_bad_layout_and_schedule():
    with pytest.raises(ValueError, match="layout.*got 'sin_cos'"):
        SinusoidalEncoding(8, layout="sin_cos")
    with pytest.raises(ValueError, match="layout.*got 'sin_cos'"):
        LearnableFrequencyEncoding(8, layout="sin_cos")
    with pytest.raises(ValueError, match="schedule.*got 'cosine'"):
        LearnableFrequencyEncoding(8, schedule="cosine")
    with pytest.raises(TypeError, match="schedule options.*gamma"):
        LearnableFrequencyEncoding(8, schedule="linear", gamma=2.0)
    with pytest.raises(ValueError, match="base"):
        LearnableFrequencyEncoding(8, schedule="linear", base=100.0)
    with pytest.raises(ValueError, match="frequencies must hold ceil"):
        SinusoidalEncoding(8, frequencies=[1.0, 2.0])


def test_dft_refuses_positions_beyond_its_dim():
    m = DFTEncoding(8)
    with pytest.raises(ValueError, match=r"0…7 for the DFT encoding, got up to 8 .*alias=True"):
        m(torch.zeros(1, 9, 8))
    with pytest.raises(ValueError, match="0…7.*got up to 9"):
        m(torch.zeros(1, 4, 8), offset=6)
    with pytest.raises(ValueError, match="positions must lie in 0…dim-1 = 0…7.*got 8"):
        m(torch.zeros(1, 2, 8), positions=torch.tensor([1, 8]))
    with pytest.raises(ValueError, match="positions must be integers.*1.5"):
        m(torch.zeros(1, 2, 8), positions=torch.tensor([1.5, 2.0]))
    with pytest.raises(ValueError, match="0…7"):
        m.table(9)


def test_learned_refuses_positions_beyond_max_len():
    m = LearnedEncoding(8, max_len=10)
    with pytest.raises(ValueError, match=r"0…max_len-1 = 0…9 .*got up to 11.*larger max_len"):
        m(torch.zeros(1, 4, 8), offset=8)
    with pytest.raises(ValueError, match="integers in 0…max_len-1 = 0…9.*10"):
        m(torch.zeros(1, 2, 8), positions=torch.tensor([0, 10]))
    with pytest.raises(ValueError, match="integers.*0.5"):
        m(torch.zeros(1, 2, 8), positions=torch.tensor([0.5, 1.0]))
    with pytest.raises(TypeError, match="max_len"):
        LearnedEncoding(8, max_len=10.0)


def test_frequencies_that_require_grad_build_fast_rows_under_no_grad():
    w = torch.from_numpy(spectrum.sinusoidal_frequencies(16)).requires_grad_()
    with torch.no_grad():
        got = F.waves(500, w, F.layout_index(16), dtype=torch.float64)
    np.testing.assert_allclose(got.numpy(), posenc.sinusoidal(500, 16), rtol=0, atol=1e-15)
