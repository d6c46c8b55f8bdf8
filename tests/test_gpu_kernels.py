"""posenc's Triton kernels (:mod:`posenc._gpu_kernels`) under Triton's CPU interpreter, against float64
references: their indexing, masks, layouts, tiles and the float64 path for positions beyond the cache,
on CPU tensors, on any machine with Triton (the CPU wheel suffices; CI installs it).

Triton reads ``TRITON_INTERPRET`` when a kernel is defined, so these tests run only in a process started
with it: ``TRITON_INTERPRET=1 python -m pytest tests/test_gpu_kernels.py``. On a CUDA machine
``test_cuda.py`` runs the same kernels compiled.
"""

from __future__ import annotations

import dataclasses
import math
import os

import numpy as np
import pytest

pytest.importorskip("triton", reason="Triton is not installed (pip install --no-deps triton: the CPU wheel)")
if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip(
        "the kernels run under Triton's interpreter only in a process started with TRITON_INTERPRET=1 "
        "(TRITON_INTERPRET=1 python -m pytest tests/test_gpu_kernels.py)",
        allow_module_level=True,
    )
torch = pytest.importorskip("torch")

import posenc  # noqa: E402
from posenc import _gpu_kernels  # noqa: E402
from posenc.nn import functional as F  # noqa: E402

DTYPES = (torch.float32, torch.float64, torch.bfloat16)
REL = {torch.float32: 2.0**-22, torch.float64: 2.0**-50, torch.bfloat16: 2.0**-7}
"""The error of one conversion to the dtype plus the float32/float64 work, relative to the terms' size: half
an ulp, or for bfloat16 one ulp (the interpreter converts float32 to bfloat16 by truncation, where the GPU
rounds to nearest)."""


