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


# trivial-strategy floors, recomputed by hand on tiny generated sets ----------------------------------


def _hand_floor(name: str, rows: np.ndarray, n: int) -> float:
    """The trivial strategy of each task written out per example with plain Python."""
    hits = 0
    for row in rows.tolist():
        if name in ("copy", "reverse", "sort"):
            x = row[:n]
            hits += len(set(x)) == 1  # the majority symbol n times is exact only on a constant input
        elif name == "parity":
            hits += row[-1] == S  # answer 0 (even)
        elif name == "addition":
            hits += all(d == S for d in row[-(n + 1) :])  # the sum 0…0
        elif name == "mode":
            hits += row[-1] == min(row[:n])
        elif name == "count":
            hits += sum(t == row[n + 1] for t in row[:n]) == 1  # the count is 1
        elif name in ("passkey", "recall"):
            hits += row[1] == row[-1]  # the token after the first one
    return hits / len(rows)


@pytest.mark.parametrize("name", sorted(lg.TASKS))
@pytest.mark.parametrize("n", [1, 3, 12])
def test_trivial_floor_matches_a_hand_computation(name, n):
    task = lg.task(name)
    vocab = max(3, task.min_vocab(n))  # few symbols: the floors' cases occur in a small set
    for depth in (0.0, 0.5, 1.0) if task.uses_depth else (0.5,):
        batch = task.batch(np.random.default_rng(n), 400, n, vocab, depth)
        assert task.floor(batch, n) == pytest.approx(_hand_floor(name, batch.tokens, n))
    assert task.trivial_rule


def test_trivial_floors_hand_worked():
    def rows(*r):
        return lg.Batch(np.array(r), 1)

    passkey = lg.task("passkey")
    # depth 0: [⋆, k, filler…, ∣, k] — the token after the first is always the key
    assert passkey.floor(passkey.batch(np.random.default_rng(0), 50, 8, 32, 0.0), 8) == 1.0
    assert passkey.floor(rows([5, 6, 1, 7, 0, 7], [5, 7, 1, 7, 0, 7]), 4) == 0.5
    mode = lg.task("mode")
    assert mode.floor(rows([4, 2, 2, 0, 2], [4, 3, 4, 0, 4], [3, 2, 4, 0, 2]), 3) == pytest.approx(2 / 3)
    copy = lg.task("copy")
    assert copy.floor(lg.Batch(np.array([[3, 3, 0, 3, 3], [3, 4, 0, 3, 4]]), 2), 2) == 0.5
    assert lg.task("count").trivial(np.zeros((1, 12), dtype=np.int64), 10).tolist() == [[S + 1, S]]
    # mode with all-distinct symbols: the smallest is the mode (ties go to the smallest)
    assert mode.floor(mode.batch(np.random.default_rng(1), 20, 3, 3), 3) >= np.mean(
        [len(set(r[:3])) == 3 for r in mode.batch(np.random.default_rng(1), 20, 3, 3).tokens.tolist()]
    )
