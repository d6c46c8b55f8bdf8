"""What the rotary tables cost per call beside the rotation: the module's own tables, tables given to
``apply_rotary``, and the per-pair tables the fast paths derive from given tables at every call.

    OMP_NUM_THREADS=1 python benchmarks/bench_rotary_tables.py [--rounds 15] [--public-only]

Shapes decode ``(1, 32, 1, 128)`` (offset 100: one new token) and prefill ``(1, 32, 2048, 128)``, float32
and bfloat16, both pair layouts, one thread, CPU. Each row rotates ``q`` and ``k``; a decode case runs
200 calls per timing (µs per call in the last column). Measuring rules (pinned heap, interleaved rounds,
CPU time, load): :mod:`_harness`. Rows:

* ``RotaryEmbedding`` forward with default positions (its cached tables and the per-pair values it keeps
  beside them), and with explicit ``[1, s]`` positions (tables formed for the call);
* :func:`posenc.nn.apply_rotary` on tables from ``cos_sin`` (cloned: tables a caller owns), which finds
  their per-pair values (both columns of every pair equal?) and derives the loop's tables from them;
* that work alone, found afresh at every call and as kept between calls (posenc's private helpers;
  ``--public-only`` leaves them out, so that the same script measures an older tree put first on
  ``PYTHONPATH``).
"""

from __future__ import annotations

from collections.abc import Callable

import _harness  # pins the heap at import
import torch

from posenc.nn import RotaryEmbedding, apply_rotary

SHAPES = ((1, 32, 1, 128), (1, 32, 2048, 128))
DTYPES = (torch.float32, torch.bfloat16)
LAYOUTS = ("half_split", "adjacent")
FLOOR = "floor q.clone(), k.clone()"
DECODE_CALLS = 200


def derivation(
    cos: torch.Tensor, sin: torch.Tensor, layout: str, x: torch.Tensor, *, kept: bool
) -> Callable[[], object]:
    """What :func:`apply_rotary` makes of given tables before the CPU loop runs, for ``q`` and ``k``: their
    per-pair values found by reading them (``kept``: looked up among those found before) and the loop's
    tables derived from them."""
    from posenc.backends import rotate as rotation

    work = torch.bfloat16 if x.dtype == cos.dtype == torch.bfloat16 else torch.float32

    def find() -> rotation.Pairs | None:
        if kept:
            return rotation.given_pairs(cos, sin, layout)
        return rotation.pair_values(cos, sin, layout)

    def derive() -> object:
        for _ in range(2):
            rotation._kernel_tables(rotation.Rotation(x, cos, sin, layout, False, find()), work)
        return None

    return derive


def cases(
    shape: tuple[int, ...], dtype: torch.dtype, layout: str, public_only: bool
) -> dict[str, Callable[[], object]]:
    q, k = torch.randn(shape).to(dtype), torch.randn(shape).to(dtype)
    s = shape[-2]
    offset = 100 if s == 1 else 0
    rope = RotaryEmbedding(shape[-1], layout=layout, max_len=4096)
    positions = (torch.arange(s) + offset)[None]
    cos, sin = (t.clone() for t in rope.cos_sin(s, offset=offset, dtype=dtype))
    rows: dict[str, Callable[[], object]] = {
        FLOOR: lambda: (q.clone(), k.clone()),
        "RotaryEmbedding, default positions": lambda: rope(q, k, offset=offset),
        "RotaryEmbedding, [1, s] positions": lambda: rope(q, k, q_positions=positions),
        "apply_rotary, tables given": lambda: (
            apply_rotary(q, cos, sin, layout=layout),
            apply_rotary(k, cos, sin, layout=layout),
        ),
    }
    if not public_only:
        rows["  its tables' derivation, found afresh"] = derivation(cos, sin, layout, q, kept=False)
        rows["  its tables' derivation, as kept"] = derivation(cos, sin, layout, q, kept=True)
    calls = DECODE_CALLS if s == 1 else 1
    if calls == 1:
        return rows
    return {name: (lambda fn=fn: [fn() for _ in range(calls)]) for name, fn in rows.items()}


def main() -> None:
    parser = _harness.arguments(__doc__, rounds=15)
    parser.add_argument("--public-only", action="store_true", help="leave out the row of private helpers")
    args = parser.parse_args()
    print(_harness.environment())
    torch.manual_seed(0)
    torch.set_num_threads(1)
    for shape in SHAPES:
        calls = DECODE_CALLS if shape[-2] == 1 else 1
        for dtype in DTYPES:
            for layout in LAYOUTS:
                block = _harness.measure(
                    cases(shape, dtype, layout, args.public_only),
                    FLOOR,
                    rounds=args.rounds,
                    max_load=args.max_load,
                    attempts=args.attempts,
                )
                per_call = {name: f"{r.cpu / calls * 1e6:9.1f}" for name, r in block.results.items()}
                _harness.report(
                    f"{shape} {str(dtype).removeprefix('torch.')} {layout}, {calls} call(s) per timing",
                    block,
                    rounds=args.rounds,
                    extra=per_call,
                    extra_header="CPU µs/call",
                )


if __name__ == "__main__":
    main()
