"""Bad values of ``posenc bench``'s options, end to end: exit 2 and one line naming the option (never a
traceback, a segfault or torch's words), before any run is written."""

from __future__ import annotations

import os

import pytest

from posenc.cli import main

BIG = str(10**12)
THREADS = 4 * (os.cpu_count() or 1)
CLASSIFY = ["bench", "--epochs", "1", "--seeds", "1", "--no-baseline", "--no-progress"]
LENGTHGEN = ["bench", "--task", "lengthgen", "--lengthgen-tasks", "parity", "--encodings", "none,rope",
             "--seeds", "1", "--steps", "2", "--train-length", "4", "--vocab", "8", "--d-model", "16",
             "--heads", "2", "--layers", "1", "--n-test", "4", "--test-lengths", "1,2", "--no-progress"]  # fmt: skip
PROBES = ["bench", "--dataset", "probes", "--window", "32", "--encodings", "none", "--epochs", "1", "--seeds", "1",
          "--no-progress"]  # fmt: skip
MEMORY = "would need .* GiB, more than the"
#: what an option argparse cannot convert ends with: one line, no usage text
HELP = r"; see posenc bench --help$"

CASES = [
    # --threads 100000 segfaulted (exit 139) in torch.set_num_threads; 10**12 overflowed in it
    (CLASSIFY, ["--threads", "100000"], rf"--threads must be an int in \[1, {THREADS}\] \(4 per CPU core\)"),
    (CLASSIFY, ["--threads", BIG], r"--threads must be an int in \[1, "),
    (CLASSIFY, ["--threads", "0"], r"--threads must be an int in \[1, "),
    (LENGTHGEN, ["--threads", "100000"], r"--threads must be an int in \[1, "),
    # --lr 1e300 was torch's "value cannot be converted to type float without overflow"
    (CLASSIFY, ["--lr", "1e300"], r"--lr must be a number in \(0, 1e\+06\][;,] got 1e\+300"),
    (LENGTHGEN, ["--lr", "1e300"], r"--lr must be a number in \(0, 1e\+06\][;,] got 1e\+300"),
    # --weight-decay 1e300 trained, diverged, and blamed --lr
    (CLASSIFY, ["--weight-decay", "1e300"], r"--weight-decay must be a number in \[0, 10\][;,] got 1e\+300"),
    (CLASSIFY, ["--seeds", BIG], r"--seeds must be an int in \[1, 1000\][;,] got 1000000000000"),
    (CLASSIFY, ["--splits", BIG], r"--splits must be an int in \[1, 1000\][;,] got 1000000000000"),
    (LENGTHGEN, ["--seeds", BIG], r"--seeds must be an int in \[1, 1000\][;,] got 1000000000000"),
    (CLASSIFY, ["--layers", BIG], rf"--layers 1000000000000 {MEMORY}"),
    # the data's own check named the field (window=…; use window <= 512), not the flag
    (
        [*CLASSIFY, "--dataset-option", "n_series=2", "--dataset-option", "length=512"],
        ["--window", BIG],
        r"--window 1000000000000 is longer than series 'synthetic-0' .*; use --window <= 512$",
    ),
    # the encoding's own check did not say which flag carried the value
    (
        [*CLASSIFY, "--encodings", "t5"],
        ["--encoding-option", "t5.num_buckets=1e12"],
        r"^posenc bench: error: --encoding-option t5.num_buckets=1000000000000.0: num_buckets must be an int",
    ),
    # --test-lengths inf was an OverflowError in round(); 1e300 and 1e12 ran out of memory or time
    (LENGTHGEN, ["--test-lengths", "inf"], r"--test-lengths must be finite numbers, got \[inf\]"),
    (LENGTHGEN, ["--test-lengths", "nan"], r"--test-lengths must exceed the training length .*got \[nan\]"),
    (LENGTHGEN, ["--test-lengths", "1e300"], rf"--test-lengths.* {MEMORY}.*lower --test-lengths"),
    (LENGTHGEN, ["--test-lengths", "1,1e12"], rf"--test-lengths.* {MEMORY}"),
    (
        ["--lengthgen-tasks", "passkey"],
        ["--passkey-lengths", "inf"],
        r"--passkey-lengths must be finite numbers",
    ),
    (["--lengthgen-tasks", "passkey"], ["--passkey-lengths", "1e300"], rf"--passkey-lengths.* {MEMORY}"),
    # --random-positions 10**12 drew a permutation of 10**12 positions at every step
    (LENGTHGEN, ["--random-positions", BIG], r"--random-positions must be an int in \[1, 1048576\]"),
    # --vocab and --d-model 10**12 were torch's DefaultCPUAllocator RuntimeError
    (LENGTHGEN, ["--vocab", BIG], rf"--vocab 1000000000000 .*{MEMORY}"),
    (LENGTHGEN, ["--d-model", BIG], rf"--d-model 1000000000000 .*{MEMORY}"),
    # --lags 0, -5 and 100000 were the probe's own "k must be a positive int" / "k=100000 does not fit",
    # naming k, not the flag; an empty --lags silently ran every distance, a repeated one trained it twice
    (PROBES, ["--lags", "0"], r"--lags must be distances k with 1 <= k < --window 32 \(k <= 31\), got 0$"),
    (PROBES, ["--lags", "-5"], r"--lags must be distances k with 1 <= k < --window 32 \(k <= 31\), got -5$"),
    (PROBES, ["--lags", "2,100000"], r"--lags must be distances k with 1 <= k < --window 32 .*, got 100000$"),
    (
        [*PROBES, "--dataset-option", "task=lag"],
        ["--lags", "31"],
        r"--lags must be distances k with 1 <= k < --window 32 - 1 \(k <= 30\) with --dataset-option 'task=lag', got 31$",
    ),
    # a bad probe task must not read as --task (the bench's own flag)
    (
        PROBES,
        ["--dataset-option", "task=foo"],
        r"--dataset-option 'task=foo' must be 'task=order' or 'task=lag'$",
    ),
    (PROBES, ["--lags", ","], r"--lags must name at least one distance k, got ','$"),
    (PROBES, ["--lags", "3,3"], r"--lags must not repeat a distance, got 3 twice$"),
    # the probe's own check named window, not --window
    (PROBES, ["--window", "2"], r"--window must be >= 3 for --dataset probes, got 2$"),
    # --window 100000 built 99999 probe sets of 100000 steps (ran for minutes); 10**12 blamed --length, --dim
    (PROBES, ["--window", "100000"], rf"--window 100000.*{MEMORY}.*lower --window"),
    (PROBES, ["--window", BIG], rf"--window 1000000000000.*{MEMORY}"),
    # the series' "512 time steps" was rewritten as "512 time --steps" (a --task lengthgen flag)
    (
        [*CLASSIFY, "--dataset-option", "n_series=2", "--dataset-option", "length=512"],
        ["--window", "600"],
        r"--window 600 is longer than series 'synthetic-0' of dataset 'synthetic' \(512 time steps;",
    ),
    # a repeated scale policy or detector trained the same runs twice
    (CLASSIFY, ["--scale", "native,native"], r"--scale must not repeat a policy, got native twice$"),
    (
        [*CLASSIFY, "--task", "detect"],
        ["--detector", "forecast,forecast"],
        r"--detector must not repeat a name, got forecast twice$",
    ),
    # the dfstrans split named the field anomaly_percent=1e-300, not the flag
    (
        CLASSIFY,
        ["--protocol", "dfstrans", "--anomaly-percent", "1e-300"],
        r"--anomaly-percent 1e-300: fewer than 2 positive instances .*raise --anomaly-percent",
    ),
    # values argparse cannot convert printed the whole usage text before the error
    (CLASSIFY, ["--window", "inf"], rf"^posenc bench: error: --window: invalid int value: 'inf'{HELP}"),
    (CLASSIFY, ["--lr", "x"], rf"^posenc bench: error: --lr: invalid float value: 'x'{HELP}"),
    (CLASSIFY, ["--seeds", "abc"], rf"^posenc bench: error: --seeds must be a count N .*got 'abc'{HELP}"),
    (CLASSIFY, ["--model", "cnn"], rf"^posenc bench: error: --model: invalid choice: 'cnn' .*{HELP}"),
    (LENGTHGEN, ["--steps", "x"], rf"^posenc bench: error: --steps: invalid int value: 'x'{HELP}"),
]


@pytest.mark.parametrize(
    "base, extra, message", CASES, ids=lambda v: " ".join(v) if isinstance(v, list) else None
)
def test_a_bad_value_is_one_line_naming_the_option(tmp_path, capsys, base, extra, message):
    import re

    if base[0] != "bench":  # lengthgen with another task
        base = [*LENGTHGEN, *base]
    try:
        code = main([*base, *extra, "--out", str(tmp_path)])
    except SystemExit as exc:  # argparse's own errors exit from inside the parser
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(message, err[0]), err
    assert not (tmp_path / "runs").exists()


def test_help_keeps_its_usage_text(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: posenc bench [-h]") and "--lags LAGS" in out
