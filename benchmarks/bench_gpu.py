"""Rotary and sinusoidal tables on a CUDA GPU, as fractions of the memory bandwidth a copy reaches.

    python benchmarks/bench_gpu.py [--rounds 15]

Times are CUDA-event medians over interleaved rounds (each round runs every case once, ``--reps``
calls back to back, input sets rotated so no case reads what the one before left in L2). The
bandwidth a case reaches is the bytes it must move (rotary: read ``q``, ``k``, write both; tables:
write the output) over its time; the yardstick is a large device-to-device copy (bytes read plus
written), measured in the same run. The floor of each block is the copy of the same bytes
(``q.clone(), k.clone()``; for tables, a ``fill_`` of the output).

Rotary rows: :func:`posenc.nn.apply_rotary` (posenc's Triton kernel) and the same call with the kernel
switched off (posenc's pure PyTorch code); Meta LLaMA's complex multiply; Hugging Face's
``rotate_half`` formula; posenc under ``torch.compile``, and inductor's own fused kernel for the real
expression (``torch.compile`` of the pair formula). fwd+bwd rows add ``backward`` with fixed output
gradients (twice the bytes). Table rows: ``SinusoidalEncoding.table`` (Triton kernel, and the pure
PyTorch shift identity), the tutorial formula (float32 angles, inexact far out) and every angle
formed in float64 by ``torch.outer``/``sin``/``cos`` then cast; the error column is the largest error
over 2048 rows below position 10^7 against float64 NumPy.
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Callable

import numpy as np
import torch

from posenc import _gpu
from posenc.nn import RotaryEmbedding, SinusoidalEncoding, apply_rotary
from posenc.nn import rotary as rotary_module

ROTARY_SHAPES = ((8, 8, 2048, 64), (1, 8, 16384, 64), (4, 32, 4096, 128))
TABLE_SHAPES = ((2048, 512), (16384, 1024), (65536, 2048))
SETS = 3
"""Input sets each case cycles through (each ≥ 32 MiB, so three exceed the 50–60 MB L2)."""


def without_gpu_kernels(fn: Callable[..., object]) -> Callable[..., object]:
    """``fn`` with posenc's GPU kernels switched off (its pure PyTorch code), in the same process."""

    def pure(*args: object, **kwargs: object) -> object:
        saved = _gpu.kernels
        _gpu.kernels = lambda device_type, dtype: None  # type: ignore[assignment]
        try:
            return fn(*args, **kwargs)
        finally:
            _gpu.kernels = saved  # type: ignore[assignment]

    return pure


def time_cases(cases: dict[str, Callable[[int], object]], *, rounds: int, reps: int) -> dict[str, float]:
    """Median milliseconds per call of each ``case(set_index)``, over interleaved rounds."""
    for fn in cases.values():  # warm-up: compilation, caches, autotuning
        for i in range(SETS):
            fn(i)
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for rnd in range(rounds):
        order = names[rnd % len(names) :] + names[: rnd % len(names)]
        for name in order:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for rep in range(reps):
                cases[name](rep % SETS)
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) / reps)
    return {name: statistics.median(t) for name, t in times.items()}


def copy_bandwidth(rounds: int) -> float:
    """Bytes/s (read + written) of a 2 GiB device-to-device copy."""
    src = torch.randn(2**28, device="cuda")  # 1 GiB
    dst = torch.empty_like(src)
    ms = time_cases({"copy": lambda i: dst.copy_(src)}, rounds=rounds, reps=5)["copy"]
    return 2 * src.nbytes / (ms * 1e-3)


def print_block(title: str, ms: dict[str, float], nbytes: dict[str, float], floor: str, peak: float) -> None:
    print(f"\n{title}")
    print("| case | ms | GB/s | of copy bandwidth | ÷ floor |\n|---|---|---|---|---|")
    for name, t in ms.items():
        rate = nbytes[name] / (t * 1e-3)
        print(f"| {name} | {t:.4f} | {rate / 1e9:.0f} | {rate / peak:.0%} | {t / ms[floor]:.2f} |")


