"""The relative property of multi-axis rotary: with ``R(p) = exp(Σ_a p_a G_a)`` the score
``⟨R(p)q, R(p′)k⟩ = ⟨q, R(p)ᵀR(p′)k⟩`` depends on ``p′ − p`` only when the generators ``G_a`` commute
(Heo et al. 2024, sec. 3.1; Schenck et al. 2025, "Learning the RoPEs"). posenc's multi-axis
rotations (axial, M-RoPE, RoPE-Mixed) act pairwise, so their generators commute; two generators that
share a coordinate do not, and the scores then depend on where the pair of positions sits.
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc.nn.multiaxis import MultiAxisRotary

F64 = torch.float64


def generators(rope: MultiAxisRotary) -> torch.Tensor:
    """``G_a`` ``[A, r, r]``: ``F[a, i]·J`` on pair ``i``'s coordinates (half-split: ``i`` and ``i + r/2``)."""
    frequencies = rope.frequencies.to(F64)
    a, half = frequencies.shape
    g = torch.zeros(a, 2 * half, 2 * half, dtype=F64)
    i = torch.arange(half)
    g[:, i + half, i] = frequencies
    g[:, i, i + half] = -frequencies
    return g


def rotation(g: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    return torch.linalg.matrix_exp(torch.einsum("a,aij->ij", p.to(F64), g))


def score(
    g: torch.Tensor, q: torch.Tensor, k: torch.Tensor, p: torch.Tensor, p2: torch.Tensor
) -> torch.Tensor:
    return (rotation(g, p) @ q) @ (rotation(g, p2) @ k)


coordinates = st.lists(st.integers(-50, 50), min_size=2, max_size=2).map(torch.tensor)


def test_the_generators_reproduce_posencs_rotation():
    rope = MultiAxisRotary(
        8, torch.tensor([[1.0, 0.3, 0.0, 0.02], [0.0, 0.5, 0.7, 0.01]]), layout="half_split"
    )
    x = torch.randn(8, dtype=F64, generator=torch.Generator().manual_seed(0))
    p = torch.tensor([[3], [-5]])
    cos, sin = rope.cos_sin(p, dtype=F64)
    assert torch.allclose(
        rope.rotate(x[None], cos, sin)[0], rotation(generators(rope), p[:, 0]) @ x, atol=1e-12
    )


@given(p=coordinates, p2=coordinates, shift=coordinates)
def test_commuting_generators_give_scores_of_the_difference_only(p, p2, shift):
    mixed = MultiAxisRotary.mixed(8, 1, seed=3).frequencies.detach()[0]  # RoPE-Mixed: both axes in every pair
    rope = MultiAxisRotary(8, mixed, layout="half_split")
    g = generators(rope)
    assert torch.allclose(g[0] @ g[1], g[1] @ g[0], atol=1e-12)
    q, k = torch.randn(2, 8, dtype=F64, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(score(g, q, k, p, p2), score(g, q, k, p + shift, p2 + shift), atol=1e-9)


def test_generators_that_share_a_coordinate_do_not_commute_and_scores_then_move():
    g = torch.zeros(2, 3, 3, dtype=F64)
    g[0, 1, 0], g[0, 0, 1] = 1.0, -1.0  # rotation in the (0, 1) plane
    g[1, 2, 1], g[1, 1, 2] = 1.0, -1.0  # rotation in the (1, 2) plane
    assert not torch.allclose(g[0] @ g[1], g[1] @ g[0])
    q, k = torch.randn(2, 3, dtype=F64, generator=torch.Generator().manual_seed(2))
    p, p2, shift = torch.tensor([1, 0]), torch.tensor([0, 2]), torch.tensor([1, 1])
    moved = score(g, q, k, p + shift, p2 + shift) - score(g, q, k, p, p2)
    assert moved.abs() > 1e-2
