"""Malformed or surprising data files: refused with the file and line named, or read as documented."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from posenc_bench.data import DataFormatError, load_dataset, load_table, load_telemanom, make_splits
from posenc_bench.data.containers import Dataset, Series
from tests.bench.data.test_data_loaders import CHANNELS, channel_arrays, telemanom_rows, write_telemanom

LABELS = "labeled_anomalies.csv"


def _msl(tmp_path: Path) -> Path:
    return write_telemanom(tmp_path / "t", {k: v for k, v in CHANNELS.items() if v[0] == "MSL"})


def _rewrite(root: Path, edit) -> None:
    lines = (root / LABELS).read_text().splitlines()
    (root / LABELS).write_text("\n".join(edit(lines)) + "\n")


@pytest.mark.parametrize(
    "edit, cells",
    [
        (lambda lines: [*lines[:2], "B-2,MSL", *lines[3:]], 2),  # a short row
        (lambda lines: [*lines[:2], lines[2] + ",extra", *lines[3:]], 6),  # a row with an extra cell
        (lambda lines: [*lines, "C-3"], 1),  # a short last row
    ],
)
def test_ragged_labels_file_names_file_and_line(tmp_path, edit, cells):
    root = _msl(tmp_path)
    _rewrite(root, edit)
    with pytest.raises(
        DataFormatError, match=f"line [0-9]+: {cells} cells, but the header has 5 columns"
    ) as info:
        load_telemanom(root)
    assert str(info.value).startswith(str(root / LABELS))


def test_channel_listed_twice_unites_its_ranges(tmp_path):
    root = _msl(tmp_path)
    rows = telemanom_rows({k: v for k, v in CHANNELS.items() if v[0] == "MSL"})
    rows.append(
        {**rows[0], "anomaly_sequences": "[[8, 12], [20, 21]]", "class": "[point, point]"}
    )  # A-1 again
    with (root / LABELS).open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    ds = load_telemanom(root)
    a = next(s for s in ds.series if s.name == "A-1")
    assert [s.name for s in ds.series] == ["A-1", "B-2"]  # one series per channel
    assert a.events == [(5, 12), (20, 21), (30, 35)]  # [5, 9] ∪ [8, 12] = [5, 12]
    assert a.event_kinds == ["contextual+point", "point", "point"]
    expected = np.zeros(40, dtype=bool)
    for s, e in [(5, 9), (30, 35), (8, 12), (20, 21)]:
        expected[s : e + 1] = True
    np.testing.assert_array_equal(a.labels, expected)
    np.testing.assert_array_equal(a.values, channel_arrays("A-1", 40, 5)[1])


def test_channel_filters_apply_before_checks_of_other_channels(tmp_path):
    root = write_telemanom(tmp_path / "t")  # MSL and SMAP
    rows = telemanom_rows()
    rows.append({**rows[2], "num_values": "999"})  # S-1 (SMAP) listed again, inconsistently
    with (root / LABELS).open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert [s.name for s in load_telemanom(root, spacecraft="MSL").series] == ["A-1", "B-2"]
    with pytest.raises(DataFormatError, match="num_values '999'"):
        load_telemanom(root, spacecraft="SMAP")


@pytest.mark.parametrize("header", ["a,a,label", "a,label,label", "label,b,label"])
def test_duplicate_csv_column_names_are_refused(tmp_path, header):
    path = tmp_path / "x.csv"
    path.write_text(header + "\n" + "\n".join("1,2,0" if i % 5 else "1,2,1" for i in range(20)) + "\n")
    with pytest.raises(DataFormatError, match="appears more than once") as info:
        load_table(path)
    assert str(info.value).startswith(str(path))


def test_label_column_that_is_also_ignored_is_refused(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("a,label\n" + "\n".join(f"{i},{i % 2}" for i in range(8)) + "\n")
    with pytest.raises(ValueError, match="label_column 'label' is also in ignore_columns"):
        load_table(path, label_column="label", ignore_columns=["label"])
    with pytest.raises(TypeError, match="ignore_columns must be a list"):
        load_table(path, ignore_columns="a")
    np.save(tmp_path / "y.npy", np.arange(16.0).reshape(8, 2) % 2)
    with pytest.raises(DataFormatError, match="both the label"):
        load_table(tmp_path / "y.npy", ignore_columns=[1])


def test_labels_without_test_arrays_say_so(tmp_path):
    root = _msl(tmp_path)
    for f in (root / "test").iterdir():
        f.unlink()
    (root / "test").rmdir()
    with pytest.raises(DataFormatError, match="no test arrays") as info:
        load_dataset(str(root))
    assert "label" not in str(info.value).split(LABELS)[-1].split(":")[0]
    smd = tmp_path / "smd"
    (smd / "test_label").mkdir(parents=True)
    (smd / "test_label" / "m.txt").write_text("0\n")
    with pytest.raises(DataFormatError, match="test_label/ is here"):
        load_dataset(str(smd))


def test_empty_dataset_spec_is_refused_not_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.csv").write_text("a,label\n1,0\n")
    with pytest.raises(ValueError, match="empty string"):
        load_dataset("")


def test_all_positive_labels_are_reported_as_such():
    rng = np.random.default_rng(0)
    series = [
        Series.from_labels(f"s{i}", rng.normal(size=(200, 2)), np.ones(200, dtype=bool)) for i in range(2)
    ]
    with pytest.raises(ValueError, match="no normal time steps"):
        make_splits(Dataset("all", series, 2, ""), window=8, stride=4)


@pytest.mark.parametrize("value", ["yes", "no", 1, 0, None, "False"])
def test_truthy_stand_ins_are_refused_for_booleans(tmp_path, value):
    import posenc
    from posenc.nn import DFTEncoding, SinusoidalEncoding

    with pytest.raises(TypeError, match="alias must be True or False"):
        posenc.dft(4, 4, alias=value)
    with pytest.raises(TypeError, match="alias must be True or False"):
        DFTEncoding(4, alias=value)
    with pytest.raises(TypeError, match="learn_scale must be True or False"):
        SinusoidalEncoding(4, learn_scale=value)
    with pytest.raises(TypeError, match="include_train must be True or False"):
        load_telemanom(_msl(tmp_path), include_train=value)
    rng = np.random.default_rng(0)
    ds = Dataset(
        "d", [Series.from_events("s", rng.normal(size=(400, 2)), [(50, 60), (200, 210), (330, 340)])], 2, ""
    )
    with pytest.raises(TypeError, match="group_events must be True or False"):
        make_splits(ds, window=8, stride=4, group_events=value)


def test_labels_file_with_a_byte_order_mark_or_not_utf8(tmp_path):
    root = _msl(tmp_path)
    text = (root / LABELS).read_bytes()
    (root / LABELS).write_bytes(b"\xef\xbb\xbf" + text)  # as spreadsheet programs save CSV
    assert [s.name for s in load_telemanom(root).series] == ["A-1", "B-2"]
    (root / LABELS).write_bytes(text.replace(b"MSL", b"MS\xff", 1))
    with pytest.raises(DataFormatError, match="not UTF-8 text") as info:
        load_telemanom(root)
    assert str(info.value).startswith(str(root / LABELS))
