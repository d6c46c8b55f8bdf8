"""Parsing of ``posenc bench``'s list-valued flags, shared by every task's flags (classify, detect, lengthgen)."""

from __future__ import annotations

from posenc_bench.experiment.axes import check_encoding_names


def csv_list(text: str) -> tuple[str, ...]:
    """``"a, b,,c"`` as ``("a", "b", "c")``: comma-separated items, stripped, empty ones dropped."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def encoding_names(text: str, always: tuple[str, ...]) -> tuple[str, ...]:
    """``--encodings`` as registry names after ``always``, each once; ``UsageError`` names the unknown ones."""
    requested = csv_list(text)
    check_encoding_names("--encodings", requested)
    return tuple(dict.fromkeys(always + requested))
