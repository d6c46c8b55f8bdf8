"""Rotary position embedding (RoPE; Su et al. 2021, RoFormer): rotate query/key pairs by ``t·θ_i``.

Pair ``i`` of a query or key at position ``t`` is rotated by the angle ``t·θ_i`` (Su et al. 2021, eq. 34)::

    out_a = x_a·cos(tθ_i) − x_b·sin(tθ_i)
    out_b = x_b·cos(tθ_i) + x_a·sin(tθ_i)

so ``⟨R_m q, R_n k⟩ = ⟨q, R_(n−m) k⟩`` depends on ``n − m`` only (Su et al. 2021).
``θ_i = base^(−2i/r)``, ``i < r/2``, over the ``r = rotary_dim`` rotated dimensions (:func:`posenc.spectrum.geometric`); dimensions ``r … d_h − 1`` pass
through unchanged (partial rotary, GPT-NeoX ``rotary_pct`` / GPT-J ``rotary_dim``).

Which coordinates form pair ``i`` is the *layout*; both are in use and must not be mixed up
when loading weights. For ``r = 8`` (pairs 0…3)::

    adjacent     a0 b0 a1 b1 a2 b2 a3 b3    RoFormer, GPT-J ``rotate_every_two``, Meta LLaMA (complex)
    half_split   a0 a1 a2 a3 b0 b1 b2 b3    GPT-NeoX, Hugging Face ``rotate_half`` (LLaMA, Mistral …)

The cos/sin tables handed to :func:`apply_rotary` are ``[s, r]`` in the same layout
(``cos(tθ_i)`` stands in both columns of pair ``i``): for ``half_split`` they equal Hugging
Face's ``cos``/``sin`` (``cat(freqs, freqs)``), for ``adjacent`` GPT-J's ``repeat_interleave``.
The rotation itself, its reference :func:`rotation_reference` and its backends (the compiled CPU loop,
the Triton kernel, the compiler's form …) live in :mod:`posenc.backends.rotate`; the one-launch rotation
of queries and keys (the CPU loop for decoding steps, the Triton kernel on CUDA) in
:mod:`posenc.backends.rotate_qk`.

Context extension (``scaling``) changes the frequencies (and, for YaRN/LongRoPE, scales the
tables by an attention factor) so that angles stay ``t·θ_i`` in float64: ``"linear"`` (Chen et
al. 2023), ``"ntk"`` (bloc97 2023), and Hugging Face's ``"dynamic"``, ``"yarn"`` (Peng et
al. 2023), ``"longrope"`` (Ding et al. 2024) and ``"llama3"`` — the registry of
:mod:`posenc.nn.rope_types`; :meth:`RotaryEmbedding.from_hf` reads them from a transformers config.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from posenc import spectrum, validate
from posenc.backends import Backend, rotate_qk
from posenc.backends.rotate import (
    LAYOUTS,
    Pairs,
    apply_rotary,
    check_floating,
    check_inplace,
    check_tables,
    layout_table,
    pairs,
    rotate,
    rotation_reference,
)
from posenc.nn import _positions, rope_types
from posenc.nn._rotary_weights import permute_rotary_weights
from posenc.nn.contracts import PositionContext, RotaryContract
from posenc.nn.functional import sincos
from posenc.registry import EncodingView

__all__ = ["LAYOUTS", "RotaryEmbedding", "apply_rotary", "permute_rotary_weights", "rotation_reference"]


@dataclasses.dataclass(frozen=True)
class _Positions:
    """A rotary context's positions (``None``: the default ``0 … s−1``), read back by ``transform_qk``."""

    positions: torch.Tensor | None


