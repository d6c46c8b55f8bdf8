"""Shaw et al.'s (2018) slot gather, its adjoint and the fused forms built on them (the gather added in
place, attention with per-slot values), the backends of :class:`posenc.nn.ShawRelativeBias`: the compiled
loop against ``torch.gather`` / ``scatter_add`` and against sums written out in the test, in float64;
gradients by finite differences. A backend test: it calls the private ``posenc.nn._slots`` directly."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
from posenc.nn import ShawRelativeBias  # noqa: E402
from posenc.nn._slots import add_gathered_, attend_with_slots, gather_slots, sum_slots  # noqa: E402

needs_loop = pytest.mark.usefixtures("native")


@st.composite
def indices(draw):
    """An index as Shaw's attention makes one (clipped ``k_j − q_i`` from sorted, gapped or shuffled
    positions) or arbitrary slots; ``[s_q, s_k]`` or ``[b, s_q, s_k]``."""
    b, s_q, s_k = draw(st.integers(1, 3)), draw(st.integers(1, 9)), draw(st.integers(1, 40))
    k = draw(st.integers(1, 6))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    kind = draw(st.sampled_from(["clipped", "gapped", "shuffled", "arbitrary"]))
    batched = draw(st.booleans())
    lead = (b,) if batched else ()
    if kind == "arbitrary":
        return torch.randint(0, 2 * k + 1, (*lead, s_q, s_k), generator=g), 2 * k + 1
    q_pos = torch.randint(0, 3 * s_k, (*lead, s_q), generator=g)
    k_pos = torch.arange(s_k).expand(*lead, s_k)
    if kind == "gapped":
        k_pos = torch.randint(1, 4, (*lead, s_k), generator=g).cumsum(-1)
    elif kind == "shuffled":
        k_pos = k_pos[..., torch.randperm(s_k, generator=g)]
    distance = k_pos.unsqueeze(-2) - q_pos.unsqueeze(-1)
    return (distance.clamp(-k, k) + k).contiguous(), 2 * k + 1


def _explicit_gather(table, index):
    out = torch.empty(*table.shape[:-1], index.shape[-1], dtype=table.dtype)
    for pos in torch.cartesian_prod(*(torch.arange(n) for n in out.shape)).view(-1, out.dim()).tolist():
        *lead, i, j = pos
        row = index[lead[0], i, j] if index.dim() == 3 else index[i, j]
        out[tuple(pos)] = table[(*lead, i, int(row))]
    return out


def _shapes(index, heads):
    b = index.shape[0] if index.dim() == 3 else 2
    return b, heads


@needs_loop
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=indices(), heads=st.integers(1, 3), dtype=st.sampled_from([torch.float32, torch.float64]))
def test_loop_equals_gather_and_scatter_add(pure, case, heads, dtype):
    index, n = case
    b, h = _shapes(index, heads)
    table = torch.randn(b, h, index.shape[-2], n, dtype=dtype)
    weights = torch.randn(b, h, *index.shape[-2:], dtype=dtype)
    torch.testing.assert_close(gather_slots(table, index), pure(gather_slots, table, index), rtol=0, atol=0)
    # the loop sums runs of one slot in 16 lanes, scatter_add in order: equal within the sum's roundings
    eps = torch.finfo(dtype).eps
    bound = index.shape[-1] * eps * weights.abs().sum(-1, keepdim=True)
    assert ((sum_slots(weights, index, n) - pure(sum_slots, weights, index, n)).abs() <= bound).all()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    case=indices(),
    heads=st.integers(1, 3),
    d=st.integers(1, 5),
    dtype=st.sampled_from([torch.float32, torch.float64]),
)
def test_fused_forms_equal_their_compositions(pure, case, heads, d, dtype):
    """``add_gathered_`` is ``dst + gather`` (one rounding: equal); ``attend_with_slots`` is
    ``α·v + Σ_j α_ij w[index[i, j]]`` summed out in the test (equal up to the sums' order); gradients
    as autograd's through the explicit forms; loop and pure path."""
    index, n = case
    b, h = _shapes(index, heads)
    s_q, s_k = index.shape[-2:]
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    table = torch.randn(b, h, s_q, n, dtype=dtype, requires_grad=True)
    dst = torch.randn(b, h, s_q, s_k, dtype=dtype, requires_grad=True)
    weights = torch.randn(b, h, s_q, s_k, dtype=dtype, requires_grad=True)
    values = torch.randn(b, h, s_k, d, dtype=dtype, requires_grad=True)
    slot_values = torch.randn(n, d, dtype=dtype, requires_grad=True)
    full = index if index.dim() == 3 else index.expand(b, s_q, s_k)
    per_pair = slot_values[full].unsqueeze(1)  # [b, 1, s_q, s_k, d]: the vector of every pair
    expected = (weights.unsqueeze(-1) * (values.unsqueeze(-3) + per_pair)).sum(-2)
    explicit = (dst + _explicit_gather(table.detach(), index), expected)
    probe = (torch.randn_like(explicit[0]), torch.randn_like(expected))
    inputs = (table, dst, weights, values, slot_values)
    want = torch.autograd.grad(
        ((dst + table.gather(-1, _per_head(index, table))) * probe[0]).sum() + (expected * probe[1]).sum(),
        inputs,
    )
    for run in (lambda f, *a: f(*a), pure):
        added = run(add_gathered_, dst * 1.0, table, index)
        out = run(attend_with_slots, weights, values, slot_values, index)
        torch.testing.assert_close(added, explicit[0], rtol=0, atol=0)
        torch.testing.assert_close(out, expected, rtol=tol, atol=tol)
        got = torch.autograd.grad((added * probe[0]).sum() + (out * probe[1]).sum(), inputs)
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, rtol=tol, atol=tol)


