"""The lengthgen tasks: every example is its task's definition, recomputed independently here."""

from __future__ import annotations

from collections import Counter

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


@given(n=st.integers(1, 25), vocab=st.integers(2, 12), seed=st.integers(0, 2**16))
def test_mode_is_the_most_common_symbol_the_smallest_on_ties(n, vocab, seed):
    batch = lg.task("mode").batch(np.random.default_rng(seed), 4, n, vocab)
    assert batch.tokens.shape == (4, n + 2) and batch.answer == 1
    for row in batch.tokens:
        counts = Counter(int(x) for x in row[:n])
        top = max(counts.values())
        assert row[n] == lg.SEP and row[-1] == min(s for s, c in counts.items() if c == top)


@given(n=st.integers(1, 120), seed=st.integers(0, 2**16))
def test_count_is_the_occurrences_of_the_query_in_decimal(n, seed):
    batch = lg.task("count").batch(np.random.default_rng(seed), 4, n, 10)
    digits = len(str(n))
    assert batch.tokens.shape == (4, n + 2 + digits) and batch.answer == digits
    for row in batch.tokens:
        x, query = [int(v) for v in row[:n]], int(row[n + 1])
        assert row[n] == lg.SEP and query in x
        written = "".join(str(int(d) - S) for d in row[n + 2 :])[::-1]  # least significant digit first
        assert int(written) == x.count(query) and len(written) == digits


def test_mode_and_count_chance_and_vocabulary():
    assert lg.task("mode").chance(40, 16) == pytest.approx(1 / 16)
    assert lg.task("count").chance(9, 32) == pytest.approx(0.1)
    assert lg.task("count").chance(32, 32) == pytest.approx(0.01)  # two digits
    with pytest.raises(ValueError, match="vocab=8 is too small for task 'count' at length 3: it needs >= 10"):
        lg.task("count").batch(np.random.default_rng(0), 1, 3, 8)
    assert lg.sequence_length("count", 12) == 16 and lg.sequence_length("mode", 5) == 7
