"""The DFT encoding exactly as the DFStrans companion code implements it — a reproduction, not a recommendation.

Labaien et al. (2023), the companion paper of Idé, Labaien & Chen (2024), published their model
with a ``DFTEncoding`` module (repository ``dfstrans/DFStrans``, ``positional_encodings.py``).
That module is **not** the faithful DFT encoding of Idé, Labaien & Chen (2024), eqs. 17–21
(:class:`posenc.nn.DFTEncoding`). :class:`DFStransDFTEncoding` reproduces what it
does, so that the published results can be explained:

* **Table.** Row of position ``t`` (``d`` even, ``k = 0 … d/2 − 1``, ``ω_k = 2πk/d``)::

      column 2k     cos(ω_k · t)
      column 2k+1   sin(ω_k · t)          (column 1 = sin(0) = 0: an all-zero column; no Nyquist term)

  Positions start at **1**: a sequence of ``s`` steps uses rows ``t = 1 … s``.
* **Scaling per time step**, not per frequency: the row of the *first* and of the *last* time
  step is multiplied by ``√(1/d)``, every other row by ``√(2/d)``.
* **In-place decay.** The published ``forward`` applies that scaling to a *view of its stored
  table* and keeps it: every call — training and evaluation alike — multiplies the stored rows
  ``1 … s`` again. After ``n`` calls with the same ``s`` the added middle rows are
  ``(√(2/d))ⁿ · (cos, sin)(ω_k t)``, of norm ``(√(2/d))^(n−1)`` (1, 0.091, 0.0083, … at d = 240);
  after a handful of batches the encoding is numerically zero. :attr:`calls` counts the forward
  calls so far; the stored table and the count are persistent buffers, so a checkpoint carries
  the decayed state (as the published module's registered buffer does).

Angles are float64 with exact ``π`` (the published code rounds ``π`` and the angles to float32;
the difference is below 1e-4 for positions under 1000). ``unit_norm`` has nothing to renormalise
that would not undo the decay being reproduced: the first call's middle rows already have norm 1
(``√(2/d)·√(d/2)``), so ``unit_norm=True`` leaves the table as it is and ``scale`` multiplies
what is added — the decay continues from there.
"""

from __future__ import annotations

import math

import torch

from posenc import validate
from posenc.nn.input import InputEncoding

DEFAULT_MAX_LEN = 4999
"""Longest sequence of the published module (its table holds positions ``0 … 4999``)."""


class DFStransDFTEncoding(InputEncoding):
    """The DFStrans code's ``DFTEncoding``, decay included (module docstring), on tokens ``[b, s, d_model]``.

    Args:
        d_model: token dimension ``d`` (even: the published table needs ``d/2`` cos/sin pairs).
        max_len: longest sequence; the stored table holds positions ``0 … max_len`` (the published
            module: 5000 rows, so ``max_len = 4999``).
        mode, dim, scale, learn_scale, unit_norm: as :class:`posenc.nn.input.InputEncoding`; see the
            module docstring for ``unit_norm``.

    Every forward call multiplies the stored rows ``1 … s`` by ``√(1/d)`` (first and last) or
    ``√(2/d)`` (the others) **in place** and adds the result. Explicit ``positions`` and a nonzero
    ``offset`` are refused: the published module has neither. :meth:`table` ``(s)`` reads, without
    decaying, the stored rows of positions ``1 … s`` — what the last call of length ``s`` added.
    """

    stored: torch.Tensor
    calls: torch.Tensor

    def __init__(
        self,
        d_model: int,
        *,
        max_len: int = DEFAULT_MAX_LEN,
        mode: str = "add",
        dim: int | None = None,
        scale: float = 1.0,
        learn_scale: bool = False,
        unit_norm: bool = False,
    ) -> None:
        super().__init__(
            d_model, mode=mode, dim=dim, scale=scale, learn_scale=learn_scale, unit_norm=unit_norm
        )
        if self.dim % 2:
            raise ValueError(
                f"dim must be even for the DFStrans DFT table (d/2 cos/sin pairs), got dim={self.dim}"
            )
        self.max_len = validate.positive_int("max_len", max_len)
        self.register_buffer("stored", self.initial_table(self.max_len + 1, self.dim))
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))

    @staticmethod
    def initial_table(length: int, dim: int) -> torch.Tensor:
        """The undecayed table ``[length, dim]`` float64 for positions ``0 … length−1`` (module docstring)."""
        t = torch.arange(length, dtype=torch.float64)[:, None]
        omega = 2 * math.pi * torch.arange(dim // 2, dtype=torch.float64) / dim
        angles = t * omega
        return torch.stack([torch.cos(angles), torch.sin(angles)], dim=-1).reshape(length, dim)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, max_len={self.max_len}, calls={int(self.calls)}"

    def reset_parameters(self) -> None:
        """Restore the undecayed table and set :attr:`calls` to 0."""
        with torch.no_grad():
            self.stored.copy_(self.initial_table(self.max_len + 1, self.dim))
            self.calls.zero_()

    def step_factors(self, s: int) -> torch.Tensor:
        """``[s]`` float64 factors applied per call to rows ``1 … s``: ``√(1/d)`` first and last, ``√(2/d)`` between.

        For ``s = 1`` the one row is first and last and, as published, is scaled twice: ``1/d``.
        """
        factors = torch.full((s,), math.sqrt(2 / self.dim), dtype=torch.float64)
        factors[0] = math.sqrt(1 / self.dim)
        factors[-1] = (
            math.sqrt(1 / self.dim) if s > 1 else 1 / self.dim
        )  # s = 1: first and last, scaled twice
        return factors

    def _rows(
        self,
        s: int,
        positions: torch.Tensor | None,
        offset: int,
        *,
        dtype: torch.dtype,
        device: torch.device,
        cache: bool = True,
    ) -> torch.Tensor:
        if positions is not None or offset != 0:
            raise ValueError(
                "the DFStrans DFT encoding always uses positions 1 … s of its stored table; "
                f"got positions={'given' if positions is not None else None}, offset={offset}"
            )
        if s > self.max_len:
            raise ValueError(
                f"sequence length s={s} exceeds max_len={self.max_len} of the DFStrans DFT encoding "
                f"(rows 1 … s of its table); build it with max_len >= {s}"
            )
        rows = self.stored[1 : s + 1]
        if cache:  # a forward call: decay the stored rows in place, as the published module does
            with torch.no_grad():
                rows.mul_(self.step_factors(s).to(rows.device)[:, None])
                self.calls.add_(1)
        return rows.to(device=device, dtype=dtype)
