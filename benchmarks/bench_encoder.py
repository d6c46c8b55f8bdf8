"""Encoder forward+backward time with every registered encoding, as a ratio to ``none``.

    OMP_NUM_THREADS=1 python benchmarks/bench_encoder.py [--rounds 5] [--threads 1,2] [--encodings t5,shaw]
    python benchmarks/bench_encoder.py --device cuda --threads 1      # the GPU rows (targets below)

CPU: ``TransformerEncoder(d=128, 4 heads, 2 layers)`` on ``(B=32, S=128)`` float32, bidirectional, no masks.
CUDA: ``TransformerEncoder(512, 8 heads, 4 layers)`` on ``(16, 1024)`` under bfloat16 autocast, causal (the
issue's targets, ÷ ``none``: T5 ≤ 1.25, Shaw keys ≤ 1.5, Shaw with values ≤ 2, peak memory ≤ 1.3).
One step = ``zero_grad``, forward, ``sum().backward()``. Measuring rules (pinned heap, interleaved rounds,
CPU time, load): :mod:`_harness`; the floor is the ``none`` encoding, so ``÷floor`` is each encoding's step
time over ``none``'s (1.10 = 10 % slower). Columns: tokens/s; the attention backend that served the call
(:mod:`posenc.backends.scores`); memory: on CUDA the peak allocated in a step, on the CPU the bytes saved
for the backward (distinct storages; the activations a step holds at its peak). Shaw is measured again
with posenc's compiled loops switched off (CPU), and T5 and Shaw again without the FlexAttention backend
(CUDA: SDPA with the dense ``[b, h, s, s]`` mask, the form it replaces).
"""

from __future__ import annotations

from collections.abc import Callable

import _harness  # pins the heap at import
import torch

from posenc.backends import Backend, scores
from posenc.nn import TransformerEncoder, available_encodings

SIZES = {"cpu": (32, 128, 128, 4, 2), "cuda": (16, 1024, 512, 8, 4)}  # B, S, d, heads, layers


def without_flex(fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` with the FlexAttention backend out of the score-term table (the next one serves)."""

    def dense() -> object:
        saved = scores.BACKENDS
        scores.BACKENDS = tuple(b for b in saved if b.name != "flex")
        try:
            return fn()
        finally:
            scores.BACKENDS = saved

    return dense


def backend_of(step: Callable[[], object]) -> str:
    """The attention backend(s) one call of ``step`` used."""
    names: list[str] = []
    original = scores.choose

    def choose(call: scores.ScoreCall) -> Backend[scores.ScoreCall]:
        backend = original(call)
        names.append(backend.name)
        return backend

    scores.choose = choose
    try:
        step()
    finally:
        scores.choose = original
    return "/".join(sorted(set(names))) or "-"


def memory_mib(step: Callable[[], object], device: str) -> float:
    """CUDA: peak allocated MiB in one ``step``; CPU: MiB of distinct storages saved for the backward."""
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2**20
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step()
    return sum(seen.values()) / 2**20


def main() -> None:
    parser = _harness.arguments(__doc__, rounds=5)
    parser.add_argument(
        "--encodings", default="", help="comma-separated encodings (default: all, and variants)"
    )
    parser.add_argument("--device", default="cpu", choices=sorted(SIZES))
    args = parser.parse_args()
    device = args.device
    b, s, d, heads, layers = SIZES[device]
    print(_harness.environment())
    print(f"device {device}: B={b} S={s} d={d} heads={heads} layers={layers}")
    torch.manual_seed(0)
    x = torch.randn(b, s, d, device=device)
    configs: dict[str, tuple[str, dict | None]] = {name: (name, None) for name in available_encodings()}
    configs["shaw (on_values=True)"] = ("shaw", {"on_values": True})
    wanted = {e.strip() for e in args.encodings.split(",") if e.strip()}
    if wanted:
        configs = {k: v for k, v in configs.items() if k == "none" or v[0] in wanted or k in wanted}
    models = {
        label: TransformerEncoder(d, heads, layers, encoding=name, encoding_options=opts, max_len=s).to(
            device
        )
        for label, (name, opts) in configs.items()
    }
    if "t5" in models:
        # T5 with its bias frozen: a mask without a gradient (SDPA keeps its fused kernel)
        models["t5 (bias frozen)"] = TransformerEncoder(d, heads, layers, encoding="t5", max_len=s).to(device)
        models["t5 (bias frozen)"].encoding.requires_grad_(False)

    def step(model: TransformerEncoder) -> None:
        model.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
            out = model(x, causal=device == "cuda")
        out.float().sum().backward()
        if device == "cuda":
            torch.cuda.synchronize()

    cases: dict[str, Callable[[], object]] = {
        label: (lambda m=model: step(m)) for label, model in models.items()
    }
    # on the CPU Shaw's slot gather and sum without the compiled loop; on CUDA T5 and Shaw's key term
    # without FlexAttention (Shaw's values need the weights: never FlexAttention)
    variants = ("shaw", "shaw (on_values=True)") if device == "cpu" else ("t5", "shaw")
    for label in (v for v in variants if v in cases):
        wrap = _harness.without_native if device == "cpu" else without_flex
        cases[f"  {label}, {'pure torch' if device == 'cpu' else 'without FlexAttention'}"] = wrap(
            cases[label]
        )
    for threads in _harness.thread_counts(args.threads):
        torch.set_num_threads(threads)
        block = _harness.measure(
            cases, "none", rounds=args.rounds, max_load=args.max_load, attempts=args.attempts
        )
        none_mib = memory_mib(cases["none"], device)
        extra = {}
        for label, r in block.results.items():
            mib = memory_mib(cases[label], device)
            extra[label] = (
                f"{b * s / r.wall:10.0f}  {backend_of(cases[label]):>13s}"
                f"  {mib:9.1f} MiB ({mib / none_mib:4.2f}× none)"
            )
        _harness.report(
            f"encoder forward+backward on {device}, {torch.get_num_threads()} thread(s); floor = none",
            block,
            rounds=args.rounds,
            extra=extra,
            extra_header="tokens/s (wall)  backend        memory",
        )


if __name__ == "__main__":
    main()
