"""Every seed figure is written as PNG and SVG, labelled, titled and grey-printable."""

from __future__ import annotations

import pytest

plots = pytest.importorskip("posenc.plots", reason="matplotlib is needed for figures")

GREY_MAPS = {"gray", "Greys", "binary", "cividis"}


@pytest.mark.parametrize("name", list(plots.FIGURES))
def test_figure_is_labelled_and_grey(name, tmp_path):
    fig = plots.FIGURES[name]()
    main_axes = [ax for ax in fig.axes if ax.get_title()]
    assert main_axes, f"{name} has no titled axes"
    for ax in main_axes:
        assert ax.get_xlabel() and ax.get_ylabel(), f"{name}: unlabelled axis in {ax.get_title()!r}"
        for image in ax.images:
            assert image.get_cmap().name in GREY_MAPS
    files = plots.save(fig, tmp_path / name)
    assert [f.suffix for f in files] == [".png", ".svg"]
    assert all(f.stat().st_size > 1000 for f in files)
    assert files[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in files[1].read_bytes()[:1000]


def test_lines_differ_in_style():
    fig = plots.reconstruction()
    styles = {line.get_linestyle() for line in fig.axes[0].lines}
    assert len(styles) == 3


def test_bad_format(tmp_path):
    with pytest.raises(ValueError, match="formats must be among"):
        plots.save(plots.FIGURES["frequency_distribution"](), tmp_path / "x", formats=("jpg",))
