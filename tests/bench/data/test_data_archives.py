"""The UCR Anomaly Archive's file naming and TSB-AD's CSV layout, on small files written here and on
the archive's series 135 as aeon ships it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from posenc.cli import main
from posenc_bench.data import load_dataset
from posenc_bench.data.archives import parse_tsb_train, parse_ucr_name
from posenc_bench.data.readers import DataFormatError


def _ucr(folder: Path, number: int, name: str, values: np.ndarray, train: int, begin: int, end: int) -> Path:
    path = folder / f"{number:03d}_UCR_Anomaly_{name}_{train}_{begin}_{end}.txt"
    path.write_text("\n".join(f"{v:.6f}" for v in values) + "\n")
    return path


def _tsb(folder: Path, stem: str, values: np.ndarray, labels: np.ndarray) -> Path:
    path = folder / f"{stem}.csv"
    cols = [f"v{j}" for j in range(values.shape[1])]
    rows = [",".join([*cols, "Label"])] + [
        ",".join([*(f"{x:.6f}" for x in row), str(int(y))]) for row, y in zip(values, labels)
    ]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_ucr_name_gives_train_end_and_the_one_anomaly_as_a_half_open_range_from_zero():
    assert parse_ucr_name("001_UCR_Anomaly_DISTORTEDBIDMC1_2500_5400_5600") == (2500, 5400, 5599)
    assert parse_ucr_name("250_UCR_Anomaly_weird_name_with_7_parts_10_20_21") == (10, 20, 20)
    with pytest.raises(DataFormatError, match="not a UCR Anomaly Archive name"):
        parse_ucr_name("UCR_Anomaly_x_1_2")
    with pytest.raises(DataFormatError, match="begin < end is needed, got 20 … 20"):
        parse_ucr_name("003_UCR_Anomaly_x_10_20_20")
    assert parse_tsb_train("001_NAB_id_1_Facility_tr_1007_1st_2014") == 1007


def test_ucr_folder_loads_one_series_per_file(tmp_path):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=300), rng.normal(size=200)
    _ucr(tmp_path, 2, "beta", b, 100, 150, 152)
    _ucr(tmp_path, 1, "alpha", a, 120, 201, 210)
    (tmp_path / "README.md").write_text("not a series")
    whole = load_dataset(f"ucr:{tmp_path}")
    assert [s.name for s in whole.series] == [
        "001_UCR_Anomaly_alpha_120_201_210",
        "002_UCR_Anomaly_beta_100_150_152",
    ]
    first = whole.series[0]
    np.testing.assert_allclose(first.values[:, 0], a, atol=1e-6)
    assert first.events == [(201, 209)]  # steps 201 … 209: the name's 201 … 210, end excluded
    split = load_dataset(f"ucr:{tmp_path}", include_train=True)
    test, train = split.series[0], split.series[1]
    assert train.name == f"{first.name}:train" and train.train_only and train.length == 120
    assert test.length == 180 and test.events == [(81, 89)]


def _aeon_series_135() -> Path:
    """aeon's copy of the UCR archive's series 135 (TimeEval's KDD-TSAD release): a TRAIN and a TEST csv
    with columns ``timestamp,value,is_anomaly``. Found without importing aeon, whose numba pins an older
    NumPy than posenc's, so aeon is installed without its dependencies (``pip install --no-deps aeon``)."""
    spec = importlib.util.find_spec("aeon")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(
            "aeon is not installed: it ships the UCR series 135 this test reads (pip install --no-deps aeon)"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / "KDD-TSAD_135"
    if not folder.is_dir():
        pytest.skip(f"this aeon has no {folder}")
    return folder


def test_ucr_labels_agree_step_for_step_with_aeons_series_135(tmp_path):
    folder = _aeon_series_135()
    columns = {"names": True, "delimiter": ",", "dtype": np.float64}
    whole = np.genfromtxt(folder / "135_UCR_Anomaly_InternalBleeding16_TEST.csv", **columns)
    train = np.genfromtxt(folder / "135_UCR_Anomaly_InternalBleeding16_TRAIN.csv", **columns)
    path = tmp_path / "135_UCR_Anomaly_InternalBleeding16_1200_4187_4199.txt"  # the archive's own file name
    path.write_text("\n".join(repr(float(v)) for v in whole["value"]) + "\n")

    (series,) = load_dataset(f"ucr:{path}").series
    np.testing.assert_array_equal(series.values[:, 0], whole["value"])
    np.testing.assert_array_equal(series.labels, whole["is_anomaly"] == 1)
    assert series.events == [(4187, 4198)]

    labelled, nominal = load_dataset(f"ucr:{path}", include_train=True).series
    assert nominal.train_only and nominal.length == len(train) == 1200
    np.testing.assert_array_equal(nominal.values[:, 0], train["value"])
    np.testing.assert_array_equal(labelled.labels, whole["is_anomaly"][1200:] == 1)


def test_ucr_refuses_an_anomaly_in_the_training_part(tmp_path):
    _ucr(tmp_path, 1, "x", np.zeros(50), 30, 10, 12)
    with pytest.raises(DataFormatError, match="anomalous step lies in the training part"):
        load_dataset(f"ucr:{tmp_path}")


def test_tsb_ad_csv_layout(tmp_path):
    rng = np.random.default_rng(1)
    values = rng.normal(size=(60, 3))
    labels = np.zeros(60, dtype=int)
    labels[40:44] = 1
    _tsb(tmp_path, "001_SMD_id_1_Facility_tr_30_1st_40", values, labels)
    ds = load_dataset(f"tsb-ad:{tmp_path}", include_train=True)
    test, train = ds.series
    assert ds.n_features == 3 and train.length == 30 and test.events == [(10, 13)]
    np.testing.assert_allclose(test.values, values[30:], atol=1e-6)


def test_tsb_ad_needs_a_label_column(tmp_path):
    (tmp_path / "x_tr_2_1st_3.csv").write_text("a,b\n1,2\n3,4\n")
    with pytest.raises(DataFormatError, match="no 'Label' column"):
        load_dataset(f"tsb-ad:{tmp_path}")


@pytest.mark.slow  # trains two tiny detectors
def test_bench_detect_on_ucr_files_scores_each_file(tmp_path, capsys):
    rng = np.random.default_rng(2)
    data = tmp_path / "ucr"
    data.mkdir()
    for k in range(3):
        t = np.arange(700)
        x = np.sin(2 * np.pi * t / 25) + 0.05 * rng.normal(size=700)
        x[500 + 20 * k : 510 + 20 * k] += 3.0
        _ucr(data, k + 1, f"sine{k}", x, 300, 501 + 20 * k, 510 + 20 * k)
    out = tmp_path / "out"
    args = ["bench", "--task", "detect", "--dataset", f"ucr:{data}", "--encodings", "rope", "--seeds", "1"]
    args += ["--epochs", "1", "--window", "16", "--horizon", "2", "--d-model", "16", "--heads", "2"]
    args += ["--layers", "1", "--no-progress", "--no-shuffle-control", "--out", str(out)]
    assert main(args) == 0
    text = (out / "results.md").read_text()
    assert "| forecast | rope | none | vus_pr | 3 |" in text
    runs = json.loads((out / "results.json").read_text())["runs"]
    assert {len(r["series"]) for r in runs} == {3}