def _work(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _pairs(layout: str, r: int) -> tuple[torch.Tensor, torch.Tensor]:
    half = torch.arange(r // 2)
    return (half, half + r // 2) if layout == "half_split" else (2 * half, 2 * half + 1)


def rotation(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """Su et al. (2021), eq. 34, in float64: ``(R x, the size of the terms summed)`` for pair values
    ``cos``/``sin`` broadcasting against ``x[..., r/2]``; dims beyond ``r`` unchanged."""
    a, b = _pairs(layout, 2 * cos.shape[-1])
    x = x.double()
    ref, size = x.clone(), x.abs()
    ref[..., a] = x[..., a] * cos - x[..., b] * sin
    ref[..., b] = x[..., b] * cos + x[..., a] * sin
    size[..., a] = (x[..., a] * cos).abs() + (x[..., b] * sin).abs()
    size[..., b] = (x[..., b] * cos).abs() + (x[..., a] * sin).abs()
    return ref, size.clamp_min(1e-300)


def relative_error(out: torch.Tensor, ref: tuple[torch.Tensor, torch.Tensor]) -> float:
    """Largest ``|out − ref| / size`` (NaN, so failing every bound, where an element was never written)."""
    err = (out.double() - ref[0]).abs() / ref[1]
    return float("nan") if err.isnan().any() else err.max().item() if err.numel() else 0.0


# --- rotate: one tensor, tables per position -------------------------------------------------------------


@pytest.mark.parametrize("paired", [True, False], ids=["paired", "full"])
@pytest.mark.parametrize("d, r", [(20, 12), (16, 16), (64, 24)])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["half_split", "adjacent"])
def test_rotate_matches_float64(layout, dtype, d, r, paired):
    torch.manual_seed(0)
    work = _work(dtype)
    x = torch.randn(2, 3, 37, d, dtype=torch.float64).to(dtype)
    angle = torch.randn(37, r // 2, dtype=torch.float64)
    cos, sin = angle.cos().to(work), angle.sin().to(work)
    a, b = _pairs(layout, r)
    full_cos, signed = torch.empty(37, r, dtype=work), torch.empty(37, r, dtype=work)
    full_cos[:, a] = full_cos[:, b] = cos
    signed[:, a], signed[:, b] = -sin, sin
    for checks in ("full", "signature"):
        out = torch.full_like(x, float("nan"))
        tables = (cos, sin) if paired else (full_cos, signed)
        _gpu_kernels.rotate(x, out, *tables, layout, r, paired, checks=checks)
        assert relative_error(out, rotation(x, cos.double(), sin.double(), layout)) <= REL[dtype]


# --- rotate_qk: q and k, tables gathered by position, float64 angles beyond the cache ----------------------

N_CACHE, FACTOR = 16, 1.25
B, H, H_K, S_Q, S_K = 2, 3, 1, 5, 9
POSITION_FORMS = {
    "offsets inside the cache": lambda: (None, (7, 3)),
    "offsets running beyond it": lambda: (None, (12, 10)),
    "[1, s] int32": lambda: ((torch.arange(4, 4 + S_Q)[None].int(), torch.arange(S_K)[None].int()), (0, 0)),
    "[b, s] int64, some beyond, one negative": lambda: (
        (torch.tensor([[0, 1, 2, 3, 4], [40, 41, 15, -3, 1000]]), torch.arange(B * S_K).view(B, S_K) * 3),
        (0, 0),
    ),
}


def qk_case(
    layout: str,
    dtype: torch.dtype,
    d: int,
    r: int,
    s_q: int = S_Q,
    s_k: int = S_K,
    h: int = H,
    h_k: int = H_K,
):
    """``q`` (a transposed view), ``k``, the module's strided pair-value views of a cache of
    :data:`N_CACHE` rows, and ``theta`` with the attention factor appended."""
    work = _work(dtype)
    theta = 10000.0 ** (-torch.arange(0, r, 2, dtype=torch.float64) / r)
    angle = torch.arange(N_CACHE, dtype=torch.float64)[:, None] * theta
    full = torch.empty(N_CACHE, 2, r, dtype=work)  # a module's [n, r] tables, read as pair values
    if layout == "half_split":
        full[:, 0], full[:, 1] = ((f(angle) * FACTOR).to(work).repeat(1, 2) for f in (torch.cos, torch.sin))
        tables = (full[:, 0, : r // 2], full[:, 1, : r // 2])
    else:
        full[:, 0], full[:, 1] = (
            (f(angle) * FACTOR).to(work).repeat_interleave(2, -1) for f in (torch.cos, torch.sin)
        )
        tables = (full[:, 0, 0::2], full[:, 1, 0::2])
    q = torch.randn(B, s_q, h, d, dtype=torch.float64).to(dtype).transpose(1, 2)
    k = torch.randn(B, h_k, s_k, d, dtype=torch.float64).to(dtype)
    return q, k, tables, theta, torch.cat([theta, torch.tensor([FACTOR], dtype=torch.float64)])


def qk_errors(
    layout, dtype, d, r, positions, offsets, inverse, *, checks="full", s_q=S_Q, s_k=S_K, h=H, h_k=H_K
):
    q, k, tables, theta, theta_ext = qk_case(layout, dtype, d, r, s_q, s_k, h, h_k)
    q_out, k_out = torch.full_like(q, float("nan")), torch.full_like(k, float("nan"))
    _gpu_kernels.rotate_qk(
        q, k, q_out, k_out, positions, offsets, tables, theta_ext, layout, r, inverse, checks=checks
    )
    if positions is None:
        t_q, t_k = offsets[0] + torch.arange(s_q)[None], offsets[1] + torch.arange(s_k)[None]
    else:
        t_q, t_k = positions
    errors = []
    for x, out, t in ((q, q_out, t_q), (k, k_out, t_k)):
        angle = t.double()[:, None, :, None] * theta
        sign = -1.0 if inverse else 1.0
        errors.append(
            relative_error(out, rotation(x, angle.cos() * FACTOR, sign * angle.sin() * FACTOR, layout))
        )
    return errors


@pytest.mark.parametrize("inverse", [False, True], ids=["forward", "inverse"])
@pytest.mark.parametrize("form", sorted(POSITION_FORMS))
@pytest.mark.parametrize("d, r", [(16, 16), (20, 12)])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["half_split", "adjacent"])
def test_rotate_qk_matches_float64(layout, dtype, d, r, form, inverse):
    torch.manual_seed(0)
    positions, offsets = POSITION_FORMS[form]()
    assert max(qk_errors(layout, dtype, d, r, positions, offsets, inverse)) <= REL[dtype]


class Launches:
    """Counts the launches of the kernels of :mod:`posenc._gpu_kernels` (each ``kernel[grid](…)``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.names: list[str] = []
        for name in ("_rotate_qk_kernel", "_rotate_qk_far_kernel"):
            kernel = getattr(_gpu_kernels, name)
            monkeypatch.setattr(_gpu_kernels, name, self._counted(name, kernel))

    def _counted(self, name, kernel):
        names = self.names

        class Counted:
            def __getitem__(self, grid):
                names.append(name)
                return kernel[grid]

        return Counted()


@pytest.mark.parametrize("far", [False, True], ids=["inside the cache", "one row beyond"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["half_split", "adjacent"])
def test_decoding_with_tensor_positions_is_two_launches_and_matches_float64(monkeypatch, layout, dtype, far):
    torch.manual_seed(0)
    launches = Launches(monkeypatch)
    t = torch.tensor([[N_CACHE - 1], [N_CACHE + 7 if far else 3]])  # [b, 1] int64: one new token each
    errors = qk_errors(layout, dtype, 24, 24, (t, t), (0, 0), False, s_q=1, s_k=1)
    assert max(errors) <= REL[dtype]
    assert launches.names == ["_rotate_qk_kernel", "_rotate_qk_far_kernel"]


@pytest.mark.parametrize("offsets, expected", [((3, 7), 1), ((12, 0), 2)], ids=["inside", "beyond"])
def test_int_offsets_launch_the_far_rows_only_when_they_run_beyond_the_cache(monkeypatch, offsets, expected):
    launches = Launches(monkeypatch)
    errors = qk_errors("half_split", torch.float32, 16, 16, None, offsets, False)
    assert max(errors) <= REL[torch.float32]
    assert len(launches.names) == expected


def test_checks_once_per_signature_give_the_same_rotation(monkeypatch):
    torch.manual_seed(0)
    full = qk_errors("adjacent", torch.float32, 20, 12, *POSITION_FORMS["[1, s] int32"](), False)
    torch.manual_seed(0)
    once = qk_errors(
        "adjacent", torch.float32, 20, 12, *POSITION_FORMS["[1, s] int32"](), False, checks="signature"
    )
    assert once == full and max(full) <= REL[torch.float32]
    with pytest.raises(ValueError, match="checks must be"):
        qk_errors("adjacent", torch.float32, 20, 12, None, (0, 0), False, checks="none")


# --- waves: sinusoidal tables by the angle addition formulas ----------------------------------------------


@pytest.mark.parametrize("dim", [6, 7, 130, 129])
@pytest.mark.parametrize("layout", ["interleaved", "interleaved_cos_first", "split"])
def test_waves_match_float64_far_out(layout, dim):
    w = torch.from_numpy(posenc.spectrum.geometric(dim))
    code = F._gpu_layout(F.layout_index(dim, layout), w.shape[0])
    if code is None:
        assert (
            layout == "interleaved_cos_first" and dim % 2
        )  # ends in a sine: a layout the kernel does not write
        return
    n, start = 300, 10**7 - 300
    b = math.isqrt(n - 1) + 1
    fine = torch.outer(torch.arange(b, dtype=torch.float64), w)
    coarse = torch.outer(start + b * torch.arange(-(-n // b), dtype=torch.float64), w)
    ref = posenc.sinusoidal(np.arange(start, start + n), dim, layout=layout)
    for checks in ("full", "signature"):
        out = torch.full((n, dim), float("nan"), dtype=torch.float32)
        _gpu_kernels.waves(out, (fine.sin(), fine.cos()), (coarse.sin(), coarse.cos()), code, checks=checks)
        assert np.abs(out.double().numpy() - ref).max() <= 3.1e-8


def test_empty_queries_leave_the_keys_rotated_and_nothing_at_all_launches_nothing(monkeypatch):
    torch.manual_seed(0)
    positions = (torch.zeros(B, 0, dtype=torch.long), torch.arange(S_K)[None].expand(B, S_K))
    assert (
        max(qk_errors("half_split", torch.float32, 16, 16, positions, (0, 0), False, s_q=0))
        <= REL[torch.float32]
    )
    launches = Launches(monkeypatch)
    qk_errors("half_split", torch.float32, 16, 16, None, (0, 0), False, s_q=0, s_k=0)
    assert launches.names == []


@pytest.mark.parametrize("bad", [2**53, -(2**53), 2**62], ids=["2^53", "-2^53", "2^62"])
def test_a_position_beyond_float64_exactness_stops_the_far_rows_kernel(monkeypatch, bad):
    """The far-rows kernel, which reads every tensor position of the call, asserts ``|t| < 2^53`` on the
    device: compiled with ``debug=True`` for that assertion (the interpreter ignores a kernel's own debug
    flag, so the test turns on its builder's), so that the caller need not launch a check of its own."""
    from triton.runtime import interpreter

    monkeypatch.setattr(
        interpreter.interpreter_builder,
        "options",
        dataclasses.replace(interpreter.interpreter_builder.options, debug=True),
    )
    ok = torch.tensor([[0, 1, 2**53 - 1, -(2**53) + 1, 5]])
    assert (
        max(qk_errors("half_split", torch.float64, 16, 16, (ok, ok[:, :1]), (0, 0), False, s_q=5, s_k=1))
        <= REL[torch.float64]
    )
    bad_positions = torch.tensor([[0, 1, bad, 3, 4]])
    with pytest.raises(Exception, match=r"positions must be < 2\^53 in magnitude"):
        qk_errors(
            "half_split", torch.float32, 16, 16, (bad_positions, ok[:, :1]), (0, 0), False, s_q=5, s_k=1
        )


@pytest.mark.parametrize("h, h_k, s, d, r", [(32, 8, 3, 128, 128), (12, 4, 40, 96, 64)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("layout", ["half_split", "adjacent"])
def test_rotate_qk_tiles_split_across_heads_and_rows_match_float64(layout, dtype, h, h_k, s, d, r):
    """Head dims of real models: tiles of fewer heads than a tensor has (head-parallel grids) and of fewer
    rows than a sequence has, with positions inside and beyond the cache."""
    assert _gpu_kernels._qk_tile(B, h, s, 2 * (r // 2) + (d - r), 528)[0] < h  # several head groups
    torch.manual_seed(0)
    t_q = torch.randint(-2, N_CACHE + 3, (B, s))
    t_k = torch.randint(0, N_CACHE, (1, s))
    errors = qk_errors(layout, dtype, d, r, (t_q, t_k), (0, 0), False, s_q=s, s_k=s, h=h, h_k=h_k)
    assert max(errors) <= REL[dtype]


def test_tiles_are_powers_of_two_for_every_head_count_and_row_width():
    """``tl.arange`` takes powers of two only: every tile the launcher picks must be one (a row of 96
    elements once gave 10 rows)."""
    for heads in (1, 3, 8, 12, 32, 40, 64):
        for seq in (1, 5, 40, 4096):
            for row_elements in (8, 24, 80, 96, 128, 192, 256, 320):
                for batch in (1, 4, 64):
                    tile_heads, rows = _gpu_kernels._qk_tile(batch, heads, seq, row_elements, 528)
                    assert tile_heads & (tile_heads - 1) == 0 and rows & (rows - 1) == 0
                    assert 1 <= tile_heads <= triton_next_pow2(heads) and 1 <= rows <= triton_next_pow2(seq)


def triton_next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()
