"""Loaders on small files written here, in every layout, and every malformed case.

Each malformed file must produce an error naming the file and the problem.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pytest

from posenc_bench.data import (
    DATASETS,
    DataFormatError,
    Dataset,
    ProbeSuite,
    detect_layout,
    load_dataset,
    load_smd,
    load_table,
    load_telemanom,
)

CHANNELS = {  # chan: (spacecraft, test rows, features, ranges, classes)
    "A-1": ("MSL", 40, 5, [[30, 35], [5, 9]], "[point, contextual]"),
    "B-2": ("MSL", 50, 5, [[0, 0]], "[point]"),
    "S-1": ("SMAP", 30, 3, [[10, 29]], "[contextual]"),
}


def write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(
            handle, fieldnames=["chan_id", "spacecraft", "anomaly_sequences", "class", "num_values"]
        )
        writer.writeheader()
        writer.writerows(rows)


def telemanom_rows(channels=CHANNELS) -> list[dict]:
    return [
        {"chan_id": c, "spacecraft": sc, "anomaly_sequences": str(r), "class": k, "num_values": n}
        for c, (sc, n, _, r, k) in channels.items()
    ]


def channel_arrays(chan: str, n: int, f: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(sum(map(ord, chan)))
    return rng.normal(size=(n + 7, f)), rng.normal(size=(n, f))


def write_telemanom(root: Path, channels=CHANNELS, *, compact: bool = False) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    write_csv(root / "labeled_anomalies.csv", telemanom_rows(channels))
    arrays = {c: channel_arrays(c, n, f) for c, (_, n, f, _, _) in channels.items()}
    if compact:
        np.savez(root / "train.npz", **{c: a[0] for c, a in arrays.items()})
        np.savez(root / "test.npz", **{c: a[1] for c, a in arrays.items()})
    else:
        (root / "train").mkdir()
        (root / "test").mkdir()
        for c, (train, test) in arrays.items():
            np.save(root / "train" / f"{c}.npy", train)
            np.save(root / "test" / f"{c}.npy", test)
    return root


@pytest.mark.parametrize("compact", [False, True])
def test_telemanom_layouts_load_test_arrays_with_inclusive_ranges(tmp_path, compact):
    root = write_telemanom(tmp_path / "t", msl_only(), compact=compact)
    ds = load_dataset(str(root))
    assert detect_layout(root) == "telemanom" and ds.name == "msl" and ds.n_features == 5
    a = ds.series[0]
    assert a.name == "A-1" and a.events == [(5, 9), (30, 35)] and a.event_kinds == ["contextual", "point"]
    np.testing.assert_array_equal(a.values, channel_arrays("A-1", 40, 5)[1])
    assert np.flatnonzero(a.labels).tolist() == [*range(5, 10), *range(30, 36)]
    assert ds.series[1].labels.sum() == 1  # [0, 0] is one point
    both = load_telemanom(root, include_train=True)
    assert [s.name for s in both.series] == ["A-1", "A-1:train", "B-2", "B-2:train"]
    assert both.series[1].train_only and both.series[1].length == 47 and not both.series[1].labels.any()


def test_telemanom_spacecraft_filter_and_choice(tmp_path):
    root = write_telemanom(tmp_path / "t")
    with pytest.raises(ValueError, match=r"lists spacecraft \['MSL', 'SMAP'\]; pass spacecraft="):
        load_telemanom(root)
    smap = load_telemanom(root, spacecraft="SMAP")
    assert [s.name for s in smap.series] == ["S-1"] and smap.n_features == 3 and smap.name == "smap"
    with pytest.raises(ValueError, match="spacecraft must be one of"):
        load_telemanom(root, spacecraft="MER")
    assert [s.name for s in load_telemanom(root, spacecraft="MSL", channels=["B-2"]).series] == ["B-2"]
    with pytest.raises(ValueError, match=r"channels \['Z-9'\] are not in"):
        load_telemanom(root, spacecraft="MSL", channels=["Z-9"])


def msl_only():
    return {k: v for k, v in CHANNELS.items() if v[0] == "MSL"}


@pytest.mark.parametrize(
    "edit, file, problem",
    [
        (
            lambda r: r[0].update(anomaly_sequences="[[30, 40]]", **{"class": "[point]"}),
            "labeled_anomalies.csv",
            r"row 2 \(chan_id 'A-1'\): label range \[30, 40\] is out of bounds for .*A-1.npy with 40 rows",
        ),
        (
            lambda r: r[0].update(anomaly_sequences="[[-1, 3]]", **{"class": "[point]"}),
            "labeled_anomalies.csv",
            "out of bounds",
        ),
        (
            lambda r: r[1].update(num_values="49"),
            "labeled_anomalies.csv",
            "num_values '49' but .*B-2.npy has 50 rows",
        ),
        (
            lambda r: r[0].update(anomaly_sequences="[[1, 2], [3]]"),
            "labeled_anomalies.csv",
            "not a list of \\[start, end\\] integer pairs",
        ),
        (lambda r: r[0].update(anomaly_sequences="oops"), "labeled_anomalies.csv", "not a list of"),
        (
            lambda r: r[0].update(anomaly_sequences="[[1, 5], [4, 8]]", **{"class": "[a, b]"}),
            "labeled_anomalies.csv",
            "label ranges overlap",
        ),
        (lambda r: r[0].update(**{"class": "[point]"}), "labeled_anomalies.csv", "class lists 1 kinds for 2"),
        (lambda r: r.append({**r[0], "num_values": "39"}), "labeled_anomalies.csv", "num_values '39' but"),
    ],
)
def test_telemanom_malformed_csv(tmp_path, edit, file, problem):
    root = write_telemanom(tmp_path / "t", msl_only())
    rows = telemanom_rows(msl_only())
    edit(rows)
    write_csv(root / "labeled_anomalies.csv", rows)
    with pytest.raises(DataFormatError, match=problem) as info:
        load_telemanom(root)
    assert str(info.value).startswith(str(root / file))


def test_telemanom_malformed_arrays(tmp_path):
    root = write_telemanom(tmp_path / "t", msl_only())
    (root / "test" / "B-2.npy").unlink()
    with pytest.raises(
        FileNotFoundError,
        match=r"t/test/B-2.npy: missing file \(the test array of "
        r"channel 'B-2'\)",
    ):
        load_telemanom(root)
    np.save(root / "test" / "B-2.npy", np.zeros((50, 4)))
    with pytest.raises(DataFormatError, match=r"B-2.npy: 4 features, but .*A-1.npy has 5"):
        load_telemanom(root)
    bad = np.zeros((50, 5))
    bad[7, 2] = np.nan
    np.save(root / "test" / "B-2.npy", bad)
    with pytest.raises(
        DataFormatError,
        match=r"B-2.npy: non-finite value nan \(NaN or inf\) at row 7, "
        "column 2",
    ):
        load_telemanom(root)
    np.save(root / "test" / "B-2.npy", np.array([[1.0, 2.0], [3.0]], dtype=object), allow_pickle=True)
    with pytest.raises(DataFormatError, match=r"B-2.npy: object array \(ragged rows\?\)"):
        load_telemanom(root)
    (root / "test" / "B-2.npy").write_bytes(b"not numpy")
    with pytest.raises(DataFormatError, match="B-2.npy: not a readable .npy array"):
        load_telemanom(root)
    (root / "labeled_anomalies.csv").unlink()
    with pytest.raises(FileNotFoundError, match="labeled_anomalies.csv: missing file"):
        load_telemanom(root)


def test_compact_layout_missing_member_and_missing_csv_columns(tmp_path):
    root = write_telemanom(tmp_path / "c", msl_only(), compact=True)
    arrays = dict(np.load(root / "test.npz"))
    del arrays["B-2"]
    np.savez(root / "test.npz", **arrays)
    with pytest.raises(
        DataFormatError,
        match=r"test.npz: no array 'B-2', although "
        "labeled_anomalies.csv lists",
    ):
        load_telemanom(root)
    (root / "labeled_anomalies.csv").write_text("chan_id,spacecraft\nA-1,MSL\n")
    with pytest.raises(
        DataFormatError,
        match=r"labeled_anomalies.csv: expected columns .*missing "
        r"\['anomaly_seq",
    ):
        load_telemanom(root)


def write_smd(root: Path, machines=("machine-1-1", "machine-1-2", "machine-1-10")) -> Path:
    for part in ("train", "test", "test_label"):
        (root / part).mkdir(parents=True)
    rng = np.random.default_rng(0)
    for m in machines:
        np.savetxt(root / "train" / f"{m}.txt", rng.random((20, 4)), delimiter=",")
        np.savetxt(root / "test" / f"{m}.txt", rng.random((25, 4)), delimiter=",")
        labels = np.zeros(25, dtype=int)
        labels[[3, 4, 5, 20]] = 1
        np.savetxt(root / "test_label" / f"{m}.txt", labels, fmt="%d")
    return root


def test_smd_layout(tmp_path):
    root = write_smd(tmp_path / "smd")
    ds = load_dataset(str(root))
    assert detect_layout(root) == "smd" and ds.name == "smd"
    assert [s.name for s in ds.series] == ["machine-1-1", "machine-1-2", "machine-1-10"]
    assert ds.series[0].events == [(3, 5), (20, 20)]
    expected = np.loadtxt(root / "test" / "machine-1-10.txt", delimiter=",")
    np.testing.assert_allclose(ds.series[2].values, expected)
    with_train = load_smd(root, machines=["machine-1-2"], include_train=True)
    assert [s.name for s in with_train.series] == ["machine-1-2", "machine-1-2:train"]


@pytest.mark.parametrize(
    "file, content, problem",
    [
        ("test/machine-1-2.txt", "1,2,3,4\n1,2,3\n", "ragged rows: the number of columns changed"),
        ("test/machine-1-2.txt", "1,2,3,4\n1,x,3,4\n", "unreadable value: could not convert string 'x'"),
        (
            "test/machine-1-2.txt",
            "1,2,3,4\n1,nan,3,4\n",
            r"non-finite value nan \(NaN or inf\) at row 1, "
            "column 1",
        ),
        ("test/machine-1-2.txt", "1,2,3\n" * 25, "3 features, but .*machine-1-1.txt has 4"),
        ("test/machine-1-2.txt", "", "no data rows"),
        ("test_label/machine-1-2.txt", "0\n" * 24, r"shape \(24, 1\), expected \(25, 1\)"),
        (
            "test_label/machine-1-2.txt",
            "0\n" * 10 + "2\n" + "0\n" * 14,
            "label 2.0 at row 10; labels must be 0 or 1",
        ),
    ],
)
def test_smd_malformed(tmp_path, file, content, problem):
    root = write_smd(tmp_path / "smd")
    (root / file).write_text(content)
    with pytest.raises(DataFormatError, match=problem) as info:
        load_smd(root)
    assert str(info.value).startswith(str(root / file))


def test_smd_missing_label_file(tmp_path):
    root = write_smd(tmp_path / "smd")
    (root / "test_label" / "machine-1-2.txt").unlink()
    with pytest.raises(FileNotFoundError, match="test_label/machine-1-2.txt: missing file"):
        load_smd(root)


def test_csv_series_with_label_column_and_ignored_timestamp(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "b.csv").write_text(
        'time,x,label,y\n2020-01-01,1.5,0,2\n2020-01-02,2.5,1,3\n"2020,3",3.5,1,4\n'
    )
    (folder / "a.csv").write_text("time,x,label,y\nt0,0,0,0\nt1,1,0,1\n")
    ds = load_dataset(str(folder), ignore_columns=["time"])
    assert detect_layout(folder) == "table" and [s.name for s in ds.series] == ["a", "b"]
    b = ds.series[1]
    np.testing.assert_array_equal(b.values, [[1.5, 2], [2.5, 3], [3.5, 4]])
    assert b.events == [(1, 2)]
    (folder / "c.csv").write_text("flag,x\n1,0.5\n0,0.25\n")
    single = load_table(folder / "c.csv", label_column="flag")
    assert single.n_features == 1 and single.series[0].events == [(0, 0)]


@pytest.mark.parametrize(
    "content, options, problem",
    [
        ("x,y\n1,2\n", {}, r"no column 'label'; columns: \['x', 'y'\]"),
        ("x,label\n1,0\n2\n", {}, "ragged rows"),
        ("x,label\n1,0\n2,0,5\n", {}, "ragged rows"),
        ("x,label\n1,0\nabc,1\n", {}, r"column 'x', data row 1: 'abc' is not a number"),
        ("x,label\n1,0\nnan,1\n", {}, "column 'x', data row 1: non-finite value nan"),
        ("x,label\n1,0\n2,3\n", {}, "label 3.0 at data row 1; labels must be 0 or 1"),
        ("label\n1\n0\n", {}, "no feature columns besides the label"),
        ("x,label\n", {}, "no data rows"),
        ("", {}, "empty file"),
    ],
)
def test_csv_malformed(tmp_path, content, options, problem):
    path = tmp_path / "s.csv"
    path.write_text(content)
    with pytest.raises(DataFormatError, match=problem) as info:
        load_table(path, **options)
    assert str(info.value).startswith(str(path))


def test_npy_series_and_malformed(tmp_path):
    table = np.column_stack([[1, 1, 0, 0, 0, 0], np.arange(6.0) ** 2, [0, 1, 1, 0, 0, 1]])
    np.save(tmp_path / "s.npy", table)
    ds = load_dataset(str(tmp_path / "s.npy"))
    np.testing.assert_array_equal(ds.series[0].values, table[:, :2])
    assert ds.series[0].events == [(1, 2), (5, 5)]
    first = load_table(tmp_path / "s.npy", label_column=0, ignore_columns=[1])
    assert first.n_features == 1 and first.series[0].events == [(0, 1)]
    np.testing.assert_array_equal(first.series[0].values[:, 0], [0, 1, 1, 0, 0, 1])
    with pytest.raises(DataFormatError, match=r"s.npy: column index 3 is not an int in \[-3, 3\)"):
        load_table(tmp_path / "s.npy", label_column=3)
    np.save(tmp_path / "t.npy", np.full((6, 3), 0.5))
    with pytest.raises(DataFormatError, match="t.npy: label 0.5 at data row 0; labels must be 0 or 1"):
        load_table(tmp_path)
    np.save(tmp_path / "t.npy", np.ones((6, 4)))
    with pytest.raises(DataFormatError, match=r"t.npy: 3 features, but .*s.npy has 2"):
        load_table(tmp_path)
    (tmp_path / "u.csv").write_text("x,label\n1,0\n")
    with pytest.raises(DataFormatError, match="mixes .csv and .npy"):
        load_table(tmp_path)


def test_load_dataset_names_resolution_and_errors(tmp_path, monkeypatch):
    with pytest.raises(
        ValueError, match="unknown dataset 'mls': expected one of synthetic, probes, msl, smd"
    ):
        load_dataset("mls")
    with pytest.raises(TypeError, match="spec must be a dataset name or a path"):
        load_dataset(3)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no known data layout"):
        load_dataset(str(empty))
    monkeypatch.setenv("POSENC_DATA", str(tmp_path / "root"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"dataset 'smd' not found; looked in .*root/smd"):
        load_dataset("smd")
    write_telemanom(tmp_path / "root" / "msl", CHANNELS)  # both spacecraft: "msl" selects MSL
    ds = load_dataset("msl")
    assert isinstance(ds, Dataset) and [s.name for s in ds.series] == ["A-1", "B-2"]
    write_smd(tmp_path / "root" / "smd")
    assert len(load_dataset("smd", machines=["machine-1-1"]).series) == 1
    assert set(DATASETS) == {"msl", "smd", "synthetic", "probes"}
    assert isinstance(load_dataset("probes", window=8), ProbeSuite)
    assert load_dataset().name == "synthetic"


def _truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _flip_middle_byte(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]


@pytest.mark.parametrize(
    "name, damage, message",
    [
        ("test.npz", lambda data: b"", r"test.npz: not a readable .npz archive \(an empty file\)"),
        (
            "test.npz",
            lambda data: b"garbage " * 40,
            r"test.npz: not a readable .npz archive \(no zip header\)",
        ),
        ("test.npz", _truncate, r"test.npz: not a readable .npz archive \(File is not a zip file\)"),
        ("test.npz", _flip_middle_byte, r"test.npz\['[A-Z]-\d'\]: unreadable array \(Bad CRC-32"),
        ("train.npz", lambda data: b"", r"train.npz: not a readable .npz archive \(an empty file\)"),
        ("test/A-1.npy", _truncate, r"A-1.npy: not a readable .npy array \(Failed to read all data"),
    ],
)
def test_damaged_array_files_are_named_by_the_command_line_without_a_traceback(
    tmp_path, capsys, name, damage, message
):
    """An empty, garbled, truncated or bit-flipped .npz (or .npy) is a data error naming the file, not a
    traceback from inside NumPy (EOFError, zipfile.BadZipFile, a pickle ValueError)."""
    from posenc.cli import main

    root = write_telemanom(tmp_path / "t", msl_only(), compact=name.endswith(".npz"))
    path = root / name
    path.write_bytes(damage(path.read_bytes()))
    args = ["bench", "--dataset", str(root), "--dataset-option", "include_train=true", "--task", "detect"]
    assert main([*args, "--encodings", "none", "--no-progress", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and "Traceback" not in err, err


def test_a_list_option_takes_one_name_or_comma_separated_names(tmp_path):
    """``--dataset-option channels=M-6`` arrives as the string "M-6": one channel (it raised a TypeError
    with a traceback; SMD's ``machines`` split it into characters)."""
    root = write_telemanom(tmp_path / "t", msl_only())
    assert [s.name for s in load_telemanom(root, channels="A-1").series] == ["A-1"]
    assert [s.name for s in load_telemanom(root, channels="B-2, A-1").series] == ["A-1", "B-2"]
    smd = write_smd(tmp_path / "smd")
    assert [s.name for s in load_smd(smd, machines="machine-1-2").series] == ["machine-1-2"]


@pytest.mark.parametrize(
    "option, message",
    [
        (
            "channels=[1]",
            r"channels must be a list of names, got \[1\] \(list\); write one name, comma-separated",
        ),
        ('channels={"A-1": 1}', r"channels must be a list of names, got \{'A-1': 1\} \(dict\)"),
        ("channels=,", r"channels must name at least one, got an empty list"),
        ("channels=Z-9", r"channels \['Z-9'\] are not in"),
    ],
)
def test_a_list_option_of_the_wrong_type_says_how_to_write_a_list(tmp_path, capsys, option, message):
    from posenc.cli import main

    root = write_telemanom(tmp_path / "t", msl_only())
    args = ["bench", "--dataset", str(root), "--dataset-option", option, "--out", str(tmp_path / "out")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and "Traceback" not in err, err


def test_a_missing_dataset_lists_each_place_once_and_where_to_get_it(tmp_path, monkeypatch):
    """Run from the checkout, ``../shared/data`` of the current directory and of the checkout are one place:
    it was listed twice."""
    from posenc_bench.data import load

    monkeypatch.delenv("POSENC_DATA", raising=False)
    (tmp_path / "checkout").mkdir()
    monkeypatch.setattr(load, "REPOSITORY", tmp_path / "checkout")
    monkeypatch.chdir(tmp_path / "checkout")
    with pytest.raises(FileNotFoundError) as caught:
        load_dataset("smd")
    message = str(caught.value)
    assert message.count(str(tmp_path / "shared" / "data" / "smd")) == 1, message
    assert "docs/datasets.md" in message
