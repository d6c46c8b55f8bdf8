"""Relative-position biases built for length extrapolation: Kerple, Sandwich and FIRE.

Each adds to the score ``(i, j)`` of head ``h`` (query at ``i``, key at ``j``; alignment rules of
:mod:`posenc.nn._positions`) a term that depends on the positions only, so attention keeps them as
an additive float mask ``[h, s_q, s_k]``:

=============  ==========================================================  ==========================
class          added to score ``(i, j)`` of head ``h``                      source
=============  ==========================================================  ==========================
Kerple (log)   ``−r₁·log(1 + r₂·|i − j|)``, ``r₁, r₂ > 0`` learned           Chi et al. 2022, eq. (6)
Kerple (power) ``−r₁·|i − j|^r₂``, ``r₁ > 0``, ``0 < r₂ ≤ 2`` learned         Chi et al. 2022, eq. (5)
Sandwich       ``(Σ_{k=1}^{d'/2} cos((i − j)·ω_k) − d'/2) / (8h/H)``,        Chi et al. 2023, §5
               ``ω_k = 10000^(−2k/d')``
FIRE           ``f_θ(ψ(|i − j|) / ψ(max(i, L)))``, ``ψ(x) = log(c·x + 1)``,   Li et al. 2023, eq. (3)
               ``f_θ`` an MLP ``1 → w → H``, ``c`` and ``L`` learned
=============  ==========================================================  ==========================

The papers write the causal case ``j ≤ i``; like ALiBi here, ``|i − j|`` extends them to
bidirectional attention and is the same where ``j ≤ i``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from posenc import validate
from posenc.nn import _positions
from posenc.nn.bias import AttentionBias

KERPLE_FORMS: tuple[str, ...] = ("log", "power")


def _constrained(raw: torch.Tensor, *, low: float, high: float | None = None) -> torch.Tensor:
    """``raw`` clamped into ``[low, high]`` (Chi et al.'s reference keeps Kerple's parameters positive so)."""
    return raw.clamp(min=low, max=high)


class KerpleBias(AttentionBias):
    """Kernelized relative positional bias (Chi et al. 2022, "KERPLE", eqs. 5–6), one pair of scalars per head.

    ``form="log"``: ``−r₁·log(1 + r₂·|i − j|)``; ``form="power"``: ``−r₁·|i − j|^r₂`` (``r₂ ≤ 2`` keeps
    the kernel conditionally positive definite). ``r₁`` and ``r₂`` are learned per head and initialised as
    in the authors' code (Chi et al., github.com/chijames/KERPLE, ``ParallelKerpleLog`` and
    ``ParallelKerplePower``: ``2·U[0, 1)`` for the log form's multiplier and the power form's exponent,
    ``U[0, 1)`` for the other): ``r₁`` uniformly in ``(0, 2]`` (log) or ``(0, 1]`` (power), ``r₂`` in
    ``(0, 1]`` (log) or ``(0, 2]`` (power), the open end at 0 so that no head starts at the clamp; both are
    clamped to ``≥ eps`` (and the power form's ``r₂ ≤ 2``) when used.

    Args:
        n_heads: number of heads.
        form: ``"log"`` (their best) or ``"power"``.
        eps: lower clamp of both parameters.
    """

    def __init__(self, n_heads: int, *, form: str = "log", eps: float = 1e-2) -> None:
        super().__init__()
        self.n_heads = validate.positive_int("n_heads", n_heads)
        self.form = validate.choice("form", form, KERPLE_FORMS)
        self.eps = validate.positive_float("eps", eps)
        r1_high, r2_high = (2.0, 1.0) if self.form == "log" else (1.0, 2.0)
        self.r1 = nn.Parameter(r1_high * (1.0 - torch.rand(self.n_heads)))
        self.r2 = nn.Parameter(r2_high * (1.0 - torch.rand(self.n_heads)))

    def coefficients(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(r₁, r₂)`` ``[h]`` as used: clamped to ``[eps, ∞)`` and, for the power form, ``r₂ ≤ 2``."""
        r2_max = 2.0 if self.form == "power" else None
        return _constrained(self.r1, low=self.eps), _constrained(self.r2, low=self.eps, high=r2_max)

    def _bias_from_distance(self, distance: torch.Tensor) -> torch.Tensor:
        r1, r2 = (c.to(torch.float64)[:, None, None] for c in self.coefficients())
        gap = distance.abs().to(torch.float64).unsqueeze(-3)
        if self.form == "log":
            return -r1 * torch.log1p(r2 * gap)
        return -r1 * gap.pow(r2)

    def extra_repr(self) -> str:
        return f"n_heads={self.n_heads}, form={self.form!r}"


def sandwich_kernel(distance: torch.Tensor, dim: int, *, base: float = 10000.0) -> torch.Tensor:
    """``Σ_{k=1}^{dim/2} cos(distance·ω_k)``, ``ω_k = base^(−2k/dim)``, float64 (Chi et al. 2023, §5).

    The inner product ``p_i·p_j`` of two sinusoidal embeddings (Vaswani et al. 2017, §3.5) depends on
    ``i − j`` only; this is that kernel, with the frequencies indexed from ``k = 1`` as in Sandwich.
    """
    k = np.arange(1, dim // 2 + 1, dtype=np.float64)
    omega = torch.from_numpy(base ** (-2.0 * k / dim)).to(distance.device)
    return torch.cos(distance.to(torch.float64).unsqueeze(-1) * omega).sum(-1)


class SandwichBias(AttentionBias):
    """Sandwich (Chi et al. 2023, "Dissecting Transformer Length Extrapolation via the Lens of Receptive
    Field Analysis", §5): the sinusoidal relative kernel used as a parameter-free attention bias.

    Score ``(i, j)`` of head ``h = 1 … H`` gets ``(K(i − j) − d'/2) / (8h/H)`` with ``K`` the kernel of
    :func:`sandwich_kernel`: ``0`` on the diagonal, negative and decaying (with oscillation) away from
    it; the head factors ``8h/H`` play the part of ALiBi's slopes, as in the authors' code.

    Args:
        n_heads: number of heads ``H``.
        d_model: default ``d'`` (the width of the sinusoidal embeddings whose product is the kernel).
        dim: ``d'`` (even) when it should differ from ``d_model``.
        base: ``10000`` of the frequencies.
    """

    def __init__(self, n_heads: int, d_model: int, *, dim: int | None = None, base: float = 10000.0) -> None:
        super().__init__()
        self.n_heads = validate.positive_int("n_heads", n_heads)
        self.dim = validate.positive_int("dim", d_model if dim is None else dim)
        if self.dim % 2:
            raise ValueError(f"dim must be even (pairs of sin/cos), got {self.dim}")
        self.base = validate.positive_float("base", base)
        heads = torch.arange(1, self.n_heads + 1, dtype=torch.float64)
        self._scales = heads * 8.0 / self.n_heads  # float64 constant, not a buffer (as ALiBi's slopes)

    def _bias_from_distance(self, distance: torch.Tensor) -> torch.Tensor:
        kernel = sandwich_kernel(distance, self.dim, base=self.base) - self.dim / 2
        return kernel.unsqueeze(-3) / self._scales.to(distance.device)[:, None, None]

    def extra_repr(self) -> str:
        return f"n_heads={self.n_heads}, dim={self.dim}, base={self.base}"


class FIREBias(AttentionBias):
    """Functional interpolation for relative positions (Li et al. 2023, "Functional Interpolation for
    Relative Positions Improves Long Context Transformers", eq. 3 and appendix code).

    ``b_h(i, j) = f_θ(ψ(|i − j|) / (ψ(max(i, L)) + ε))_h`` with ``ψ(x) = log(|c|·x + 1)``, ``f_θ`` an MLP
    ``1 → width → H`` with ReLU, ``c`` learned (initialised at ``init_c``) and the threshold
    ``L = |λ·L₀|`` with ``L₀ = init_l`` fixed and ``λ`` learned (initialised at 1). Dividing by
    ``ψ(max(i, L))`` maps every distance seen by a query into ``[0, 1]`` (progressive interpolation),
    so queries beyond the training length still see inputs in the range the MLP was trained on.

    Args:
        n_heads: heads ``H`` (outputs of the MLP).
        max_len: the default ``L₀`` (the training length).
        width: hidden width of the MLP (32 in the paper).
        init_c: initial ``c`` (0.1 in the paper).
        init_l: ``L₀`` when it should differ from ``max_len``.
        eps: ``ε`` of the denominator.
    """

    by_offset = False  # ψ(max(i, L)) depends on the query's position, not on j − i alone

    def __init__(
        self,
        n_heads: int,
        max_len: int = 512,
        *,
        width: int = 32,
        init_c: float = 0.1,
        init_l: float | None = None,
        eps: float = 1e-6,
    ) -> None:
        super().__init__()
        self.n_heads = validate.positive_int("n_heads", n_heads)
        self.width = validate.positive_int("width", width)
        self.eps = validate.positive_float("eps", eps)
        self.mlp = nn.Sequential(nn.Linear(1, self.width), nn.ReLU(), nn.Linear(self.width, self.n_heads))
        self.c = nn.Parameter(torch.tensor(validate.positive_float("init_c", init_c)))
        self.init_l = validate.positive_float("init_l", float(max_len) if init_l is None else init_l)
        self.l_multiplier = nn.Parameter(torch.tensor(1.0))

    def threshold(self) -> torch.Tensor:
        """The learned threshold ``L = |λ·L₀|`` (a 0-d tensor)."""
        return (self.l_multiplier * self.init_l).abs()

    def normalized_distance(self, distance: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        """``ψ(|i − j|) / (ψ(max(i, L)) + ε)`` for ``distance`` ``j − i`` ``[…, s_q, s_k]`` and query
        positions ``i`` broadcastable to ``[…, s_q, 1]``, in the parameters' dtype."""
        dtype = self.c.dtype
        c = self.c.abs()
        numerator = torch.log1p(c * distance.abs().to(dtype))
        denominator = torch.log1p(c * torch.maximum(query.to(dtype), self.threshold())) + self.eps
        return numerator / denominator

    def bias(
        self,
        q_len: int,
        k_len: int,
        *,
        q_positions: torch.Tensor | None = None,
        k_positions: torch.Tensor | None = None,
        offset: int = 0,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> torch.Tensor:
        """``[h, s_q, s_k]`` (``[b, h, s_q, s_k]`` for batched positions) FIRE bias."""
        where = self.c.device if device is None else torch.device(device)
        qp, kp = _positions.resolve(
            q_len, k_len, q_positions=q_positions, k_positions=k_positions, offset=offset, device=where
        )
        qp, kp = qp.to(where), kp.to(where)
        distance = kp.unsqueeze(-2) - qp.unsqueeze(-1)
        x = self.normalized_distance(distance, qp.unsqueeze(-1))
        out: torch.Tensor = self.mlp(x.unsqueeze(-1))
        return out.movedim(-1, -3).to(dtype)  # [..., s_q, s_k, h] → [..., h, s_q, s_k]

    def extra_repr(self) -> str:
        return f"n_heads={self.n_heads}, width={self.width}, init_l={self.init_l}"


class KerplePowerBias(KerpleBias):
    """:class:`KerpleBias` in its power form ``−r₁·|i − j|^r₂`` (the registry's ``"kerple_power"``)."""

    def __init__(self, n_heads: int, *, eps: float = 1e-2) -> None:
        super().__init__(n_heads, form="power", eps=eps)
