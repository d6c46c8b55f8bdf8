"""Query and key positions of one attention call: the single alignment rule shared by rotary and biases.

Every encoding that acts inside attention needs the positions of the queries and of the keys.
They are given explicitly, or default to ranges aligned at the *end* (bottom-right), the
convention of cached decoding, where ``s_q`` new queries follow ``s_k − s_q`` earlier keys::

    keys     offset + 0 … offset + s_k − 1
    queries  offset + s_k − s_q … offset + s_k − 1

For self-attention (``s_q = s_k``) both are ``offset + 0 … offset + s − 1``.

Explicit positions are ``[s]`` (shared by the batch) or ``[b, s]`` (one row per sequence: a
left-padded batch, or packed sequences restarting at 0); relative distances are then
``[b, s_q, s_k]``. Positions must be finite, below ``2^53`` in magnitude (beyond, float64 angles
cannot tell neighbouring positions apart), and of an integer dtype, float32 or float64:
float16/bfloat16 cannot even hold the integers above 2048/256, so such positions were rounded
before they arrived and are refused. Integer positions of every width (``uint8`` … ``int64``) are
widened to int64 before any arithmetic (a ``uint8`` difference would wrap).

What is checked where, without reading position values on the host (no synchronisation, so the
checks run inside CUDA graphs and ``torch.compile``):

* on the host, from metadata only: the type, shape and dtype of explicit positions, and ``offset``
  and ``offset + s`` of default positions (plain ints);
* on the device, by :func:`check_values` (``torch._assert_async``): explicit positions finite and
  below ``2^53`` in magnitude; by :func:`packed`, the cumulative lengths of packed sequences. On the
  CPU that assertion runs at once and a failure is re-raised as a ``ValueError`` naming the parameter
  and the first bad value (all of ``cu_seqlens``); on a GPU it is a device-side
  assertion, which stops the program at the next synchronisation (the CUDA error names the check).
  A bad position is never used silently.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch

from posenc import validate

EXACT_LIMIT = 2**53
"""Positions must stay below this: float64 (the dtype of every angle) holds every integer up to it."""

_EXACT_FLOATS = (torch.float32, torch.float64)

_LIMIT = torch.tensor(float(EXACT_LIMIT), dtype=torch.float64)
"""``2^53`` as a 0-dim CPU tensor, which compares with positions on any device."""


def check_offset(offset: object) -> int:
    """Return ``offset`` as an int ≥ 0, else raise naming the parameter."""
    if type(offset) is int and 0 <= offset < EXACT_LIMIT:
        return offset
    if isinstance(offset, bool) or not isinstance(offset, numbers.Integral):
        raise TypeError(f"offset must be an int >= 0, got {offset!r} ({type(offset).__name__})")
    value = int(offset)
    if value < 0:
        raise ValueError(f"offset must be an int >= 0, got {value}")
    if value >= EXACT_LIMIT:
        raise ValueError(f"offset must be < 2^53 (float64 cannot tell larger positions apart), got {value}")
    return value


def check_end(end: int) -> None:
    """Refuse default positions that run to ``2^53`` or beyond (``offset + s``)."""
    if end > EXACT_LIMIT:
        raise ValueError(
            f"offset + sequence length must be <= 2^53 (float64 cannot tell larger positions apart), got {end}"
        )


def query_start(q_len: int, k_len: int, offset: int) -> int:
    """Position of the first query under the end-aligned default: ``offset + s_k − s_q``."""
    if q_len > k_len:
        raise ValueError(
            f"default positions need s_q <= s_k (queries aligned to the last keys), got s_q={q_len} > "
            f"s_k={k_len}; pass q_positions and k_positions explicitly"
        )
    return offset + k_len - q_len


def check_positions(name: str, positions: object, length: int, *, batched: bool = False) -> torch.Tensor:
    """Validate explicit positions: a real tensor ``[length]`` (or ``[b, length]`` when ``batched``),
    finite, ``|t| < 2^53`` (asserted on the device: :func:`check_values`). Returns them, integer dtypes
    widened to int64."""
    check_shape(name, positions, length, batched=batched)
    return check_real(name, positions)  # type: ignore[arg-type]


def check_shape(name: str, positions: object, length: int, *, batched: bool = False) -> None:
    """Refuse explicit positions that are not a tensor ``[length]`` (or ``[b, length]`` when ``batched``)."""
    shapes = f"[{length}] or [b, {length}]" if batched else f"[{length}]"
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape {shapes}, got {type(positions).__name__}")
    if positions.dim() not in ((1, 2) if batched else (1,)) or positions.shape[-1] != length:
        raise ValueError(
            f"{name} must have shape {shapes} (one position per token), got {list(positions.shape)}"
        )


def check_real(name: str, positions: torch.Tensor, *, values: bool = True) -> torch.Tensor:
    """Validate the dtype of positions of any shape (an integer dtype, float32 or float64) and assert their
    values finite and ``|t| < 2^53`` on the device (:func:`check_values`). Returns them, integer dtypes
    widened to int64."""
    dtype = positions.dtype
    if dtype is torch.int64 or dtype in _EXACT_FLOATS:  # the common dtypes: nothing to refuse or widen
        if values and positions.numel():
            check_values(name, positions)
        return positions
    if positions.is_complex() or dtype == torch.bool:
        raise TypeError(f"{name} must hold real numbers, got dtype {positions.dtype}")
    if positions.is_floating_point():
        raise TypeError(
            f"{name} must be an integer dtype, float32 or float64, got {positions.dtype}: it cannot hold integer "
            "positions above 2048 (float16) / 256 (bfloat16) / 16 (float8), so they were rounded already; "
            "build them as int64"
        )
    if values and positions.numel():
        check_values(name, positions)
    return positions.long() if _narrow_integer(positions) else positions


def _narrow_integer(positions: torch.Tensor) -> bool:
    """Whether ``positions`` is an integer dtype other than int64 (widened before any arithmetic)."""
    return not positions.is_floating_point() and positions.dtype != torch.int64


def check_values(name: str, positions: torch.Tensor) -> None:
    """Assert on the device that every entry of ``positions`` is finite and ``|t| < 2^53``, in one reduction:
    ``max |t| < 2^53`` (:func:`torch.linalg.vector_norm` of order ∞; NaN propagates and fails it).

    Integer dtypes narrower than int64 cannot hold such values, so only int64, uint64 and floating
    positions are looked at, integers through float64 (exact below ``2^53``; larger values round to at least
    ``2^53``, and ``−2^63`` to ``2^63``: refused either way). The check reads no value on the host
    (``torch._assert_async``); on the CPU a failure is reported as a ``ValueError`` with the first bad value
    (read only once the check has failed)."""
    if positions.dtype in (torch.int64, torch.uint64):
        values = positions.double()
    elif positions.is_floating_point():
        values = positions
    else:
        return
    ok = torch.lt(torch.linalg.vector_norm(values, ord=math.inf), _LIMIT)  # a tensor: no scalar wrapped
    assert_on_device(ok, validate.position_limit_message(name), lambda: _first_bad(positions))


def _first_bad(positions: torch.Tensor) -> str:
    flat = positions.reshape(-1).double()
    bad = ~(flat.abs() < EXACT_LIMIT)
    if positions.is_floating_point():
        return repr(flat[bad][0].item())
    first = positions.reshape(-1)[bad][0]
    if positions.dtype == torch.uint64:  # int() refuses uint64 values >= 2^63: read the bits as int64
        return repr(int(first.view(torch.int64)) % 2**64)
    return repr(int(first))


def assert_on_device(ok: torch.Tensor, message: str, got: Callable[[], str] | None = None) -> None:
    """Refuse unless the boolean scalar ``ok`` is true, without reading it on the host.

    ``torch._assert_async``: on a GPU (and in compiled graphs) a device-side assertion (it fails the next
    synchronisation with ``message``); eagerly on the CPU it runs at once, and its failure becomes a ``ValueError(message, got: …)``."""
    try:
        torch._assert_async(ok, message)
    except RuntimeError:  # raised at once only eagerly on the CPU
        raise ValueError(message + ("" if got is None else f", got {got()}")) from None


def packed(cu_seqlens: object, total: int) -> torch.Tensor:
    """Positions ``[total]`` of sequences packed one after another (flash-attn's variable-length layout):
    token ``t`` of the sequence that starts at ``cu_seqlens[i]`` is at ``t − cu_seqlens[i]``.

    ``cu_seqlens`` ``[n + 1]`` int32/int64 holds the cumulative lengths: 0 first, nondecreasing (an empty
    sequence repeats a value), ``total`` last. Its type, dtype and shape are checked on the host; its values on
    the device (:func:`assert_on_device`), and each token's sequence is found there too (``searchsorted``),
    so no value is read on the host. Returns int64 positions on ``cu_seqlens``' device."""
    allowed = (
        f"a 1-D int32/int64 tensor [n + 1] of cumulative sequence lengths: 0 first, nondecreasing, "
        f"{total} (the packed length of q and k) last"
    )
    if not isinstance(cu_seqlens, torch.Tensor):
        raise TypeError(f"cu_seqlens must be {allowed}, got {type(cu_seqlens).__name__}")
    if cu_seqlens.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"cu_seqlens must be {allowed}, got dtype {cu_seqlens.dtype}")
    if cu_seqlens.dim() != 1 or cu_seqlens.numel() == 0:
        raise ValueError(f"cu_seqlens must be {allowed}, got shape {list(cu_seqlens.shape)}")
    ends = cu_seqlens.contiguous()
    ok = (ends[0] == 0) & (ends[-1] == total) & (ends[1:] >= ends[:-1]).all()
    assert_on_device(ok, f"cu_seqlens must be {allowed}", lambda: repr(ends.tolist()))
    index = torch.arange(total, dtype=ends.dtype, device=ends.device)
    starts = ends[torch.searchsorted(ends, index, right=True) - 1]  # the last end <= t: t's own sequence
    return (index - starts).long()


