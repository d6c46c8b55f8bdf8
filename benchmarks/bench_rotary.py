"""Rotary embedding on queries and keys, as ratios to the floor ``q.clone(), k.clone()``, beside peers.

    OMP_NUM_THREADS=1 python benchmarks/bench_rotary.py [--rounds 9] [--threads 1,2] [--no-compile]

Shapes ``(8, 8, 2048, 64)`` and ``(1, 8, 16384, 64)`` (a long sequence), float32 and bfloat16, CPU.
Measuring rules (pinned heap, interleaved rounds, CPU time, load): :mod:`_harness`. The cos/sin
tables are built once, outside the timing, as a model caches them.

Forward rows (each rotates ``q`` and ``k``): :func:`posenc.nn.apply_rotary` in both layouts, each
beside the same call with posenc's compiled loops switched off (its pure PyTorch code); the
complex-multiply formulation (Meta's LLaMA ``apply_rotary_emb``: ``view_as_complex`` of float32
pairs, bf16 upcast first); Hugging Face LLaMA ``apply_rotary_pos_emb`` (half_split);
``rotary-embedding-torch`` ``rotate_queries_or_keys`` and ``x-transformers``
``apply_rotary_pos_emb`` (adjacent pairs; x-transformers takes the angles and forms cos/sin per
call, its API); and posenc under ``torch.compile`` (inductor; compile time excluded).

A compiled region has a fixed cost per call (guards, wrappers) that grows when the call before it
has flushed the caches. To tell that cost from posenc's, the floor's own copy also runs as an
opaque operator (``posenc_bench::copy``, ``torch.clone`` behind the dispatcher, identity backward),
eagerly and inside a compiled region: the last column divides each posenc row by that operator in
the same mode, so an eager and a compiled row compare like for like. (``q.clone()`` itself under
``torch.compile`` would not do: inductor replaces it with its own copy loop, another kernel.)
fwd+bwd rows: the same forward, then ``backward`` with fixed output gradients (same floor).
"""

from __future__ import annotations

from collections.abc import Callable

import _harness  # pins the heap at import
import torch

from posenc.nn import RotaryEmbedding, apply_rotary

SHAPES = ((8, 8, 2048, 64), (1, 8, 16384, 64))
DTYPES = (torch.float32, torch.bfloat16)
FLOOR = "floor q.clone(), k.clone()"
OPAQUE_FLOOR = "the floor's copy as an opaque operator"
COMPILED_OPAQUE_FLOOR = "  the same under torch.compile"
HEADER = "÷opaque copy, same mode (CPU)"

_LIBRARY = torch.library.Library("posenc_bench", "DEF")
_LIBRARY.define("copy(Tensor x) -> Tensor")
_LIBRARY.impl("copy", torch.clone, "CompositeExplicitAutograd")
torch.library.register_fake("posenc_bench::copy")(torch.empty_like)
torch.library.register_autograd("posenc_bench::copy", lambda ctx, grad: grad)