def _per_head(index, table):
    full = index.unsqueeze(1) if index.dim() == 3 else index
    return full.expand(*table.shape[:-1], index.shape[-1])


@needs_loop
@pytest.mark.parametrize("batched", [False, True])
def test_long_index_rows_are_cut_in_groups(pure, batched):
    """Rows of 20000 keys: the loop holds the pieces of 3 index rows at a time (groups 3 + 2 here)."""
    shaw = ShawRelativeBias(2, max_distance=300)
    index = shaw.index(5, 20_000, offset=9_000)
    if batched:
        index = torch.stack([index, index.flip(-1)])
    table = torch.randn(2, 3, 5, 601, dtype=torch.float64)
    weights = torch.randn(2, 3, 5, 20_000, dtype=torch.float64)
    torch.testing.assert_close(gather_slots(table, index), pure(gather_slots, table, index), rtol=0, atol=0)
    torch.testing.assert_close(
        sum_slots(weights, index, 601), pure(sum_slots, weights, index, 601), rtol=1e-12, atol=1e-12
    )


@settings(max_examples=40, deadline=None)
@given(case=indices(), heads=st.integers(1, 3))
def test_sum_slots_is_the_adjoint_of_gather_slots(case, heads):
    """``⟨gather(T), W⟩ = ⟨T, sum(W)⟩`` for every T and W, in whichever path runs here."""
    index, n = case
    b, h = _shapes(index, heads)
    table = torch.randn(b, h, index.shape[-2], n, dtype=torch.float64)
    weights = torch.randn(b, h, *index.shape[-2:], dtype=torch.float64)
    lhs = (gather_slots(table, index) * weights).sum()
    rhs = (table * sum_slots(weights, index, n)).sum()
    assert abs(float(lhs - rhs)) <= 1e-12 * float(table.abs().sum() * weights.abs().max() + 1)


@pytest.mark.parametrize("batched", [False, True])
def test_gather_equals_an_explicit_loop(batched):
    positions = torch.tensor([[0, 1, 2, 5, 6, 9, 10], [3, 2, 1, 0, 7, 8, 12]])
    shaw = ShawRelativeBias(2, max_distance=3)
    index = (
        shaw.index(7, 7, q_positions=positions, k_positions=positions)
        if batched
        else shaw.index(5, 7, offset=2)
    )
    table = torch.randn(2, 3, index.shape[-2], 7, dtype=torch.float64)
    torch.testing.assert_close(gather_slots(table, index), _explicit_gather(table, index), rtol=0, atol=0)


