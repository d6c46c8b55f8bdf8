"""Input encodings: a table of position vectors added to, or concatenated with, the tokens ``[b, s, d]``.

Four encodings share one base class, :class:`InputEncoding`, which owns everything they have in
common — input checks, ``mode`` (add or concatenate), ``scale`` (fixed or learned),
``unit_norm``, and the table cache — so that each subclass only says how to compute its rows::

    out = x + scale · (row / ‖row‖ if unit_norm else row)          mode="add"     [b, s, d_model]
    out = cat([x, scale · (…)], dim=-1)                             mode="concat"  [b, s, d_model + dim]

========================================  ===================================================  ===========================
class                                     row of position ``t``                                source
========================================  ===================================================  ===========================
:class:`SinusoidalEncoding`               ``sin/cos(t·w_i)``, any schedule and layout          Vaswani et al. 2017, §3.5
:class:`DFTEncoding`                      DFT of the one-hot at ``t`` (``t < dim``)             Idé et al. 2024, eq. 21
:class:`LearnedEncoding`                  a trainable vector per position (``t < max_len``)     Gehring et al. 2017
:class:`LearnableFrequencyEncoding`       ``sin/cos(t·w_i)`` with trainable ``w_i``             Lin et al. 2021; Su 2021
========================================  ===================================================  ===========================

**Positions** default to ``offset … offset+s−1``; explicit ones are ``[s]`` (shared by the batch) or
``[b, s]``, one row per sequence (a left-padded batch, packed sequences restarting at 0): row ``r`` of the
output takes the table rows of ``positions[r]``.

**Scale.** ``scale = 1`` (the default) adds each paper's encoding unscaled. The magnitudes differ:
a sinusoidal row has norm ``√(d/2)`` (even ``d``; entries O(1)), a DFT row has norm 1 (entries
O(1/√d)) — so at equal ``scale`` the DFT encoding is ``√(d/2)`` times weaker relative to the
tokens. Pass ``scale=math.sqrt(d/2)`` to give it the sinusoidal norm, or ``unit_norm=True`` to
give every encoding norm ``scale`` (a DFT row has norm 1, a sinusoidal row √(d/2): the choice must be visible, not a hidden constant).

**Tables** of fixed encodings are cached per dtype and device as a non-persistent buffer that
grows on demand (doubling) up to :attr:`InputEncoding.max_cached_elements`; beyond that a window
is computed exactly for the positions asked. Angles are float64 (:mod:`posenc.nn.functional`),
so the cached float32 table is correctly rounded at every position. ``state_dict()`` holds only
learned parameters. Value checks on explicit ``positions`` (finite, integers, in range) run in
eager mode; under ``torch.compile`` the forward has no graph break and skips them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import ClassVar, cast

import torch
from numpy.typing import ArrayLike
from torch import nn

from posenc import spectrum, tables, validate
from posenc.nn import _positions
from posenc.nn import functional as F
from posenc.nn.contracts import InputContract, refuse_tracing
from posenc.registry import EncodingView

MODES: tuple[str, ...] = ("add", "concat")


def _wave_view(view: EncodingView, frequencies: torch.Tensor, layout: str) -> EncodingView:
    """``view`` of a table of (sin, cos) pairs at ``frequencies`` in ``layout``, with both recorded."""
    w = frequencies.detach().to("cpu", torch.float64).numpy()
    return dataclasses.replace(view, frequencies=w, layout=layout)


class InputEncoding(InputContract):
    """Base of the input encodings: checks, add/concat, scale, unit norm and the table cache.

    Args:
        d_model: last dimension of the tokens ``x [b, s, d_model]``.
        mode: ``"add"`` (``dim`` must equal ``d_model``) or ``"concat"`` (appends ``dim`` columns).
        dim: width of the encoding; ``None`` means ``d_model``.
        scale: factor ``> 0`` applied to every row (1 = the paper's encoding, see module docstring).
        learn_scale: make ``scale`` a trainable scalar parameter initialised to ``scale``.
        unit_norm: divide every row by its Euclidean norm before scaling.

    Subclasses implement :meth:`_encode` and set :attr:`cache_tables` for fixed tables.
    """

    cache_tables: ClassVar[bool] = False
    """Whether rows are cached (fixed tables) or recomputed every call (learned ones)."""

    max_cached_elements: ClassVar[int] = 1 << 24
    """Largest cache, in entries (64 MiB of float32); windows beyond it are computed, not cached."""

    def __init__(
        self,
        d_model: int,
        *,
        mode: str = "add",
        dim: int | None = None,
        scale: float = 1.0,
        learn_scale: bool = False,
        unit_norm: bool = False,
    ) -> None:
        super().__init__()
        self.d_model = validate.size("d_model", d_model)
        self.mode = validate.choice("mode", mode, MODES)
        self.dim = self.d_model if dim is None else validate.size("dim", dim)
        if self.mode == "add" and self.dim != self.d_model:
            raise ValueError(
                f"dim must equal d_model={self.d_model} in mode='add' (the table is added to the tokens), "
                f"got dim={dim}; use mode='concat' for an encoding of another width"
            )
        initial = validate.positive_float("scale", scale)
        self.learn_scale = validate.boolean("learn_scale", learn_scale)
        self.unit_norm = validate.boolean("unit_norm", unit_norm)
        self.scale: float | nn.Parameter = nn.Parameter(torch.tensor(initial)) if learn_scale else initial
        self._cache: torch.Tensor | None
        self.register_buffer("_cache", None, persistent=False)
        self._cache_key: tuple[torch.dtype, torch.device] | None = None

    @property
    def out_features(self) -> int:
        """Last dimension of the output: ``d_model`` (add) or ``d_model + dim`` (concat)."""
        return self.d_model if self.mode == "add" else self.d_model + self.dim

    def extra_repr(self) -> str:
        scale = "learned" if self.learn_scale else self.scale
        return f"d_model={self.d_model}, dim={self.dim}, mode={self.mode!r}, scale={scale}, unit_norm={self.unit_norm}"

    def forward(
        self, x: torch.Tensor, *, positions: torch.Tensor | None = None, offset: int = 0
    ) -> torch.Tensor:
        """Add (or concatenate) the encoding of each token's position.

        Args:
            x: tokens ``[b, s, d_model]``, floating point; the output has its dtype and device.
            positions: positions of the tokens, ``[s]`` (shared by the batch) or ``[b, s]`` (one row per
                sequence: a left-padded batch, packed sequences restarting at 0; ``[1, s]`` serves every
                row); default ``offset … offset+s−1``.
            offset: first position when ``positions`` is not given (streaming / cached decoding).

        Returns:
            ``[b, s, d_model]`` (add) or ``[b, s, d_model + dim]`` (concat); with ``[b, s]`` positions, row
            ``r`` is the result for ``positions[r]``.
        """
        refuse_tracing(self)
        s = self._check_input(x)
        offset = _positions.check_offset(offset)
        if positions is not None:
            if offset != 0:
                raise ValueError(f"give positions or offset, not both (got offset={offset} with positions)")
            positions = self._check_positions(positions, x.shape[0], s)
            if not torch.compiler.is_compiling():
                self._check_rows_of_positions(positions)
        rows = self._rows(s, positions, offset, dtype=x.dtype, device=x.device)
        if self.mode == "concat":
            return torch.cat([x, self._scaled(rows).expand(x.shape[0], -1, -1)], dim=-1)
        if self.learn_scale:
            return torch.addcmul(x, rows, cast(nn.Parameter, self.scale).to(x.dtype))
        if self.scale != 1.0:
            return torch.add(x, rows, alpha=cast(float, self.scale))
        return x + rows

    def table(
        self, length: int, *, dtype: torch.dtype = torch.float64, device: torch.device | str | None = None
    ) -> torch.Tensor:
        """The rows added for positions ``0 … length−1``, ``[length, dim]``, scale and unit norm applied.

        Computed afresh (the forward cache is left alone); ``device`` defaults to the module's.
        """
        length = validate.positive_int("length", length)
        if device is None:
            device = next(self.parameters(), torch.empty(0)).device
        return self._scaled(
            self._rows(length, None, 0, dtype=dtype, device=torch.device(device), cache=False)
        )

    # -- what subclasses provide ------------------------------------------------------------

    def _encode(
        self, positions: torch.Tensor | int, *, offset: int, dtype: torch.dtype, device: torch.device
    ) -> torch.Tensor:
        """Raw rows ``[s, dim]`` for ``[s]`` positions, or for ``offset … offset+s−1`` when given an int ``s``."""
        raise NotImplementedError

    def _check_rows_of_positions(self, positions: torch.Tensor) -> None:
        """:meth:`_check_position_values` on ``[s]`` or ``[b, s]`` positions; a refusal of ``[b, s]`` ones names
        the row (the index in the message is the one within that row)."""
        try:
            self._check_position_values(positions.reshape(-1))
        except ValueError as exc:
            if positions.dim() == 1:
                raise
            for r, row in enumerate(positions):
                try:
                    self._check_position_values(row)
                except ValueError as in_row:
                    raise type(in_row)(f"{in_row} (in row {r} of the [b, s] positions)") from None
            raise exc from None

    def _check_position_values(self, positions: torch.Tensor) -> None:
        """Eager check of explicit positions ``[n]`` (finite); subclasses add their own limits."""
        validate.finite_array("positions", positions.detach().to("cpu", torch.float64).numpy(), ndim=1)

    # -- shared machinery ----------------------------------------------------------------------

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
        """Unscaled rows ``[s, dim]`` (``[b, s, dim]`` for ``[b, s]`` positions; unit norm applied): from the
        cache when the encoding is fixed."""
        if positions is not None:
            rows = self._fresh(positions.to(device).reshape(-1), 0, dtype, device)
            return rows.reshape(*positions.shape, self.dim)
        end = offset + s
        if not (cache and self.cache_tables) or end * self.dim > self.max_cached_elements:
            return self._fresh(s, offset, dtype, device)
        key = (dtype, device)
        if self._cache is None or self._cache_key != key or self._cache.shape[0] < end:
            grown = 2 * self._cache.shape[0] if self._cache is not None and self._cache_key == key else 0
            length = min(max(end, grown), self.max_cached_elements // self.dim)
            # A cache built under torch.inference_mode() would be an inference tensor, which later
            # training cannot save for backward: build it as an ordinary tensor in every mode.
            with torch.inference_mode(False):
                self._cache = self._fresh(length, 0, dtype, device)
            self._cache_key = key
        return self._cache[offset:end]

    def _fresh(
        self, positions: torch.Tensor | int, offset: int, dtype: torch.dtype, device: torch.device
    ) -> torch.Tensor:
        """:meth:`_encode` with unit norm applied (normalised in float64, then cast)."""
        if not self.unit_norm:
            return self._encode(positions, offset=offset, dtype=dtype, device=device)
        rows = self._encode(positions, offset=offset, dtype=torch.float64, device=device)
        norm = torch.linalg.vector_norm(rows, dim=-1, keepdim=True).clamp_min(torch.finfo(torch.float64).tiny)
        unit: torch.Tensor = (rows / norm).to(dtype)
        return unit

    def _scaled(self, rows: torch.Tensor) -> torch.Tensor:
        if self.learn_scale:
            return rows * cast(nn.Parameter, self.scale).to(rows.dtype)
        return rows if self.scale == 1.0 else rows * self.scale

    @staticmethod
    def _check_positions(positions: object, b: int, s: int) -> torch.Tensor:
        """Validate explicit positions ``[s]`` or ``[b, s]`` (``[1, s]`` broadcasts) for tokens ``[b, s, ·]``."""
        positions = _positions.check_positions("positions", positions, s, batched=True)
        if positions.dim() == 2 and positions.shape[0] not in (1, b):
            raise ValueError(
                f"positions must have shape [{s}] or [b, {s}] with b = {b} or 1 (one row per sequence of x), "
                f"got {list(positions.shape)}"
            )
        return positions

    def _check_input(self, x: torch.Tensor) -> int:
        """Validate ``x [b, s, d_model]`` and return ``s``."""
        if not isinstance(x, torch.Tensor):
            raise TypeError(
                f"x must be a torch.Tensor [b, s, d_model={self.d_model}], got {type(x).__name__}"
            )
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape [b, s, d_model={self.d_model}], got {list(x.shape)}")
        if not x.is_floating_point():
            raise TypeError(f"x must be floating point (float16, bfloat16, float32, float64), got {x.dtype}")
        return x.shape[1]


class SinusoidalEncoding(InputEncoding):
    """Sinusoidal encoding (Vaswani et al. 2017, §3.5), added to ``[b, s, d_model]`` tokens.

    ``PE[t, 2i] = sin(t·w_i)``, ``PE[t, 2i+1] = cos(t·w_i)``, ``w_i = base^(−2i/d)`` in the
    ``"interleaved"`` layout; ``"interleaved_cos_first"`` (Su) and ``"split"`` (tensor2tensor /
    fairseq) permute the columns (:data:`posenc.spectrum.LAYOUTS`); odd ``dim`` drops the last
    cosine. Rows have norm ``√(d/2)`` for even ``d``. Equals :func:`posenc.sinusoidal`.

    Args:
        d_model: token dimension. See :class:`InputEncoding` for ``mode``, ``dim``, ``scale``,
            ``learn_scale``, ``unit_norm``.
        base: ``ρ`` of the geometric schedule.
        layout: column layout, one of :data:`posenc.spectrum.LAYOUTS`.
        frequencies: ``⌈dim/2⌉`` angular frequencies instead of the geometric schedule (any
            schedule of :mod:`posenc.spectrum`, e.g. ``spectrum.tensor2tensor(dim)``).

    The table is never too short: it grows with the sequence (no ``max_len``).
    """

    cache_tables = True

    def __init__(
        self,
        d_model: int,
        *,
        base: float = spectrum.DEFAULT_BASE,
        layout: str = "interleaved",
        frequencies: ArrayLike | None = None,
        mode: str = "add",
        dim: int | None = None,
        scale: float = 1.0,
        learn_scale: bool = False,
        unit_norm: bool = False,
    ) -> None:
        super().__init__(
            d_model, mode=mode, dim=dim, scale=scale, learn_scale=learn_scale, unit_norm=unit_norm
        )
        w = spectrum.sinusoidal_frequencies(self.dim, base=base, frequencies=frequencies)
        self.base = float(base)
        self.layout = validate.choice("layout", layout, spectrum.LAYOUTS)
        # Plain CPU tensors, not buffers: module.half() must not round the frequencies.
        self._frequencies = torch.from_numpy(w.copy())
        self._columns = F.layout_index(self.dim, self.layout)

    @property
    def frequencies(self) -> torch.Tensor:
        """``[⌈dim/2⌉]`` float64 angular frequencies ``w_i``."""
        return self._frequencies.clone()

    def analysis_view(self, *, name: str, dim: int, seed: int) -> EncodingView:
        """The table's rows, with its frequencies and layout."""
        return _wave_view(
            super().analysis_view(name=name, dim=dim, seed=seed), self._frequencies, self.layout
        )

    def _encode(
        self, positions: torch.Tensor | int, *, offset: int, dtype: torch.dtype, device: torch.device
    ) -> torch.Tensor:
        return F.waves(positions, self._frequencies.to(device), self._columns, dtype=dtype, offset=offset)


class DFTEncoding(InputEncoding):
    """Faithful DFT encoding (Idé, Labaien & Chen 2024, eqs. 17–21).

    Row ``s`` is the DFT of the one-hot at ``s`` on the lattice ``0 … dim−1``, in the paper's order
    ``(a_0, a_1 … a_K, b_1 … b_K, b_0)`` with ``a_0 = 1/√d``, ``a_k = √(2/d)·cos(ω_k s)``,
    ``b_k = √(2/d)·sin(ω_k s)``, ``b_0 = cos(πs)/√d`` (even ``d`` only), ``ω_k = 2πk/d``.
    Rows have norm 1: entries are O(1/√d), ``√(d/2)`` times smaller than sinusoidal ones at the
    default ``scale = 1`` (see the module docstring). Equals :func:`posenc.dft`.

    Positions must lie in ``0 … dim−1``: position ``s + dim`` has the same row as ``s`` (Theorem 1
    holds only on the lattice), so longer sequences raise ``ValueError`` unless ``alias=True``,
    which wraps positions modulo ``dim`` (no longer faithful).
    """

    cache_tables = True

    def __init__(
        self,
        d_model: int,
        *,
        alias: bool = False,
        mode: str = "add",
        dim: int | None = None,
        scale: float = 1.0,
        learn_scale: bool = False,
        unit_norm: bool = False,
    ) -> None:
        super().__init__(
            d_model, mode=mode, dim=dim, scale=scale, learn_scale=learn_scale, unit_norm=unit_norm
        )
        self.alias = validate.boolean("alias", alias)
        d = self.dim
        omega = spectrum.dft(d)  # ω_k, k = 0 … ⌊d/2⌋: index k of [sin | cos] is sin(ω_k t), f + k is cos
        f, n_k = omega.size, (d - 1) // 2
        ks = list(range(1, n_k + 1))
        columns = [f] + [f + k for k in ks] + ks + ([f + d // 2] if d % 2 == 0 else [])
        amplitude = (
            [1 / math.sqrt(d)] + [math.sqrt(2 / d)] * (2 * n_k) + ([1 / math.sqrt(d)] if d % 2 == 0 else [])
        )
        self._frequencies = torch.from_numpy(omega)
        self._columns = torch.tensor(columns, dtype=torch.int64)
        self._amplitude = torch.tensor(amplitude, dtype=torch.float64)

    def _encode(
        self, positions: torch.Tensor | int, *, offset: int, dtype: torch.dtype, device: torch.device
    ) -> torch.Tensor:
        return F.waves(
            positions,
            self._frequencies.to(device),
            self._columns,
            amplitude=self._amplitude,
            dtype=dtype,
            offset=offset,
        )

    def _check_position_values(self, positions: torch.Tensor) -> None:
        tables.dft_positions(positions.detach().to("cpu", torch.float64).numpy(), self.dim, alias=self.alias)

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
        if positions is None:
            if offset + s <= self.dim:
                return super()._rows(s, None, offset, dtype=dtype, device=device, cache=cache)
            if not self.alias:
                raise ValueError(
                    f"positions must lie in 0…dim-1 = 0…{self.dim - 1} for the DFT encoding, got up to "
                    f"{offset + s - 1} (offset={offset}, s={s}): position t+{self.dim} has the same encoding as t "
                    f"(Idé, Labaien & Chen 2024: Theorem 1 holds only on the lattice); use dim >= sequence length, or "
                    f"alias=True to wrap positions mod dim"
                )
            positions = torch.arange(offset, offset + s, device=device)
        lattice = super()._rows(self.dim, None, 0, dtype=dtype, device=device, cache=cache)
        return lattice[positions.to(device).long() % self.dim]


class LearnedEncoding(InputEncoding):
    """Learned absolute encoding: one trainable vector per position (Gehring et al. 2017).

    ``weight [max_len, dim]`` is initialised from ``N(0, init_std²)``; positions must lie in
    ``0 … max_len−1`` (a clear ``ValueError`` otherwise — a learned table cannot extrapolate).
    """

    def __init__(
        self,
        d_model: int,
        *,
        max_len: int,
        init_std: float = 0.02,
        mode: str = "add",
        dim: int | None = None,
        scale: float = 1.0,
        learn_scale: bool = False,
        unit_norm: bool = False,
    ) -> None:
        super().__init__(
            d_model, mode=mode, dim=dim, scale=scale, learn_scale=learn_scale, unit_norm=unit_norm
        )
        self.max_len = validate.positive_int("max_len", max_len)
        self.init_std = validate.positive_float("init_std", init_std)
        self.weight = nn.Parameter(torch.empty(self.max_len, self.dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Redraw ``weight`` from ``N(0, init_std²)``."""
        nn.init.normal_(self.weight, std=self.init_std)

    def _encode(
        self, positions: torch.Tensor | int, *, offset: int, dtype: torch.dtype, device: torch.device
    ) -> torch.Tensor:
        if isinstance(positions, int):
            if offset + positions > self.max_len:
                raise ValueError(
                    f"positions must lie in 0…max_len-1 = 0…{self.max_len - 1} for a learned encoding, got up to "
                    f"{offset + positions - 1} (offset={offset}, s={positions}); build it with a larger max_len"
                )
            rows = self.weight[offset : offset + positions]
        else:
            rows = self.weight[positions.to(self.weight.device).long()]
        return rows.to(device=device, dtype=dtype)

    def _check_position_values(self, positions: torch.Tensor) -> None:
        t = validate.finite_array("positions", positions.detach().to("cpu", torch.float64).numpy(), ndim=1)
        bad = (t != t.round()) | (t < 0) | (t > self.max_len - 1)
        if bad.any():
            i = int(bad.argmax())
            raise ValueError(
                f"positions must be integers in 0…max_len-1 = 0…{self.max_len - 1} for a learned encoding, "
                f"got {t[i]:g} at index {i}"
            )


class LearnableFrequencyEncoding(InputEncoding):
    """Sinusoidal encoding whose frequencies are trainable (Lin et al. 2021; Su 2021).

    Rows are those of :class:`SinusoidalEncoding` with ``w_i`` a float64 parameter initialised
    from a schedule of :mod:`posenc.spectrum` (``"geometric"`` with ``base``, ``"exponential"``,
    ``"power_law"`` with ``alpha``, ``"linear"``, ``"tensor2tensor"`` …), passed through
    ``schedule_options``. Rows are recomputed every call (exact float64 angles, gradients to
    ``frequencies``); nothing is cached. ``frequencies`` stay float64 when the module is cast
    (``.half()``, ``.to(torch.bfloat16)``): only the output takes the tokens' dtype.
    """

    def __init__(
        self,
        d_model: int,
        *,
        schedule: str = "geometric",
        base: float = spectrum.DEFAULT_BASE,
        layout: str = "interleaved",
        mode: str = "add",
        dim: int | None = None,
        scale: float = 1.0,
        learn_scale: bool = False,
        unit_norm: bool = False,
        **schedule_options: float,
    ) -> None:
        super().__init__(
            d_model, mode=mode, dim=dim, scale=scale, learn_scale=learn_scale, unit_norm=unit_norm
        )
        validate.choice("schedule", schedule, tuple(spectrum.SCHEDULES))
        if schedule in ("geometric", "exponential"):
            schedule_options = {"base": base, **schedule_options}
        elif base != spectrum.DEFAULT_BASE:
            raise ValueError(f"base applies to the 'geometric' and 'exponential' schedules, not {schedule!r}")
        try:
            w = spectrum.schedule(schedule, self.dim, **schedule_options)
        except TypeError as exc:
            raise TypeError(
                f"schedule options {sorted(schedule_options)} do not fit schedule {schedule!r}: {exc}"
            ) from None
        self.schedule = schedule
        self.layout = validate.choice("layout", layout, spectrum.LAYOUTS)
        self.frequencies = nn.Parameter(torch.from_numpy(w.copy()))
        self._columns = F.layout_index(self.dim, self.layout)

    def _apply(
        self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True
    ) -> LearnableFrequencyEncoding:
        # module.half() / .to(torch.bfloat16) would round the frequencies, and with them every angle
        # t·w_i (an error of order t·w_i·2^-8 for bfloat16): keep them float64 whatever the module's dtype.
        exact = self.frequencies.detach().clone()
        grad = None if self.frequencies.grad is None else self.frequencies.grad.detach().clone()
        super()._apply(fn, recurse)
        if self.frequencies.dtype != torch.float64:
            self.frequencies.data = exact.to(self.frequencies.device)
            if grad is not None:
                self.frequencies.grad = grad.to(self.frequencies.device)
        return self

    def analysis_view(self, *, name: str, dim: int, seed: int) -> EncodingView:
        """The table's rows, with its current (trained) frequencies and layout."""
        return _wave_view(super().analysis_view(name=name, dim=dim, seed=seed), self.frequencies, self.layout)

    def _encode(
        self, positions: torch.Tensor | int, *, offset: int, dtype: torch.dtype, device: torch.device
    ) -> torch.Tensor:
        return F.waves(positions, self.frequencies.to(device), self._columns, dtype=dtype, offset=offset)
