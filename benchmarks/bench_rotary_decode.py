"""One decoding step of ``RotaryEmbedding``: tensor positions against an int ``offset``, side by side.

    OMP_NUM_THREADS=1 python benchmarks/bench_rotary_decode.py [--rounds 15]

``q (b, 32, 1, 128)``, ``k (b, 8, 1, 128)`` (grouped-query attention), float32 and bfloat16, both pair
layouts, one thread, CPU; ``b = 1`` and ``b = 4``. Rows: the module with ``offset=100``; with
``q_positions`` ``[b, 1]`` int64 (a serving loop's ``position_ids``; they serve the keys too); the
copy ``q.clone(), k.clone()``. 200 calls per timing; the ratio columns are the within-round ratios
to the ``offset=`` row, the last CPU µs per call. Measuring rules (pinned heap, interleaved rounds, CPU
time, load): :mod:`_harness`. Public API only, so that the same script measures an older tree put first
on ``PYTHONPATH``.
"""

from __future__ import annotations

from collections.abc import Callable

import _harness  # pins the heap at import
import torch

from posenc.nn import RotaryEmbedding

FLOOR = "floor q.clone(), k.clone()"
OFFSET = "offset=100"
CALLS = 200


def cases(batch: int, dtype: torch.dtype, layout: str) -> dict[str, Callable[[], object]]:
    q, k = torch.randn(batch, 32, 1, 128).to(dtype), torch.randn(batch, 8, 1, 128).to(dtype)
    rope = RotaryEmbedding(128, layout=layout, max_len=4096)
    positions = torch.full((batch, 1), 100, dtype=torch.int64)
    rows: dict[str, Callable[[], object]] = {
        FLOOR: lambda: (q.clone(), k.clone()),
        OFFSET: lambda: rope(q, k, offset=100),
        f"q_positions [{batch}, 1] int64": lambda: rope(q, k, q_positions=positions),
    }
    return {name: (lambda fn=fn: [fn() for _ in range(CALLS)]) for name, fn in rows.items()}


def main() -> None:
    parser = _harness.arguments(__doc__, rounds=15)
    args = parser.parse_args()
    print(_harness.environment())
    torch.manual_seed(0)
    torch.set_num_threads(1)
    for batch in (1, 4):
        for dtype in (torch.float32, torch.bfloat16):
            for layout in ("half_split", "adjacent"):
                block = _harness.measure(  # the offset= row is the floor: the ratios are to it
                    cases(batch, dtype, layout), OFFSET, rounds=args.rounds, max_load=args.max_load,
                    attempts=args.attempts,
                )  # fmt: skip
                per_call = {name: f"{r.cpu / CALLS * 1e6:9.1f}" for name, r in block.results.items()}
                _harness.report(
                    f"decode b={batch} {str(dtype).removeprefix('torch.')} {layout}, {CALLS} calls per timing "
                    "(÷floor: ÷ the offset= row)",
                    block, rounds=args.rounds, extra=per_call, extra_header="CPU µs/call",
                )  # fmt: skip


if __name__ == "__main__":
    main()
