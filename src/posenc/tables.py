"""Encoding tables as NumPy arrays: the sinusoidal encoding and the faithful DFT encoding.

Every table is ``(S, dim)``: one row per position, one column per feature. Angles
``t·w`` are formed in float64 (:func:`angles`, or the angle addition formula over ranges of
integer positions) and only the finished table is cast to the requested ``dtype``: in float32
the angle at ``t = 10^6`` would already be off by ~0.06 rad.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

from posenc import _native, spectrum, validate
from posenc.errors import UsageError

DEFAULT_BASE = spectrum.DEFAULT_BASE


def angles(
    positions: ArrayLike | int, frequencies: ArrayLike, *, name: str = "positions"
) -> NDArray[np.float64]:
    """The angle matrix ``A[s, i] = t_s · w_i`` in float64, ``(S, len(frequencies))``.

    ``positions`` follows the package convention (int ``S`` → ``0 … S−1``, else 1-D); ``name`` is what
    errors call them (a caller's own parameter, e.g. ``distances``). Angles that overflow float64 are refused.
    """
    t = validate.positions(positions, name=name)
    w = spectrum.custom(frequencies)
    with np.errstate(over="ignore"):
        a = np.multiply.outer(t, w)
    overflow = ~np.isfinite(a)
    if overflow.any():
        s, i = (int(k) for k in np.argwhere(overflow)[0])
        raise UsageError(
            f"{name} × frequencies must stay finite in float64, got {t[s]:g} ({name}[{s}]) times "
            f"w = {w[i]:g} (frequencies[{i}]); use smaller positions or frequencies"
        )
    return a


def _float_dtype(dtype: DTypeLike) -> np.dtype:
    try:
        out = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be a NumPy floating dtype, got {dtype!r}") from None
    if out.kind != "f":
        raise TypeError(f"dtype must be a NumPy floating dtype (float16/32/64), got {out}")
    return out


def sinusoidal(
    positions: ArrayLike | int,
    dim: int,
    *,
    base: float = DEFAULT_BASE,
    layout: str = "interleaved",
    frequencies: ArrayLike | None = None,
    dtype: DTypeLike = np.float64,
) -> NDArray[np.floating]:
    """Sinusoidal positional encoding (Vaswani et al. 2017, "Attention Is All You Need", §3.5).

    ``PE[t, 2i] = sin(t·w_i)``, ``PE[t, 2i+1] = cos(t·w_i)``, ``w_i = base^(−2i/d)`` in the
    default ``"interleaved"`` layout; ``"interleaved_cos_first"`` (Su et al. 2021, RoFormer) and
    ``"split"`` (tensor2tensor / fairseq) permute the same columns
    (:data:`posenc.spectrum.LAYOUTS`). Odd ``dim`` drops the cosine of the last frequency.

    Every entry is the float64 ``sin``/``cos`` of the float64 angle ``t·w_i``, rounded once to
    ``dtype`` (float32: within 3.1e-8 of the exact value at positions up to 10^7). A range of
    integer positions (an int ``S``, or an array holding ``t0, t0+1, …``) is built by the angle
    addition formula ``e^(i(t0+j)w) = e^(i·t0·w)·e^(i·j·w)`` in float64, a cache-sized block of
    rows at a time, without full-size float64 temporaries (see :func:`_sinusoidal_range`).

    Args:
        positions: int ``S`` (positions ``0 … S−1``) or a 1-D sequence of finite numbers,
            fractional and negative ones included.
        dim: number of columns ``d``, a positive int.
        base: ``ρ`` of the geometric schedule; ignored when ``frequencies`` is given.
        layout: one of :data:`posenc.spectrum.LAYOUTS`.
        frequencies: ``⌈d/2⌉`` angular frequencies to use instead of the geometric schedule
            (any schedule of :mod:`posenc.spectrum`, or your own).
        dtype: floating dtype of the result; angles are float64 regardless.

    Returns:
        ``(S, dim)`` array.
    """
    dim = validate.positive_int("dim", dim)
    w = spectrum.sinusoidal_frequencies(dim, base=base, frequencies=frequencies)
    sin_cols, cos_cols = spectrum.layout_columns(dim, layout)
    out_dtype = _float_dtype(dtype)
    if isinstance(positions, numbers.Integral) and not isinstance(positions, bool):
        n = validate.positive_int("positions", positions)
        if n > _DIRECT_ROWS:
            return _sinusoidal_range(0, n, w, sin_cols, cos_cols, out_dtype)
    t = validate.positions(positions)
    start = _integer_range_start(t)
    if start is None:
        out = np.empty((t.size, dim), dtype=out_dtype)
        rows = max(1, _BLOCK_BYTES // (8 * w.size))
        for r0 in range(0, t.size, rows):
            a = np.multiply.outer(t[r0 : r0 + rows], w)
            out[r0 : r0 + rows, sin_cols] = np.sin(a)
            out[r0 : r0 + rows, cos_cols] = np.cos(a[:, : cos_cols.size])
        return out
    return _sinusoidal_range(start, t.size, w, sin_cols, cos_cols, out_dtype)


_DIRECT_ROWS = 8
"""Arrays of at most this many positions take every ``sin``/``cos`` directly."""

_BLOCK_BYTES = 1 << 18
"""Size of the float64 scratch block (rows of the table) worked on at a time: a few per L2 cache."""


def _integer_range_start(t: NDArray[np.float64]) -> int | None:
    """``t[0]`` if ``t`` is ``t0, t0+1, …`` with integer ``t0`` (exactly representable), else ``None``."""
    n = t.size
    first = t[0]
    if n <= _DIRECT_ROWS or not float(first).is_integer() or abs(first) + n >= 2**52:
        return None
    if t[-1] != first + n - 1 or not np.array_equal(np.diff(t), np.ones(n - 1)):
        return None
    return int(first)


def _shift_block(n: int) -> int:
    """``b = ⌈√n⌉``: the rows per block of the shift identity over ``n`` rows, so that its ``b`` fine and
    ``⌈n/b⌉`` coarse rows are both about ``√n``."""
    return math.isqrt(n - 1) + 1


def _expi_seeds(w: NDArray[np.float64], *ranges: tuple[float, float, bool]) -> NDArray[np.float64]:
    """``[len(ranges), 4, len(w)]``: for each ``(start, step, sine_first)``, the real and imaginary parts
    of the first row and of the unit factor from which :func:`_expi_ranges` builds the rows by doubling.

    The first row is ``conj(e^(i·start·w)) = cos − i·sin``, or with ``sine_first``
    ``i·conj(e^(i·start·w)) = sin + i·cos``; the factor is ``conj(e^(i·step·w))``. Only these take
    ``sin``/``cos`` of float64 angles: the C library's (:mod:`math`), as the compiled loop of
    :mod:`posenc._native` takes them, so that both build the same rows.
    """
    angles = np.multiply.outer(np.array([a for r in ranges for a in r[:2]], dtype=np.float64), w)
    flat = angles.ravel().tolist()
    cos = np.array([math.cos(a) for a in flat]).reshape(angles.shape)
    sin = np.array([math.sin(a) for a in flat]).reshape(angles.shape)
    seeds = np.empty((len(ranges), 4, w.size))
    for k, (_, _, sine_first) in enumerate(ranges):
        first = (sin[2 * k], cos[2 * k]) if sine_first else (cos[2 * k], -sin[2 * k])
        seeds[k] = first[0], first[1], cos[2 * k + 1], -sin[2 * k + 1]
    return seeds


def _expi_ranges(
    w: NDArray[np.float64], *ranges: tuple[float, float, int, bool]
) -> list[NDArray[np.complex128]]:
    """For each ``(start, step, n, sine_first)``: ``(n, len(w))`` complex128 rows ``r < n`` of
    ``conj(e^(iθ)) = cos θ − i·sin θ``, or with ``sine_first`` of ``i·conj(e^(iθ)) = sin θ + i·cos θ``,
    at the angles ``θ = (start + step·r)·w``.

    By doubling from :func:`_expi_seeds`: rows ``m … 2m−1`` are rows ``0 … m−1`` times
    ``conj(e^(i·step·m·w))``, so row ``r`` is the first row times one factor per set bit of ``r``; the
    factor for ``2m`` is the square of the one for ``m``. The float64 angle ``step·2^k·w`` is exactly
    ``2^k`` times the angle ``step·w``, so its rounding error is amplified by ``2^k`` either way;
    squaring adds ~``2^k`` roundings of ~1e-16 to that (~5e-13 for ``n = 2^12``), far below float32's
    half ulp. Each complex product is written out as real operations, each rounded once
    (``Re = a·c − b·d``, ``Im = a·d + b·c``): NumPy's complex multiply may fuse a multiply-add, and
    these rows must equal the compiled loop's (:mod:`posenc._native`) bit for bit.
    """
    seeds = _expi_seeds(w, *((start, step, sine_first) for start, step, _, sine_first in ranges))
    n = max(r[2] for r in ranges)  # all ranges at once, each operation over [len(ranges), rows, f]
    re, im = np.empty((len(ranges), n, w.size)), np.empty((len(ranges), n, w.size))
    re[:, 0], im[:, 0] = seeds[:, 0], seeds[:, 1]
    fr, fm = seeds[:, 2, None], seeds[:, 3, None]
    m = 1
    while m < n:
        rows = min(m, n - m)
        re[:, m : m + rows] = re[:, :rows] * fr - im[:, :rows] * fm
        im[:, m : m + rows] = re[:, :rows] * fm + im[:, :rows] * fr
        if 2 * m < n:
            fr, fm = fr * fr - fm * fm, fr * fm + fm * fr
        m *= 2
    tables = []
    for k, (_, _, rows, _) in enumerate(ranges):
        out = np.empty((rows, w.size), dtype=np.complex128)
        out.real, out.imag = re[k, :rows], im[k, :rows]
        tables.append(out)
    return tables


def _column_runs(out_cols: NDArray[np.intp], src_cols: NDArray[np.intp]) -> list[tuple[slice, slice]]:
    """Split ``out[:, out_cols] = v[:, src_cols]`` into few ``(out slice, v slice)`` pairs of constant strides."""
    runs, c0, n = [], 0, out_cols.size
    while c0 < n:
        c1 = c0 + 1
        step_out = int(out_cols[c1] - out_cols[c0]) if c1 < n else 1
        step_src = int(src_cols[c1] - src_cols[c0]) if c1 < n else 1
        if step_out > 0 and step_src > 0:
            breaks = np.flatnonzero(
                (np.diff(out_cols[c0:]) != step_out) | (np.diff(src_cols[c0:]) != step_src)
            )
            c1 = c0 + 1 + (int(breaks[0]) if breaks.size else n - c0 - 1)
        else:
            step_out = step_src = 1
        runs.append(
            (
                slice(int(out_cols[c0]), int(out_cols[c1 - 1]) + 1, step_out),
                slice(int(src_cols[c0]), int(src_cols[c1 - 1]) + 1, step_src),
            )
        )
        c0 = c1
    return runs


def _native_row_layout(sin_cols: NDArray[np.intp], cos_cols: NDArray[np.intp]) -> str | None:
    """The ``expi_rows`` layout (a key of :data:`posenc._native.ROW_LAYOUTS`) placing the sines at ``sin_cols``
    and the cosines at ``cos_cols``, or ``None`` if no code does (odd ``d``: one cosine fewer)."""
    f = sin_cols.size
    if cos_cols.size != f:
        return None
    even, odd, lower = np.arange(0, 2 * f, 2), np.arange(1, 2 * f, 2), np.arange(f)
    places = {"interleaved": (even, odd), "interleaved_cos_first": (odd, even), "split": (lower, lower + f)}
    for name, (sines, cosines) in places.items():
        if np.array_equal(sin_cols, sines) and np.array_equal(cos_cols, cosines):
            return name
    return None


def _sinusoidal_range(
    start: int,
    n: int,
    w: NDArray[np.float64],
    sin_cols: NDArray[np.intp],
    cos_cols: NDArray[np.intp],
    dtype: np.dtype,
) -> NDArray[np.floating]:
    """Rows ``start … start+n−1`` of :func:`sinusoidal` by the angle addition formula (Vaswani et al. 2017, §3.5).

    With ``b = ⌈√n⌉``, row ``q·b + j`` is ``z = F[j]·C[q]``, a complex product per frequency
    computed in float64 (fine ``F[j] = e^(i·j·w)``, coarse ``C[q] = e^(i·(start+q·b)·w)``, from
    :func:`_expi_ranges`), and the float64 pair ``(Re z, Im z)`` is rounded once to ``dtype``.
    With ``F`` and ``C`` conjugated and ``F`` multiplied by ``i``, the pair is ``(sin, cos)``: in
    the interleaved layout with even ``d`` the complex result *is* the row, written straight into
    the output and cast by the multiply itself; other layouts copy their columns out of a
    cache-sized scratch. Every layout does the same arithmetic, so layouts are exact permutations.
    Where the compiled loop of :mod:`posenc._native` is built, the products, the rounding and the
    placement of the built-in layouts with even ``d`` are one pass over the output instead.
    """
    dim, f = sin_cols.size + cos_cols.size, w.size
    b = _shift_block(n)
    n_blocks = -(-n // b)
    # fine i·conj(e^(iθ)) = sin θ + i·cos θ: its float64 view holds (sin, cos) pairs, the interleaved row.
    native_layout = _native_row_layout(sin_cols, cos_cols)
    native_dtype = _native.dtype_code(dtype, "expi_rows")
    if _native.kernels is not None and native_layout is not None and native_dtype is not None:
        out = np.empty((n, dim), dtype=dtype)
        _native.expi_rows(out, native_layout, w, float(start), 1.0, b)
        return out
    fine, coarse = _expi_ranges(w, (0.0, 1.0, b, True), (float(start), float(b), n_blocks, False))
    src = np.empty(dim, dtype=np.intp)  # out[:, c] = v[:, src[c]]
    src[sin_cols], src[cos_cols] = 2 * np.arange(sin_cols.size), 2 * np.arange(cos_cols.size) + 1
    identity = np.array_equal(src, np.arange(dim))
    runs = (
        [(slice(0, dim), slice(0, dim))]
        if identity
        else [*_column_runs(sin_cols, src[sin_cols]), *_column_runs(cos_cols, src[cos_cols])]
    )
    out = np.empty((n, dim), dtype=dtype)
    full = n // b  # blocks of b complete rows
    complex_dtype = np.result_type(dtype, np.complex64)
    if dim == 2 * f and identity and complex_dtype.itemsize == 2 * dtype.itemsize:
        rows = out.view(complex_dtype)  # (n, f): the row is z itself
        np.multiply(
            fine[None], coarse[:full, None], out=rows[: full * b].reshape(full, b, f), casting="same_kind"
        )
        if full < n_blocks:
            np.multiply(fine[: n - full * b], coarse[full], out=rows[full * b :], casting="same_kind")
        return out
    per_chunk = max(1, _BLOCK_BYTES // (16 * b * f))
    scratch = np.empty((per_chunk, b, f), dtype=np.complex128)
    for q0 in range(0, n_blocks, per_chunk):
        q1 = min(q0 + per_chunk, n_blocks)
        r0, r1 = q0 * b, min(q1 * b, n)
        block = np.multiply(fine[None], coarse[q0:q1, None], out=scratch[: q1 - q0])
        v = block.view(np.float64).reshape(-1, 2 * f)[: r1 - r0]
        for out_cols, v_cols in runs:
            out[r0:r1, out_cols] = v[:, v_cols]
    return out


def dft_positions(positions: ArrayLike | int, dim: int, *, alias: bool = False) -> NDArray[np.float64]:
    """Validate DFT positions: integers in ``0 … dim−1``; with ``alias=True`` any integer, reduced mod ``dim``.

    Theorem 1 of Idé, Labaien & Chen (2024) holds only on the lattice ``0 … d−1``: position ``s + d`` has the
    same encoding as ``s``, so positions outside are refused unless aliasing is asked for.
    """
    dim = validate.positive_int("dim", dim)
    t = validate.positions(positions)
    frac = t != np.round(t)
    if frac.any():
        i = int(np.argmax(frac))
        raise ValueError(
            f"positions must be integers for the DFT encoding (a lattice of dim={dim} points); "
            f"got {t[i]:g} at index {i}"
        )
    if validate.boolean("alias", alias):
        return np.mod(t, dim)
    outside = (t < 0) | (t > dim - 1)
    if outside.any():
        i = int(np.argmax(outside))
        raise ValueError(
            f"positions must lie in 0…dim-1 = 0…{dim - 1} for the DFT encoding, got {t[i]:.0f} at "
            f"index {i}: position s+{dim} has the same encoding as s (Theorem 1 holds "
            f"only on the lattice); use dim >= sequence length, or alias=True to wrap positions mod dim"
        )
    return t


def dft(
    positions: ArrayLike | int, dim: int, *, alias: bool = False, dtype: DTypeLike = np.float64
) -> NDArray[np.floating]:
    """Faithful DFT positional encoding (Idé, Labaien & Chen 2024, "Improving Transformers using Faithful
    Positional Encoding", eqs. 17–21).

    Row ``s`` is the DFT of the one-hot ``δ_(s,t)`` on the lattice ``t = 0 … d−1``, in the
    paper's order (eq. 21)::

        e(s) = (a_0, a_1 … a_K, b_1 … b_K, b_0)
        a_0 = 1/√d,  a_k = √(2/d)·cos(ω_k s),  b_k = √(2/d)·sin(ω_k s),  b_0 = cos(πs)/√d

    with ``ω_k = 2πk/d`` and ``K = d/2 − 1`` (even ``d``) or ``K = (d−1)/2`` and no ``b_0``
    (odd ``d``). ``‖e(s)‖ = 1``: entries are O(1/√d), unscaled here (the paper's encoding).

    Args:
        positions: int ``S`` or 1-D integers, all in ``0 … dim−1`` unless ``alias=True``.
        dim: ``d``, a positive int.
        alias: wrap positions mod ``dim`` instead of refusing them (the encoding is then
            periodic and no longer faithful beyond ``d``).
        dtype: floating dtype of the result; angles are float64 regardless.
    """
    dim = validate.positive_int("dim", dim)
    t = dft_positions(positions, dim, alias=alias)
    n_k = (dim - 1) // 2  # K: number of (a_k, b_k) pairs with 1 ≤ k ≤ K
    out = np.empty((t.size, dim), dtype=_float_dtype(dtype))
    out[:, 0] = 1.0 / math.sqrt(dim)
    if n_k > 0:  # dim <= 2 has no (a_k, b_k) pairs
        a = angles(t, spectrum.dft(dim)[1 : n_k + 1])
        out[:, 1 : n_k + 1] = math.sqrt(2.0 / dim) * np.cos(a)
        out[:, n_k + 1 : 2 * n_k + 1] = math.sqrt(2.0 / dim) * np.sin(a)
    if dim % 2 == 0:
        out[:, dim - 1] = np.where(t % 2 == 0, 1.0, -1.0) / math.sqrt(dim)  # cos(π s), exact
    return out


def tensor2tensor(
    positions: ArrayLike | int,
    dim: int,
    *,
    min_timescale: float = 1.0,
    max_timescale: float = 10000.0,
    dtype: DTypeLike = np.float64,
) -> NDArray[np.floating]:
    """The table of tensor2tensor's ``get_timing_signal_1d`` and fairseq's ``SinusoidalPositionalEmbedding``.

    ``[sin(t·w_0) … sin(t·w_(p−1)), cos(t·w_0) … cos(t·w_(p−1))]`` with ``p = ⌊d/2⌋`` frequencies
    of :func:`posenc.spectrum.tensor2tensor` and, for odd ``d``, a **zero last column** — their
    odd-``d`` convention, unlike :func:`sinusoidal`'s (``⌈d/2⌉`` sines, the last cosine dropped).
    For even ``d`` it equals ``sinusoidal(positions, d, layout="split",
    frequencies=spectrum.tensor2tensor(d, …))``. fairseq's positions start at ``padding_idx + 1``
    and its padding rows are zero (``docs/conventions.md``).
    """
    dim = validate.positive_int("dim", dim)
    even = dim - dim % 2
    t = validate.positions(positions)
    out = np.zeros((t.size, dim), dtype=_float_dtype(dtype))
    if even:
        w = spectrum.tensor2tensor(even, min_timescale=min_timescale, max_timescale=max_timescale)
        out[:, :even] = sinusoidal(t, even, layout="split", frequencies=w, dtype=dtype)
    return out


GRID_LAYOUTS: tuple[str, ...] = ("per_axis", "sin_cos")


def sincos_nd(
    shape: tuple[int, ...] | list[int],
    axis_dims: tuple[int, ...] | list[int],
    *,
    base: float = DEFAULT_BASE,
    layout: str = "per_axis",
    column_order: tuple[int, ...] | list[int] | None = None,
    dtype: DTypeLike = np.float64,
) -> NDArray[np.floating]:
    """Fixed n-D sinusoidal table of a grid of ``shape`` (Dosovitskiy et al. 2021 / He et al. 2022, MAE).

    Token ``n`` is grid point ``(c_0 … c_{A−1})`` in row-major order (the last axis fastest). Axis
    ``a`` gets ``axis_dims[a]`` (even) columns, ``sin(c_a·ω_j)`` and ``cos(c_a·ω_j)`` with
    ``ω_j = base^(−j/m)``, ``j < m = axis_dims[a]/2``: the 1-D encoding of MAE's
    ``get_1d_sincos_pos_embed_from_grid``. The axes' blocks stand in ``column_order`` (default
    ``0 … A−1``); ``layout`` ``"per_axis"`` puts each axis' sines then cosines together,
    ``"sin_cos"`` all sines (in that order) then all cosines. Angles in float64 (:func:`angles`),
    one rounding to ``dtype``. Returns ``(Π shape, Σ axis_dims)``. Recipes:

    * MAE ``get_2d_sincos_pos_embed(D, (H, W))``: ``sincos_nd((H, W), (D/2, D/2), column_order=(1, 0))``
    * timm ``build_sincos2d_pos_embed((H, W), D)``: ``sincos_nd((H, W), (D/2, D/2), layout="sin_cos")``;
      with ``interleave_sin_cos=True``: ``layout="per_axis"``
    * 3-D (video; MAE-ST, CogVideoX's ``get_3d_sincos_pos_embed``): ``sincos_nd((T, H, W), (D/4, 3D/8, 3D/8),
      column_order=(0, 2, 1))``
    """
    if isinstance(shape, (str, bytes)) or not isinstance(shape, (tuple, list)) or not shape:
        raise TypeError(f"shape must be a non-empty tuple of grid sizes, got {shape!r}")
    sizes = [validate.positive_int("shape", n) for n in shape]
    if not isinstance(axis_dims, (tuple, list)) or len(axis_dims) != len(sizes):
        raise ValueError(
            f"axis_dims must give one column count per axis of shape {tuple(sizes)}, got {axis_dims!r}"
        )
    dims = [validate.positive_int("axis_dims", n) for n in axis_dims]
    if any(n % 2 for n in dims):
        raise ValueError(
            f"axis_dims must all be even (a sine and a cosine per frequency), got {list(axis_dims)}"
        )
    validate.choice("layout", layout, GRID_LAYOUTS)
    order = list(range(len(sizes))) if column_order is None else column_order
    if (
        not isinstance(order, (tuple, list))
        or any(isinstance(a, bool) or not isinstance(a, numbers.Integral) for a in order)
        or sorted(int(a) for a in order) != list(range(len(sizes)))
    ):
        raise ValueError(f"column_order must be a permutation of 0 … {len(sizes) - 1}, got {column_order!r}")
    out_dtype = _float_dtype(dtype)
    base = validate.positive_float("base", base)
    coords = np.indices(sizes, dtype=np.float64).reshape(len(sizes), -1)
    waves = []
    for a in order:
        m = dims[a] // 2
        phase = angles(coords[a], base ** (-np.arange(m, dtype=np.float64) / m))
        waves.append((np.sin(phase), np.cos(phase)))
    if layout == "per_axis":
        blocks = [block for pair in waves for block in pair]
    else:
        blocks = [s for s, _ in waves] + [c for _, c in waves]
    return np.concatenate(blocks, axis=1).astype(out_dtype)
