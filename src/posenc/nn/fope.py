"""FoPE (Hua et al. 2024, "Fourier Position Embedding: Enhancing Attention's Periodic Extension for Length
Generalization"): rotary tables that are learned Fourier series of the rotary frequencies.

Rotary rotates pair ``j`` at position ``t`` by ``tθ_j``, ``θ_j = ρ^(−2j/r)`` (Su et al. 2021, eq. 34). FoPE
(Hua et al. 2024, §4) treats each dimension as a Fourier series over several frequencies instead of one, and
clips the frequencies a context of ``L`` positions cannot complete a period of. As vLLM serves it
(``vllm/model_executor/layers/rotary_embedding/fope.py``, ``FourierRotaryEmbedding``; the config keys read by
``vllm/model_executor/models/interns1_pro.py``):

* **kept frequencies** ``θ_0 … θ_(F−1)``: the first ``num_inv_freq`` when given, else every ``θ_j`` with
  ``θ_j > 2π/L``, ``L = max_position_embeddings`` (the θ decrease, so these are the first ``F``);
* **tables**, per table head ``h`` (one per KV head when ``separate_heads``, else one)::

      C[h, t, d] = Σ_D cos(tθ_D)·cos_coef[h, D, d]        S[h, t, d] = Σ_D sin(tθ_D)·sin_coef[h, D, d]

  for ``d < F``, and ``C = 1``, ``S = 0`` (the zero frequency: no rotation) for ``F ≤ d < d_h/2``;
* **application** in half-split pairs ``(d, d + d_h/2)`` over the whole head (not ``r``)::

      out[d]         = x[d]·C[d] − x[d + d_h/2]·S[d]
      out[d + d_h/2] = x[d + d_h/2]·C[d] + x[d]·S[d]

  query head ``i`` of ``H`` uses the table of KV head ``i // (H / H_kv)`` (the grouping of grouped-query
  attention's ``repeat_kv``).

With identity coefficients the tables are ``cos(tθ_d)``, ``sin(tθ_d)``: rotary on the kept frequencies, the
others unrotated. Otherwise ``C² + S² ≠ 1`` in general, so FoPE is not a rotation, and its tables depend on the
learned ``cos_coef``, ``sin_coef`` ``[H_c, F, F]`` (``H_c`` = KV heads or 1) a checkpoint holds. Angles
``tθ_D`` and the sums are formed in float64 and cast to the input's dtype (vLLM forms them in float32).
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from posenc import spectrum, validate
from posenc.nn import _positions


def kept_frequencies(
    rotary_dim: int, base: float, max_position_embeddings: int, num_inv_freq: int | None = None
) -> NDArray[np.float64]:
    """FoPE's float64 frequencies ``θ_j = base^(−2j/r)`` that it keeps (module docstring): the first
    ``num_inv_freq``, or those with ``θ_j > 2π/max_position_embeddings``; raises when none is kept."""
    theta = spectrum.geometric(rotary_dim, base)
    if num_inv_freq is not None:
        if isinstance(num_inv_freq, bool) or not isinstance(num_inv_freq, numbers.Integral):
            raise TypeError(f"num_inv_freq must be an int or None, got {num_inv_freq!r}")
        if not 1 <= num_inv_freq <= theta.size:
            raise ValueError(
                f"num_inv_freq must be in 1…{theta.size} (rotary_dim/2 frequencies), got {num_inv_freq}"
            )
        return theta[: int(num_inv_freq)].copy()
    floor = 2.0 * math.pi / validate.positive_int("max_position_embeddings", max_position_embeddings)
    kept = theta[theta > floor]
    if kept.size == 0:
        raise ValueError(
            f"max_position_embeddings={max_position_embeddings} keeps no frequency (θ_j > 2π/"
            f"{max_position_embeddings} = {floor:.4g} for none of θ_0 = 1 … θ_{theta.size - 1} = {theta[-1]:.4g}); "
            "allowed: max_position_embeddings ≥ 7, or give num_inv_freq"
        )
    return kept


class FourierRotary(nn.Module):
    """FoPE for queries ``[b, H, s, d_h]`` and keys ``[b, H_kv, s, d_h]`` (module docstring; Hua et al. 2024).

    Args:
        head_dim: ``d_h``, even (pairs ``(d, d + d_h/2)`` span the head).
        max_position_embeddings: ``L`` of the clipping rule ``θ_j > 2π/L`` (and vLLM's table length).
        base: ``ρ`` of ``θ_j = ρ^(−2j/r)``.
        rotary_dim: ``r``, the dimensions whose frequencies are formed (as
            :class:`~posenc.nn.RotaryEmbedding`: an even count, a fraction, or ``None`` for ``d_h``).
        kv_heads: ``H_kv``, the number of key heads.
        num_inv_freq: keep the first ``num_inv_freq`` frequencies instead of clipping by ``L``.
        separate_heads: one pair of coefficient matrices per KV head (vLLM's ``fope_sep_head``), else one.
        init_factor: the training initialisation's noise (vLLM's ``fope_init_factor``): coefficients start as the
            identity plus Gaussian noise of standard deviation ``init_factor/√F``; a checkpoint overwrites them.

    Parameters ``cos_coef``, ``sin_coef``: ``[H_c, F, F]``, ``H_c = kv_heads`` if ``separate_heads`` else 1
    (vLLM stores ``[kv_heads, F, F]`` and reads only head 0 without ``fope_sep_head``).
    """

    def __init__(
        self,
        head_dim: int,
        *,
        max_position_embeddings: int,
        base: float = 10000.0,
        rotary_dim: float | None = None,
        kv_heads: int = 1,
        num_inv_freq: int | None = None,
        separate_heads: bool = False,
        init_factor: float = 0.1,
    ) -> None:
        super().__init__()
        self.head_dim = validate.positive_int("head_dim", head_dim)
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even (FoPE pairs (d, d + head_dim/2)), got {head_dim}")
        self.base = validate.positive_float("base", base)
        self.rotary_dim = spectrum.rotary_dim(self.head_dim, rotary_dim)
        self.max_position_embeddings = validate.positive_int(
            "max_position_embeddings", max_position_embeddings
        )
        self.kv_heads = validate.positive_int("kv_heads", kv_heads)
        self.separate_heads = validate.boolean("separate_heads", separate_heads)
        if (
            isinstance(init_factor, bool)
            or not isinstance(init_factor, numbers.Real)
            or not 0 <= init_factor < math.inf
        ):
            raise ValueError(f"init_factor must be a finite real number >= 0, got {init_factor!r}")
        self.init_factor: float = float(init_factor)
        theta = kept_frequencies(self.rotary_dim, self.base, self.max_position_embeddings, num_inv_freq)
        self.num_inv_freq = num_inv_freq
        # a plain attribute, not a buffer: Module.float() would round it
        self._frequencies: torch.Tensor = torch.from_numpy(theta)
        shape = (self.kv_heads if self.separate_heads else 1, theta.size, theta.size)
        self.cos_coef: nn.Parameter = nn.Parameter(torch.empty(shape))
        self.sin_coef: nn.Parameter = nn.Parameter(torch.empty(shape))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Identity plus ``N(0, (init_factor/√F)²)`` noise in each coefficient (class docstring)."""
        f = self._frequencies.shape[0]
        with torch.no_grad():
            for coef in (self.cos_coef, self.sin_coef):
                eye = torch.eye(f, dtype=coef.dtype, device=coef.device).expand_as(coef)
                coef.copy_(eye + torch.randn_like(coef) * (self.init_factor / math.sqrt(f)))

    @property
    def frequencies(self) -> torch.Tensor:
        """``[F]`` float64 kept frequencies ``θ_0 … θ_(F−1)``."""
        return self._frequencies.clone()

    @property
    def table_heads(self) -> int:
        """``H_c``: the number of distinct tables (KV heads when ``separate_heads``, else 1)."""
        return int(self.cos_coef.shape[0])

    def tables(self, positions: torch.Tensor, *, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``(C, S)`` ``[H_c, s, d_h/2]`` (``[b, H_c, s, d_h/2]`` for positions ``[b, s]``) at ``positions``,
        from float64 angles and sums, in ``dtype``; columns ``F …`` are the padding ``1``, ``0``."""
        theta = self._frequencies.to(positions.device)
        angles = positions.to(torch.float64)[..., None] * theta  # [(b,) s, F]
        cos = torch.einsum(
            "...sF,hFf->...hsf", angles.cos(), self.cos_coef.to(positions.device, torch.float64)
        )
        sin = torch.einsum(
            "...sF,hFf->...hsf", angles.sin(), self.sin_coef.to(positions.device, torch.float64)
        )
        pad = self.head_dim // 2 - theta.shape[0]
        cos = torch.cat((cos, cos.new_ones((*cos.shape[:-1], pad))), dim=-1)
        sin = torch.cat((sin, sin.new_zeros((*sin.shape[:-1], pad))), dim=-1)
        return cos.to(dtype), sin.to(dtype)

    def apply_tables(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """``x [b, H, s, d_h]`` transformed by tables ``[(b,) H_c, s, d_h/2]`` of :meth:`tables` (head ``i``
        takes table ``i // (H/H_c)``), by the half-split formula of the module docstring."""
        b, heads, s, d = x.shape
        group = heads // cos.shape[-3]
        if cos.dim() == 3:
            cos, sin = cos[None], sin[None]
        cos, sin = cos[:, :, None], sin[:, :, None]  # [b|1, H_c, 1, s, d/2]
        xs = x.reshape(b, heads // group, group, s, d)
        x1, x2 = xs[..., : d // 2], xs[..., d // 2 :]
        out = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
        return out.reshape(b, heads, s, d)

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        *,
        q_positions: torch.Tensor | None = None,
        k_positions: torch.Tensor | None = None,
        offset: int = 0,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """FoPE of queries ``[b, H, s_q, d_h]`` and keys ``[b, H_kv, s_k, d_h]``, ``H`` a multiple of
        ``H_kv = kv_heads``; positions as :meth:`posenc.nn.RotaryEmbedding.forward` (``[s]`` or ``[b, s]``;
        default ``offset + 0 …``, queries aligned at the end). Returns ``(q_out, k_out)`` in the inputs' dtype."""
        for name, t, heads in (("q", q, None), ("k", k, self.kv_heads)):
            if not isinstance(t, torch.Tensor) or not t.is_floating_point():
                raise TypeError(f"{name} must be a floating-point tensor, got {type(t).__name__}")
            if t.dim() != 4 or t.shape[-1] != self.head_dim or (heads is not None and t.shape[1] != heads):
                want = f"kv_heads={heads}" if heads is not None else "H"
                raise ValueError(
                    f"{name} must be [b, {want}, s, head_dim={self.head_dim}], got {list(t.shape)}"
                )
        if q.shape[1] % self.kv_heads:
            raise ValueError(
                f"q has {q.shape[1]} heads, not a multiple of kv_heads={self.kv_heads} (grouped-query attention)"
            )
        given = (q_positions, k_positions)
        q_pos, k_pos = _positions.resolve(
            q.shape[-2], k.shape[-2], q_positions=q_positions, k_positions=k_positions, offset=offset,
            device=q.device, values=False,
        )  # fmt: skip
        _positions.check_distinct_values(*given)
        out = []
        for x, pos in ((q, q_pos), (k, k_pos)):
            out.append(self.apply_tables(x, *self.tables(pos, dtype=x.dtype)))
        return out[0], out[1]

    def extra_repr(self) -> str:
        return (
            f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, base={self.base:g}, "
            f"kept={self._frequencies.shape[0]}, table_heads={self.table_heads}"
        )
