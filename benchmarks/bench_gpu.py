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
import time
from collections.abc import Callable
from typing import Any

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


# --- The module rows: what a model calls (RotaryEmbedding on q and k, the encoder), against peers ---------

ENCODINGS = ("none", "sinusoidal", "rope", "alibi", "t5", "shaw", "shaw_values")


def per_call_us(fn: Callable[[], object], *, reps: int, rounds: int) -> float:
    """Median over ``rounds`` of the mean time of ``reps`` back-to-back calls of ``fn``, in µs (CUDA events on
    a GPU, the host clock elsewhere): what one call costs a Python loop, launches included."""
    fn()
    fn()
    cuda = torch.cuda.is_available()
    times = []
    for _ in range(rounds):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3 / reps)
        else:
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            times.append((time.perf_counter() - t0) * 1e6 / reps)
    return statistics.median(times)


def graph_replay_us(fn: Callable[[], object], *, reps: int, rounds: int) -> float | str:
    """µs per replay of ``fn`` captured in a CUDA graph, or why it could not be captured."""
    if not torch.cuda.is_available():
        return "no CUDA"
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            fn()
    except Exception as error:  # report, do not stop the benchmark
        return f"capture failed: {type(error).__name__}: {str(error)[:120]}"
    return per_call_us(graph.replay, reps=reps, rounds=rounds)


def hf_peers(head_dim: int, max_len: int, device: str) -> tuple[Callable | None, Callable | None, str]:
    """``(cos_sin(x, position_ids), apply(q, k, cos, sin))`` of Hugging Face's LLaMA rotary, or why not."""
    try:
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
    except ImportError as error:
        return None, None, f"transformers not importable ({error})"
    config = LlamaConfig(
        hidden_size=head_dim * 8, num_attention_heads=8, head_dim=head_dim, max_position_embeddings=max_len
    )
    return LlamaRotaryEmbedding(config).to(device), apply_rotary_pos_emb, ""


def liger_rope() -> tuple[Callable | None, str]:
    """Liger-Kernel's Triton rope (``liger_rotary_pos_emb(q, k, cos, sin)``), or why not."""
    try:
        from liger_kernel.transformers.rope import liger_rotary_pos_emb
    except ImportError as error:
        return None, f"liger-kernel not installed ({error})"
    return liger_rotary_pos_emb, ""


def flash_attn_rope() -> tuple[Callable | None, str]:
    try:
        from flash_attn.layers.rotary import apply_rotary_emb
    except ImportError:
        return None, "flash-attn is not installed (it ships no wheel for this machine)"
    return apply_rotary_emb, ""


def module_rotary_rows(device: str, rounds: int) -> None:
    """The issue's rotary rows: decode and prefill per call (and decode replayed in a CUDA graph), large
    tensors forward and fwd+bwd against a copy; q and k in Hugging Face's layout (a ``[b, h, s, d]`` view
    of ``[b, s, h, d]``), bfloat16; posenc, Liger-Kernel, flash-attn, HF eager and compiled side by side."""
    liger, liger_why = liger_rope()
    flash, flash_why = flash_attn_rope()
    for why in (liger_why, flash_why):
        if why:
            print(f"  skipped: {why}")
    cases = [
        ("decode b 1, h 32, d 128, [b, 1] positions", 1, 32, 1, 128, "positions"),
        ("decode b 64, h 32, d 128, [b, 1] positions", 64, 32, 1, 128, "positions"),
        ("decode b 1, offset= int", 1, 32, 1, 128, "offset"),
        ("prefill (8, 8, 2048, 64), default positions", 8, 8, 2048, 64, "default"),
        ("(4, 32, 4096, 128), default positions", 4, 32, 4096, 128, "default"),
    ]
    if device == "cpu":  # a smoke run: small shapes
        cases = [(name, b, 2, min(s, 16), d, form) for name, b, h, s, d, form in cases[:4]]
    print(f"\nrotary on q and k, bfloat16, µs per call (median of {rounds} rounds):")
    for name, b, h, s, d, form in cases:
        rotary_case(name, (b, h, s, d), form, device, rounds, liger, flash)