def default_starts(q_len: int, k_len: int, offset: object) -> tuple[int, int]:
    """``(first query position, first key position)`` of the end-aligned defaults after a checked ``offset``."""
    offset = check_offset(offset)
    start = query_start(q_len, k_len, offset)
    check_end(offset + k_len)
    return start, offset


def packed_positions(
    q_len: int,
    k_len: int,
    q_positions: object,
    k_positions: object,
    cu_seqlens: object,
    offset: object,
    device: torch.device,
) -> torch.Tensor:
    """The positions ``offset +`` index within its sequence of ``k_len`` tokens packed as ``cu_seqlens``
    says (:func:`packed`), for queries and keys alike; refused beside explicit positions or ``q_len ≠ k_len``."""
    if q_positions is not None or k_positions is not None:
        raise ValueError(
            "give cu_seqlens or q_positions/k_positions, not both: cu_seqlens sets the positions"
        )
    if q_len != k_len:
        raise ValueError(
            f"with cu_seqlens, q and k must hold the same packed tokens, got s_q={q_len} != s_k={k_len}"
        )
    offset = check_offset(offset)
    check_end(offset + k_len)
    positions = packed(cu_seqlens, k_len).to(device)
    return positions + offset if offset else positions


def batch_of(
    q_positions: torch.Tensor, k_positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor
) -> int | None:
    """The batch ``b > 1`` of ``[b, s]`` positions, ``q`` and ``k`` checked to be ``[b, h, s, d]`` for it;
    ``None`` where one row serves the batch."""
    batch = batch_size(q_positions, k_positions)
    if batch in (None, 1):
        return None
    for name, t in (("q", q), ("k", k)):
        if t.dim() != 4 or t.shape[0] != batch:
            raise ValueError(
                f"{name} must be [b={batch}, h, s, d_h] to match positions of shape [{batch}, s], got {list(t.shape)}"
            )
    return batch


