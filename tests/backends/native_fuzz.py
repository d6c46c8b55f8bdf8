"""Fuzz posenc._native's checked wrappers; run in a subprocess by ``test_native_boundary.py``, so that a
crash fails that test instead of killing pytest. ``python native_fuzz.py EXAMPLES`` prints one JSON line
of counts and exits 0 when every property held.

Hypothesis draws a valid call of each wrapper (sizes, dtypes, layouts, strided and transposed views),
then up to three mutations of it: a wrong dtype, a wrong shape, a wrong stride or a broadcast output,
an output that overlaps an input, another device, something that is not an array, a bad mode or
layout, an index outside the slots. Every operand lives inside a larger storage filled with random
bytes. The properties:

* the call returns or raises ``ValueError`` / ``TypeError`` (``IndexError`` for an index value outside
  the slots) whose message names one of the wrapper's arguments; nothing else, never a crash;
* an unmutated call returns;
* a call that raises wrote no byte of any storage (the checks come before the loop), except a slot
  index error, which may have written the output;
* a call that returns wrote no byte outside the output's own elements (no out-of-bounds write).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from posenc import _native

FLOATS = [torch.float16, torch.float32, torch.float64, torch.bfloat16]
WRONG = [*FLOATS, torch.int32, torch.int64, torch.uint8, torch.complex64]
COUNTS: Counter[str] = Counter()


class Storage:
    """A 1-D tensor of random bytes from which views are cut; its bytes are compared after the call."""

    def __init__(self, numel: int, dtype: torch.dtype, generator: torch.Generator) -> None:
        itemsize = torch.empty((), dtype=dtype).element_size()
        raw = torch.randint(0, 256, (numel * itemsize,), dtype=torch.uint8, generator=generator)
        self.tensor = raw.view(dtype)
        self.before = raw.clone()

    def changed(self) -> torch.Tensor:
        """A mask over elements: which ones differ from before the call."""
        item = self.tensor.element_size()
        now = self.tensor.view(torch.uint8).view(self.tensor.numel(), item)
        return (now != self.before.view(self.tensor.numel(), item)).any(-1)


def strides_for(shape: tuple[int, ...], order: list[int], gap: int) -> tuple[int, ...]:
    """Dense strides for ``shape`` laid out in ``order`` (last = fastest), rows spaced by ``gap``."""
    strides = [0] * len(shape)
    step = 1
    for position, dim in enumerate(reversed(order)):
        strides[dim] = step
        step *= max(shape[dim], 1) + (gap if position == 0 else 0)
    return tuple(strides)


@st.composite
def placed(
    draw: Any,
    shape: tuple[int, ...],
    dtype: torch.dtype,
    storages: list[Storage],
    *,
    dense_last: bool = True,
    contiguous: bool = False,
) -> torch.Tensor:
    """A view of ``shape`` and ``dtype`` inside a fresh storage with margins: contiguous, permuted
    (the last dim kept last where ``dense_last``), or with gaps between rows (not if ``contiguous``)."""
    order = list(range(len(shape)))
    if len(shape) > 1 and not contiguous and draw(st.booleans()):
        if dense_last:
            order = [*draw(st.permutations(order[:-1])), order[-1]]
        else:
            order = list(draw(st.permutations(order)))
    gap = 0 if contiguous else draw(st.integers(0, 3))
    strides = strides_for(shape, order, gap)
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=True)) if all(shape) else 0
    before, after = draw(st.integers(0, 8)), draw(st.integers(0, 8))
    storage = Storage(
        before + extent + after, dtype, torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    )
    storages.append(storage)
    return storage.tensor.as_strided(shape, strides, before)


def shape_strategy() -> st.SearchStrategy[tuple[int, ...]]:
    return st.lists(st.integers(0, 7), min_size=0, max_size=5).map(tuple)


@st.composite
def mutate(draw: Any, args: dict[str, Any], arrays: list[str], storages: list[Storage]) -> list[str]:
    """Apply up to three mutations to ``args`` (the array arguments are ``arrays``); their names."""
    done = []
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from(arrays))
        t = args[name]
        if not isinstance(t, torch.Tensor) or t.device.type != "cpu":
            continue
        kind = draw(
            st.sampled_from(
                [
                    "dtype",
                    "shape",
                    "size",
                    "size",
                    "stride",
                    "broadcast",
                    "alias",
                    "meta",
                    "list",
                    "numpy",
                    "flip",
                    "transpose",
                ]
            )
        )
        if kind == "dtype":
            args[name] = draw(placed(tuple(t.shape), draw(st.sampled_from(WRONG)), storages))
        elif kind == "shape":
            args[name] = draw(placed(draw(shape_strategy()), t.dtype, storages, dense_last=False))
        elif kind == "size" and t.dim():  # one size off by one or two: the likely mistake
            dim, delta = draw(st.integers(0, t.dim() - 1)), draw(st.sampled_from([-2, -1, 1, 2]))
            shape = list(t.shape)
            shape[dim] = max(0, shape[dim] + delta)
            args[name] = draw(placed(tuple(shape), t.dtype, storages))
        elif kind == "stride" and t.dim():
            base = draw(placed((*t.shape[:-1], 2 * t.shape[-1]), t.dtype, storages))
            args[name] = base[..., ::2]
        elif kind == "broadcast" and t.dim():
            dim = draw(st.integers(0, t.dim() - 1))
            args[name] = t.narrow(dim, 0, min(1, t.shape[dim])).expand(t.shape) if t.shape[dim] else t
        elif kind == "alias":  # t's shape and strides, placed over another argument's memory
            other = args[draw(st.sampled_from(arrays))]
            if not (
                isinstance(other, torch.Tensor) and other.device.type == "cpu" and other.dtype == t.dtype
            ):
                continue
            size = other.untyped_storage().nbytes() // other.element_size()
            offset = other.storage_offset() + draw(st.integers(-2, 2))
            reach = (
                sum((n - 1) * st_ for n, st_ in zip(t.shape, t.stride(), strict=True)) if t.numel() else -1
            )
            if not 0 <= offset <= offset + reach < size:
                continue
            flat = other.as_strided((size,), (1,), 0)
            args[name] = flat.as_strided(t.shape, t.stride(), offset)
        elif kind == "meta":
            args[name] = torch.empty(t.shape, dtype=t.dtype, device="meta")
        elif kind == "list":
            args[name] = t.tolist() if t.dtype != torch.bfloat16 else 3
        elif kind == "numpy" and t.dtype != torch.bfloat16:
            args[name] = t.numpy()
        elif kind == "flip" and t.dtype != torch.bfloat16 and t.dim():  # negative strides (NumPy only)
            args[name] = np.flip(t.numpy(), draw(st.integers(0, t.dim() - 1)))
        elif kind == "transpose" and t.dim() > 1:
            args[name] = t.transpose(-1, -2)
        done.append(f"{name}:{kind}")
    return done


def output_mask(out: Any, storage: Storage) -> torch.Tensor:
    """The elements of ``storage`` that ``out`` (a tensor or a NumPy array) covers."""
    mask = torch.zeros(storage.tensor.numel(), dtype=torch.bool)
    base, item = storage.tensor.data_ptr(), storage.tensor.element_size()
    if isinstance(out, np.ndarray):  # NumPy strides may be negative: the mask is built in NumPy
        offset, rest = divmod(out.ctypes.data - base, item)
        if out.size and rest == 0 and 0 <= offset < mask.numel() and out.itemsize == item:
            flags = np.zeros(mask.numel(), dtype=bool)
            strides = tuple(st // item for st in out.strides)
            np.lib.stride_tricks.as_strided(flags[offset:], out.shape, strides)[...] = True
            mask = torch.from_numpy(flags)
        return mask
    if not isinstance(out, torch.Tensor) or out.device.type != "cpu" or not out.numel():
        return mask
    offset, rest = divmod(out.data_ptr() - base, item)
    if rest == 0 and 0 <= offset < storage.tensor.numel() and out.element_size() == item:
        mask.as_strided(out.shape, out.stride(), offset).fill_(True)
    return mask


def run_case(
    wrapper: Callable[..., None],
    args: dict[str, Any],
    output: str | tuple[str, ...],
    storages: list[Storage],
    mutations: list[str],
    index_error: bool = False,
) -> None:
    label = wrapper.__name__
    try:
        wrapper(**args)
    except (ValueError, TypeError, IndexError) as error:
        assert mutations, f"{label}: a valid call raised {error!r}"
        assert not isinstance(error, IndexError) or index_error, f"{label}: {error!r} after {mutations}"
        assert any(n in str(error) for n in args), f"{label}: {error!r} names no argument ({mutations})"
        written = isinstance(error, IndexError)  # found by the loop: the output may hold partial rows
        outcome = "refused"
    else:
        written, outcome = True, "ran"
    outputs = (output,) if isinstance(output, str) else output
    for storage in storages:
        allowed = torch.zeros((), dtype=torch.bool)
        for name in outputs if written else ():
            allowed = allowed | output_mask(args[name], storage)
        stray = storage.changed() & ~allowed
        assert not stray.any(), (
            f"{label} {outcome}: wrote {int(stray.sum())} elements outside {output} ({mutations})"
        )
    COUNTS[f"{label} {outcome}"] += 1


SETTINGS = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))


@st.composite
def rotate_case(draw: Any) -> tuple[dict[str, Any], list[Storage], list[str]]:
    storages: list[Storage] = []
    dtype = draw(st.sampled_from([torch.float32, torch.float64, torch.bfloat16]))
    work = torch.float64 if dtype == torch.float64 else torch.float32
    tdtype = draw(st.sampled_from([work, torch.bfloat16])) if dtype == torch.bfloat16 else work
    n0, n1, s, h = (
        draw(st.integers(0, 3)),
        draw(st.integers(0, 3)),
        draw(st.integers(1, 6)),
        draw(st.integers(0, 17)),
    )
    d = 2 * h + draw(st.integers(0, 3))
    paired = draw(st.booleans())
    cols = h if paired else 2 * h
    args: dict[str, Any] = {
        "x": draw(placed((n0, n1, s, d), dtype, storages)),
        "out": draw(placed((n0, n1, s, d), dtype, storages)),
        "layout": draw(st.sampled_from(sorted(_native.ROTARY_LAYOUTS))),
        "paired": paired,
    }
    args["cos"], args["sin"] = draw(placed((2, s, cols), tdtype, storages)).unbind(0)  # equal strides
    mutations = draw(mutate(args, ["x", "out", "cos", "sin"], storages))
    if draw(st.integers(0, 9)) == 0:
        args["layout"], mutations = "diagonal", [*mutations, "layout"]
    return args, storages, mutations


def rotate_qk(
    q: Any, k: Any, q_out: Any, k_out: Any, q_pos: Any, k_pos: Any, offsets: Any, cos: Any, sin: Any, theta: Any,
    layout: str, inverse: bool,
) -> None:  # fmt: skip
    """:func:`posenc._native.rotate_qk` with each position tensor an argument of its own, for ``mutate``."""
    positions = None if q_pos is None else (q_pos, k_pos)
    _native.rotate_qk(q, k, q_out, k_out, positions, offsets, cos, sin, theta, layout, inverse)


@st.composite
def rotate_qk_case(draw: Any) -> tuple[dict[str, Any], list[Storage], list[str]]:
    storages: list[Storage] = []
    dtype = draw(st.sampled_from([torch.float32, torch.float64, torch.bfloat16]))
    work = torch.float64 if dtype == torch.float64 else torch.float32
    tdtype = draw(st.sampled_from([work, torch.bfloat16])) if dtype == torch.bfloat16 else work
    b, hq, hk, sq, sk = (draw(st.integers(lo, hi)) for lo, hi in ((0, 3), (0, 3), (0, 3), (0, 5), (0, 5)))
    h, n = draw(st.integers(0, 9)), draw(st.integers(1, 6))
    d = 2 * h + draw(st.integers(0, 3))
    args: dict[str, Any] = {
        "q": draw(placed((b, hq, sq, d), dtype, storages)),
        "k": draw(placed((b, hk, sk, d), dtype, storages)),
        "q_out": draw(placed((b, hq, sq, d), dtype, storages)),
        "k_out": draw(placed((b, hk, sk, d), dtype, storages)),
        "q_pos": None,
        "k_pos": None,
        "offsets": (draw(st.integers(0, 9)), draw(st.integers(0, 9))),
        "theta": draw(placed((h + 1 + draw(st.integers(0, 2)),), torch.float64, storages, contiguous=True)),
        "layout": draw(st.sampled_from(sorted(_native.ROTARY_LAYOUTS))),
        "inverse": draw(st.booleans()),
    }
    args["cos"], args["sin"] = draw(placed((2, n, h), tdtype, storages)).unbind(0)  # equal strides
    args["theta"].copy_(torch.rand(args["theta"].shape, dtype=torch.float64))  # frequencies, the factor
    storages[-2].before = storages[-2].tensor.view(torch.uint8).clone()
    arrays = ["q", "k", "q_out", "k_out", "cos", "sin", "theta"]
    mutations = []
    if draw(st.booleans()):  # positions inside the cache, beyond it and negative
        for name, seq in (("q_pos", sq), ("k_pos", sk)):
            pos = draw(placed((draw(st.sampled_from([1, b])), seq), torch.int64, storages, dense_last=False))
            pos.copy_(torch.randint(-3, n + 4, pos.shape, generator=torch.Generator().manual_seed(seq)))
            storages[-1].before = storages[-1].tensor.view(torch.uint8).clone()
            args[name] = pos
        if args["q_pos"].numel() and draw(st.integers(0, 4)) == 0:
            args["q_pos"] = args["q_pos"].clone(memory_format=torch.contiguous_format)
            args["q_pos"].view(-1)[-1] = draw(st.sampled_from([2**53, -(2**53), -(2**63)]))
            mutations.append("q_pos:value")
        arrays += ["q_pos", "k_pos"]
    elif draw(st.integers(0, 9)) == 0:
        args["offsets"], mutations = (-1, 0), ["offsets"]
    mutations += draw(mutate(args, arrays, storages))
    return args, storages, mutations


@st.composite
def slots_case(draw: Any) -> tuple[dict[str, Any], list[Storage], list[str]]:
    storages: list[Storage] = []
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    nb, g, sq, k, n = (draw(st.integers(lo, 5)) for lo in (1, 0, 0, 0, 1))
    mode = draw(st.sampled_from(sorted(_native.SLOT_MODES)))
    width_src, width_dst = (k, n) if mode == "sum" else (n, k)
    index = torch.randint(
        0, n, (nb, sq, k), generator=torch.Generator().manual_seed(draw(st.integers(0, 99)))
    )
    args: dict[str, Any] = {
        "src": draw(placed((nb, g, sq, width_src), dtype, storages, contiguous=True)),
        "dst": draw(placed((nb, g, sq, width_dst), dtype, storages, contiguous=True)),
        "index": index,
        "mode": mode,
    }
    mutations = draw(mutate(args, ["src", "dst", "index"], storages))
    if index.numel() and draw(st.integers(0, 5)) == 0:
        args["index"] = index.clone()
        args["index"].view(-1)[draw(st.integers(0, index.numel() - 1))] = draw(
            st.sampled_from([-1, n, 2**40])
        )
        mutations = [*mutations, "index:value"]
    if draw(st.integers(0, 9)) == 0:
        args["mode"], mutations = "scatter", [*mutations, "mode"]
    return args, storages, mutations


@st.composite
def expi_case(draw: Any) -> tuple[dict[str, Any], list[Storage], list[str]]:
    storages: list[Storage] = []
    n, f = draw(st.integers(0, 20)), draw(st.integers(0, 9))
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    out = draw(placed((n, 2 * f), dtype, storages))
    args: dict[str, Any] = {
        "out": out.numpy() if draw(st.booleans()) else out,
        "layout": draw(st.sampled_from(sorted(_native.ROW_LAYOUTS))),
        "w": np.linspace(0.0, 1.0, f),
        "start": draw(st.sampled_from([0.0, 977.0, -3.5])),
        "step": draw(st.sampled_from([1.0, 0.5])),
        "block": draw(st.integers(1, n + 3)),
    }
    mutations = draw(mutate(args, ["out"], storages)) if isinstance(args["out"], torch.Tensor) else []
    extra = draw(st.sampled_from(["", "", "", "block", "w", "layout"]))
    if extra == "block":
        args["block"] = draw(st.integers(-3, 0))
    elif extra == "w":
        args["w"] = np.zeros((2, f))
    elif extra == "layout":
        args["layout"] = "diagonal"
    return args, storages, [*mutations, extra] if extra else mutations


def fuzz(examples: int) -> None:
    @settings(SETTINGS, max_examples=examples)
    @given(rotate_case())
    def rotate(case: tuple[dict[str, Any], list[Storage], list[str]]) -> None:
        run_case(_native.rotate, case[0], "out", case[1], case[2])

    @settings(SETTINGS, max_examples=examples)
    @given(rotate_qk_case())
    def rotate_qk_(case: tuple[dict[str, Any], list[Storage], list[str]]) -> None:
        run_case(rotate_qk, case[0], ("q_out", "k_out"), case[1], case[2])

    @settings(SETTINGS, max_examples=examples)
    @given(slots_case())
    def slots(case: tuple[dict[str, Any], list[Storage], list[str]]) -> None:
        args, storages, mutations = case
        run_case(_native.slots, args, "dst", storages, mutations, index_error="index:value" in mutations)

    @settings(SETTINGS, max_examples=examples)
    @given(expi_case())
    def expi_rows(case: tuple[dict[str, Any], list[Storage], list[str]]) -> None:
        run_case(_native.expi_rows, case[0], "out", case[1], case[2])

    for test in (rotate, rotate_qk_, slots, expi_rows):
        test()


QK_ROW_OF_2 = (0, 0, 1, 0, 1, 3, 8, 8, 4, 4, 1, 1, 2, 1, 1, 0, 8, 8, 8, 8, 8, 8)
"""rotate_qk's codes, sizes and query side after its 9 pointers: float32, half_split, positions, a batch of 3
whose queries' positions are 2 rows (neither 1 nor the batch)."""
QK_SIDE_K = (1, 1, 1, 1, 1, 0, 8, 8, 8, 8, 8, 8)