def rotary_case(
    name: str,
    shape: tuple[int, int, int, int],
    form: str,
    device: str,
    rounds: int,
    liger: Callable | None,
    flash: Callable | None,
) -> None:
    """One row group of :func:`module_rotary_rows`: ``form`` is ``"positions"`` (``[b, s]``), ``"offset"`` or
    ``"default"``."""
    dtype = torch.bfloat16
    b, h, s, d = shape
    max_len = 4096
    q = torch.randn(b, s, h, d, device=device, dtype=dtype).transpose(1, 2)
    k = torch.randn(b, s, h, d, device=device, dtype=dtype).transpose(1, 2)
    pos = torch.randint(0, max_len - 1, (b, s), device=device) if form == "positions" else None
    hf_pos = pos if pos is not None else torch.arange(s, device=device)[None].expand(b, s)
    if form == "offset":
        hf_pos = torch.full((b, 1), 1000, device=device)
    rope = RotaryEmbedding(d, max_len=max_len).to(device)
    kwargs: dict[str, Any] = {"q_positions": pos} if form == "positions" else {}
    if form == "offset":
        kwargs = {"offset": 1000}
    rows: dict[str, float | str] = {}
    reps = 200 if s == 1 else 20
    rows["posenc RotaryEmbedding"] = per_call_us(lambda: rope(q, k, **kwargs), reps=reps, rounds=rounds)
    if s == 1:
        rows["  posenc, replayed in a CUDA graph"] = graph_replay_us(
            lambda: rope(q, k, **kwargs), reps=reps, rounds=rounds
        )
    hf_emb, hf_apply, hf_why = hf_peers(d, max_len, device)
    if hf_emb is not None and hf_apply is not None:

        def hf_eager() -> object:
            cos, sin = hf_emb(q, hf_pos)
            return hf_apply(q, k, cos, sin)

        rows["HF eager (LlamaRotaryEmbedding + apply_rotary_pos_emb)"] = per_call_us(
            hf_eager, reps=reps, rounds=rounds
        )
        if device == "cuda" and (b == 64 or s > 1):  # compiling costs ~30 s a shape: the rows only
            compiled = torch.compile(hf_eager)
            rows["HF torch.compile"] = per_call_us(compiled, reps=reps, rounds=rounds)
        if liger is not None:

            def liger_call() -> object:
                cos, sin = hf_emb(q, hf_pos)
                return liger(q, k, cos, sin)

            rows["Liger-Kernel rope (cos/sin from HF)"] = per_call_us(liger_call, reps=reps, rounds=rounds)
    else:
        print(f"  HF and Liger skipped: {hf_why}")
    if flash is not None:
        theta = 10000.0 ** (-torch.arange(0, d, 2, device=device, dtype=torch.float64) / d)
        angles = torch.outer(torch.arange(max_len, device=device, dtype=torch.float64), theta)
        cos_f, sin_f = angles.cos().to(dtype), angles.sin().to(dtype)
        q_bshd, k_bshd = q.transpose(1, 2), k.transpose(1, 2)
        rows["flash-attn Triton rotary"] = per_call_us(
            lambda: (flash(q_bshd, cos_f[:s], sin_f[:s]), flash(k_bshd, cos_f[:s], sin_f[:s])),
            reps=reps,
            rounds=rounds,
        )
    if s > 1 and device == "cuda":
        rows["floor q.clone(), k.clone()"] = per_call_us(
            lambda: (q.clone(), k.clone()), reps=reps, rounds=rounds
        )
        leaf_q, leaf_k = q.detach().clone().requires_grad_(), k.detach().clone().requires_grad_()
        grad = torch.randn_like(q)

        def fwd_bwd() -> None:
            out_q, out_k = rope(leaf_q, leaf_k)
            torch.autograd.backward((out_q, out_k), (grad, grad))
            leaf_q.grad = leaf_k.grad = None

        def copy_bwd() -> None:
            out_q, out_k = leaf_q.clone(), leaf_k.clone()
            torch.autograd.backward((out_q, out_k), (grad, grad))
            leaf_q.grad = leaf_k.grad = None

        rows["posenc fwd+bwd"] = per_call_us(fwd_bwd, reps=reps, rounds=rounds)
        rows["floor fwd+bwd of q.clone(), k.clone()"] = per_call_us(copy_bwd, reps=reps, rounds=rounds)
    print(f"  {name}:")
    for label, value in rows.items():
        shown = f"{value:9.1f}" if isinstance(value, float) else f"  {value}"
        print(f"    {label:<58}{shown}")


