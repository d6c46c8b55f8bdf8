"""The forward path reads no position value on the host, for every form of positions.

A ``TorchDispatchMode`` counts the operators that copy a tensor value to the host
(``aten::_local_scalar_dense``: ``.item()``, ``float(t)``, ``bool(t)``; ``aten::equal``; ``aten::is_nonzero``):
on a GPU each is a synchronisation, and each breaks CUDA-graph capture. The count must be zero per forward.
"""

from __future__ import annotations

import collections

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from posenc.nn import ALiBiBias, RotaryEmbedding, ShawRelativeBias, T5RelativeBias, TransformerEncoder
from posenc.nn.multiaxis import MultiAxisRotary

HOST_READS = frozenset({"aten::_local_scalar_dense", "aten::equal", "aten::is_nonzero", "aten::item"})

S = 80  # more than the 64 rows below which tables are formed directly
INT_DTYPES = (torch.int64, torch.int32, torch.int16, torch.uint8)


class HostReads(TorchDispatchMode):
    """Counts the operators of :data:`HOST_READS` dispatched while active."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name
        if name in HOST_READS:
            self.counts[name] += 1
        return func(*args, **(kwargs or {}))


def host_reads(call) -> dict[str, int]:
    call()  # the first call may build caches
    with HostReads() as mode:
        call()
    return dict(mode.counts)


def position_forms(s: int, b: int = 2) -> dict[str, dict[str, torch.Tensor]]:
    forms: dict[str, dict[str, torch.Tensor]] = {"default": {}}
    for dtype in INT_DTYPES:
        name = str(dtype).removeprefix("torch.")
        forms[f"[s] {name}"] = {"positions": torch.arange(s).to(dtype)}
        forms[f"[b, s] {name}"] = {"positions": (torch.arange(b * s).view(b, s) % 200).to(dtype)}
    forms["[s] float32"] = {"positions": torch.arange(s, dtype=torch.float32) + 0.5}
    forms["[1, s] float64"] = {"positions": torch.arange(s, dtype=torch.float64)[None]}
    return forms


FORMS = position_forms(S)


def test_the_counter_sees_host_reads():
    t = torch.arange(3)
    counts = host_reads(lambda: (t.sum().item(), torch.equal(t, t), float(t[1])))
    assert counts == {"aten::_local_scalar_dense": 2, "aten::equal": 1}


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("xpos", [None, 512.0])
def test_rotary_forward_reads_nothing_on_the_host(form, xpos):
    rope = RotaryEmbedding(16, xpos_scale_base=xpos, max_len=32)
    q = torch.randn(2, 3, S, 16)
    positions = FORMS[form].get("positions")
    assert host_reads(lambda: rope(q, q, q_positions=positions)) == {}
    assert host_reads(lambda: rope(q[:, :, -1:], q, offset=7)) == {}  # decoding: one query, cached keys


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("xpos", [None, 512.0])
def test_rotary_packed_sequences_read_nothing_on_the_host(dtype, xpos):
    rope = RotaryEmbedding(16, xpos_scale_base=xpos, max_len=32)
    q = torch.randn(1, 3, S, 16)
    cu_seqlens = torch.tensor([0, 30, 30, 75, S], dtype=dtype)  # an empty sequence among them
    assert host_reads(lambda: rope(q, q, cu_seqlens=cu_seqlens, offset=3)) == {}
    with torch.no_grad():
        assert host_reads(lambda: rope(q, q.clone(), cu_seqlens=cu_seqlens, inplace=True)) == {}


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("encoding", ["alibi", "t5", "shaw"])
def test_biases_read_nothing_on_the_host(form, encoding):
    module = {"alibi": ALiBiBias(4), "t5": T5RelativeBias(4), "shaw": ShawRelativeBias(8)}[encoding]
    positions = FORMS[form].get("positions")
    if encoding == "shaw":
        call = lambda: module.index(S, S, q_positions=positions, k_positions=positions)
    else:
        call = lambda: module.bias(S, S, q_positions=positions, k_positions=positions)
    if positions is not None and positions.is_floating_point() and encoding != "alibi":
        pytest.skip("T5 buckets and Shaw's slots need integer positions")
    assert host_reads(call) == {}


@pytest.mark.parametrize("form", ["default", "[s] int32", "[b, s] int64", "[b, s] uint8"])
@pytest.mark.parametrize("encoding", ["rope", "alibi", "t5", "shaw", "xpos"])
def test_encoder_forward_reads_nothing_on_the_host(form, encoding):
    torch.manual_seed(0)
    options = {"xpos_scale_base": 512.0} if encoding == "xpos" else {}
    model = TransformerEncoder(16, 2, 2, encoding="rope" if encoding == "xpos" else encoding,
                               encoding_options=options)  # fmt: skip
    x = torch.randn(2, S, 16)
    positions = FORMS[form].get("positions")
    with torch.no_grad():
        assert host_reads(lambda: model(x, positions=positions, causal=True)) == {}
    assert host_reads(lambda: model(x, positions=positions).sum().backward()) == {}


@pytest.mark.parametrize("dtype", INT_DTYPES[1:] + (torch.int8, torch.uint16, torch.uint32))
def test_every_integer_dtype_of_positions_is_accepted(dtype):
    q = torch.randn(2, 3, 5, 8, dtype=torch.float64)
    positions = torch.tensor([0, 3, 1, 7, 2]).to(dtype)
    rope = RotaryEmbedding(8)
    expected = rope(q, q, q_positions=positions.long())
    got = rope(q, q, q_positions=positions)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    keys = torch.tensor([2, 7, 1, 3, 0]).to(dtype)
    alibi = ALiBiBias(2)
    torch.testing.assert_close(
        alibi.bias(5, 5, q_positions=positions, k_positions=keys),
        alibi.bias(5, 5, q_positions=positions.long(), k_positions=keys.long()),
        rtol=0,
        atol=0,
    )  # j − i with j < i: no wrap-around in narrow unsigned dtypes


@pytest.mark.parametrize(
    "bad",
    [
        torch.tensor([0, 2**53, 1]),
        torch.tensor([0, -(2**63), 1]),
        torch.tensor([0.0, float("nan"), 1.0]),
        torch.tensor([0, 2**64 - 1, 1], dtype=torch.uint64),  # would wrap to -1 as int64
    ],
)
def test_bad_positions_are_refused_with_the_value(bad):
    q = torch.randn(1, 1, 3, 8)
    with pytest.raises(ValueError, match=r"q_positions must be finite and < 2\^53.*got"):
        RotaryEmbedding(8)(q, q, q_positions=bad)
    with pytest.raises(ValueError, match=r"positions must be finite and < 2\^53"):
        ALiBiBias(2).bias(3, 3, q_positions=bad, k_positions=bad)


def multiaxis_forms(s: int, b: int = 2, axes: int = 3) -> dict[str, torch.Tensor]:
    forms = {}
    for dtype in INT_DTYPES:
        name = str(dtype).removeprefix("torch.")
        forms[f"[A, s] {name}"] = (torch.arange(axes * s).view(axes, s) % 200).to(dtype)
        forms[f"[A, b, s] {name}"] = (torch.arange(axes * b * s).view(axes, b, s) % 200).to(dtype)
    forms["[A, b, s] float32"] = torch.arange(axes * b * s, dtype=torch.float32).view(axes, b, s) / 7
    forms["[A, s] float64"] = torch.arange(axes * s, dtype=torch.float64).view(axes, s)
    return forms


MULTIAXIS_FORMS = multiaxis_forms(S)


def multiaxis_modules() -> dict[str, MultiAxisRotary]:
    return {
        "mrope": MultiAxisRotary.mrope(16, [2, 3, 3]),
        "axial": MultiAxisRotary.axial(16, [4, 6, 6]),
        "mixed": MultiAxisRotary.mixed(16, 3),  # learnable, per-head frequencies over 2 axes
    }


@pytest.mark.parametrize("form", list(MULTIAXIS_FORMS))
@pytest.mark.parametrize("kind", ["mrope", "axial", "mixed"])
def test_multiaxis_forward_reads_nothing_on_the_host(form, kind):
    module = multiaxis_modules()[kind]
    positions = MULTIAXIS_FORMS[form][: module.n_axes]
    q = torch.randn(2, 3, S, 16)
    assert host_reads(lambda: module(q, q, positions=positions)) == {}
    assert host_reads(lambda: module(q, q, positions=positions, k_positions=positions)) == {}
    if kind == "mixed":
        assert host_reads(lambda: sum(t.sum() for t in module(q, q, positions=positions)).backward()) == {}


@pytest.mark.parametrize("kind", ["mrope", "axial", "mixed"])
@pytest.mark.parametrize("form", ["[A, s] int64", "[A, b, s] int32", "[A, b, s] float32"])
def test_multiaxis_compiles_with_fullgraph(kind, form):
    module = multiaxis_modules()[kind]
    positions = MULTIAXIS_FORMS[form][: module.n_axes]
    q = torch.randn(2, 3, S, 16)
    torch._dynamo.reset()  # each case compiles afresh (the recompile limit counts across cases)
    compiled = torch.compile(module, backend="aot_eager", fullgraph=True)  # any graph break raises
    for got, expected in zip(
        compiled(q, q, positions=positions), module(q, q, positions=positions), strict=True
    ):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize(
    "bad",
    [
        torch.tensor([[0, 2**53, 1], [0, 1, 2], [0, 1, 2]]),
        torch.tensor([[0.0, 1.0, 2.0], [0.0, float("inf"), 1.0], [0.0, 1.0, 2.0]]),
        torch.tensor([[[0, 1, 2**64 - 1]]] * 3, dtype=torch.uint64),
    ],
)
def test_multiaxis_bad_positions_are_refused_with_the_value(bad):
    module = MultiAxisRotary.mrope(16, [2, 3, 3])
    q = torch.randn(1, 1, 3, 16)
    with pytest.raises(ValueError, match=r"^positions must be finite and < 2\^53.*got"):
        module(q, q, positions=bad)
    with pytest.raises(ValueError, match=r"^k_positions must be finite and < 2\^53.*got"):
        module(q, q, positions=torch.zeros(bad.shape, dtype=torch.int64), k_positions=bad)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2])
def test_positions_in_rounding_float_dtypes_are_refused(dtype):
    q = torch.randn(1, 1, 3, 8)
    positions = torch.tensor([0.0, 1.0, 2.0]).to(dtype)
    with pytest.raises(
        TypeError, match=rf"^q_positions must be an integer dtype, float32 or float64, got {dtype}"
    ):
        RotaryEmbedding(8)(q, q, q_positions=positions)
    with pytest.raises(
        TypeError, match=rf"^positions must be an integer dtype, float32 or float64, got {dtype}"
    ):
        MultiAxisRotary.mrope(8, [1, 1, 2])(q, q, positions=positions.expand(3, 3))


ROPE_TYPE_PARAMETERS = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "ntk": {"rope_type": "ntk", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 4.0},
    "yarn": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 32},
    "longrope": {
        "rope_type": "longrope",
        "short_factor": [1.0 + 0.1 * i for i in range(8)],
        "long_factor": [1.0 + 0.5 * i for i in range(8)],
        "original_max_position_embeddings": 32,
    },
    "llama3": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16,
    },
    "ntk_alpha": {"rope_type": "dynamic", "alpha": 1000.0},  # Hunyuan's fixed NTK-α
    "ntk_mixed": {"rope_type": "ntk", "factor": 4.0, "mixed_b": 2.0},  # vLLM's reading of a config's "ntk"
    "deepseek_yarn": {"rope_type": "deepseek_yarn", "factor": 2.0, "original_max_position_embeddings": 32},
}


def rope_of_type(name: str) -> RotaryEmbedding:
    """A rotary embedding of rope type ``name`` over a 64-position context (S = 80 runs beyond it)."""
    from posenc.nn import rope_types

    if name in ("default", "ntk", "proportional"):
        if name == "default":
            return RotaryEmbedding(16, max_len=32)
        options = {"partial_rotary_factor": 0.5} if name == "proportional" else {}
        return RotaryEmbedding(16, scaling=name, scaling_factor=None if name == "proportional" else 4.0,
                               scaling_options=options or None, max_len=32)  # fmt: skip
    config = {"head_dim": 16, "max_position_embeddings": 64, "rope_parameters": ROPE_TYPE_PARAMETERS[name]}
    assert name in rope_types.ROPE_TYPES
    return RotaryEmbedding.from_hf(config, max_len=32)


def test_every_rope_type_is_covered():
    from posenc.nn import rope_types

    assert set(rope_types.ROPE_TYPES) <= {"default", "proportional", *ROPE_TYPE_PARAMETERS}


@pytest.mark.parametrize("form", ["default", "[s] int64", "[b, s] int32", "[s] float32", "[1, s] float64"])
@pytest.mark.parametrize("name", ["default", "proportional", *ROPE_TYPE_PARAMETERS])
def test_every_rope_type_reads_nothing_on_the_host(name, form):
    # dynamic and longrope follow the length: from offset + s_k for default positions, on the device for
    # explicit ones; short and long calls, inside and beyond the original context, in turn
    rope = rope_of_type(name)
    q = torch.randn(2, 3, S, 16)
    positions = FORMS[form].get("positions")
    for s in (S, 8):
        p = None if positions is None else positions[..., :s]
        x = q[:, :, :s]
        assert host_reads(lambda x=x, p=p: rope(x, x, q_positions=p)) == {}, s
    assert host_reads(lambda: rope(q[:, :, -1:], q, offset=7)) == {}  # decoding: one query, cached keys
    assert host_reads(lambda: rope.cos_sin(S, positions=positions, dtype=torch.float32)) == {}


class Dispatched(TorchDispatchMode):
    """Counts every operator dispatched while active (views included)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func._schema.name)
        return func(*args, **(kwargs or {}))


