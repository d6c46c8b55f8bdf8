"""Shaw et al.'s (2018, eqs. 3–5) slot terms written out: the key term gathered from per-query slots, and the
value term summed into them, each with its backends.

With ``slots = q·w^Kᵀ`` (``[…, s_q, n]``) the key term is ``slots[…, i, index[i, j]]`` and the value term
``Σ_j α_ij (v_j + w^V[index[i, j]])``. References and their compiled CPU loop: :mod:`posenc.nn._slots`
(``gather_slots``, ``add_gathered_``, ``attend_with_slots``; the loop where it applies, else
``torch.gather`` / ``scatter_add``). Beside them, for an index that is a band of diagonals
(``clip(j − i + shift, −k, k) + k``, default positions) off the CPU: :mod:`posenc.nn._diagonals`'
``band_gather`` / ``band_sum``, whose gradients sum along diagonals in one pass instead of scattering
with atomics (the scatter serialises on a GPU; on the CPU the compiled loop is faster).
"""

from __future__ import annotations

import dataclasses
from typing import cast

import torch

from posenc.backends import Backend, Environment, select
from posenc.nn._diagonals import band_gather, band_sum
from posenc.nn._slots import add_gathered_, attend_with_slots, gather_slots


@dataclasses.dataclass(frozen=True)
class SlotCall:
    """One slot term: ``src`` (the slots ``[…, s_q, n]`` for the key term, the weights ``[…, s_q, s_k]`` for
    the value term), the ``index`` ``[(b,) s_q, s_k]``, and ``band = (k, shift)`` when the index is a band."""

    src: torch.Tensor
    index: torch.Tensor
    band: tuple[int, int] | None = None


def _banded(call: SlotCall) -> bool:
    return call.band is not None and call.index.dim() == 2


_OFF_CPU = frozenset({"cuda", "mps", "xpu", "hpu", "meta"})
_EVERY_DEVICE = _OFF_CPU | {"cpu"}


def _band_gather(call: SlotCall) -> torch.Tensor:
    assert call.band is not None
    return band_gather(call.src, call.index, *call.band)


def _gather(call: SlotCall) -> torch.Tensor:
    return gather_slots(call.src, call.index)


GATHER: tuple[Backend[SlotCall], ...] = (
    Backend("band", _band_gather, devices=_OFF_CPU, compiled=True, exported=True, supports=_banded),
    Backend("slots", _gather, devices=_EVERY_DEVICE, compiled=True, exported=True),
)
"""The key term as a ``[…, s_q, s_k]`` tensor."""


def _choose(table: tuple[Backend[SlotCall], ...], call: SlotCall) -> Backend[SlotCall]:
    return select(table, call, Environment.of(call.src))


def gather(call: SlotCall) -> torch.Tensor:
    """The key term ``src[…, i, index[i, j]]``, ``[…, s_q, s_k]``."""
    return cast(torch.Tensor, _choose(GATHER, call).apply(call))


def add_gathered(scores: torch.Tensor, call: SlotCall) -> torch.Tensor:
    """``scores`` plus the key term, in place: as it is gathered where the reference serves (no temporary
    of the scores' size), else the banded term added."""
    if _choose(GATHER, call).name == "slots":
        return add_gathered_(scores, call.src, call.index)
    return scores.add_(gather(call))


def attend(weights: torch.Tensor, v: torch.Tensor, slot_values: torch.Tensor, call: SlotCall) -> torch.Tensor:
    """``Σ_j weights_ij (v_j + slot_values[index[i, j]])`` for ``call.src = weights`` (eq. 3)."""
    if _choose(GATHER, call).name == "slots":
        return attend_with_slots(weights, v, slot_values, call.index)
    assert call.band is not None
    return torch.matmul(weights, v) + band_sum(weights, call.index, *call.band) @ slot_values
