"""Encoder forward+backward time with every registered encoding, as a ratio to ``none``.

    OMP_NUM_THREADS=1 python benchmarks/bench_encoder.py [--rounds 5] [--threads 1,2]

``TransformerEncoder(d=128, 4 heads, 2 layers)`` on ``(B=32, S=128)`` float32, CPU, bidirectional,
no masks; one step = ``zero_grad``, forward, ``sum().backward()``. Measuring rules (pinned heap,
interleaved rounds, CPU time, load): :mod:`_harness`; the floor is the ``none`` encoding, so
``÷floor`` is each encoding's step time over ``none``'s (1.10 = 10 % slower). Shaw is measured
twice: as installed, and with posenc's compiled loops switched off (``torch.gather`` and
``scatter_add`` for its slots).
"""

from __future__ import annotations

from collections.abc import Callable

import _harness  # pins the heap at import
import torch

from posenc.nn import TransformerEncoder, available_encodings

B, S, D, HEADS, LAYERS = 32, 128, 128, 4, 2


def main() -> None:
    args = _harness.arguments(__doc__, rounds=5).parse_args()
    print(_harness.environment())
    print(f"B={B} S={S} d={D} heads={HEADS} layers={LAYERS}")
    torch.manual_seed(0)
    x = torch.randn(B, S, D)
    configs: dict[str, tuple[str, dict | None]] = {name: (name, None) for name in available_encodings()}
    configs["shaw (on_values=True)"] = ("shaw", {"on_values": True})
    models = {
        label: TransformerEncoder(D, HEADS, LAYERS, encoding=name, encoding_options=opts, max_len=S)
        for label, (name, opts) in configs.items()
    }
    # T5 with its bias frozen: what a learned mask costs scaled_dot_product_attention (it must return
    # the mask's gradient, so it leaves its fused kernel)
    models["t5 (bias frozen)"] = TransformerEncoder(D, HEADS, LAYERS, encoding="t5", max_len=S)
    models["t5 (bias frozen)"].encoding.requires_grad_(False)

    def step(model: TransformerEncoder) -> None:
        model.zero_grad(set_to_none=True)
        model(x).sum().backward()

    cases: dict[str, Callable[[], object]] = {
        label: (lambda m=model: step(m)) for label, model in models.items()
    }
    for label in ("shaw", "shaw (on_values=True)"):  # its slot gather and sum without the compiled loop
        cases[f"  {label}, pure torch"] = _harness.without_native(cases[label])
    for threads in _harness.thread_counts(args.threads):
        torch.set_num_threads(threads)
        block = _harness.measure(
            cases, "none", rounds=args.rounds, max_load=args.max_load, attempts=args.attempts
        )
        tokens = {label: f"{B * S / r.wall:10.0f}" for label, r in block.results.items()}
        _harness.report(
            f"encoder forward+backward, {torch.get_num_threads()} thread(s); floor = none",
            block,
            rounds=args.rounds,
            extra=tokens,
            extra_header="tokens/s (wall)",
        )


if __name__ == "__main__":
    main()