def entry_points_recheck() -> None:
    """The C entry points refuse, by themselves, sizes that contradict each other (pointers to a scratch
    buffer large enough for every call; none is touched)."""
    scratch = torch.zeros(4096)
    p = scratch.data_ptr()
    bad = {
        "rotate: table rows overlap": lambda k: k.rotate(
            p, p, p, p, 0, 0, 1, 1, 1, 2, 8, 8, 8, 8, 8, 8, 8, 8, 3, 1
        ),
        "rotate: paired flag": lambda k: k.rotate(p, p, p, p, 0, 0, 1, 1, 1, 2, 8, 8, 8, 8, 8, 8, 8, 8, 8, 2),
        "rotate: r > d": lambda k: k.rotate(p, p, p, p, 0, 0, 1, 1, 1, 2, 8, 10, 8, 8, 8, 8, 8, 8, 8, 0),
        "expi_rows: rows overlap": lambda k: k.expi_rows(p, 0, 0, 4, 2, 4, 7, p, 0.0, 1.0, 0),
        "expi_rows: scratch overflow": lambda k: k.expi_rows(p, 0, 0, 4, 2**61, 4, 8, p, 0.0, 1.0, 0),
        "slots: mode": lambda k: k.slots(p, p, p, 0, 3, 1, 1, 1, 1, 1),
        "rotate_qk: a broadcast row of 2 for a batch of 3": lambda k: k.rotate_qk(
            *[p] * 9, *QK_ROW_OF_2, *QK_SIDE_K
        ),
    }
    for what, call in bad.items():
        try:
            call(_native.kernels)
        except ValueError:
            COUNTS["entry point refused"] += 1
        else:
            raise AssertionError(f"the C entry point accepted {what}")
    assert not scratch.any(), "an entry point that refused wrote"


if __name__ == "__main__":
    assert _native.kernels is not None, "posenc._kernels is not loaded"
    entry_points_recheck()
    fuzz(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
    print(json.dumps(dict(sorted(COUNTS.items()))))