def opaque_copy(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The floor's copy through the dispatcher, which ``torch.compile`` keeps as one opaque call."""
    return torch.ops.posenc_bench.copy(q), torch.ops.posenc_bench.copy(k)


def complex_rotary(freqs_cis: torch.Tensor) -> Callable[[torch.Tensor, torch.Tensor], tuple]:
    """Meta LLaMA's ``apply_rotary_emb``: pairs as complex numbers (float32), cast back."""

    def rotate(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q_ = torch.view_as_complex(q.float().reshape(*q.shape[:-1], -1, 2))
        k_ = torch.view_as_complex(k.float().reshape(*k.shape[:-1], -1, 2))
        return (
            torch.view_as_real(q_ * freqs_cis).flatten(3).type_as(q),
            torch.view_as_real(k_ * freqs_cis).flatten(3).type_as(k),
        )

    return rotate


def rotations(shape: tuple[int, ...], dtype: torch.dtype, compile_: bool) -> dict[str, Callable]:
    """``name -> f(q, k) -> (q_rot, k_rot)`` for posenc and the installed peers."""
    s, d = shape[-2], shape[-1]
    fns: dict[str, Callable] = {}
    for layout in ("half_split", "adjacent"):
        cos, sin = RotaryEmbedding(d, layout=layout, max_len=s).cos_sin(s, dtype=dtype)
        fns[f"posenc apply_rotary {layout}"] = lambda q, k, c=cos, n=sin, lay=layout: (
            apply_rotary(q, c, n, layout=lay),
            apply_rotary(k, c, n, layout=lay),
        )
        fns[f"  {layout}, pure torch (no compiled loop)"] = _harness.without_native(
            fns[f"posenc apply_rotary {layout}"]
        )
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.outer(torch.arange(s, dtype=torch.float64), theta)
    fns["complex multiply (Meta LLaMA)"] = complex_rotary(
        torch.polar(torch.ones_like(angles), angles).to(torch.complex64)
    )
    llama = _harness.import_peer("transformers.models.llama.modeling_llama", "test")
    if llama is not None:
        cos, sin = RotaryEmbedding(d, layout="half_split", max_len=s).cos_sin(s, dtype=dtype)
        fns["HF LLaMA apply_rotary_pos_emb (half_split)"] = lambda q, k, c=cos[None], n=sin[None]: (
            llama.apply_rotary_pos_emb(q, k, c, n)
        )
    ret = _harness.import_peer("rotary_embedding_torch", "peers")
    if ret is not None:
        lucid = ret.RotaryEmbedding(dim=d)
        lucid.rotate_queries_or_keys(torch.zeros(1, 1, s, d, dtype=dtype))  # fill its cache
        fns["rotary-embedding-torch (adjacent)"] = lambda q, k: (
            lucid.rotate_queries_or_keys(q),
            lucid.rotate_queries_or_keys(k),
        )
    xt = _harness.import_peer("x_transformers.x_transformers", "peers")
    if xt is not None:
        freqs = torch.repeat_interleave(angles.float(), 2, dim=-1)[None]  # [1, s, d], adjacent pairs
        fns["x-transformers apply_rotary_pos_emb (adjacent)"] = lambda q, k: (
            xt.apply_rotary_pos_emb(q, freqs),
            xt.apply_rotary_pos_emb(k, freqs),
        )
    fns[OPAQUE_FLOOR] = opaque_copy
    if compile_:
        torch._dynamo.config.recompile_limit = 64  # every shape, dtype and grad mode gets its own graph
        for layout in ("half_split", "adjacent"):
            eager = fns[f"posenc apply_rotary {layout}"]
            fns[f"posenc {layout} under torch.compile"] = torch.compile(eager, dynamic=False)
        fns[COMPILED_OPAQUE_FLOOR] = torch.compile(opaque_copy, dynamic=False)
    return fns


def same_mode_ratios(block: _harness.Block) -> dict[str, str]:
    """posenc's rows ÷ the opaque copy in the same mode (CPU medians): eager rows ÷ the eager operator,
    compiled rows ÷ the compiled one."""
    out = {}
    for name, result in block.results.items():
        if name.startswith("posenc"):
            floor = COMPILED_OPAQUE_FLOOR if "torch.compile" in name else OPAQUE_FLOOR
            if floor in block.results:
                out[name] = f"{result.cpu / block.results[floor].cpu:.2f}"
    return out


def forward_backward(
    fn: Callable, q: torch.Tensor, k: torch.Tensor, gq: torch.Tensor, gk: torch.Tensor
) -> None:
    q.grad = k.grad = None
    out_q, out_k = fn(q, k)
    torch.autograd.backward([out_q, out_k], [gq, gk])


def run(shape: tuple[int, ...], dtype: torch.dtype, args) -> None:
    """Forward and forward+backward blocks for one shape and dtype, at each thread count."""
    q, k = torch.randn(shape).to(dtype), torch.randn(shape).to(dtype)
    gq, gk = torch.randn(shape).to(dtype), torch.randn(shape).to(dtype)
    qg, kg = q.clone().requires_grad_(), k.clone().requires_grad_()
    fns = rotations(shape, dtype, compile_=not args.no_compile)
    for threads in _harness.thread_counts(args.threads):
        torch.set_num_threads(threads)
        label = f"{tuple(shape)} {str(dtype).removeprefix('torch.')}, {torch.get_num_threads()} thread(s)"
        cases: dict[str, Callable[[], object]] = {FLOOR: lambda: (q.clone(), k.clone())}
        cases.update({name: (lambda f=fn: f(q, k)) for name, fn in fns.items()})
        block = _harness.measure(
            cases, FLOOR, rounds=args.rounds, max_load=args.max_load, attempts=args.attempts
        )
        _harness.report(
            f"forward {label}", block, rounds=args.rounds, extra=same_mode_ratios(block), extra_header=HEADER
        )
        cases = {FLOOR: lambda: (q.clone(), k.clone())}
        cases.update(
            {
                name: (lambda f=fn: forward_backward(f, qg, kg, gq, gk))
                for name, fn in fns.items()
                if "x-transformers" not in name and "rotary-embedding-torch" not in name
            }
        )
        block = _harness.measure(
            cases, FLOOR, rounds=args.rounds, max_load=args.max_load, attempts=args.attempts
        )
        _harness.report(
            f"forward+backward {label}",
            block,
            rounds=args.rounds,
            extra=same_mode_ratios(block),
            extra_header=HEADER,
        )
    torch.set_num_threads(1)


def main() -> None:
    parser = _harness.arguments(__doc__, rounds=9)
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile rows")
    parser.add_argument(
        "--shapes",
        default="all",
        choices=["all", "short", "long"],
        help="(8,8,2048,64), (1,8,16384,64) or both (default)",
    )
    args = parser.parse_args()
    print(_harness.environment())
    torch.manual_seed(0)
    shapes = {"all": SHAPES, "short": SHAPES[:1], "long": SHAPES[1:]}[args.shapes]
    for shape in shapes:
        for dtype in DTYPES:
            run(shape, dtype, args)


if __name__ == "__main__":
    main()
