"""The lengthgen tasks: every example is its task's definition, recomputed independently here."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from posenc_bench.data import lengthgen as lg

S = lg.SPECIAL


@given(n=st.integers(1, 20), seed=st.integers(0, 2**16))
def test_copy_reverse_sort_answers(n, seed):
    for name, answer in (("copy", lambda x: x), ("reverse", lambda x: x[::-1]), ("sort", sorted)):
        batch = lg.task(name).batch(np.random.default_rng(seed), 3, n, 7)
        assert batch.tokens.shape == (3, 2 * n + 1) and batch.answer == n
        for row in batch.tokens:
            x = list(row[:n])
            assert row[n] == lg.SEP and list(row[n + 1 :]) == list(answer(x))
            assert min(x) >= S and max(x) < S + 7


@given(n=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_parity_and_addition(n, seed):
    rng = np.random.default_rng(seed)
    for row in lg.task("parity").batch(rng, 4, n, 5).tokens:
        assert row[-1] - S == sum(int(b) - S for b in row[:n]) % 2
    for row in lg.task("addition").batch(rng, 4, n, 10).tokens:
        digits = row - S
        a = sum(int(d) * 10**i for i, d in enumerate(digits[:n]))  # least significant digit first
        b = sum(int(d) * 10**i for i, d in enumerate(digits[n + 1 : 2 * n + 1]))
        total = sum(int(d) * 10**i for i, d in enumerate(digits[2 * n + 2 :]))
        assert total == a + b and len(digits[2 * n + 2 :]) == n + 1


@pytest.mark.parametrize("depth", [0.0, 0.3, 1.0])
def test_passkey_sits_at_its_depth_and_recall_answers_the_query(depth):
    batch = lg.task("passkey").batch(np.random.default_rng(0), 5, 10, 9, depth)
    for row in batch.tokens:
        at = list(row).index(lg.MARK)
        assert at == round(depth * 10) and row[at + 1] == row[-1] and row[-2] == lg.SEP
    for row in lg.task("recall").batch(np.random.default_rng(1), 5, 6, 9).tokens:
        keys, values = row[0:12:2], row[1:12:2]
        assert len(set(keys)) == 6 and row[12] == lg.SEP
        assert row[-1] == values[list(keys).index(row[-2])]


def test_chance_and_vocabulary():
    assert lg.task("copy").chance(3, 10) == pytest.approx(1e-3)
    assert lg.task("parity").chance(50, 10) == 0.5
    assert lg.task("addition").chance(2, 32) == pytest.approx(1e-3)
    assert lg.task("passkey").chance(64, 20) == pytest.approx(0.05)
    with pytest.raises(ValueError, match="vocab=4 is too small for task 'recall' at length 5"):
        lg.task("recall").batch(np.random.default_rng(0), 1, 5, 4)
    with pytest.raises(ValueError, match="unknown lengthgen task 'copyy'; valid: copy"):
        lg.task("copyy")
    assert lg.sequence_length("recall", 4) == 11 and lg.sequence_length("passkey", 8) == 12
