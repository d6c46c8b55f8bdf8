"""Multi-axis rotary embeddings: positions with several coordinates (time, height, width …).

A token has ``A`` coordinates ``p = (p_0 … p_{A−1})``; pair ``i`` of a query or key is rotated by

    φ_i(p) = Σ_a p_a · F[a, i]                                                    (1)

one frequency matrix ``F`` ``[A, r/2]`` (or ``[h, A, r/2]``, one per head) for every variant:

* **axial** rotary (Lu et al. 2021, "Pretrained Transformers as Universal Computation Engines";
  rotary-embedding-torch's ``get_axial_freqs``; timm's ``RotaryEmbedding``; torchtune's vision
  rope): the pairs are split among the axes, each column of ``F`` has one non-zero entry, and
  ``φ`` is the 1-D RoPE angle of one coordinate (language grid ``ρ^(−2j/r_a)`` or pixel grid
  ``π·linspace(1, f_max/2)``);
* **M-RoPE** (Wang et al. 2024, "Qwen2-VL", sec. 2.1): the ``r/2`` pairs of the text rotary are
  assigned to time/height/width in contiguous *sections*; its interleaved form (Qwen3-VL) gives
  height and width every third pair from pair 1 and 2;
* **RoPE-Mixed** (Heo et al. 2024, "Rotary Position Embedding for Vision Transformer", eq. 9): a
  learnable ``F`` per head mixes both axes in every pair.

Because every generator ``F[:, i]`` of (1) acts on its own pair, the rotations commute and the
score ``⟨R(p)q, R(p′)k⟩ = ⟨q, R(p′ − p)k⟩`` depends on ``p′ − p`` only (Heo et al. 2024, sec. 3.1);
the exact zeros of axial/M-RoPE columns leave (1) a single float64 product, so axial tables equal
1-D RoPE tables of one coordinate bit for bit.

Positions are ``[A, s]`` (shared by the batch) or ``[A, b, s]`` (Qwen2-VL's ``position_ids``), checked as
:mod:`posenc.nn._positions` checks 1-D positions: shape and dtype on the host, values (finite,
``|p| < 2^53``) on the device, so the forward pass reads no tensor value on the host.
Angles are formed in float64; the tables then go to :func:`posenc.nn.apply_rotary` in ``layout``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from posenc import spectrum, validate
from posenc.backends.rotate import LAYOUTS, check_floating, layout_table, pairs, rotate, rotation_reference
from posenc.nn import _positions, rope_types
from posenc.nn.position_ids import mrope_position_ids as mrope_position_ids
from posenc.nn.rotary import RotaryEmbedding

GRIDS: tuple[str, ...] = ("lang", "pixel")


def mrope_axes(sections: Sequence[int], pairs: int, *, interleaved: bool = False) -> np.ndarray:
    """Which axis drives each of the ``pairs`` rotary pairs under M-RoPE ``sections`` (an int array ``[pairs]``).

    Contiguous (Qwen2-VL; Wang et al. 2024, sec. 2.1): the first ``sections[0]`` pairs follow axis 0,
    the next ``sections[1]`` axis 1, and so on. Interleaved (Qwen3-VL): axis ``a ≥ 1`` drives pairs
    ``a, a + A, …, a + A·(sections[a] − 1)`` and axis 0 the rest. ``sections`` must sum to ``pairs``.
    """
    if isinstance(sections, (str, bytes)) or not isinstance(sections, Sequence) or not sections:
        raise TypeError(f"sections must be a non-empty list of ints (pairs per axis), got {sections!r}")
    counts = [validate.non_negative_int("sections", s) for s in sections]
    if sum(counts) != pairs:
        raise ValueError(
            f"sections must sum to the number of rotary pairs (rotary_dim / 2 = {pairs}), got {list(sections)} "
            f"(sum {sum(counts)})"
        )
    n_axes = len(counts)
    if not interleaved:
        return np.repeat(np.arange(n_axes), counts)
    axes = np.zeros(pairs, dtype=np.int64)
    for a in range(1, n_axes):
        last = a + n_axes * (counts[a] - 1)
        if counts[a] and last >= pairs:
            raise ValueError(
                f"interleaved sections {list(sections)}: axis {a} needs pair {last}, beyond the {pairs} pairs"
            )
        axes[a : n_axes * counts[a] : n_axes] = a
    return axes


def axis_frequencies(theta: np.ndarray, axes: np.ndarray, n_axes: int) -> np.ndarray:
    """``F [n_axes, r/2]`` of eq. (1) with ``F[axes[i], i] = θ_i`` and zeros elsewhere."""
    matrix = np.zeros((n_axes, theta.size), dtype=np.float64)
    matrix[axes, np.arange(theta.size)] = theta
    return matrix


def grid_frequencies(dim: int, grid: str, *, base: float = 10000.0, max_freq: float = 10.0) -> np.ndarray:
    """The ``dim/2`` frequencies of one axis: ``"lang"`` ``base^(−2j/dim)`` (Su et al. 2021) or ``"pixel"``
    ``π·linspace(1, max_freq/2, dim/2)`` (rotary-embedding-torch's and timm's pixel grid, for
    coordinates in ``[−1, 1]``)."""
    validate.choice("grid", grid, GRIDS)
    if grid == "lang":
        return spectrum.geometric(dim, base)
    return np.pi * np.linspace(1.0, validate.positive_float("max_freq", max_freq) / 2.0, dim // 2)


class MultiAxisRotary(nn.Module):
    """Rotary embedding over ``A`` position axes, eq. (1) of the module docstring.

    Args:
        head_dim: ``d_h`` of the queries and keys; dimensions past ``r = 2·F.shape[-1]`` pass through.
        frequencies: ``F`` ``[A, r/2]``, or ``[h, A, r/2]`` for one matrix per head.
        layout: ``"half_split"`` (Hugging Face, Qwen2-VL) or ``"adjacent"`` (rotary-embedding-torch, timm).
        attention_factor: factor on the cos/sin tables (YaRN/LongRoPE's, as in transformers).
        learnable: make ``F`` a parameter (RoPE-Mixed); else a non-persistent float64 buffer.

    Use the constructors :meth:`mrope`, :meth:`axial`, :meth:`mixed` and :meth:`from_hf`.
    """

    def __init__(
        self,
        head_dim: int,
        frequencies: torch.Tensor | np.ndarray,
        *,
        layout: str = "half_split",
        attention_factor: float = 1.0,
        learnable: bool = False,
    ) -> None:
        super().__init__()
        self.head_dim = validate.positive_int("head_dim", head_dim)
        self.layout = validate.choice("layout", layout, LAYOUTS)
        self.attention_factor = validate.positive_float("attention_factor", attention_factor)
        matrix = torch.as_tensor(frequencies, dtype=torch.float64)
        if matrix.dim() not in (2, 3) or matrix.shape[-1] == 0:
            raise ValueError(
                f"frequencies must be [axes, r/2] or [heads, axes, r/2], got shape {list(matrix.shape)}"
            )
        if not bool(torch.isfinite(matrix).all()):
            raise ValueError("frequencies must be finite")
        self.rotary_dim = 2 * matrix.shape[-1]
        if self.rotary_dim > self.head_dim:
            raise ValueError(f"frequencies rotate {self.rotary_dim} dims, more than head_dim={self.head_dim}")
        self.n_axes = matrix.shape[-2]
        self.learnable = validate.boolean("learnable", learnable)
        if self.learnable:
            self.frequencies = nn.Parameter(matrix.to(torch.float32))
        else:
            self.register_buffer("frequencies", matrix, persistent=False)

    @classmethod
    def mrope(
        cls,
        head_dim: int,
        sections: Sequence[int],
        *,
        base: float = 10000.0,
        rotary_dim: float | None = None,
        interleaved: bool = False,
        theta: np.ndarray | None = None,
        attention_factor: float = 1.0,
        layout: str = "half_split",
    ) -> MultiAxisRotary:
        """M-RoPE (Wang et al. 2024, Qwen2-VL; ``interleaved``: Qwen3-VL) over ``len(sections)`` axes.

        ``θ_i = base^(−2i/r)`` (or the given ``theta`` ``[r/2]``, e.g. after a rope type's scaling);
        pair ``i`` follows the axis :func:`mrope_axes` gives it.
        """
        r = spectrum.rotary_dim(validate.positive_int("head_dim", head_dim), rotary_dim)
        axes = mrope_axes(sections, r // 2, interleaved=validate.boolean("interleaved", interleaved))
        theta = spectrum.geometric(r, validate.positive_float("base", base)) if theta is None else theta
        return cls(
            head_dim,
            axis_frequencies(np.asarray(theta, dtype=np.float64), axes, len(sections)),
            layout=layout,
            attention_factor=attention_factor,
        )

    @classmethod
    def axial(
        cls,
        head_dim: int,
        axis_dims: Sequence[int],
        *,
        grid: str = "lang",
        base: float = 10000.0,
        max_freq: float = 10.0,
        layout: str = "adjacent",
    ) -> MultiAxisRotary:
        """Axial rotary: axis ``a`` rotates its own ``axis_dims[a]`` dimensions (even), in axis order.

        Each axis uses :func:`grid_frequencies` of its own width (rotary-embedding-torch's
        ``get_axial_freqs``, timm's ``RotaryEmbedding``); dimensions past ``Σ axis_dims`` pass through.
        """
        if isinstance(axis_dims, (str, bytes)) or not isinstance(axis_dims, Sequence) or not axis_dims:
            raise TypeError(f"axis_dims must be a non-empty list of even ints, got {axis_dims!r}")
        dims = [validate.positive_int("axis_dims", n) for n in axis_dims]
        if any(n % 2 for n in dims):
            raise ValueError(f"axis_dims must all be even (each rotates whole pairs), got {list(axis_dims)}")
        theta = np.concatenate([grid_frequencies(n, grid, base=base, max_freq=max_freq) for n in dims])
        axes = np.repeat(np.arange(len(dims)), [n // 2 for n in dims])
        return cls(head_dim, axis_frequencies(theta, axes, len(dims)), layout=layout)

    @classmethod
    def mixed(
        cls, head_dim: int, num_heads: int, *, base: float = 10.0, seed: int = 0, layout: str = "adjacent"
    ) -> MultiAxisRotary:
        """RoPE-Mixed (Heo et al. 2024, eq. 9): learnable 2-D ``F [h, 2, d_h/2]``, initialised as the
        paper's ``init_2d_freqs``: magnitudes ``m_j = base^(−4j/d_h)``, ``j < d_h/4``, along a random
        direction ``φ_h`` per head and the direction ``φ_h + π/2``::

            F[h, 0] = (m·cos φ_h, m·cos(φ_h + π/2)),   F[h, 1] = (m·sin φ_h, m·sin(φ_h + π/2))
        """
        d = validate.positive_int("head_dim", head_dim)
        if d % 4:
            raise ValueError(
                f"head_dim must be a multiple of 4 for RoPE-Mixed (two directions of pairs), got {d}"
            )
        h = validate.positive_int("num_heads", num_heads)
        magnitude = validate.positive_float("base", base) ** (-np.arange(0, d, 4) / d)
        phase = np.random.default_rng(seed).uniform(0.0, 2.0 * np.pi, size=(h, 1))
        m = magnitude.size
        directions = np.concatenate(
            [np.repeat(phase, m, axis=1), np.repeat(phase + np.pi / 2, m, axis=1)], axis=1
        )
        magnitudes = np.concatenate([magnitude, magnitude])
        matrix = np.stack([magnitudes * np.cos(directions), magnitudes * np.sin(directions)], axis=1)
        return cls(d, matrix, layout=layout, learnable=True)

    @classmethod
    def from_hf(cls, config: object, *, layer_type: str | None = None) -> MultiAxisRotary:
        """The M-RoPE of a Hugging Face config with ``mrope_section`` in its rope parameters.

        The frequencies and attention factor are :meth:`RotaryEmbedding.from_hf`'s for the same
        config; ``mrope_interleaved`` (Qwen3-VL) picks the interleaved assignment.
        """
        sections, interleaved = rope_types.hf_mrope(config, layer_type=layer_type)
        if sections is None:
            raise ValueError(
                "config has no mrope_section in its rope parameters: use RotaryEmbedding.from_hf"
            )
        settings = rope_types.hf_settings(config, layer_type=layer_type, multi_axis=True)
        settings.pop("max_position_embeddings")
        rope = RotaryEmbedding(**settings, max_len=1)
        return cls.mrope(
            rope.head_dim,
            sections,
            rotary_dim=rope.rotary_dim,
            interleaved=interleaved,
            theta=rope.frequencies.numpy(),
            attention_factor=rope.attention_factor,
        )

    def angles(self, positions: torch.Tensor) -> torch.Tensor:
        """Float64 ``φ`` of eq. (1): ``[s, r/2]`` for ``[A, s]`` positions, ``[b, s, r/2]`` for ``[A, b, s]``,
        with a head dimension (``[h, s, r/2]``, ``[b, h, s, r/2]``) for per-head frequencies."""
        return self._angles(self._check_positions("positions", positions))

    def _angles(self, p: torch.Tensor) -> torch.Tensor:
        p = p.to(torch.float64)
        matrix = self.frequencies.to(device=p.device, dtype=torch.float64)
        if matrix.dim() == 2:
            return torch.einsum("a...,an->...n", p, matrix)
        return torch.einsum("a...s,han->...hsn", p, matrix)

    def _check_positions(self, name: str, positions: object) -> torch.Tensor:
        """Shape and dtype on the host, values on the device (:func:`posenc.nn._positions.check_real`)."""
        if not isinstance(positions, torch.Tensor):
            raise TypeError(
                f"{name} must be a torch.Tensor [axes, s] or [axes, b, s], got {type(positions).__name__}"
            )
        if positions.dim() not in (2, 3) or positions.shape[0] != self.n_axes:
            raise ValueError(
                f"{name} must be [axes={self.n_axes}, s] or [axes={self.n_axes}, b, s] (one row per position "
                f"axis), got shape {list(positions.shape)}"
            )
        return _positions.check_real(name, positions)

    def cos_sin(
        self, positions: torch.Tensor, *, dtype: torch.dtype = torch.float32
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)`` in ``self.layout``, ``[..., s, r]`` with :meth:`angles`' leading dims, times the
        attention factor (in float64, before the cast)."""
        return self._cos_sin(self._check_positions("positions", positions), dtype)

    def _cos_sin(self, p: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        phi = self._angles(p)
        cos, sin = torch.cos(phi) * self.attention_factor, torch.sin(phi) * self.attention_factor
        return layout_table(cos, self.layout).to(dtype), layout_table(sin, self.layout).to(dtype)

    def rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """``x [b, h, s, d_h]`` (or ``[h, s, d_h]``, ``[s, d_h]``) rotated by tables from :meth:`cos_sin`.

        Tables ``[s, r]``, ``[b, s, r]`` (a head axis is inserted) or ``[b, h, s, r]`` broadcast to ``x``.
        Tables that require grad (RoPE-Mixed's learnable ``F``) are rotated by the reference
        :func:`posenc.backends.rotate.rotation_reference`, which differentiates through them too; others by
        :func:`posenc.backends.rotate.rotate`, told they are rotations (one value per pair).
        """
        check_floating("x", x)
        if x.shape[-1] != self.head_dim:
            raise ValueError(f"x must be [..., s, head_dim={self.head_dim}], got {list(x.shape)}")
        if cos.dim() == 3 and x.dim() == 4 and self.frequencies.dim() == 2:
            cos, sin = cos[:, None], sin[:, None]
        shape = (*x.shape[:-1], self.rotary_dim)
        try:
            cos, sin = cos.expand(shape), sin.expand(shape)
        except RuntimeError:
            raise ValueError(
                f"x of shape {list(x.shape)} does not match tables of shape {list(cos.shape)}"
            ) from None
        flat_x = x.reshape(-1, self.head_dim)
        flat_c, flat_s = cos.reshape(-1, self.rotary_dim), sin.reshape(-1, self.rotary_dim)
        if flat_c.requires_grad or flat_s.requires_grad:
            out = rotation_reference(flat_x, flat_c, flat_s, self.layout)
        else:
            paired = pairs(flat_c, self.layout)[0], pairs(flat_s, self.layout)[0]
            out = rotate(flat_x, None, None, self.layout, paired=paired)
        return out.reshape(x.shape)

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        *,
        positions: torch.Tensor,
        k_positions: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate ``q [b, h, s_q, d_h]`` at ``positions`` and ``k [b, h, s_k, d_h]`` at ``k_positions``
        (default: ``positions``); positions ``[A, s]`` or ``[A, b, s]``."""
        check_floating("q", q)
        check_floating("k", k)
        q_cos, q_sin = self._cos_sin(self._check_positions("positions", positions), q.dtype)
        if k_positions is None:
            k_cos, k_sin = q_cos.to(k.dtype), q_sin.to(k.dtype)
        else:
            k_cos, k_sin = self._cos_sin(self._check_positions("k_positions", k_positions), k.dtype)
        return self.rotate(q, q_cos, q_sin), self.rotate(k, k_cos, k_sin)

    def extra_repr(self) -> str:
        heads = f", heads={self.frequencies.shape[0]}" if self.frequencies.dim() == 3 else ""
        return (
            f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, axes={self.n_axes}{heads}, "
            f"layout={self.layout!r}, learnable={self.learnable}"
        )
