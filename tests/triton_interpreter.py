"""Run posenc's Triton kernels under Triton's CPU interpreter (``TRITON_INTERPRET=1``, set by the caller)
against float64 references; prints the largest errors as JSON. Called by ``test_gpu_kernels.py``."""

from __future__ import annotations

import json
import math

import numpy as np
import torch

import posenc
from posenc import _gpu_kernels
from posenc.nn import functional as F


def rotary_errors() -> dict[str, float]:
    """Largest error relative to the terms' size, per layout × dtype × (d, r) × table form."""
    torch.manual_seed(0)
    errors = {}
    for layout in ("half_split", "adjacent"):
        for dtype in (torch.float32, torch.float64, torch.bfloat16):
            for d, r in ((20, 12), (16, 16), (64, 24)):
                work = torch.float64 if dtype == torch.float64 else torch.float32
                # inputs already in their dtypes, so the reference differs from the kernel by its rounding only
                x = torch.randn(2, 3, 37, d, dtype=torch.float64).to(dtype).double()
                angle = torch.randn(37, r // 2, dtype=torch.float64)
                cos, sin = angle.cos().to(work).double(), angle.sin().to(work).double()
                half = torch.arange(r // 2)
                a, b = (half, half + r // 2) if layout == "half_split" else (2 * half, 2 * half + 1)
                ref, size = x.clone(), x.abs()
                ref[..., a], ref[..., b] = (
                    x[..., a] * cos - x[..., b] * sin,
                    x[..., b] * cos + x[..., a] * sin,
                )
                size[..., a] = (x[..., a] * cos).abs() + (x[..., b] * sin).abs()
                size[..., b] = (x[..., b] * cos).abs() + (x[..., a] * sin).abs()
                full_cos, signed = torch.empty(37, r, dtype=work), torch.empty(37, r, dtype=work)
                full_cos[:, a] = full_cos[:, b] = cos.to(work)
                signed[:, a], signed[:, b] = -sin.to(work), sin.to(work)
                for form, tables, paired in (
                    ("paired", (cos.to(work), sin.to(work)), True),
                    ("full", (full_cos, signed), False),
                ):
                    out = torch.full_like(x.to(dtype), float("nan"))
                    _gpu_kernels.rotate(x.to(dtype), out, *tables, layout, r, paired)
                    err = ((out.double() - ref).abs() / size).max().item()
                    errors[f"{layout} {str(dtype).removeprefix('torch.')} d={d} r={r} {form}"] = err
    return errors


def rotate_qk_errors() -> dict[str, float]:
    """Largest error of the one-launch q/k kernel relative to the terms' size, against float64 rotations
    by ``t·θ`` (times the attention factor), per layout × dtype × (d, r) × positions × direction. The cache
    holds 16 rows, so the ``[b, s]`` positions (some beyond it, one negative) take both the gather and the
    float64 angles."""
    torch.manual_seed(0)
    errors = {}
    b, h, h_k, s_q, s_k, n_cache, factor = 2, 3, 1, 5, 9, 16, 1.25
    for layout in ("half_split", "adjacent"):
        for dtype in (torch.float32, torch.float64, torch.bfloat16):
            work = torch.float64 if dtype == torch.float64 else torch.float32
            for d, r in ((16, 16), (20, 12)):
                theta = 10000.0 ** (-torch.arange(0, r, 2, dtype=torch.float64) / r)
                angle = torch.arange(n_cache, dtype=torch.float64)[:, None] * theta
                full = torch.empty(n_cache, 2, r, dtype=work)  # a module's [n, r] tables, read as pair values
                full[:, 0] = (angle.cos() * factor).to(work).repeat_interleave(2, -1)
                full[:, 1] = (angle.sin() * factor).to(work).repeat_interleave(2, -1)
                tables = (full[:, 0, 0::2], full[:, 1, 0::2])  # strided views, as the module hands them over
                for form in ("offset", "[1, s] int32", "[b, s] int64"):
                    if form == "offset":
                        positions, offsets = None, (7, 3)
                        t_q = 7 + torch.arange(s_q).expand(b, s_q)
                        t_k = 3 + torch.arange(s_k).expand(b, s_k)
                    elif form == "[1, s] int32":
                        t_q, t_k = torch.arange(4, 4 + s_q)[None], torch.arange(s_k)[None]
                        positions, offsets = (t_q.int(), t_k.int()), (0, 0)
                        t_q, t_k = t_q.expand(b, s_q), t_k.expand(b, s_k)
                    else:
                        t_q = torch.tensor([[0, 1, 2, 3, 4], [40, 41, 42, -3, 1000]])
                        t_k = torch.arange(b * s_k).view(b, s_k) * 3
                        positions, offsets = (t_q, t_k), (0, 0)
                    for inverse in (False, True):
                        q = torch.randn(b, s_q, h, d, dtype=torch.float64).to(dtype).transpose(1, 2)
                        k = torch.randn(b, h_k, s_k, d, dtype=torch.float64).to(dtype)
                        q_out, k_out = torch.full_like(q, float("nan")), torch.full_like(k, float("nan"))
                        theta_ext = torch.cat([theta, torch.tensor([factor], dtype=torch.float64)])
                        _gpu_kernels.rotate_qk(
                            q, k, q_out, k_out, positions, offsets, tables, theta_ext, layout, r, inverse
                        )
                        worst = 0.0
                        for x, out, t in ((q, q_out, t_q), (k, k_out, t_k)):
                            a_ = t.double()[:, None, :, None] * theta
                            c, s_ = a_.cos() * factor, a_.sin() * factor * (-1.0 if inverse else 1.0)
                            xd = x.double()
                            half = torch.arange(r // 2)
                            ia, ib = (
                                (half, half + r // 2) if layout == "half_split" else (2 * half, 2 * half + 1)
                            )
                            ref, size = xd.clone(), xd.abs()
                            ref[..., ia] = xd[..., ia] * c - xd[..., ib] * s_
                            ref[..., ib] = xd[..., ib] * c + xd[..., ia] * s_
                            size[..., ia] = (xd[..., ia] * c).abs() + (xd[..., ib] * s_).abs()
                            size[..., ib] = (xd[..., ib] * c).abs() + (xd[..., ia] * s_).abs()
                            worst = max(
                                worst, ((out.double() - ref).abs() / size.clamp_min(1e-300)).max().item()
                            )
                        direction = "inverse" if inverse else "forward"
                        name = str(dtype).removeprefix("torch.")
                        errors[f"{layout} {name} d={d} r={r} {form} {direction}"] = worst
    return errors


def module_errors() -> dict[str, float]:
    """``RotaryEmbedding`` through its one-launch path (the ``posenc::rotate_qk`` operator, registered here
    for the CPU so that the interpreter runs it) against its table path, forward and gradients, largest
    absolute difference per layout × positions (float64, 20 of 24 dims rotated, cache of 16 rows)."""
    from posenc import _gpu
    from posenc.backends import rotate_qk
    from posenc.nn import RotaryEmbedding

    rotate_qk._LIBRARY.impl("rotate_qk", rotate_qk.launch, "CPU")
    errors = {}
    torch.manual_seed(0)
    forms = {
        "default": {},
        "offset": {"offset": 30},
        "[s] int32": {"q_positions": torch.arange(3, 8, dtype=torch.int32)},
        "[b, s] int64": {"q_positions": torch.tensor([[0, 1, 2, 3, 4], [40, 41, 2, -3, 9]])},
    }
    for layout in ("half_split", "adjacent"):
        rope = RotaryEmbedding(24, rotary_dim=20, layout=layout, max_len=16)
        for form, kwargs in forms.items():
            q = torch.randn(2, 5, 3, 24, dtype=torch.float64).transpose(1, 2).requires_grad_()
            k = torch.randn(2, 3, 5, 24, dtype=torch.float64, requires_grad=True)
            grads = torch.randn(2, 3, 5, 24, dtype=torch.float64)
            results = []
            for one_launch in (True, False):
                original, choice = _gpu.kernels, rotate_qk.one_launch
                rotate_qk.one_launch = lambda call, on=one_launch: on  # type: ignore[assignment]
                _gpu.kernels = lambda device_type, dtype: _gpu_kernels  # type: ignore[assignment]
                try:
                    q_rot, k_rot = rope(q, k, **kwargs)
                    dq, dk = torch.autograd.grad((q_rot * grads).sum() + (k_rot * grads).sum(), (q, k))
                finally:
                    _gpu.kernels = original  # type: ignore[assignment]
                    rotate_qk.one_launch = choice  # type: ignore[assignment]
                results.append((q_rot, k_rot, dq, dk))
            errors[f"{layout} {form}"] = max((a - b).abs().max().item() for a, b in zip(*results))
    return errors


def table_errors() -> dict[str, float]:
    """Largest absolute error of float32 tables below position 10^7, per layout and dim the kernel writes."""
    errors = {}
    for layout in ("interleaved", "interleaved_cos_first", "split"):
        for dim in (6, 7, 130, 129):
            w = torch.from_numpy(posenc.spectrum.geometric(dim))
            code = F._gpu_layout(F.layout_index(dim, layout), w.shape[0])
            if code is None:
                continue
            n, start = 300, 10**7 - 300
            b = math.isqrt(n - 1) + 1
            fine = torch.outer(torch.arange(b, dtype=torch.float64), w)
            coarse = torch.outer(start + b * torch.arange(-(-n // b), dtype=torch.float64), w)
            out = torch.full((n, dim), float("nan"), dtype=torch.float32)
            _gpu_kernels.waves(out, (fine.sin(), fine.cos()), (coarse.sin(), coarse.cos()), code)
            ref = posenc.sinusoidal(np.arange(start, start + n), dim, layout=layout)
            errors[f"{layout} {dim}"] = float(np.abs(out.double().numpy() - ref).max())
    return errors


if __name__ == "__main__":
    print(
        json.dumps(
            {
                "rotary": rotary_errors(),
                "rotate_qk": rotate_qk_errors(),
                "module": module_errors(),
                "tables": table_errors(),
            }
        )
    )
