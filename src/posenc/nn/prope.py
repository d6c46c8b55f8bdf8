"""p-RoPE (Barbero et al. 2024, "Round and Round We Go! What makes Rotary Positional Encodings useful?", §6).

Rotary rotates pair ``i`` by ``t·θ_i``, ``θ_i = ρ^(−2i/d)``, ``i = 0 … d/2 − 1`` (Su et al. 2021, eq. 34).
The lowest frequencies barely turn over a context and Barbero et al. find that the model uses them
as position-free "semantic" channels that rotation only disturbs; p-RoPE keeps the fraction ``p`` of
highest frequencies, ``θ_i`` for ``i < n = ⌊p·d/2⌋``, and sets the others to 0 (no rotation):
``p = 1`` is RoPE, ``p → 0`` approaches NoPE.

The kept frequencies are those of a partial rotary over ``r = 2n`` dimensions with base
``ρ' = ρ^(2n/d)`` (``ρ'^(−2i/r) = ρ^(−2i/d)``), so :class:`PartialRotary` is that rotary: pairs
``0 … n − 1`` rotate, dimensions ``r … d − 1`` pass through. Which coordinates form the unrotated
pairs differs from zeroing ``θ_i`` in place by a fixed permutation of the head's coordinates,
which the learned projections absorb.
"""

from __future__ import annotations

from posenc import validate
from posenc.nn.rotary import RotaryEmbedding


def kept_pairs(head_dim: int, p: float) -> int:
    """``n = ⌊p·d/2⌋``, the number of highest frequencies p-RoPE keeps; raises when it is 0."""
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 < float(p) <= 1.0:
        raise ValueError(f"p must be a fraction in (0, 1] of the frequencies to keep, got {p!r}")
    n = int(float(p) * (head_dim // 2))
    if n < 1:
        raise ValueError(
            f"p={p!r} keeps no frequency of head_dim={head_dim} (⌊p·d/2⌋ = 0); raise p or use 'none'"
        )
    return n


class PartialRotary(RotaryEmbedding):
    """p-RoPE: rotary keeping the fraction ``p`` of its highest frequencies (module docstring).

    Args:
        head_dim: ``d``.
        p: fraction of the ``d/2`` frequencies kept, the highest ones (Barbero et al. use 0.25 and 0.75).
        base: ``ρ`` of the full rotary's ``θ_i = ρ^(−2i/d)``.
        layout, max_len: as :class:`~posenc.nn.rotary.RotaryEmbedding`.
    """

    def __init__(
        self,
        head_dim: int,
        *,
        p: float = 0.75,
        base: float = 10000.0,
        layout: str = "half_split",
        max_len: int = 2048,
    ) -> None:
        head_dim = validate.positive_int("head_dim", head_dim)
        base = validate.positive_float("base", base)
        n = kept_pairs(head_dim, p)
        super().__init__(
            head_dim, base=base ** (2 * n / head_dim), rotary_dim=2 * n, layout=layout, max_len=max_len
        )
        self.p = float(p)

    def extra_repr(self) -> str:
        return f"p={self.p}, {super().extra_repr()}"
