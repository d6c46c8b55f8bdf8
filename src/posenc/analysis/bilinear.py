"""Su's general bilinear form ``p_mᵀ H p_n`` of two sinusoidal encodings, for a diagonal ``H``.

Attention scores ``(x_m + p_m)ᵀ W_Q W_Kᵀ (x_n + p_n)`` hold the term ``p_mᵀ H p_n`` with
``H = W_Q W_Kᵀ``. For a diagonal ``H = diag(h)`` and a pair ``i`` of frequency ``θ_i`` whose
sine column carries ``h_s,i`` and cosine column ``h_c,i`` (Su, 2021, "general case"; his
eq. for cos-first pairs)::

    h_s sin mθ sin nθ + h_c cos mθ cos nθ
        = ½(h_c + h_s) cos((m−n)θ)  +  ½(h_c − h_s) cos((m+n)θ)
          └──── relative: depends on m − n only ┘  └─ absolute: on m + n ┘

In the default sin-first ``"interleaved"`` layout ``h_s = H₂ᵢ``, ``h_c = H₂ᵢ₊₁`` and the
``(m+n)`` coefficient is ``½(H₂ᵢ₊₁ − H₂ᵢ)``; Su's cos-first pairs give ``½(H₂ᵢ − H₂ᵢ₊₁)``.
The relative part is a weighted version of the kernel of :mod:`~posenc.analysis.kernel`;
Su approximates it by ``∫₀¹ h(u) e^{i(m−n)θ(u)} du`` with ``h`` the pair weights
``½(h_c + h_s)`` spread over ``u = 2i/d`` (:func:`weighted_decay_integral`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from posenc import spectrum, tables, validate
from posenc.analysis import kernel


def pair_coefficients(
    h: ArrayLike, *, dim: int, layout: str = "interleaved"
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The per-pair coefficients ``(½(h_c + h_s), ½(h_c − h_s))`` of the diagonal ``h`` (``⌈d/2⌉`` each).

    For odd ``d`` the last frequency has a sine column only (``h_c = 0``).
    """
    dim = validate.positive_int("dim", dim)
    diag = validate.finite_array("h", h, ndim=1)
    if diag.size != dim:
        raise ValueError(f"h must hold the d = {dim} diagonal entries of H, got {diag.size}")
    sin_cols, cos_cols = spectrum.layout_columns(dim, layout)
    h_s = diag[sin_cols]
    h_c = np.zeros_like(h_s)
    h_c[: cos_cols.size] = diag[cos_cols]
    return 0.5 * (h_c + h_s), 0.5 * (h_c - h_s)


def _finite(name: str, value: ArrayLike) -> NDArray[np.float64]:
    """``value`` as a float64 array of finite numbers (any shape)."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number or an array of numbers, got {value!r}") from None
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must hold finite positions, got {value!r}")
    return arr


def bilinear_parts(
    h: ArrayLike,
    m: ArrayLike,
    n: ArrayLike,
    *,
    dim: int,
    base: float = tables.DEFAULT_BASE,
    layout: str = "interleaved",
    frequencies: ArrayLike | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Split ``p_mᵀ diag(h) p_n`` into its relative and absolute parts (Su, 2021, general ``H``).

    Args:
        h: the ``d`` diagonal entries of ``H``, in the table's column order.
        m, n: positions (any real numbers), scalars or arrays broadcastable together.
        dim: ``d``.
        base: ``ρ`` of the geometric frequencies ``ρ^(−2i/d)``; ignored when ``frequencies`` is given.
        layout: column layout of the table (:data:`posenc.spectrum.LAYOUTS`).
        frequencies: ``⌈d/2⌉`` frequencies of any schedule (e.g. trained ones) instead of the geometric.

    Returns:
        ``(relative, absolute)`` of the broadcast shape of ``m`` and ``n``:
        ``relative = Σ_i ½(h_c + h_s) cos((m−n)θ_i)`` (a function of ``m − n`` only),
        ``absolute = Σ_i ½(h_c − h_s) cos((m+n)θ_i)``; their sum is ``p_mᵀ diag(h) p_n``.
    """
    rel_coef, abs_coef = pair_coefficients(h, dim=dim, layout=layout)
    w = spectrum.sinusoidal_frequencies(dim, base=base, frequencies=frequencies)
    mm, nn = _finite("m", m), _finite("n", n)
    try:
        mb, nb = np.broadcast_arrays(mm, nn)
    except ValueError:
        raise ValueError(f"m and n must broadcast together, got shapes {mm.shape} and {nn.shape}") from None
    shape = mb.shape
    relative = np.cos(tables.angles((mb - nb).ravel(), w)) @ rel_coef
    absolute = np.cos(tables.angles((mb + nb).ravel(), w)) @ abs_coef
    return relative.reshape(shape), absolute.reshape(shape)