def dispatched(call) -> list[str]:
    call()  # the first call may build caches
    with Dispatched() as mode:
        call()
    return mode.ops


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("layout", ["half_split", "adjacent"])
def test_a_decoding_step_at_tensor_positions_dispatches_few_operators(dtype, layout):
    # one query and key at [b, 1] positions (q_positions only: it serves the keys too), no more than 12
    # operators in all: on the CPU int64 positions are checked once, by the loop that rotates q and k
    # (test below), so no reduction asserts them; int32 holds no value >= 2^53
    rope = RotaryEmbedding(128, layout=layout, max_len=4096)
    q, k = torch.randn(1, 32, 1, 128), torch.randn(1, 8, 1, 128)
    positions = torch.tensor([[100]], dtype=dtype)
    ops = dispatched(lambda: rope(q, k, q_positions=positions))
    assert len(ops) <= 12, ops
    assert ops.count("aten::_assert_async") == 0, ops
    assert len(dispatched(lambda: rope(q, k, offset=100))) <= 4


@pytest.mark.parametrize("bad", [2**53, -(2**53), -(2**63)])
@pytest.mark.parametrize("layout", ["half_split", "adjacent"])
def test_a_decoding_step_refuses_a_bad_position_once_checked(bad, layout):
    # the decoding step of the test above, its one check of the values: for the queries' positions (serving
    # the keys too), and for distinct keys' positions, each named, with the first bad value
    rope = RotaryEmbedding(128, layout=layout, max_len=4096)
    q, k = torch.randn(2, 32, 1, 128), torch.randn(2, 8, 1, 128)
    good, worse = torch.tensor([[100], [7]]), torch.tensor([[100], [bad]])
    with pytest.raises(ValueError, match=rf"^q_positions must be finite and < 2\^53 .*, got {bad}$"):
        rope(q, k, q_positions=worse)
    with pytest.raises(ValueError, match=rf"^q_positions must be finite and < 2\^53 .*, got {bad}$"):
        rope(q, k, q_positions=worse, k_positions=good)
    with pytest.raises(ValueError, match=rf"^k_positions must be finite and < 2\^53 .*, got {bad}$"):
        rope(q, k, q_positions=good, k_positions=worse)


def python_depth(call) -> int:
    """The most posenc Python frames on the stack at once while ``call`` runs (after a first call)."""
    import sys

    call()
    deepest = 0

    def profile(frame, event, arg):
        nonlocal deepest
        if event == "call" and "/posenc/" in frame.f_code.co_filename:
            depth, f = 0, frame
            while f is not None:
                depth += "/posenc/" in f.f_code.co_filename
                f = f.f_back
            deepest = max(deepest, depth)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return deepest


@pytest.mark.parametrize(
    "options", [{}, {"offset": 7}, {"q_positions": torch.tensor([[100]])}, {"q_positions": torch.arange(8)}]
)
def test_the_forward_reaches_the_arithmetic_within_five_python_frames(options):
    # RotaryEmbedding.forward itself counts as one; the CPU loop is the arithmetic
    rope = RotaryEmbedding(64, max_len=64)
    s = 1 if "q_positions" in options and options["q_positions"].numel() == 1 else 8
    q = torch.randn(2, 4, s, 64)
    assert python_depth(lambda: rope(q, q, **options)) <= 5
    batched = torch.arange(16).view(2, 8)
    q = torch.randn(2, 4, 8, 64)
    assert python_depth(lambda: rope(q, q, q_positions=batched)) <= 5