def batch_size(q_positions: torch.Tensor, k_positions: torch.Tensor) -> int | None:
    """The batch of ``[b, s]`` positions (``None`` when both are ``[s]``); rows of 1 broadcast."""
    if q_positions.dim() == 1 and k_positions.dim() == 1:
        return None
    rows = {p.shape[0] for p in (q_positions, k_positions) if p.dim() == 2}
    if not rows:
        return None
    if len(rows - {1}) > 1:
        raise ValueError(
            f"q_positions and k_positions have different batch sizes {list(q_positions.shape)} and "
            f"{list(k_positions.shape)}"
        )
    return max(rows)


def resolve(
    q_len: int,
    k_len: int,
    *,
    q_positions: torch.Tensor | None,
    k_positions: torch.Tensor | None,
    offset: int,
    device: torch.device,
    values: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions ``([s_q], [s_k])`` of the queries and keys (``[b, s]`` rows when given so).

    Explicit positions win; when only one is given and ``s_q = s_k`` it serves both (self-attention), and
    one tensor given for both is checked once.
    Otherwise the defaults of the module docstring apply (int64 ranges on ``device``).
    ``values=False`` checks shapes and dtypes only; the caller then asserts the values
    (:func:`check_distinct_values`) unless a kernel asserts them itself.
    """
    offset = check_offset(offset)
    if q_positions is None and k_positions is not None and q_len == k_len:
        q_positions = k_positions
    if k_positions is None and q_positions is not None and q_len == k_len:
        k_positions = q_positions
    if (q_positions is None) != (k_positions is None):
        given = "q_positions" if k_positions is None else "k_positions"
        raise ValueError(
            f"{given} was given but not its partner and s_q={q_len} != s_k={k_len}; pass both q_positions and k_positions"
        )
    if q_positions is None:
        start, offset = default_starts(q_len, k_len, offset)
        return (
            torch.arange(start, start + q_len, device=device),
            torch.arange(offset, offset + k_len, device=device),
        )
    check_shape("q_positions", q_positions, q_len, batched=True)
    checked_q = check_real("q_positions", q_positions, values=values)
    if k_positions is q_positions and k_len == q_len:  # one tensor serves both: checked once
        return checked_q, checked_q
    check_shape("k_positions", k_positions, k_len, batched=True)
    return checked_q, check_real("k_positions", k_positions, values=values)  # type: ignore[arg-type]


def check_distinct_values(q_positions: torch.Tensor | None, k_positions: torch.Tensor | None) -> None:
    """:func:`check_values` of the positions given for the queries and the keys (as given, before
    :func:`resolve` widened them: an int32 tensor cannot hold a bad value); one given alone serves both, and
    one tensor given for both is checked once."""
    q_positions = k_positions if q_positions is None else q_positions
    k_positions = q_positions if k_positions is None else k_positions
    for name, positions in (("q_positions", q_positions), ("k_positions", k_positions)):
        if (
            positions is not None
            and positions.numel()
            and (name == "q_positions" or positions is not q_positions)
        ):
            check_values(name, positions)


def check_wrapping_values(q_positions: torch.Tensor | None, k_positions: torch.Tensor | None) -> None:
    """:func:`check_distinct_values` of given positions whose widening to int64 wraps (uint64: ``2^64 − 1``
    becomes ``−1``), for a caller whose kernel asserts the values of the widened positions itself."""
    if any(p is not None and p.dtype == torch.uint64 for p in (q_positions, k_positions)):
        check_distinct_values(q_positions, k_positions)


def relative_distances(
    q_len: int,
    k_len: int,
    *,
    q_positions: torch.Tensor | None = None,
    k_positions: torch.Tensor | None = None,
    offset: int = 0,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Key position minus query position, ``j − i`` (the sign of T5's ``relative_position``).

    ``[s_q, s_k]``, or ``[b, s_q, s_k]`` when either positions are ``[b, s]``.
    """
    qp, kp = resolve(
        q_len,
        k_len,
        q_positions=q_positions,
        k_positions=k_positions,
        offset=offset,
        device=torch.device("cpu") if device is None else torch.device(device),
    )
    batch = batch_size(qp, kp)
    kp = kp.to(qp.device)
    if batch is None:
        return kp[None, :] - qp[:, None]
    return kp.expand(batch, k_len)[:, None, :] - qp.expand(batch, q_len)[:, :, None]