def weighted_decay_integral(
    h: ArrayLike,
    distances: ArrayLike | int,
    *,
    dim: int,
    base: float = tables.DEFAULT_BASE,
    layout: str = "interleaved",
) -> NDArray[np.float64]:
    """Su's ``⌈d/2⌉ · Re ∫₀¹ h(u) e^{i x θ(u)} du`` for the relative part of ``diag(h)`` (Su, 2021).

    ``h(u)`` interpolates the pair weights ``½(h_c + h_s)`` linearly between their nodes
    ``u_i = 2i/d`` (held constant beyond the last), ``θ(u) = ρ^(−u)``. It approximates the
    relative part of :func:`bilinear_parts` at ``m − n = x`` as long as the sum is a Riemann
    sum of the integral (:func:`~posenc.analysis.riemann_limit`) and ``h`` is smooth in ``i``.
    """
    rel_coef, _ = pair_coefficients(h, dim=dim, layout=layout)
    nodes = 2.0 * np.arange(rel_coef.size) / dim

    def weight(u: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.interp(u, nodes, rel_coef)

    return kernel.decay_integral(kernel.Geometric(base), distances, dim=dim, weight=weight)


FORM_KEYS: tuple[str, ...] = ("diagonal_share", "form_toeplitz_error", "relative_share")
"""Keys of :func:`form_summary` (the ``attention_form`` object of ``posenc analyze --checkpoint --json``)."""


def form_summary(
    H: ArrayLike, E: ArrayLike, *, frequencies: ArrayLike | None = None, layout: str = "interleaved"
) -> dict[str, float | None]:
    """Su's decomposition of the encoding term ``p_mᵀ H p_n`` of attention scores, as three numbers.

    Args:
        H: ``[d, d]`` query–key form (e.g. a layer's ``W_Qᵀ W_K``), in the table's column order.
        E: ``[S, d]`` encoding rows ``p_0 … p_(S−1)``.
        frequencies: the table's ``⌈d/2⌉`` frequencies when it is sinusoidal (``layout`` its layout).

    Returns:
        ``diagonal_share``: ``‖diag H‖ / ‖H‖_F`` — Su's premise is a dominant diagonal;
        ``form_toeplitz_error``: :func:`~posenc.analysis.toeplitz_deviation` of ``E H Eᵀ``,
        0 when the full encoding term depends on ``m − n`` only;
        ``relative_share``: ``‖R‖_F / (‖R‖_F + ‖A‖_F)`` for the relative and absolute parts
        of ``diag(H)`` (:func:`bilinear_parts`, scaled to the table's amplitude); ``None``
        without frequencies.
    """
    table = validate.finite_array("E", E, ndim=2)
    form = validate.finite_array("H", H, ndim=2)
    dim = table.shape[1]
    if form.shape != (dim, dim):
        raise ValueError(
            f"H must be [d, d] = [{dim}, {dim}] for a table of d = {dim} columns, got {form.shape}"
        )
    if table.shape[0] < 2:
        raise ValueError(f"E must hold at least 2 positions, got {table.shape[0]}")
    norm = float(np.linalg.norm(form))
    out: dict[str, float | None] = {
        "diagonal_share": float(np.linalg.norm(np.diag(form)) / norm) if norm > 0 else 0.0,
        "form_toeplitz_error": kernel.toeplitz_deviation(table @ form @ table.T),
        "relative_share": None,
    }
    if frequencies is not None:
        unit = tables.sinusoidal(table.shape[0], dim, frequencies=frequencies, layout=layout)
        amplitude2 = float(np.sum(table**2) / np.sum(unit**2))
        t = np.arange(table.shape[0], dtype=np.float64)
        rel, ab = bilinear_parts(
            np.diag(form), t[:, None], t[None, :], dim=dim, layout=layout, frequencies=frequencies
        )
        r, a = amplitude2 * float(np.linalg.norm(rel)), amplitude2 * float(np.linalg.norm(ab))
        out["relative_share"] = r / (r + a) if r + a > 0 else None
    return out