def rotary_cases(shape: tuple[int, ...], dtype: torch.dtype) -> tuple[dict, dict, dict]:
    """Forward and fwd+bwd cases on ``SETS`` fresh ``(q, k)`` pairs; and the bytes each moves."""
    s, d = shape[-2], shape[-1]
    qs = [torch.randn(shape, device="cuda", dtype=dtype) for _ in range(SETS)]
    ks = [torch.randn(shape, device="cuda", dtype=dtype) for _ in range(SETS)]
    grads = torch.randn(shape, device="cuda", dtype=dtype)
    fwd: dict[str, Callable[[int], object]] = {
        "floor q.clone(), k.clone()": lambda i: (qs[i].clone(), ks[i].clone())
    }
    for layout in ("half_split", "adjacent"):
        cos, sin = RotaryEmbedding(d, layout=layout, max_len=s).cos_sin(s, dtype=dtype, device="cuda")

        def rotate(q, k, c=cos, n=sin, lay=layout):
            return apply_rotary(q, c, n, layout=lay), apply_rotary(k, c, n, layout=lay)

        fwd[f"posenc {layout}"] = lambda i, f=rotate: f(qs[i], ks[i])
        pure = without_gpu_kernels(rotate)
        fwd[f"  {layout}, pure torch"] = lambda i, f=pure: f(qs[i], ks[i])
        compiled = torch.compile(rotate)
        fwd[f"  {layout}, torch.compile(posenc)"] = lambda i, f=compiled: f(qs[i], ks[i])

        def expression(q, k, c=cos, n=sin, lay=layout):
            return (
                rotary_module._rotation_expr(q, c, n, lay, False),
                rotary_module._rotation_expr(k, c, n, lay, False),
            )

        inductor = torch.compile(expression)
        fwd[f"  {layout}, inductor's kernel for the pair formula"] = lambda i, f=inductor: f(qs[i], ks[i])
    cos, sin = RotaryEmbedding(d, layout="half_split", max_len=s).cos_sin(s, dtype=dtype, device="cuda")

    def hf(q, k):
        def rotate_half(x):
            return torch.cat((-x[..., d // 2 :], x[..., : d // 2]), dim=-1)

        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    fwd["Hugging Face rotate_half (half_split)"] = lambda i: hf(qs[i], ks[i])
    freqs = torch.polar(torch.ones(s, d // 2, device="cuda"), torch.outer(
        torch.arange(s, device="cuda", dtype=torch.float32),
        10000.0 ** (-torch.arange(0, d, 2, device="cuda", dtype=torch.float32) / d),
    ))  # fmt: skip

    def complex_rotate(q, k):
        q_ = torch.view_as_complex(q.float().reshape(*q.shape[:-1], -1, 2))
        k_ = torch.view_as_complex(k.float().reshape(*k.shape[:-1], -1, 2))
        return (
            torch.view_as_real(q_ * freqs).flatten(3).type_as(q),
            torch.view_as_real(k_ * freqs).flatten(3).type_as(k),
        )

    fwd["complex multiply (Meta LLaMA, adjacent)"] = lambda i: complex_rotate(qs[i], ks[i])

    leaves = [(q.clone().requires_grad_(), k.clone().requires_grad_()) for q, k in zip(qs, ks)]

    def backward_of(fn):
        def run(i):
            q, k = leaves[i]
            out_q, out_k = fn(q, k)
            torch.autograd.backward((out_q, out_k), (grads, grads))
            q.grad = k.grad = None

        return run

    def copy_pair(q, k):
        return q.clone(), k.clone()

    def posenc_pair(q, k):
        return apply_rotary(q, cos, sin, layout="half_split"), apply_rotary(k, cos, sin, layout="half_split")

    both = {
        "floor q.clone(), k.clone()": backward_of(copy_pair),
        "posenc half_split": backward_of(posenc_pair),
        "  half_split, pure torch": without_gpu_kernels(backward_of(posenc_pair)),
        "Hugging Face rotate_half (half_split)": backward_of(hf),
        "complex multiply (Meta LLaMA, adjacent)": backward_of(complex_rotate),
    }
    nbytes = 4 * qs[0].nbytes  # read q, k; write both
    return fwd, both, {"fwd": nbytes, "both": 2 * nbytes}


def table_error(table: Callable[[int, int], torch.Tensor], dim: int) -> str:
    far, rows = 10**7, 2048
    w = 10000.0 ** (-2.0 * np.arange(dim // 2) / dim)
    a = np.multiply.outer(np.arange(far - rows, far, dtype=np.float64), w)
    ref = np.stack([np.sin(a), np.cos(a)], axis=2).reshape(rows, dim)
    got = table(rows, far - rows).double().cpu().numpy()
    return f"{np.abs(got - ref).max():.2e}"


def table_cases(length: int, dim: int) -> tuple[dict[str, Callable[[int, int], torch.Tensor]], torch.Tensor]:
    encoding = SinusoidalEncoding(dim).cuda()

    def posenc_table(n: int, start: int = 0) -> torch.Tensor:
        if start:
            return encoding(torch.zeros(1, n, dim, device="cuda"), offset=start)[0]
        return encoding.table(n, dtype=torch.float32, device="cuda")

    w32 = torch.exp(torch.arange(0, dim, 2, device="cuda", dtype=torch.float32) * (-math.log(10000.0) / dim))
    w64 = 10000.0 ** (-torch.arange(0, dim, 2, device="cuda", dtype=torch.float64) / dim)

    def tutorial(n: int, start: int = 0) -> torch.Tensor:
        pe = torch.zeros(n, dim, device="cuda")
        position = torch.arange(start, start + n, device="cuda", dtype=torch.float32).unsqueeze(1)
        pe[:, 0::2] = torch.sin(position * w32)
        pe[:, 1::2] = torch.cos(position * w32)
        return pe

    def float64_angles(n: int, start: int = 0) -> torch.Tensor:
        a = torch.outer(torch.arange(start, start + n, device="cuda", dtype=torch.float64), w64)
        return torch.stack([torch.sin(a), torch.cos(a)], dim=-1).view(n, dim).float()

    out = torch.empty(length, dim, device="cuda")
    return {
        "floor: fill_ of the output": lambda n, start=0: out.fill_(1.0),
        "posenc SinusoidalEncoding.table": posenc_table,
        "  the same, pure torch": without_gpu_kernels(posenc_table),
        "tutorial formula (float32 angles)": tutorial,
        "float64 angles, sin/cos, cast": float64_angles,
    }, out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--reps", type=int, default=20, help="calls per case per round (default 20)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_gpu.py needs a CUDA device")
    props = torch.cuda.get_device_properties(0)
    kernels = (
        "loaded"
        if _gpu.kernels("cuda", torch.float32) is not None
        else "unavailable (no Triton, or POSENC_TRITON=0)"
    )
    print(
        f"{props.name}, {props.multi_processor_count} SMs, {props.total_memory / 2**30:.0f} GiB; torch "
        f"{torch.__version__}, CUDA {torch.version.cuda}; posenc GPU kernels: {kernels}"
    )
    peak = copy_bandwidth(args.rounds)
    print(f"device-to-device copy of 1 GiB: {peak / 1e9:.0f} GB/s (read + written)")
    for shape in ROTARY_SHAPES:
        for dtype in (torch.float32, torch.bfloat16):
            torch._dynamo.reset()  # each block compiles afresh, never past dynamo's recompile limit
            fwd, both, nbytes = rotary_cases(shape, dtype)
            title = f"rotary {tuple(shape)} {str(dtype).removeprefix('torch.')}"
            ms = time_cases(fwd, rounds=args.rounds, reps=args.reps)
            print_block(
                f"{title}, forward", ms, dict.fromkeys(ms, nbytes["fwd"]), "floor q.clone(), k.clone()", peak
            )
            ms = time_cases(both, rounds=args.rounds, reps=args.reps)
            print_block(
                f"{title}, fwd+bwd", ms, dict.fromkeys(ms, nbytes["both"]), "floor q.clone(), k.clone()", peak
            )
            torch.cuda.empty_cache()
    for length, dim in TABLE_SHAPES:
        tables, out = table_cases(length, dim)
        ms = time_cases(
            {name: lambda i, f=f, n=length: f(n) for name, f in tables.items()},
            rounds=args.rounds,
            reps=args.reps,
        )
        print_block(
            f"table {length}×{dim} float32",
            ms,
            dict.fromkeys(ms, out.nbytes),
            "floor: fill_ of the output",
            peak,
        )
        if dim == 1024:
            print("\nlargest error over 2048 rows below 10^7 (float32 output, against float64 NumPy):")
            for name, f in tables.items():
                if not name.startswith("floor"):
                    print(f"  {name}: {table_error(f, dim)}")


if __name__ == "__main__":
    main()
