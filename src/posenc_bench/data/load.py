"""``load_dataset``: one entry point for named datasets and paths with auto-detected layout.

Named datasets:

* ``"synthetic"`` (the default) — :func:`posenc_bench.data.synthetic.make_synthetic`, built in.
* ``"probes"`` — a :class:`posenc_bench.data.probes.ProbeSuite` (splits per distance ``k``).
* ``"msl"``, ``"smd"`` — real data found in a folder ``msl/`` or ``smd/`` under the first of:
  ``$POSENC_DATA``; ``../shared/data`` relative to the current directory; ``../shared/data``
  relative to the repository holding this package (a source checkout). ``"msl"`` selects
  ``spacecraft="MSL"`` so the original telemanom layout (MSL and SMAP together) works too.

Archives by prefix: ``"ucr:PATH"`` — the UCR Anomaly Archive's files, ``"tsb-ad:PATH"`` — TSB-AD's
CSV files (:mod:`posenc_bench.data.archives`).

Any other string is a path whose layout is detected, in this order: telemanom
(``labeled_anomalies.csv`` with ``test.npz`` or ``test/*.npy``), SMD (``test/*.txt`` and
``test_label/``), a CSV/NPY file or a folder of them (:mod:`posenc_bench.data.generic`).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from posenc.errors import UsageTypeError
from posenc_bench.data.archives import load_tsb_ad, load_ucr
from posenc_bench.data.containers import Dataset
from posenc_bench.data.generic import load_table, table_files
from posenc_bench.data.probes import ProbeSuite
from posenc_bench.data.readers import DataFormatError
from posenc_bench.data.smd import is_smd, load_smd
from posenc_bench.data.synthetic import make_synthetic
from posenc_bench.data.telemanom import LABELS_FILE, is_telemanom, load_telemanom

DATASETS = ("synthetic", "probes", "msl", "smd")
#: Archive prefixes ``"<prefix>:PATH"`` and their loaders.
ARCHIVES: dict[str, Callable[..., Dataset]] = {"ucr": load_ucr, "tsb-ad": load_tsb_ad}
REPOSITORY = Path(__file__).resolve().parents[3]


def data_dirs() -> list[Path]:
    """The folders searched for named real datasets, in order (module docstring)."""
    roots = [Path(os.environ["POSENC_DATA"])] if os.environ.get("POSENC_DATA") else []
    return roots + [Path.cwd().parent / "shared" / "data", REPOSITORY.parent / "shared" / "data"]


def find_data(name: str) -> Path:
    """The folder ``<root>/<name>`` under the first of :func:`data_dirs` that has it."""
    # each place once, however it is spelled (the current directory's parent may be the checkout's)
    places: dict[Path, Path] = {}
    for root in data_dirs():
        places.setdefault((root / name).resolve(), root / name)
    tried = list(places.values())
    for path in tried:
        if path.is_dir():
            return path
    raise FileNotFoundError(
        f"dataset {name!r} not found; looked in {', '.join(map(str, tried))}. Set "
        f"POSENC_DATA to the folder holding {name}/ or pass the path itself (where {name} is published "
        "and how to lay it out: docs/datasets.md)"
    )


def detect_layout(path: Path) -> str:
    """``"telemanom"``, ``"smd"`` or ``"table"`` for ``path`` (module docstring); ValueError if none.

    A folder that looks like half a telemanom or SMD layout (its labels without its test
    arrays) is reported as such, not read as a table.
    """
    if path.is_dir() and is_telemanom(path):
        return "telemanom"
    if path.is_dir() and is_smd(path):
        return "smd"
    if path.is_dir() and (path / LABELS_FILE).is_file():
        raise DataFormatError(
            f"{path}: {LABELS_FILE} is here but no test arrays: a telemanom layout needs "
            f"test.npz or test/<chan_id>.npy beside it"
        )
    if path.is_dir() and (path / "test_label").is_dir():
        raise DataFormatError(
            f"{path}: test_label/ is here but no test/<machine>.txt files: the SMD layout "
            "needs test/, test_label/ (and optionally train/)"
        )
    if table_files(path):
        return "table"
    raise ValueError(
        f"{path}: no known data layout: expected telemanom (labeled_anomalies.csv with test.npz "
        "or test/*.npy), SMD (test/*.txt and test_label/), or .csv/.npy files with a label "
        "column"
    )


def _call(loader: Callable[..., Any], what: str, *args: Any, **options: Any) -> Any:
    """``loader(*args, **options)``, refusing options it does not take with a message listing those it does."""
    parameters = inspect.signature(loader).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        allowed = [n for n, p in list(parameters.items())[len(args) :] if p.kind is not p.VAR_POSITIONAL]
        unknown = [k for k in options if k not in allowed]
        if unknown:
            raise UsageTypeError(
                f"dataset option {', '.join(map(repr, unknown))} is not an option of {what}; its options "
                f"are {', '.join(allowed) or 'none'}"
            )
    return loader(*args, **options)


def load_path(path: str | Path, **options: Any) -> Dataset:
    """Load the dataset at ``path`` with its detected layout; ``options`` go to that loader."""
    path = Path(path)
    layout = detect_layout(path)
    loaders: dict[str, Callable[..., Dataset]] = {
        "telemanom": load_telemanom,
        "smd": load_smd,
        "table": load_table,
    }
    loader = loaders[layout]
    return _call(loader, f"the {layout} loader", path, **options)


def load_dataset(spec: str | os.PathLike[str] = "synthetic", **options: Any) -> Dataset | ProbeSuite:
    """Load a dataset by name or path (module docstring); ``options`` go to the loader.

    Returns a :class:`Dataset`, except ``"probes"`` which returns a :class:`ProbeSuite`.

    Raises:
        ValueError: ``spec`` is neither a known name nor an existing path (lists the names).
        FileNotFoundError: a named real dataset whose folder is not found (says where it looked).
    """
    if isinstance(spec, str) and spec in DATASETS:
        if spec == "synthetic":
            return _call(make_synthetic, "the synthetic dataset", **options)
        if spec == "probes":
            return _call(ProbeSuite, "the probe suite", **options)
        root = find_data(spec)
        if spec == "smd":
            return _call(load_smd, "the smd loader", root, **options)
        if detect_layout(root) != "telemanom":
            raise ValueError(
                f"{root}: not a telemanom layout (labeled_anomalies.csv with test.npz or test/*.npy)"
            )
        return _call(load_telemanom, "the msl loader", root, **{"spacecraft": "MSL", **options})
    prefix, colon, rest = str(spec).partition(":") if isinstance(spec, str) else ("", "", "")
    if colon and prefix in ARCHIVES:
        if not Path(rest).exists():
            raise ValueError(f"{prefix}:{rest}: no such file or folder")
        return _call(ARCHIVES[prefix], f"the {prefix} loader", Path(rest), **options)
    if not isinstance(spec, (str, os.PathLike)):
        raise TypeError(f"spec must be a dataset name or a path, got {type(spec).__name__}")
    if str(spec).strip() == "":
        raise ValueError(
            f"spec must be a dataset name ({', '.join(DATASETS)}) or a path, got an empty string "
            "(pass '.' to mean the current folder)"
        )
    if not Path(spec).exists():
        raise ValueError(
            f"unknown dataset {str(spec)!r}: expected one of {', '.join(DATASETS)} or an "
            "existing path (a telemanom or SMD folder, or .csv/.npy files with a label column)"
        )
    return load_path(Path(spec), **options)
