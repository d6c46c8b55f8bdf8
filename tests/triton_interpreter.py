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
    print(json.dumps({"rotary": rotary_errors(), "tables": table_errors()}))
