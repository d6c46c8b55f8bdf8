"""Data for the anomaly-classification benchmark (NumPy only; ``docs/protocol.md``).

>>> from posenc_bench.data import load_dataset, make_splits
>>> dataset = load_dataset("synthetic")             # or "msl", "smd", "probes", a path
>>> splits = make_splits(dataset, window=64, stride=16, seed=0)
>>> splits.train.X.shape[1:]
(64, 7)
"""

from posenc_bench.data.containers import SPLIT_NAMES, Dataset, Series, Splits, WindowSet, label_runs
from posenc_bench.data.generic import load_table
from posenc_bench.data.load import DATASETS, detect_layout, find_data, load_dataset, load_path
from posenc_bench.data.probes import PROBE_TASKS, ProbeSuite, make_probe, max_distance
from posenc_bench.data.readers import DataFormatError
from posenc_bench.data.smd import load_smd
from posenc_bench.data.splits import DEFAULT_STRIDE, DEFAULT_WINDOW, PROTOCOLS, duplicate_groups, make_splits
from posenc_bench.data.synthetic import make_synthetic
from posenc_bench.data.telemanom import load_telemanom
from posenc_bench.data.windows import fit_normalisation, make_windows

__all__ = [
    "DATASETS",
    "DEFAULT_STRIDE",
    "DEFAULT_WINDOW",
    "PROBE_TASKS",
    "PROTOCOLS",
    "SPLIT_NAMES",
    "DataFormatError",
    "Dataset",
    "ProbeSuite",
    "Series",
    "Splits",
    "WindowSet",
    "detect_layout",
    "duplicate_groups",
    "find_data",
    "fit_normalisation",
    "label_runs",
    "load_dataset",
    "load_path",
    "load_smd",
    "load_table",
    "load_telemanom",
    "make_probe",
    "make_splits",
    "make_synthetic",
    "make_windows",
    "max_distance",
]
