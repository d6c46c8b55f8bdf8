"""The CUDA path: rotary and tables on the GPU against float64 references, every registered encoding
in a model on the GPU against the same model on the CPU, and ``posenc bench --device cuda``.

Skipped on machines without a CUDA device. Where Triton is installed, rotary and the tables run on
posenc's GPU kernels (:mod:`posenc._gpu`); each test that says so also runs the pure PyTorch code and
checks that the kernel was the one called.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch
from bench_args import tiny_bench

import posenc
from posenc import _gpu, spectrum
from posenc.cli import main
from posenc.nn import DFTEncoding, RotaryEmbedding, SinusoidalEncoding, apply_rotary, rotary
from posenc.nn import functional as F
from posenc.nn.build import available_encodings
from posenc_bench.models import TransformerClassifier

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
REL = {torch.float16: 2.0**-9, torch.bfloat16: 2.0**-7, torch.float32: 2.0**-21, torch.float64: 2.0**-50}
"""Allowed error relative to the size of the terms summed: four roundings to the dtype (the pure PyTorch
code rounds each operation in half precision; the kernels once)."""


@pytest.fixture(params=["kernel", "pure torch"])
def path(request, monkeypatch):
    """Each test twice: with posenc's GPU kernels (skipped without Triton) and with the pure PyTorch code;
    yields the list of kernel calls made, so a test can check that the kernel ran."""
    calls: list[str] = []
    if request.param == "pure torch":
        monkeypatch.setattr(_gpu, "kernels", lambda device_type, dtype: None)
    else:
        kernels = _gpu.kernels("cuda", torch.float32)
        if kernels is None:
            pytest.skip("Triton is not installed: no GPU kernels")
        for name in ("rotate", "waves"):
            original = getattr(kernels, name)

            def counted(*args, _name=name, _original=original, **kwargs):
                calls.append(_name)
                return _original(*args, **kwargs)

            monkeypatch.setattr(kernels, name, counted)
    yield request.param, calls


def _close(got: torch.Tensor, ref: tuple[torch.Tensor, torch.Tensor], dtype: torch.dtype) -> None:
    """``got`` within :data:`REL` of the float64 ``(value, size of the terms)`` of :func:`_reference`."""
    value, size = ref
    err = (got.double().cpu() - value).abs()
    bound = REL[dtype] * size + 1e-300
    assert bool((err <= bound).all()), (
        f"max error {err.max().item():.3g}, worst ratio {(err / bound).max():.3g}"
    )


def _reference(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, inverse: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``R x`` (``Rᵀ x``) in float64 on the CPU, written out pair by pair (Su et al. 2021, eq. 34), and
    the sum of the terms' magnitudes (``|x_a·c_a| + |x_b·s_a|``, …) that rounding errors scale with."""
    x, c, s = x.double().cpu(), cos.double().cpu(), sin.double().cpu()
    r = c.shape[-1]
    a = torch.arange(r // 2) if layout == "half_split" else 2 * torch.arange(r // 2)
    b = a + r // 2 if layout == "half_split" else a + 1
    sign = -1.0 if inverse else 1.0
    out, size = x.clone(), x.abs()
    out[..., a] = x[..., a] * c[:, a] - sign * x[..., b] * s[:, a]
    out[..., b] = x[..., b] * c[:, b] + sign * x[..., a] * s[:, b]
    size[..., a] = (x[..., a] * c[:, a]).abs() + (x[..., b] * s[:, a]).abs()
    size[..., b] = (x[..., b] * c[:, b]).abs() + (x[..., a] * s[:, b]).abs()
    return out, size


@pytest.mark.parametrize("layout", rotary.LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rotated", [64, 24])  # every dim, or partial rotary (dims 24 … 63 copied)
@pytest.mark.parametrize("strided", [False, True])  # q from a [b, s, h, d] projection, viewed [b, h, s, d]
def test_rotary_forward_and_backward_match_float64(path, layout, dtype, rotated, strided):
    mode, calls = path
    torch.manual_seed(0)
    b, h, s, d = 2, 3, 77, 64
    base = torch.randn(b, s, h, d, device="cuda").to(dtype)
    x = base.transpose(1, 2) if strided else base.transpose(1, 2).contiguous()
    cos, sin = RotaryEmbedding(rotated, layout=layout, max_len=s).cos_sin(s, dtype=dtype, device="cuda")
    x.requires_grad_()
    y = apply_rotary(x, cos, sin, layout=layout)
    grad = torch.randn_like(y)
    y.backward(grad)
    assert y.dtype == dtype and y.stride() == x.stride()
    _close(y.detach(), _reference(x.detach(), cos, sin, layout, inverse=False), dtype)
    _close(x.grad, _reference(grad, cos, sin, layout, inverse=True), dtype)
    assert [c for c in calls if c == "rotate"] == (["rotate", "rotate"] if mode == "kernel" else [])


@pytest.mark.parametrize("layout", rotary.LAYOUTS)
def test_rotary_general_tables_on_cuda(path, layout):
    # tables whose two columns of a pair differ (not a rotation): the kernel's unpaired form
    torch.manual_seed(1)
    x = torch.randn(4, 50, 32, device="cuda")
    cos, sin = torch.randn(50, 32, device="cuda"), torch.randn(50, 32, device="cuda")
    _close(apply_rotary(x, cos, sin, layout=layout), _reference(x, cos, sin, layout, False), torch.float32)


def test_rotary_refuses_tables_on_another_device():
    x = torch.randn(2, 8, 16, device="cuda")
    cos, sin = RotaryEmbedding(16, max_len=8).cos_sin(8, dtype=torch.float32)
    with pytest.raises(ValueError, match="cos and sin must be on x's device cuda:0, got cpu and cpu"):
        apply_rotary(x, cos, sin, layout="half_split")


@pytest.mark.parametrize("layout", rotary.LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_rotary_on_cuda_matches_eager(layout, dtype):
    torch._dynamo.reset()
    torch.manual_seed(2)
    cos, sin = RotaryEmbedding(64, layout=layout, max_len=96).cos_sin(96, dtype=dtype, device="cuda")

    def step(x: torch.Tensor) -> torch.Tensor:
        return apply_rotary(x, cos, sin, layout=layout)

    x = torch.randn(2, 4, 96, 64, device="cuda", dtype=dtype, requires_grad=True)
    x_c = x.detach().clone().requires_grad_()
    grad = torch.randn_like(x)
    step(x).backward(grad)
    y_c = torch.compile(step)(x_c)
    y_c.backward(grad)
    _close(y_c.detach(), _reference(x.detach(), cos, sin, layout, False), dtype)
    _close(x_c.grad, _reference(grad, cos, sin, layout, True), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("layout", spectrum.LAYOUTS)
def test_sinusoidal_tables_on_cuda_are_correctly_rounded_at_ten_million(path, dtype, layout):
    mode, calls = path
    d, n, start = 130, 3000, 10**7 - 3000
    m = SinusoidalEncoding(d, layout=layout).cuda()
    got = m(torch.zeros(1, n, d, dtype=dtype, device="cuda"), offset=start)[0].double().cpu().numpy()
    ref = posenc.sinusoidal(np.arange(start, start + n), d, layout=layout)  # float64, the NumPy path
    # half a float32 ulp (2.98e-8) plus the float64 rounding of the angle t·w (≤ 9.3e-10 here), twice
    tol = 3.1e-8 if dtype == torch.float32 else 2 * 9.4e-10
    assert np.abs(got - ref).max() <= tol
    assert ("waves" in calls) == (mode == "kernel")


@pytest.mark.parametrize("kind", ["integer range", "fractional"])
def test_tables_at_explicit_positions_on_cuda(path, kind):
    # explicit positions: every angle formed directly in float64 (detecting a range would read them on the host)
    _, calls = path
    w = torch.from_numpy(spectrum.geometric(64))
    if kind == "integer range":
        t = torch.arange(10**7 - 300, 10**7, dtype=torch.float64)
    else:
        t = torch.tensor([0.5, -2.0, 7.0, 1e7, 3.0, 123456.25], dtype=torch.float64).repeat(20)
    sin, cos = F.sincos(t.cuda(), w.cuda(), dtype=torch.float32)
    a = torch.outer(t, w)
    for got, ref in ((sin, torch.sin(a)), (cos, torch.cos(a))):
        assert (got.double().cpu() - ref).abs().max() <= 3.1e-8 + 9.3e-10
    assert "waves" not in calls


def test_dft_table_with_amplitudes_on_cuda(path):
    m = DFTEncoding(48)
    got = m.table(40, dtype=torch.float64, device="cuda").cpu()
    torch.testing.assert_close(got, m.table(40, dtype=torch.float64), rtol=0, atol=1e-13)


@pytest.mark.parametrize("encoding", available_encodings())
def test_every_encoding_trains_on_cuda_like_on_cpu(encoding):
    torch.manual_seed(3)
    options = {"layout": "adjacent"} if encoding == "rope" else {}
    cpu = TransformerClassifier(
        5, 32, 4, 2, encoding=encoding, encoding_options=options, dropout=0.0, max_len=64
    )
    gpu = copy.deepcopy(cpu).cuda()
    x, target = torch.randn(8, 32, 5), (torch.rand(8) < 0.5).float()  # 32 steps: the DFT encoding's lattice
    losses = []
    for model, device in ((cpu, "cpu"), (gpu, "cuda")):
        logits = model(x.to(device))
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, target.to(device))
        loss.backward()
        losses.append((logits.detach().cpu(), loss.item()))
    torch.testing.assert_close(losses[1][0], losses[0][0], rtol=1e-4, atol=1e-5)
    for (name, p_cpu), p_gpu in zip(cpu.named_parameters(), gpu.parameters()):
        assert p_gpu.grad is not None and p_gpu.grad.is_cuda, name
        torch.testing.assert_close(p_gpu.grad.cpu(), p_cpu.grad, rtol=1e-3, atol=1e-5, msg=name)


@pytest.mark.slow
def test_bench_cli_on_cuda(tmp_path, capsys):
    args = tiny_bench(length=1024, epochs=2, seeds=1)
    assert main(["bench", *args, "--device", "cuda", "--encodings", "rope,t5", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert {run["encoding"] for run in data["runs"]} == {"none", "sinusoidal", "rope", "t5"}
    assert data["meta"]["device"] == "cuda"


LENGTHGEN = ["bench", "--task", "lengthgen", "--lengthgen-tasks", "passkey,count", "--encodings", "none,rope,fire,cope",
             "--seeds", "1", "--steps", "6", "--train-length", "4", "--vocab", "10", "--d-model", "16", "--heads", "2",
             "--layers", "1", "--n-test", "4", "--passkey-lengths", "1,2", "--test-lengths", "1,2",
             "--passkey-depths", "0,1", "--rope-scaling", "yarn", "--random-positions", "40", "--no-progress"]  # fmt: skip


def test_lengthgen_cli_on_cuda(tmp_path, monkeypatch):
    """``--task lengthgen --device cuda`` end to end: every forward (training, test, rotary scaling) gets
    its tokens, positions and weights on the GPU, the trained encodings are kept on the CPU, and the
    losses match the same grid run on the CPU."""
    from posenc_bench.decoder import CausalDecoder

    seen: set[str] = set()
    forward = CausalDecoder.forward

    def recorded(self, tokens, *, positions=None):
        seen.update(t.device.type for t in (tokens, *self.parameters()))
        if positions is not None:
            seen.add(positions.device.type)
        return forward(self, tokens, positions=positions)

    monkeypatch.setattr(CausalDecoder, "forward", recorded)
    assert main([*LENGTHGEN, "--device", "cuda", "--out", str(tmp_path / "cuda")]) == 0
    assert seen == {"cuda"}
    seen.clear()
    assert main([*LENGTHGEN, "--device", "cpu", "--out", str(tmp_path / "cpu")]) == 0
    assert seen == {"cpu"}
    runs = sorted((tmp_path / "cuda" / "runs").rglob("metrics.json"))
    assert len(runs) == 2 * 4
    for path in runs:
        on_cpu = tmp_path / "cpu" / path.relative_to(tmp_path / "cuda")
        gpu, cpu = json.loads(path.read_text()), json.loads(on_cpu.read_text())
        assert gpu["final_loss"] == pytest.approx(cpu["final_loss"], rel=1e-3) and gpu["tokens_per_s"] > 0
        assert set(gpu.get("scaled", {})) == set(cpu.get("scaled", {}))
        state = torch.load(path.parent / "encoding.pt", weights_only=True)
        assert all(v.device.type == "cpu" for v in state.values())
    table = json.loads((tmp_path / "cuda" / "lengthgen.json").read_text())
    assert set(table["criteria"]["count"]) == {"rope", "fire", "cope"}


# --- RotaryEmbedding on CUDA: the one-launch operator posenc::rotate_qk, graphs and the compiler ------------

POSITION_FORMS = (
    "default",
    "offset",
    "[s] int32",
    "[1, s] int64",
    "[b, s] int64",
    "[b, s] int32 beyond cache",
)
ATOL = {torch.float32: 4e-6, torch.bfloat16: 3e-2, torch.float64: 1e-13}
"""q, k ~ N(0, 1): a few roundings to the dtype of values of size up to about 5."""


def _positions_kwargs(form: str, b: int, s: int, device: str = "cuda") -> dict[str, object]:
    g = torch.Generator().manual_seed(3)
    if form == "default":
        return {}
    if form == "offset":
        return {"offset": 37}
    if form == "[s] int32":
        return {"q_positions": (torch.arange(s) + 5).int().to(device)}
    if form == "[1, s] int64":
        return {"q_positions": (torch.arange(s) * 2)[None].to(device)}
    if form == "[b, s] int64":
        return {"q_positions": torch.randint(0, 60, (b, s), generator=g).to(device)}
    return {"q_positions": torch.randint(0, 5000, (b, s), generator=g).int().to(device)}  # cache holds 64


@pytest.fixture
def qk_calls(monkeypatch):
    """The calls of the one-launch kernel (skipped without Triton)."""
    kernels = _gpu.kernels("cuda", torch.float32)
    if kernels is None:
        pytest.skip("Triton is not installed: no GPU kernels")
    calls: list[int] = []
    original = kernels.rotate_qk

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(kernels, "rotate_qk", counted)
    return calls


@pytest.mark.parametrize("positions", ["[b, 1] int64", "int offsets"])
def test_the_qk_launcher_decodes_in_at_most_two_cuda_kernels(positions):
    """The launcher alone (what the module adds around it is counted by the module's tests): the q+k
    kernel, and the far-rows kernel only where the host cannot rule positions beyond the cache out."""
    kernels = _gpu.kernels("cuda", torch.bfloat16)
    if kernels is None:
        pytest.skip("Triton is not installed: no GPU kernels")
    b, d, n = 4, 128, 64
    q = torch.randn(b, 32, 1, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, 8, 1, d, device="cuda", dtype=torch.bfloat16)
    table = torch.randn(n, d, device="cuda")
    theta = torch.rand(d // 2 + 1, device="cuda", dtype=torch.float64)
    pos = torch.randint(0, n, (b, 1), device="cuda")
    given = ((pos, pos), (0, 0)) if positions == "[b, 1] int64" else (None, (n - 1, n - 1))
    args = (q, k, torch.empty_like(q), torch.empty_like(k), *given, (table[:, :64], table[:, 64:]), theta)

    def call() -> None:
        kernels.rotate_qk(*args, "half_split", d, False, checks="signature")

    call()  # compiled and its signature checked
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    launched = sorted(e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    expected = (
        ["_rotate_qk_far_kernel", "_rotate_qk_kernel"]
        if positions == "[b, 1] int64"
        else ["_rotate_qk_kernel"]
    )
    assert launched == expected


@pytest.mark.parametrize("form", POSITION_FORMS)
@pytest.mark.parametrize("layout", rotary.LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_rotary_module_on_cuda_is_one_launch_and_matches_float64(qk_calls, form, layout, dtype):
    torch.manual_seed(0)
    b, h, s, d = 2, 3, 9, 24
    rope = RotaryEmbedding(d, rotary_dim=20, layout=layout, max_len=64)
    reference = RotaryEmbedding(d, rotary_dim=20, layout=layout, max_len=64)
    q = torch.randn(b, s, h, d, dtype=torch.float64).to(dtype).transpose(1, 2)  # Hugging Face's layout
    k = torch.randn(b, 1, s, d, dtype=torch.float64).to(dtype)  # one key head (GQA)
    kwargs = _positions_kwargs(form, b, s)
    q_c, k_c = q.cuda().requires_grad_(), k.cuda().requires_grad_()
    out_q, out_k = rope.cuda()(q_c, k_c, **kwargs)
    assert len(qk_calls) == 1
    assert out_q.stride() == q_c.stride() and out_q.dtype == dtype
    cpu_kwargs = {n: v.cpu() if isinstance(v, torch.Tensor) else v for n, v in kwargs.items()}
    q64, k64 = q.double().requires_grad_(), k.double().requires_grad_()
    ref_q, ref_k = reference.double()(q64, k64, **cpu_kwargs)
    torch.testing.assert_close(out_q.double().cpu(), ref_q.detach(), rtol=0, atol=ATOL[dtype])
    torch.testing.assert_close(out_k.double().cpu(), ref_k.detach(), rtol=0, atol=ATOL[dtype])
    grad_q, grad_k = torch.randn_like(ref_q), torch.randn_like(ref_k)
    torch.autograd.backward((out_q, out_k), (grad_q.to(dtype).cuda(), grad_k.to(dtype).cuda()))
    assert len(qk_calls) == 2  # the backward: one launch for both gradients
    torch.autograd.backward((ref_q, ref_k), (grad_q.to(dtype).double(), grad_k.to(dtype).double()))
    torch.testing.assert_close(q_c.grad.double().cpu(), q64.grad, rtol=0, atol=ATOL[dtype])
    torch.testing.assert_close(k_c.grad.double().cpu(), k64.grad, rtol=0, atol=ATOL[dtype])


@pytest.mark.parametrize("form", POSITION_FORMS)
def test_rotary_module_is_captured_in_a_cuda_graph_for_every_position_form(qk_calls, form):
    torch.manual_seed(1)
    b, h, s, d = 4, 8, 1 if form != "offset" else 3, 64
    rope = RotaryEmbedding(d, max_len=64).cuda()
    q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    k = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    kwargs = _positions_kwargs(form, b, s)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            rope(q, k, **kwargs)  # warm-up: caches, Triton compilation
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out_q, out_k = rope(q, k, **kwargs)
    q.copy_(torch.randn_like(q))  # new inputs, and new positions, in the captured tensors
    positions = kwargs.get("q_positions")
    if isinstance(positions, torch.Tensor):
        positions.copy_(positions.flip(-1))
    graph.replay()
    torch.cuda.synchronize()
    expected_q, expected_k = rope(q, k, **kwargs)
    torch.testing.assert_close(out_q, expected_q, rtol=0, atol=0)
    torch.testing.assert_close(out_k, expected_k, rtol=0, atol=0)


@pytest.mark.parametrize("inplace", [False, True])
def test_rotary_packed_sequences_on_cuda_are_one_launch_and_captured_in_a_cuda_graph(qk_calls, inplace):
    """cu_seqlens: positions found on the device (no host read), one launch for q and k, the float64 CPU
    result; captured in a CUDA graph, new cumulative lengths written into the captured tensor are used."""
    torch.manual_seed(2)
    h, d, total = 4, 32, 16
    rope = RotaryEmbedding(d, max_len=64).cuda()
    reference = RotaryEmbedding(d, max_len=64).double()
    cu = torch.tensor([0, 3, 3, 10, total], dtype=torch.int32, device="cuda")
    q = torch.randn(1, total, h, d, device="cuda").transpose(1, 2)
    k = torch.randn(1, h, total, d, device="cuda")
    ref_q, ref_k = reference(q.double().cpu(), k.double().cpu(), cu_seqlens=cu.cpu())
    with torch.no_grad():
        out_q, out_k = rope(q, k, cu_seqlens=cu, inplace=inplace)
    assert len(qk_calls) == 1
    assert (out_q is q and out_k is k) == inplace
    torch.testing.assert_close(out_q.double().cpu(), ref_q, rtol=0, atol=ATOL[torch.float32])
    torch.testing.assert_close(out_k.double().cpu(), ref_k, rtol=0, atol=ATOL[torch.float32])
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.no_grad():
        for _ in range(2):
            rope(q, k, cu_seqlens=cu)  # warm-up
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        out_q, out_k = rope(q, k, cu_seqlens=cu)
    cu.copy_(torch.tensor([0, 8, 9, 9, total], dtype=torch.int32))
    graph.replay()
    torch.cuda.synchronize()
    expected_q, expected_k = rope(q, k, cu_seqlens=cu)
    torch.testing.assert_close(out_q, expected_q, rtol=0, atol=0)
    torch.testing.assert_close(out_k, expected_k, rtol=0, atol=0)


@pytest.mark.parametrize("form", ["[b, s] int64", "[b, s] int32 beyond cache", "default"])
def test_rotary_module_compiles_with_fullgraph_on_cuda(qk_calls, form):
    torch._dynamo.reset()
    torch.manual_seed(2)
    b, h, s, d = 2, 4, 7, 32
    rope = RotaryEmbedding(d, max_len=64).cuda()
    q = torch.randn(b, h, s, d, device="cuda", requires_grad=True)
    k = torch.randn(b, h, s, d, device="cuda", requires_grad=True)
    kwargs = _positions_kwargs(form, b, s)

    def step(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        out_q, out_k = rope(q, k, **kwargs)
        return (out_q * out_k).sum()

    eager = step(q, k)
    dq, dk = torch.autograd.grad(eager, (q, k))
    compiled = torch.compile(step, fullgraph=True)(q, k)
    cq, ck = torch.autograd.grad(compiled, (q, k))
    torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(cq, dq, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ck, dk, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("encoding", ["rope", "alibi", "t5", "shaw"])
def test_encoder_with_batched_positions_compiles_with_fullgraph_on_cuda(encoding):
    from posenc.nn import TransformerEncoder

    torch._dynamo.reset()
    torch.manual_seed(3)
    model = TransformerEncoder(32, 4, 2, encoding=encoding).cuda()
    x = torch.randn(2, 16, 32, device="cuda")
    positions = torch.randint(0, 100, (2, 16), device="cuda")
    eager = model(x, positions=positions, causal=True)
    compiled = torch.compile(model, fullgraph=True)(x, positions=positions, causal=True)
    torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-4)


# --- Score terms on fused kernels: a mask that needs its gradient goes to SDPA, formed without atomics -----


def _encoder_pair(name: str, options: dict | None):
    """The same TransformerEncoder on the CPU in float64 and on CUDA in float32."""
    from posenc.nn import TransformerEncoder

    torch.manual_seed(5)
    cpu = TransformerEncoder(32, 4, 2, encoding=name, encoding_options=options, max_len=64).double()
    return cpu, copy.deepcopy(cpu).float().cuda()


@pytest.mark.parametrize(
    ("name", "options", "fused"),
    [
        ("t5", None, True),
        ("t5", {"bidirectional": False}, True),
        ("alibi", None, True),
        ("shaw", None, True),
        ("shaw", {"on_values": True}, False),
        ("rope", None, True),
    ],
)
@pytest.mark.parametrize("masks", ["causal", "padded", "none"])
def test_score_terms_train_on_the_fused_kernel_like_the_float64_cpu_model(
    name, options, fused, masks, monkeypatch
):
    """Outputs and every parameter's gradient on CUDA (float32) against the float64 CPU model; on CUDA a
    learned bias and Shaw's key term reach ``scaled_dot_product_attention`` (no written-out scores)."""
    from posenc.backends import scores

    cpu, gpu = _encoder_pair(name, options)
    x = torch.randn(3, 40, 32, dtype=torch.float64)
    pad = torch.zeros(3, 40, dtype=torch.bool)
    pad[1, -7:] = True
    kwargs = {"causal": masks == "causal", "key_padding_mask": pad if masks == "padded" else None}
    explicit: list[int] = []
    original = scores.choose

    def choose(call):
        backend = original(call)
        explicit.extend([1] if backend.name == "explicit" else [])
        return backend

    monkeypatch.setattr(scores, "choose", choose)
    out_cpu = cpu(x, **kwargs)
    out_cpu.square().mean().backward()
    explicit.clear()
    gpu_kwargs = {**kwargs, "key_padding_mask": None if kwargs["key_padding_mask"] is None else pad.cuda()}
    out_gpu = gpu(x.float().cuda(), **gpu_kwargs)
    out_gpu.square().mean().backward()
    assert (not explicit) == fused, f"written-out attention calls on CUDA: {len(explicit)}"
    torch.testing.assert_close(out_gpu.double().cpu(), out_cpu, rtol=1e-4, atol=1e-4)
    for (pname, p_cpu), p_gpu in zip(cpu.named_parameters(), gpu.parameters()):
        assert p_gpu.grad is not None, pname
        torch.testing.assert_close(p_gpu.grad.double().cpu(), p_cpu.grad, rtol=2e-3, atol=2e-5, msg=pname)


@pytest.mark.parametrize("shift", [-3, 0, 2])
def test_band_terms_on_cuda_equal_the_scatter_forms(shift):
    from posenc.nn._diagonals import band_gather, band_sum
    from posenc.nn._slots import gather_slots, sum_slots

    k, s_q, s_k = 4, 33, 40
    index = ((torch.arange(s_k)[None] - torch.arange(s_q)[:, None] + shift).clamp(-k, k) + k).cuda()
    slots = torch.randn(2, 3, s_q, 2 * k + 1, device="cuda", requires_grad=True)
    weights = torch.randn(2, 3, s_q, s_k, device="cuda", requires_grad=True)
    for fast, plain, src in ((band_gather, gather_slots, slots), (band_sum, sum_slots, weights)):
        got = fast(src, index, k, shift)
        ref = plain(src, index) if plain is gather_slots else plain(src, index, 2 * k + 1)
        torch.testing.assert_close(got, ref, rtol=1e-6, atol=1e-5)
        g = torch.randn_like(got)
        (d_got,) = torch.autograd.grad(got, src, g)
        (d_ref,) = torch.autograd.grad(ref, src, g)
        torch.testing.assert_close(d_got, d_ref, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("name", ["t5", "shaw", "rope"])
def test_encoder_trains_under_compile_with_fullgraph_on_cuda(name):
    """Default positions (the diagonal and one-launch paths): compiled forward and gradients equal eager."""
    from posenc.nn import TransformerEncoder

    torch._dynamo.reset()
    torch.manual_seed(3)
    model = TransformerEncoder(32, 4, 2, encoding=name).cuda()
    x = torch.randn(2, 16, 32, device="cuda")
    eager = model(x, causal=True)
    grads = torch.autograd.grad(eager.square().sum(), list(model.parameters()))
    compiled = torch.compile(model, fullgraph=True)(x, causal=True)
    compiled_grads = torch.autograd.grad(compiled.square().sum(), list(model.parameters()))
    torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-4)
    for got, ref in zip(compiled_grads, grads):
        torch.testing.assert_close(got, ref, rtol=1e-3, atol=1e-4)


@pytest.mark.xfail(
    reason="on an H200 (torch 2.11) the compiled graph held no posenc::rotate_qk: the one launch was not chosen while "
    "dynamo traced on CUDA, though a CPU trace with the device check and kernels stubbed holds three; "
    "cause not found yet",
    strict=False,
)
def test_compiled_encoder_rope_rotates_q_and_k_by_one_launch_per_layer():
    """Under ``torch.compile`` each layer's ``transform_qk`` is one ``posenc::rotate_qk`` call (eager mode
    keeps the table rotations); both equal the float64 CPU model, at default and ``[b, s]`` positions."""
    from posenc.nn import TransformerEncoder

    if _gpu.kernels("cuda", torch.float32) is None:
        pytest.skip("Triton is not installed: no one-launch kernel")
    torch._dynamo.reset()
    torch.manual_seed(3)
    cpu = TransformerEncoder(32, 4, 3, encoding="rope").double()
    gpu = copy.deepcopy(cpu).float().cuda()
    graphs: list[torch.fx.GraphModule] = []

    def record(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = torch.compile(gpu, backend=record, fullgraph=True)
    x = torch.randn(2, 24, 32, dtype=torch.float64)
    for positions in (None, torch.randint(0, 500, (2, 24))):
        graphs.clear()
        device_positions = None if positions is None else positions.cuda()
        got = compiled(x.float().cuda(), positions=device_positions, causal=True)
        ops = [n for g in graphs for n in g.graph.nodes if "rotate_qk" in str(n.target)]
        assert len(ops) == 3, [str(n.target) for g in graphs for n in g.graph.nodes]
        ref = cpu(x, positions=positions, causal=True)
        torch.testing.assert_close(got.double().cpu(), ref, rtol=1e-4, atol=1e-4)
        eager = gpu(x.float().cuda(), positions=device_positions, causal=True)
        torch.testing.assert_close(eager.double().cpu(), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["t5", "shaw", "alibi"])
def test_fused_score_terms_under_bf16_autocast_give_the_float32_gradients(name):
    """Whichever fused backend SDPA picks for a bf16 mask that needs its gradient, every parameter's
    gradient points as the float32 model's does (cosine ≥ 0.99; bf16 rounds at 2^-8)."""
    from posenc.nn import TransformerEncoder

    torch.manual_seed(7)
    model = TransformerEncoder(64, 4, 2, encoding=name, max_len=256).cuda()
    x = torch.randn(4, 256, 64, device="cuda")

    def grads(autocast: bool) -> list[torch.Tensor]:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = model(x, causal=True).float().square().mean()
        return [g.float().flatten() for g in torch.autograd.grad(loss, list(model.parameters()))]

    for (pname, _), low, high in zip(model.named_parameters(), grads(True), grads(False)):
        assert torch.isfinite(low).all(), pname
        cosine = torch.nn.functional.cosine_similarity(low, high, dim=0)
        assert cosine >= 0.99 or high.norm() < 1e-6, (pname, float(cosine))