@pytest.mark.parametrize("batched", [False, True])
def test_gradients_match_finite_differences(batched):
    index = ShawRelativeBias(2, max_distance=2).index(4, 6, offset=1)
    if batched:
        index = torch.stack([index, index.flip(-1)])
    table = torch.randn(2, 2, 4, 5, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(2, 2, 4, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: gather_slots(t, index), (table,))
    assert torch.autograd.gradgradcheck(lambda t: gather_slots(t, index), (table,))
    assert torch.autograd.gradcheck(lambda w: sum_slots(w, index, 5), (weights,))
    assert torch.autograd.gradgradcheck(lambda w: sum_slots(w, index, 5), (weights,))
    scores = torch.randn(2, 2, 4, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda d, t: add_gathered_(d * 1.0, t, index), (scores, table))
    assert torch.autograd.gradgradcheck(lambda d, t: add_gathered_(d * 1.0, t, index), (scores, table))
    values = torch.randn(2, 2, 6, 3, dtype=torch.float64, requires_grad=True)
    slot_values = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    args = (weights, values, slot_values)
    assert torch.autograd.gradcheck(lambda *a: attend_with_slots(*a, index), args)
    assert torch.autograd.gradgradcheck(lambda *a: attend_with_slots(*a, index), args)


@needs_loop
def test_shaw_attention_gradients_equal_the_pure_path(pure):
    """Key and value terms through autograd, expanded and transposed gradients included."""
    shaw = ShawRelativeBias(8, max_distance=4, on_values=True).double()
    index = shaw.index(12, 12)
    q = torch.randn(3, 2, 12, 8, dtype=torch.float64, requires_grad=True)
    v = torch.randn(3, 2, 8, 12, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(3, 2, 12, 12, dtype=torch.float64).softmax(-1).requires_grad_()
    scores = torch.randn(3, 2, 12, 12, dtype=torch.float64, requires_grad=True)

    def grads():
        shaw.zero_grad()
        q.grad = v.grad = weights.grad = scores.grad = None
        added = shaw.add_key_scores_(scores * 1.0, q, index)
        out = shaw.attend(weights.transpose(-1, -2), v.transpose(-1, -2), index)
        loss = (shaw.key_scores(q, index) * added).sum() + (out**2).sum()
        loss.backward()
        return shaw.keys.grad.clone(), shaw.values.grad.clone(), q.grad, v.grad, weights.grad, scores.grad

    for fast, slow in zip(grads(), pure(grads), strict=True):
        torch.testing.assert_close(fast, slow, rtol=1e-12, atol=1e-12)


@needs_loop
@pytest.mark.parametrize("bad", [-1, 5])
def test_a_slot_out_of_range_is_an_index_error(bad):
    index = torch.zeros(3, 4, dtype=torch.int64)
    index[1, 2] = bad
    with pytest.raises(IndexError, match=rf"index holds {bad}, outside the slots \[0, 5\)"):
        gather_slots(torch.zeros(2, 3, 5), index)
    with pytest.raises(IndexError, match=rf"index holds {bad}, outside the slots \[0, 5\)"):
        sum_slots(torch.zeros(2, 3, 4), index, 5)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: gather_slots(torch.zeros(2, 3, 5), torch.zeros(4, 4, dtype=torch.int64)), r"s_q = table"),
        (
            lambda: gather_slots(torch.zeros(3, 5), torch.zeros(2, 3, 4, dtype=torch.int64)),
            r"\[b, h, s_q, 5\]",
        ),
        (lambda: sum_slots(torch.zeros(2, 3, 5), torch.zeros(3, 4, dtype=torch.int64), 5), r"s_k=4"),
        (lambda: gather_slots(torch.zeros(2, 3, 5), torch.zeros(3, dtype=torch.int64)), r"\[s_q, s_k\]"),
    ],
)
def test_bad_shapes_name_what_is_expected(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def _off_cpu(monkeypatch):
    """posenc.backends.slots choosing as it would off the CPU (the tensors stay on the CPU)."""
    import dataclasses

    from posenc.backends import Environment, select
    from posenc.backends import slots as slot_backends

    monkeypatch.setattr(
        slot_backends,
        "_choose",
        lambda table, call: select(table, call, dataclasses.replace(Environment.of(call.src), device="cuda")),
    )
    return slot_backends


@pytest.mark.parametrize("shift", [-2, 0, 3])
def test_every_slot_backend_equals_the_reference_through_select(monkeypatch, shift):
    """Off the CPU a band takes the diagonal forms, any other index the reference; each term (the gather,
    added in place, the value sum) and its gradients equal the reference's."""
    import dataclasses

    from posenc.backends import Environment, select
    from posenc.backends import slots as slot_backends

    k, s = 3, 10
    index = (torch.arange(s)[None] - torch.arange(s)[:, None] + shift).clamp(-k, k) + k
    g = torch.Generator().manual_seed(shift + 10)
    slots = torch.randn(2, 2, s, 2 * k + 1, generator=g, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(2, 2, s, s, generator=g, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 2, s, 4, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2 * k + 1, 4, generator=g, dtype=torch.float64, requires_grad=True)
    call = slot_backends.SlotCall(slots, index, (k, shift))
    cpu = Environment.of(slots)
    assert select(slot_backends.GATHER, call, cpu).name == "slots"  # the CPU: the compiled loop's reference
    off = dataclasses.replace(cpu, device="cuda")
    assert select(slot_backends.GATHER, call, off).name == "band"
    chosen = _off_cpu(monkeypatch)
    batched = slot_backends.SlotCall(slots, index.expand(2, s, s), (k, shift))
    assert select(slot_backends.GATHER, batched, off).name == "slots"
    base = torch.randn(2, 2, s, s, generator=g, dtype=torch.float64)
    value_call = slot_backends.SlotCall(weights, index, (k, shift))
    pairs = [
        (chosen.gather(call), gather_slots(slots, index)),
        (chosen.add_gathered(base.clone(), call), base + gather_slots(slots, index)),
        (chosen.attend(weights, v, w, value_call), attend_with_slots(weights, v, w, index)),
    ]
    for got, want in pairs:
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
        grad = torch.randn_like(got)
        inputs = [t for t in (slots, weights, v, w) if t.requires_grad]
        d_got = torch.autograd.grad(got, inputs, grad, allow_unused=True)
        d_want = torch.autograd.grad(want, inputs, grad, allow_unused=True)
        for a, b in zip(d_got, d_want, strict=True):
            assert (a is None) == (b is None)
            if a is not None:
                torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("change", "loop"),
    [
        ({}, True),
        ({"compiling": True}, False),  # torch.compile traces torch.gather / scatter_add
        ({"device": "cuda"}, False),
        ({"native": False}, False),  # not built, or POSENC_NATIVE=0
        ({"dtype": torch.bfloat16}, False),
    ],
)
def test_the_slot_loop_is_chosen_by_select_alone(change, loop):
    """Whether the slot terms run in the compiled loop is decided by ``select()`` over the slot backends,
    from the setting (device, dtype, compile state, loaded kernels) and the index's metadata."""
    import dataclasses

    from posenc.backends import Environment, select
    from posenc.nn import _slots

    src, index = torch.zeros(2, 3, 5, 7), torch.zeros(5, 4, dtype=torch.int64)
    env = dataclasses.replace(Environment.of(src), **{"native": True, **change})
    assert (select(_slots._BACKENDS, (src, index), env).name == "loop") is loop
    int32 = (src, index.int())  # the loop reads int64 indices only
    assert (
        select(_slots._BACKENDS, int32, dataclasses.replace(Environment.of(src), native=True)).name == "torch"
    )