def qk_kernel_rows(device: str, rounds: int) -> None:
    """The q+k kernels themselves (:func:`posenc._gpu_kernels.rotate_qk`, no module around them), in
    Hugging Face's layout: µs per call (and, for decode, per CUDA-graph replay) and, for prefill, the
    fraction of the copy floor ``q.clone(), k.clone()``, per position form (int offsets: one launch;
    tensor positions: the second launch for rows beyond the cache looks too) and checks (``full`` or
    once per ``signature``). On the CPU (``--smoke-cpu``) it runs under ``TRITON_INTERPRET=1``, tiny."""
    from posenc import _gpu_kernels  # imports Triton

    shapes = [(1, 32, 8, 1, 128), (64, 32, 8, 1, 128), (4, 32, 8, 4096, 128)]
    if device == "cpu":
        shapes = [(2, 4, 2, 1, 16), (2, 4, 2, 8, 16)]
    print(f"\nposenc._gpu_kernels.rotate_qk, half_split, µs per call (median of {rounds} rounds):")
    for shape in shapes:
        for dtype in (torch.bfloat16, torch.float32):
            qk_kernel_case(_gpu_kernels, shape, dtype, device, rounds)


def qk_kernel_case(
    kernels: Any, shape: tuple[int, ...], dtype: torch.dtype, device: str, rounds: int
) -> None:
    """One row group of :func:`qk_kernel_rows`: ``shape`` is ``(b, h, h_k, s, d)``; a cache of 8192 rows."""
    b, h, h_k, s, d = shape
    n_cache = 8192
    q = torch.randn(b, s, h, d, device=device, dtype=dtype).transpose(1, 2)
    k = torch.randn(b, s, h_k, d, device=device, dtype=dtype).transpose(1, 2)
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.outer(torch.arange(n_cache, dtype=torch.float64), theta)
    cos, sin = (f(angles).float().repeat(1, 2).to(device) for f in (torch.cos, torch.sin))
    tables = (cos[:, : d // 2], sin[:, : d // 2])
    theta_ext = torch.cat([theta, torch.ones(1, dtype=torch.float64)]).to(device)
    inside = torch.randint(0, n_cache, (b, s), device=device)
    beyond = inside.clone()
    beyond[:, -1] = n_cache + 5  # one row of each sequence beyond the cache: float64 angles
    forms = {
        "int offsets": (None, (n_cache - s - 1, n_cache - s - 1)),
        "[b, s] int64 positions, all inside": ((inside, inside), (0, 0)),
        "[b, s] int64 positions, last beyond": ((beyond, beyond), (0, 0)),
    }
    reps = 1 if device == "cpu" else 200 if s == 1 else 20  # the interpreter takes ~0.1 s a call
    rows: dict[str, float | str] = {}
    for form, (positions, offsets) in forms.items():
        for checks in ("full", "signature"):

            def call(p: Any = positions, o: Any = offsets, c: str = checks) -> None:
                kernels.rotate_qk(
                    q, k, q_out, k_out, p, o, tables, theta_ext, "half_split", d, False, checks=c
                )

            rows[f"{form}, checks={checks}"] = per_call_us(call, reps=reps, rounds=rounds)
            if s == 1 and checks == "signature":
                rows[f"{form}, replayed in a CUDA graph"] = graph_replay_us(call, reps=reps, rounds=rounds)
    floor = per_call_us(lambda: (q.clone(), k.clone()), reps=reps, rounds=rounds)
    rows["floor q.clone(), k.clone()"] = floor
    print(f"  q {(b, h, s, d)}, k {(b, h_k, s, d)}, {str(dtype).removeprefix('torch.')}:")
    for label, value in rows.items():
        shown = f"{value:9.1f}" if isinstance(value, float) else f"  {value}"
        share = f"  ({floor / value:.0%} of the copy)" if isinstance(value, float) and s > 1 else ""
        print(f"    {label:<58}{shown}{share}")


def encoder_rows(device: str, rounds: int, compiled: tuple[str, ...]) -> None:
    """Encoder forward+backward, ``TransformerEncoder(512, 8, 4)``, batch 16 × 1024, bfloat16 autocast, causal:
    ms per step and relative to ``none``, eager and (for ``compiled``) under ``torch.compile``; peak memory."""
    from posenc.nn import TransformerEncoder

    b, s, d_model = (16, 1024, 512) if device == "cuda" else (2, 32, 32)
    x = torch.randn(b, s, d_model, device=device)
    print(f"\nencoder fwd+bwd, TransformerEncoder({d_model}, 8, 4), batch {b} × {s}, bf16 autocast, causal:")
    base: dict[str, float] = {}
    for mode in ("eager", "compiled"):
        for name in ENCODINGS:
            if mode == "compiled" and name not in compiled:
                continue
            torch.manual_seed(0)
            encoding, options = ("shaw", {"on_values": True}) if name == "shaw_values" else (name, None)
            try:
                model = TransformerEncoder(
                    d_model, 8, 4, encoding=encoding, encoding_options=options, max_len=s
                ).to(device)
            except Exception as error:  # report, do not stop the benchmark
                print(f"  {mode:<8} {name:<11} failed to build: {type(error).__name__}: {str(error)[:160]}")
                continue
            step_model = torch.compile(model) if mode == "compiled" else model

            def step(m: Callable[..., torch.Tensor] = step_model) -> None:
                with torch.autocast(device, dtype=torch.bfloat16):
                    m(x, causal=True).float().square().mean().backward()

            try:
                if device == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                ms = per_call_us(step, reps=3, rounds=rounds) / 1e3
            except Exception as error:  # report, do not stop the benchmark
                print(f"  {mode:<8} {name:<11} failed: {type(error).__name__}: {str(error)[:160]}")
                continue
            peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else float("nan")
            base.setdefault(mode, ms) if name == "none" else None
            ratio = ms / base[mode] if mode in base else float("nan")
            print(f"  {mode:<8} {name:<11} {ms:8.2f} ms  {ratio:5.2f}× none  peak {peak:5.2f} GiB")
            del model, step_model
            if device == "cuda":
                torch.cuda.empty_cache()


def attention_rows(rounds: int) -> None:
    """Attention alone, forward+backward, ``[16, 8, 1024, 64]`` bf16, causal: SDPA and FlexAttention with each
    way a score term reaches a fused kernel (a fixed ALiBi bias dense or as a score_mod; T5's learned bias and
    Shaw's key term as a mask that needs a gradient), ms per step and relative to SDPA causal. Each case is
    guarded: one that fails prints why and the rest still run."""
    from posenc.nn import ALiBiBias, ShawRelativeBias, T5RelativeBias

    b, h, s, d = 16, 8, 1024, 64
    dtype = torch.bfloat16
    qkv = [torch.randn(b, h, s, d, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3)]
    future = torch.ones(s, s, dtype=torch.bool, device="cuda").triu(1)
    alibi = ALiBiBias(h).bias(s, s, dtype=dtype, device="cuda").masked_fill(future, float("-inf"))[None]
    t5 = T5RelativeBias(h, bidirectional=False).cuda()
    shaw = ShawRelativeBias(d, max_distance=16).cuda()
    shaw_context = shaw.context(s, positions=None, dtype=dtype, device=torch.device("cuda"))
    F = torch.nn.functional

    def sdpa_causal() -> torch.Tensor:
        return F.scaled_dot_product_attention(*qkv, is_causal=True)

    def sdpa_alibi() -> torch.Tensor:
        return F.scaled_dot_product_attention(*qkv, attn_mask=alibi)

    def sdpa_t5() -> torch.Tensor:
        mask = t5.bias(s, s, dtype=dtype, device="cuda").masked_fill(future, float("-inf"))[None]
        return F.scaled_dot_product_attention(*qkv, attn_mask=mask)

    def sdpa_shaw() -> torch.Tensor:
        q = qkv[0] * d**-0.5
        mask = shaw.score_term(q, qkv[1], shaw_context).dense().masked_fill(future, float("-inf"))
        return F.scaled_dot_product_attention(q, qkv[1], qkv[2], attn_mask=mask, scale=1.0)

    cases: dict[str, Callable[[], torch.Tensor]] = {
        "SDPA causal": sdpa_causal,
        "SDPA, dense ALiBi bias": sdpa_alibi,
        "SDPA, T5 bias needing its gradient (formed per step)": sdpa_t5,
        "SDPA, Shaw key term needing its gradient": sdpa_shaw,
    }
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        flex = torch.compile(flex_attention)
        block = create_block_mask(lambda b_, h_, i, j: j <= i, None, None, s, s, device="cuda")
        slopes = ALiBiBias(h).slopes.to("cuda", torch.float32)

        def alibi_mod(score, b_, h_, i, j):  # type: ignore[no-untyped-def]
            return score - slopes[h_] * (i - j).abs()

        cases["FlexAttention causal block mask"] = lambda: flex(*qkv, block_mask=block)
        cases["FlexAttention, ALiBi score_mod"] = lambda: flex(*qkv, score_mod=alibi_mod, block_mask=block)
        from posenc.backends import scores as score_backends

        def flex_t5() -> torch.Tensor:  # the learned per-offset table [h, 2s - 1], formed per step
            diagonals = t5.diagonals(s, s, dtype=torch.float32, device="cuda")
            return score_backends.flex(score_backends.ScoreCall(*qkv, diagonals=diagonals, causal=True))

        def flex_shaw() -> torch.Tensor:  # the slot scores [b, h, s, 2k + 1] with their gradient
            q = qkv[0] * d**-0.5
            term = shaw.score_term(q, qkv[1], shaw_context)
            call = score_backends.ScoreCall(q, qkv[1], qkv[2], q_scaled=True, term=term, causal=True)
            return score_backends.flex(call)

        cases["FlexAttention, T5 per-offset score_mod (learned)"] = flex_t5
        cases["FlexAttention, Shaw slot score_mod (learned)"] = flex_shaw

    except ImportError as error:
        print(f"  FlexAttention skipped: {error}")
    grad = torch.randn(b, h, s, d, device="cuda", dtype=dtype)
    print(f"\nattention alone fwd+bwd, [{b}, {h}, {s}, {d}] bf16, causal, ms per step:")
    base = None
    for name, fn in cases.items():

        def step(f: Callable[[], torch.Tensor] = fn) -> None:
            f().backward(grad)
            for t in qkv:
                t.grad = None

        try:
            ms = per_call_us(step, reps=5, rounds=rounds) / 1e3
        except Exception as error:  # report, do not stop the benchmark
            print(f"  {name:<54} failed: {type(error).__name__}: {str(error)[:160]}")
            continue
        base = ms if base is None else base
        print(f"  {name:<54} {ms:8.3f} ms  {ms / base:5.2f}×")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--reps", type=int, default=20, help="calls per case per round (default 20)")
    parser.add_argument(
        "--suite",
        choices=("all", "modules", "attention", "qk", "kernels"),
        default="all",
        help="modules: RotaryEmbedding and the encoder against peers; attention: score terms on fused "
        "attention kernels; qk: the q+k rotation kernels called directly; kernels: apply_rotary and tables "
        "against the copy bandwidth (default all)",
    )
    parser.add_argument(
        "--compiled",
        default="none,rope,alibi,t5",
        help="encodings whose encoder step is also timed under torch.compile (comma-separated)",
    )
    parser.add_argument("--smoke-cpu", action="store_true", help="run the module rows on the CPU, tiny")
    args = parser.parse_args()
    if args.smoke_cpu:
        if args.suite == "qk":  # under TRITON_INTERPRET=1
            qk_kernel_rows("cpu", 1)
            return
        module_rotary_rows("cpu", 2)
        encoder_rows("cpu", 1, ())
        return
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
    if args.suite in ("all", "modules"):  # the encoder first: a run cut short keeps its rows
        encoder_rows("cuda", max(3, args.rounds // 3), tuple(filter(None, args.compiled.split(","))))
        module_rotary_rows("cuda", args.rounds)
    if args.suite in ("all", "qk"):
        qk_kernel_rows("cuda", args.rounds)
    if args.suite in ("all", "attention"):
        attention_rows(max(3, args.rounds // 3))
    if args.suite in ("modules", "attention", "qk"):
        return
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
