"""Reading numeric files with errors that name the file and the problem.

Every reader returns a finite float64 matrix ``[T, F]`` or raises: :class:`FileNotFoundError`
for a missing file, :class:`DataFormatError` (a ``ValueError``) for a malformed one — the
message starts with the file (and member/row/column where known), then says what is wrong.
"""

from __future__ import annotations

import csv
import warnings
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from posenc.errors import UsageError


class DataFormatError(UsageError):
    """A data file exists but does not hold what its layout requires (a :class:`posenc.UsageError`, so a ``ValueError``)."""


def require_file(path: Path, what: str) -> Path:
    """Return ``path`` if it is a file, else raise ``FileNotFoundError`` saying what it should hold."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing file ({what})")
    return path


def check_matrix(where: str, array: np.ndarray) -> NDArray[np.float64]:
    """``array`` as a finite 2-D float64 matrix with at least one row; ``where`` names its source."""
    if array.dtype == object:
        raise DataFormatError(f"{where}: object array (ragged rows?); expected a numeric [T, F] array")
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        raise DataFormatError(f"{where}: dtype {array.dtype} is not numeric")
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2 or array.shape[0] == 0 or array.shape[1] == 0:
        raise DataFormatError(f"{where}: expected a non-empty [T, F] array, got shape {array.shape}")
    out = np.asarray(array, dtype=np.float64)
    bad = ~np.isfinite(out)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        raise DataFormatError(
            f"{where}: non-finite value {float(out[row, col])!r} (NaN or inf) at row "
            f"{row}, "
            f"column {col} ({int(bad.sum())} such values)"
        )
    return out


UNREADABLE = (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error)
"""What NumPy raises for a truncated, garbled or empty ``.npy``/``.npz`` file (or a bad member)."""


def read_npz(path: Path, *, what: str) -> np.lib.npyio.NpzFile:
    """An ``.npz`` archive, opened (its members are read by :func:`npz_member`), else :class:`DataFormatError`."""
    require_file(path, what)
    with path.open("rb") as handle:
        head = handle.read(4)
    if head not in (b"PK\x03\x04", b"PK\x05\x06"):
        why = "an empty file" if not head else "no zip header"
        raise DataFormatError(f"{path}: not a readable .npz archive ({why}); expected {what}")
    try:
        return np.load(path, allow_pickle=False)
    except UNREADABLE as exc:
        raise DataFormatError(f"{path}: not a readable .npz archive ({exc}); expected {what}") from None


def npz_member(archive: np.lib.npyio.NpzFile, name: str, where: str) -> np.ndarray:
    """Member ``name`` of ``archive``; a :class:`DataFormatError` naming ``where`` when it cannot be read."""
    try:
        return archive[name]
    except UNREADABLE as exc:
        raise DataFormatError(f"{where}: unreadable array ({exc})") from None


def read_npy(path: Path, *, what: str) -> NDArray[np.float64]:
    """A ``.npy`` file as a finite ``[T, F]`` float64 matrix (a 1-D array becomes one column)."""
    require_file(path, what)
    with path.open("rb") as handle:
        if handle.read(6) != b"\x93NUMPY":
            raise DataFormatError(f"{path}: not a readable .npy array (no .npy header)")
    try:
        array = np.load(path, allow_pickle=False)
    except UNREADABLE as exc:
        if "allow_pickle" in str(exc):
            raise DataFormatError(
                f"{path}: object array (ragged rows?); expected a numeric [T, F] array"
            ) from None
        raise DataFormatError(f"{path}: not a readable .npy array ({exc})") from None
    return check_matrix(str(path), array)


def _load_text(path: Path, *, what: str, dtype: type, header: bool) -> np.ndarray:
    require_file(path, what)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": checked below
            array: np.ndarray = np.loadtxt(
                path, delimiter=",", ndmin=2, dtype=dtype, skiprows=int(header), quotechar='"'
            )
    except ValueError as exc:
        problem = "ragged rows" if "number of columns" in str(exc) else "unreadable value"
        raise DataFormatError(f"{path}: {problem}: {exc}") from None
    if array.size == 0:
        raise DataFormatError(f"{path}: no data rows")
    return array


def read_delimited(path: Path, *, what: str) -> NDArray[np.float64]:
    """A comma-separated numeric text file (no header) as a finite ``[T, F]`` float64 matrix.

    Ragged rows, non-numeric cells and empty files raise :class:`DataFormatError` naming the file.
    """
    return check_matrix(str(path), _load_text(path, what=what, dtype=np.float64, header=False))


def read_csv_columns(path: Path, *, what: str, numeric: Sequence[str]) -> NDArray[np.float64]:
    """The columns named ``numeric`` of a CSV file with a header, as a finite float64 matrix.

    Every row must have as many cells as the header (ragged rows raise); other columns may
    hold text (e.g. timestamps). Raises :class:`DataFormatError` naming file, row and column.
    """
    names = read_header(path, what=what)
    cells = _load_text(path, what=what, dtype=str, header=True)
    if cells.shape[1] != len(names):
        raise DataFormatError(
            f"{path}: ragged rows: the header has {len(names)} columns, the rows {cells.shape[1]}"
        )
    out = np.empty((cells.shape[0], len(numeric)), dtype=np.float64)
    for j, name in enumerate(numeric):
        column = cells[:, names.index(name)]
        try:
            out[:, j] = column.astype(np.float64)
        except ValueError:
            row = next(i for i, cell in enumerate(column) if not _is_number(cell))
            raise DataFormatError(
                f"{path}: column {name!r}, data row {row}: {str(column[row])!r} is not a number"
            ) from None
        if not np.isfinite(out[:, j]).all():
            row = int(np.flatnonzero(~np.isfinite(out[:, j]))[0])
            raise DataFormatError(
                f"{path}: column {name!r}, data row {row}: non-finite value {column[row]!s} (NaN or inf)"
            )
    return check_matrix(str(path), out)


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _csv_lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    """``(line number, cells)`` of each non-blank line of a UTF-8 CSV file (a leading byte-order mark is dropped)."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            for cells in reader:
                if cells:
                    yield reader.line_num, cells
    except UnicodeDecodeError as exc:
        raise DataFormatError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except csv.Error as exc:
        raise DataFormatError(f"{path}: not readable as CSV ({exc})") from None


def read_header(path: Path, *, what: str) -> list[str]:
    """The column names on the first line of a CSV file (unique; :class:`DataFormatError` otherwise)."""
    require_file(path, what)
    first = next(_csv_lines(path), None)
    if first is None:
        raise DataFormatError(f"{path}: empty file; expected a header line of column names")
    names = [name.strip() for name in first[1]]
    check_column_names(path, names)
    return names


def read_csv_rows(path: Path, *, what: str) -> list[dict[str, str]]:
    """A CSV file with a header as a list of row dicts; each row must have as many cells as the header.

    Raises :class:`DataFormatError` naming the file and line for a short or long row, and for
    repeated column names (blank lines are skipped).
    """
    names = read_header(path, what=what)
    rows = []
    for line, cells in list(_csv_lines(path))[1:]:
        if len(cells) != len(names):
            raise DataFormatError(
                f"{path}: line {line}: {len(cells)} cells, but the header has "
                f"{len(names)} columns ({', '.join(names)})"
            )
        rows.append(dict(zip(names, cells)))
    return rows


def check_column_names(path: Path, names: Sequence[str]) -> None:
    """Refuse repeated column names: which of two columns named ``a`` would ``a`` be?"""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise DataFormatError(
                f"{path}: column name {name!r} appears more than once in the header "
                f"({', '.join(names)}); column names must be unique"
            )
        seen.add(name)