class RotaryEmbedding(RotaryContract):
    """Rotary position embedding for queries and keys ``[b, h, s, d_h]`` (Su et al. 2021, eq. 34; module docstring).

    Args:
        head_dim: ``d_h``, the per-head dimension of the queries and keys.
        base: ``ρ`` of ``θ_i = ρ^(−2i/r)`` (10000 in RoFormer, GPT-NeoX, LLaMA 1–2).
        rotary_dim: dimensions rotated: an even int, a float fraction of ``head_dim``
            (``int(head_dim·fraction)``, must come out even), or ``None`` for all.
        layout: ``"adjacent"`` (RoFormer/GPT-J) or ``"half_split"`` (GPT-NeoX/Hugging Face).
        scaling: ``None`` or a context-extension type of :data:`posenc.nn.rope_types.ROPE_TYPES`
            (``"linear"``, ``"ntk"``, ``"dynamic"``, ``"yarn"``, ``"longrope"``, ``"llama3"``).
        scaling_factor: its ``factor ≥ 1``; only with ``scaling``.
        scaling_options: its other parameters by their Hugging Face names
            (e.g. ``{"original_max_position_embeddings": 4096, "beta_fast": 32}``); only with ``scaling``.
        xpos_scale_base: ``γ`` of xPos (Sun et al. 2022, "A Length-Extrapolatable Transformer"):
            queries at position ``t`` are scaled per pair by ``ζ_i^((t−c)/γ)``, keys by ``ζ_i^(−(t−c)/γ)``,
            ``ζ_i = (2i + 0.4r)/(1.4r)``, so the score of ``(m, n)`` decays as ``ζ_i^((m−n)/γ)``.
            ``c`` is the key position at index ``⌊s_k/2⌋`` (per row), which keeps the scales near 1
            and equals ``rotary-embedding-torch``'s centre; it cancels in every score.
        max_len: positions whose cos/sin are tabulated up front; longer inputs grow the table.

    Positions (``q_positions``/``k_positions`` of :meth:`forward`) are ``[s]`` or, per sequence of a
    left-padded or packed batch, ``[b, s]``: finite and below ``2^53``, in an integer dtype, float32 or
    float64 (:mod:`posenc.nn._positions`; float16/bfloat16 cannot hold integer positions above 2048/256).

    The cached tables are non-persistent buffers (``state_dict()`` is empty) holding one cosine and one
    sine per pair, ``[n, r/2]`` (what the fast paths read), rebuilt from float64 angles
    (:func:`posenc.nn.functional.sincos`) for each device and dtype they are used in, outside inference
    mode (a module first called under ``torch.inference_mode()`` still trains).

    ``dynamic`` and ``longrope`` follow the context length without reading a position on the host: with
    default positions the length is ``offset + s_k`` (host ints); with explicit positions it is the
    call's largest position + 1, found on the device, where ``longrope`` then picks its short or long
    factors and ``dynamic`` keeps the longest length seen (Hugging Face's rule) as a device tensor and forms
    its NTK-scaled frequencies from it. :attr:`frequencies` shows the default-position calls' state.
    """

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        rotary_dim: float | None = None,
        layout: str = "half_split",
        scaling: str | None = None,
        scaling_factor: float | None = None,
        scaling_options: Mapping[str, Any] | None = None,
        xpos_scale_base: float | None = None,
        max_len: int = 2048,
    ) -> None:
        super().__init__()
        self.head_dim = validate.positive_int("head_dim", head_dim)
        self.base = validate.positive_float("base", base)
        self.rotary_dim = spectrum.rotary_dim(self.head_dim, rotary_dim)
        self.layout = validate.choice("layout", layout, LAYOUTS)
        self.scaling_parameters = rope_types.module_parameters(
            scaling, scaling_factor, scaling_options, rotary_dim=self.rotary_dim
        )
        self.scaling = scaling
        self.scaling_factor = self.scaling_parameters.get("factor")
        self.xpos_scale_base = (
            None if xpos_scale_base is None else validate.positive_float("xpos_scale_base", xpos_scale_base)
        )
        self._length_rule = "static" if scaling is None else rope_types.ROPE_TYPES[scaling].length_rule
        self._original_length = float(
            self.scaling_parameters.get("original_max_position_embeddings")
            or self.scaling_parameters.get("max_position_embeddings")
            or 0
        )
        self._longest = self._original_length  # dynamic NTK: the longest context seen (Hugging Face's rule)
        self._longest_seen: torch.Tensor | None = None  # the same, on the device, for explicit positions
        self._longrope_sets: torch.Tensor | None = None  # [2, r/2 + 1], made at the first explicit call
        self._frequencies, self._attention_factor = self._compute_frequencies(self._original_length)
        self._table_dtype: torch.dtype | None = None
        self._kernel_theta: torch.Tensor | None = None  # rotate_qk's float64 [θ_i…, attention factor]
        self.register_buffer("_cos", torch.empty(0), persistent=False)
        self.register_buffer("_sin", torch.empty(0), persistent=False)
        self._build(validate.positive_int("max_len", max_len), torch.get_default_dtype(), torch.device("cpu"))

    @classmethod
    def from_hf(
        cls,
        config: Any,
        *,
        layer_type: str | None = None,
        layout: str = "half_split",
        max_len: int | None = None,
    ) -> RotaryEmbedding:
        """The rotary embedding a Hugging Face ``transformers`` config describes.

        ``config`` is a ``PretrainedConfig`` or a plain dict with the same keys: ``rope_parameters``
        (or the legacy ``rope_scaling``) holding ``rope_type`` and its parameters, ``rope_theta``,
        ``partial_rotary_factor``, ``head_dim`` (else ``hidden_size // num_attention_heads``) and
        ``max_position_embeddings``. Rope types ``default`` and every name of
        :data:`posenc.nn.rope_types.ROPE_TYPES` that transformers defines (``linear``, ``dynamic``,
        ``yarn``, ``longrope``, ``llama3``, ``proportional``) are read exactly as transformers reads
        them; the result rotates like transformers' own rotary embedding, but forms its angles in float64.
        ``layout`` is ``"half_split"`` for Hugging Face weights (``rotate_half``); ``layer_type`` picks
        one rope of a config with one per layer type (Gemma 3's ``"sliding_attention"`` …). Values it
        would have to guess at are refused: a ``head_dim`` that is not a positive integer, an
        ``original_max_position_embeddings`` that is not positive, an unknown rope type, and M-RoPE
        configs (``mrope_section``: read them with :meth:`posenc.nn.MultiAxisRotary.from_hf`). Where some
        layers use no rope (Llama 4's ``no_rope_layers``), this is the rope of the others:
        :func:`posenc.nn.rope_types.hf_rope_layers` says which layers rotate.
        """
        settings = rope_types.hf_settings(config, layer_type=layer_type)
        if max_len is None:
            max_len = min(int(settings.pop("max_position_embeddings", None) or 2048), 8192)
        else:
            settings.pop("max_position_embeddings", None)
        return cls(**settings, layout=layout, max_len=max_len)

    def _compute_frequencies(self, length: float) -> tuple[torch.Tensor, float]:
        """Float64 ``θ`` ``[r/2]`` and the attention factor for a context of ``length`` positions."""
        with torch.inference_mode(False):
            if self.scaling is None:
                return torch.from_numpy(spectrum.geometric(self.rotary_dim, self.base)), 1.0
            compute = rope_types.ROPE_TYPES[self.scaling].compute
            theta, factor = compute(self.rotary_dim, self.base, self.scaling_parameters, length)
            return torch.from_numpy(np.ascontiguousarray(theta, dtype=np.float64)), float(factor)

    def _follow_length(self, length: float) -> None:
        """Switch frequencies for a call reaching ``length`` positions (``dynamic``/``longrope`` only).

        ``dynamic`` uses the longest length seen so far and returns to the original frequencies when a call
        fits in ``max_position_embeddings`` again; ``longrope`` uses the call's length. Host arrays only."""
        if self._length_rule == "static":
            return
        if self._length_rule == "longest":
            if length > self._longest:
                self._longest = length
            elif length < self._original_length < self._longest:
                self._longest = self._original_length
            length = self._longest
            self._longest_seen = None  # explicit positions start again from this length
        theta, factor = self._compute_frequencies(length)
        if factor != self._attention_factor or not np.array_equal(theta.numpy(), self._frequencies.numpy()):
            self._frequencies, self._attention_factor = theta, factor
            self._table_dtype = None  # the cached tables belong to the old frequencies

    @property
    def frequencies(self) -> torch.Tensor:
        """``[r/2]`` float64 rotation frequencies ``θ_i`` after scaling (angles are ``t·θ_i``)."""
        return self._frequencies.clone()

    def analysis_view(self, *, name: str, dim: int, seed: int) -> EncodingView:
        """The contract's rotated probe rows, with the rotation frequencies ``θ_i``."""
        view = super().analysis_view(name=name, dim=dim, seed=seed)
        return dataclasses.replace(view, frequencies=self._frequencies.to(torch.float64).numpy())

    @property
    def attention_factor(self) -> float:
        """Factor on the cos/sin tables (1 except for ``yarn``/``longrope``; Peng et al. 2023, YaRN)."""
        return self._attention_factor

    def tables(self, positions: torch.Tensor, *, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)`` ``[s, r]`` in ``self.layout`` at real ``positions [s]``, times :attr:`attention_factor`."""
        c, s = self._range(positions, dtype=dtype, device=positions.device)
        return layout_table(c, self.layout), layout_table(s, self.layout)

    def _range(
        self, positions: torch.Tensor | int, *, dtype: torch.dtype, device: torch.device, offset: int = 0
    ) -> Pairs:
        """Per-pair ``(cos, sin)`` ``[s, r/2]`` times the attention factor (in float64 before the cast) at
        ``positions``, or for an int ``n`` at ``offset … offset + n − 1`` by the fast exact path of
        :func:`posenc.nn.functional.sincos`."""
        frequencies = self._frequencies.to(device)
        if self._attention_factor == 1.0:
            s, c = sincos(positions, frequencies, dtype=dtype, offset=offset)
            return c, s
        s, c = sincos(positions, frequencies, dtype=torch.float64, offset=offset)
        return (c * self._attention_factor).to(dtype), (s * self._attention_factor).to(dtype)

    def _cached(self, start: int, length: int, dtype: torch.dtype, device: torch.device) -> Pairs:
        """Rows ``start … start+length−1`` of the per-pair tables in ``dtype`` on ``device``, rebuilt for a new
        dtype, device or frequencies (from float64 angles, outside inference mode), doubled when a call runs
        past their end; a window beyond twice their length (one decoding step at 10^6) is computed directly."""
        end, cached = start + length, self._cos.shape[0]
        self._tables_in(dtype, device, end)
        if end > 2 * cached:
            return self._range(length, dtype=dtype, device=device, offset=start)
        return self._cos[start:end], self._sin[start:end]

    def _tables_in(self, dtype: torch.dtype, device: torch.device, end: int = 0) -> None:
        """The cached tables rebuilt where their dtype, device or frequencies changed, and doubled where a call
        runs to ``end`` past their end but not beyond twice their length (:meth:`_cached`)."""
        cached = self._cos.shape[0]
        if self._table_dtype != dtype or self._cos.dtype != dtype or self._cos.device != device:
            self._build(cached, dtype, device)
        if cached < end <= 2 * cached:
            self._build(2 * cached, dtype, device)

    def _build(self, length: int, dtype: torch.dtype, device: torch.device) -> None:
        with torch.inference_mode(False):
            self._cos, self._sin = (t.contiguous() for t in self._range(length, dtype=dtype, device=device))
        self._table_dtype = dtype

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        *,
        q_positions: torch.Tensor | None = None,
        k_positions: torch.Tensor | None = None,
        offset: int = 0,
        cu_seqlens: torch.Tensor | None = None,
        inplace: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate queries ``[b, h, s_q, d_h]`` and keys ``[b, h, s_k, d_h]``.

        Positions default to ``offset + 0 … s_k − 1`` for keys and the last ``s_q`` of those for
        queries (cached decoding; :mod:`posenc.nn._positions`). Explicit positions are ``[s]``, or
        ``[b, s]`` with one row per sequence of the batch (then ``q``/``k`` must be 4-D); each distinct
        tensor of them is checked once per call, in one reduction on the device (or by the one-launch kernel
        itself). Returns ``(q_rot, k_rot)`` in the inputs' dtype; an empty batch or sequence gives empty ones.

        ``cu_seqlens`` ``[n + 1]`` (int32/int64; flash-attn's variable-length layout): ``q``, ``k``
        ``[…, total, d_h]`` hold ``n`` sequences packed along the sequence dim, sequence ``i`` at
        ``cu_seqlens[i] … cu_seqlens[i+1] − 1``, each token at ``offset +`` its index in its sequence;
        checked (0 first, not decreasing, ``total`` last) and turned into positions on the device.

        ``inplace``: write the rotations into ``q`` and ``k`` (made into fresh outputs, then copied back) and
        return those tensors; refused where autograd needs them, where one element is reachable by two
        indices, and where ``q`` and ``k`` share an element (:func:`posenc.backends.rotate.check_inplace`).
        """
        for name, t in (("q", q), ("k", k)):
            check_floating(name, t)
            if t.dim() < 2 or t.shape[-1] != self.head_dim:
                raise ValueError(f"{name} must be [..., s, head_dim={self.head_dim}], got {list(t.shape)}")
        if inplace:
            check_inplace(q, k)
        if cu_seqlens is not None:
            q_positions = k_positions = _positions.packed_positions(
                q.shape[-2], k.shape[-2], q_positions, k_positions, cu_seqlens, offset, q.device
            )
            offset = 0
        given = (q_positions, k_positions)  # their values are checked below, each distinct tensor once
        if q_positions is not None or k_positions is not None:
            q_positions, k_positions = _positions.resolve(
                q.shape[-2], k.shape[-2], q_positions=q_positions, k_positions=k_positions, offset=offset,
                device=q.device, values=False,
            )  # fmt: skip
        launch = self._one_launch_serves(q, k, q_positions, k_positions, context=False)
        if launch is not None:  # it asserts the values of the (widened) positions itself
            _positions.check_wrapping_values(*given)
            q_rot, k_rot = self._one_launch(launch, q, k, q_positions, k_positions, offset)
        else:
            _positions.check_distinct_values(*given)
            q_tab, k_tab = self._tables_for(q, k, q_positions, k_positions, offset)
            q_rot, k_rot = self._rotate(q, q_tab), self._rotate(k, k_tab)
        if not inplace:
            return q_rot, k_rot
        q.copy_(q_rot)
        k.copy_(k_rot)
        return q, k

    def _tables_for(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        q_positions: torch.Tensor | None,
        k_positions: torch.Tensor | None,
        offset: int,
    ) -> tuple[Pairs, Pairs]:
        """The per-pair tables of ``q`` and of ``k`` (:meth:`_rotate`) at checked explicit positions or (both
        ``None``) the defaults after ``offset``."""
        s_q, s_k = q.shape[-2], k.shape[-2]
        if q_positions is None or k_positions is None:
            start, offset = _positions.default_starts(s_q, s_k, offset)
            self._follow_length(offset + s_k)
            if self.xpos_scale_base is None:
                k_tab = self._cached(offset, s_k, k.dtype, k.device)
                same = start == offset and q.dtype == k.dtype
                return k_tab if same else self._cached(start, s_q, q.dtype, q.device), k_tab
            qp = torch.arange(start, start + s_q, device=q.device)
            kp = torch.arange(offset, offset + s_k, device=q.device)
        else:
            qp, kp = q_positions, k_positions
        batch = _positions.batch_of(qp, kp, q, k)
        if batch is not None:  # a row of 1 broadcast to the batch (one tensor for both: expanded once)
            same = qp is kp
            qp = qp.expand(batch, s_q) if qp.dim() == 1 or qp.shape[0] != batch else qp
            kp = qp if same else kp.expand(batch, s_k) if kp.dim() == 1 or kp.shape[0] != batch else kp
        theta, factor = self._call_frequencies(qp, kp)
        k_tab = self._scaled_tables(kp, kp, theta, factor, sign=-1.0, dtype=k.dtype)
        if qp is kp and self.xpos_scale_base is None and q.dtype == k.dtype:
            return k_tab, k_tab
        return self._scaled_tables(qp, kp, theta, factor, sign=1.0, dtype=q.dtype), k_tab

    def _call_frequencies(
        self, qp: torch.Tensor, kp: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | float]:
        """Float64 ``θ [r/2]`` and the attention factor at explicit positions; for ``dynamic``/``longrope``
        those of the call's largest position + 1, found on the device (class docstring)."""
        theta = self._frequencies.to(qp.device)
        if self._length_rule == "static" or not (qp.numel() and kp.numel()):
            return theta, self._attention_factor
        length = torch.maximum(qp.amax(), kp.amax().to(qp.device)).to(torch.float64) + 1.0
        original = self._original_length
        if self.scaling == "dynamic":  # rope_types' dynamic NTK base for the longest length seen
            longest = self._longest_seen
            if longest is None or longest.device != qp.device:
                longest = torch.tensor(self._longest, dtype=torch.float64, device=qp.device)
            reset = (length < original) & (longest > original)  # back inside: the original frequencies
            longest = self._longest_seen = torch.where(reset, original, torch.maximum(longest, length))
            stretch = rope_types.dynamic_stretch(float(self.scaling_parameters["factor"]), longest, original)
            return rope_types.ntk_frequencies(self.rotary_dim, self.base, stretch), 1.0
        sets = self._longrope_sets  # LongRoPE's θ ‖ factor within L and beyond it (constant there)
        if sets is None or sets.device != qp.device:  # made once per device: the settings alone decide them
            with torch.inference_mode(False):
                made = (self._compute_frequencies(n) for n in (original, original + 1.0))
                sets = torch.stack([torch.cat([t, torch.tensor([f], dtype=torch.float64)]) for t, f in made])
            sets = self._longrope_sets = sets.to(qp.device)
        chosen = torch.where(length > original, sets[1], sets[0])
        return chosen[:-1], chosen[-1]

    def _scaled_tables(
        self,
        positions: torch.Tensor,
        keys: torch.Tensor,
        theta: torch.Tensor,
        factor: torch.Tensor | float,
        *,
        sign: float,
        dtype: torch.dtype,
    ) -> Pairs:
        """Per-pair ``(cos, sin)`` ``[s, r/2]`` at checked positions ``[s]``/``[1, s]``, ``[b·s, r/2]`` at ``[b, s]``,
        angles and scales in float64, then cast; xPos scales ``ζ^(sign·(t − c)/γ)``, ``c`` from ``keys``."""
        column = positions if positions.shape == (1, 1) else positions.reshape(-1, 1)  # [s] or [b·s] rows
        angles = torch.mul(column, theta)  # int or float positions promoted to float64 by the product
        scale: torch.Tensor | float = factor
        if self.xpos_scale_base is not None and keys.shape[-1]:
            centre = keys[..., keys.shape[-1] // 2, None].to(positions.device, torch.float64)
            power = (positions.to(torch.float64) - centre) / self.xpos_scale_base
            r = self.rotary_dim
            zeta = (torch.arange(0, r, 2, dtype=torch.float64, device=positions.device) + 0.4 * r) / (1.4 * r)
            self._check_xpos_range(power, dtype)
            scale = zeta ** (sign * power.reshape(column.shape)) * factor
        if isinstance(scale, float) and scale == 1.0:
            return angles.cos().to(dtype=dtype), angles.sin().to(dtype=dtype)
        return (angles.cos() * scale).to(dtype=dtype), (angles.sin() * scale).to(dtype=dtype)

    def _check_xpos_range(self, power: torch.Tensor, dtype: torch.dtype) -> None:
        """Refuse xPos scales ``ζ_i^(±(t − c)/γ)`` that ``dtype`` cannot hold (asserted on the device): with
        the smallest ``ζ_0 = 0.4/1.4``, ``|t − c|/γ · |ln ζ_0|`` must stay within half of ``ln`` of ``dtype``'s
        largest value, so that a scale, its inverse and products of scaled queries and keys stay finite."""
        limit = math.log(torch.finfo(dtype).max) / 2 / -math.log(0.4 / 1.4)
        span = limit * self.xpos_scale_base  # type: ignore[operator]
        message = (
            f"xPos scales overflow {dtype} beyond |t − c| = {span:.0f} positions from the centre key c "
            f"(the key at index s_k // 2; xpos_scale_base={self.xpos_scale_base}): keep every query and key "
            f"within {span:.0f} positions of it, raise xpos_scale_base, or use float64"
        )
        _positions.assert_on_device(
            (power.abs() <= limit).all(),
            message,
            lambda: f"|t − c| up to {float(power.abs().max()) * self.xpos_scale_base:.0f}",  # type: ignore[operator]
        )

    def _rotate(self, x: torch.Tensor, tables: Pairs) -> torch.Tensor:
        """``x [..., s, d]`` rotated by per-pair tables ``[s, r/2]``, or ``x [b, h, s, d]`` by ``[b·s, r/2]`` (row
        ``i·s + j``: sequence ``i``, token ``j``), ``x`` seen as ``[h, b·s, d]`` (a view for ``s = 1`` too)."""
        c, n = tables[0], x.shape[-2]
        if c.shape[0] == n:
            return rotate(x, None, None, self.layout, paired=tables)
        if x.dim() != 4 or x.shape[0] * n != c.shape[0]:
            raise ValueError(
                f"x must be [b, h, s, d_h] with b·s = {c.shape[0]} table rows, got {list(x.shape)}"
            )
        if n == 1:  # [b, h, 1, d] seen as [1, h, b, d]: the batch is the sequence the loop walks
            return rotate(x.transpose(0, 2), None, None, self.layout, paired=tables).transpose(0, 2)
        b, h, _, d = x.shape
        flat = x.transpose(0, 1).reshape(h, b * n, d)
        return rotate(flat, None, None, self.layout, paired=tables).view(h, b, n, d).transpose(0, 1)

    def _one_launch_serves(
        self, q: torch.Tensor, k: torch.Tensor, qp: object, kp: object, *, context: bool
    ) -> Backend[rotate_qk.QK] | None:
        """The one place this module chooses how to rotate: the backend of one launch for ``q`` and ``k``
        (``rotate_qk``), or ``None`` (by tables)."""
        xpos, static = self.xpos_scale_base is not None, self._length_rule == "static"
        return rotate_qk.one_launch(rotate_qk.QK(q, k, qp, kp, xpos, static, context))

    def _one_launch(
        self,
        launch: Backend[rotate_qk.QK],
        q: torch.Tensor,
        k: torch.Tensor,
        q_positions: torch.Tensor | None,
        k_positions: torch.Tensor | None,
        offset: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`forward` by the one-launch backend ``launch`` of ``posenc::rotate_qk`` (the cache, in the dtype
        that backend reads, gathered by position in the kernel)."""
        work = rotate_qk.table_dtype(launch, q.dtype)
        q_pos = k_pos = None
        if q_positions is None or k_positions is None:
            offsets = _positions.default_starts(q.shape[-2], k.shape[-2], offset)
            self._tables_in(work, q.device, offsets[1] + k.shape[-2])  # grows the cache to cover the call
        else:
            self._tables_in(work, q.device)
            _positions.batch_of(q_positions, k_positions, q, k)
            q_pos, k_pos = (p if p.dim() == 2 else p.view(1, -1) for p in (q_positions, k_positions))
            if q_pos.dtype != k_pos.dtype:
                q_pos, k_pos = q_pos.long(), k_pos.long()
            offsets = (0, 0)
        if self._kernel_theta is None or self._kernel_theta.device != q.device:
            factor = torch.tensor([self._attention_factor], dtype=torch.float64)
            with torch.inference_mode(False):
                self._kernel_theta = torch.cat([self._frequencies, factor]).to(q.device)
        return launch.apply(  # type: ignore[return-value]
            q, k, q_pos, k_pos, self._cos, self._sin, self._kernel_theta, *offsets, self.layout, False
        )

    def cos_sin(
        self,
        length: int,
        *,
        positions: torch.Tensor | None = None,
        offset: int = 0,
        dtype: torch.dtype,
        device: torch.device | str | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)`` ``[length, r]`` (``[b, length, r]`` for ``[b, length]`` positions) for :meth:`rotate`.

        Positions default to ``offset … offset+length−1`` (cached). :class:`posenc.nn.TransformerEncoder`
        computes the tables once per forward and every layer rotates with them. Not for xPos, whose
        queries and keys need inverse scales: use :meth:`forward`.
        """
        if self.xpos_scale_base is not None:
            raise ValueError(
                "xPos scales queries and keys by inverse factors, so one (cos, sin) pair cannot serve both; "
                "call the module on (q, k) instead"
            )
        return self._context_tables(length, positions, offset, dtype, device, sign=1.0)

    def _context_tables(
        self,
        length: int,
        positions: torch.Tensor | None,
        offset: int,
        dtype: torch.dtype,
        device: torch.device | str | None,
        *,
        sign: float,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        device = torch.device("cpu") if device is None else torch.device(device)
        _, offset = _positions.default_starts(length, length, offset)
        if positions is None and self.xpos_scale_base is None:
            self._follow_length(offset + length)
            tables = self._cached(offset, length, dtype, device)
        else:
            positions = (
                torch.arange(offset, offset + length, device=device) if positions is None else positions
            )
            positions = _positions.check_positions("positions", positions, length, batched=True).to(device)
            theta, factor = self._call_frequencies(positions, positions)
            tables = self._scaled_tables(positions, positions, theta, factor, sign=sign, dtype=dtype)
            tables = (tables[0].view(*positions.shape, -1), tables[1].view(*positions.shape, -1))
        return layout_table(tables[0], self.layout), layout_table(tables[1], self.layout)

    def context(
        self, length: int, *, positions: torch.Tensor | None, dtype: torch.dtype, device: torch.device
    ) -> PositionContext:
        """The tables of one forward; with xPos, queries' and keys' (inverse scales) separately. Without
        xPos ``state`` keeps the positions (``None``: default) for :meth:`transform_qk`'s one launch."""
        if self.xpos_scale_base is None:
            tables = self.cos_sin(length, positions=positions, dtype=dtype, device=device)
            return PositionContext(cos_sin=tables, state=_Positions(positions))
        return PositionContext(
            cos_sin=self._context_tables(length, positions, 0, dtype, device, sign=1.0),
            key_cos_sin=self._context_tables(length, positions, 0, dtype, device, sign=-1.0),
        )

    def transform_qk(
        self, q: torch.Tensor, k: torch.Tensor, context: PositionContext
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``q`` and ``k`` rotated at the context's positions: by one launch of ``posenc::rotate_qk`` where
        its backends serve a context (on CUDA while ``torch.compile`` traces: :mod:`posenc.backends.rotate_qk`),
        otherwise by the context's tables."""
        if isinstance(context.state, _Positions):
            p = context.state.positions
            launch = self._one_launch_serves(q, k, p, p, context=True)
            if launch is not None:
                p = p if p is None else _positions.check_positions("positions", p, p.shape[-1], batched=True)
                return self._one_launch(launch, q, k, p, p, 0)
        return super().transform_qk(q, k, context)

    def rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """``x [..., s, head_dim]`` rotated by tables from :meth:`cos_sin` (:func:`apply_rotary` in this layout).

        Tables ``[b, s, r]`` (or ``[b, 1, s, r]``) rotate each sequence of ``x [b, h, s, d]`` by its own
        positions: ``x`` is seen as ``[h, b·s, d]`` (a view when ``b`` and ``s`` are adjacent in memory,
        as after a qkv projection) and the tables as ``[b·s, r]``. Empty inputs give empty results.
        """
        if x.numel() == 0:
            return x.clone()
        if cos.dim() == 2:
            check_tables(x, cos, sin, self.layout)
        elif cos.shape[-2] != x.shape[-2] or cos.shape != sin.shape:
            raise ValueError(
                f"x [..., s, d] and tables [b, s, r] must agree in s, got {list(x.shape)}, {list(cos.shape)}"
            )
        else:
            cos, sin = cos.reshape(-1, cos.shape[-1]), sin.reshape(-1, sin.shape[-1])  # [b·s, r]
        return self._rotate(x, (pairs(cos, self.layout)[0], pairs(sin, self.layout)[0]))

    def extra_repr(self) -> str:
        scaling = (
            ""
            if self.scaling is None
            else f", scaling={self.scaling!r}, scaling_factor={self.scaling_factor}"
        )
        xpos = "" if self.xpos_scale_base is None else f", xpos_scale_base={self.xpos_scale_base}"
        return f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, base={self.base}, layout={self.layout!r}{scaling}{xpos}"
