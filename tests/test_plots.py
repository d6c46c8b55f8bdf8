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


MATHS = set("θωρσδπΣ∫⟨⟩≤≥−ᵀ⌈⌉") | {"^", "_"}


def _texts(fig):
    for ax in fig.axes:
        yield from (ax.get_title(), ax.get_xlabel(), ax.get_ylabel())
        legend = ax.get_legend()
        if legend is not None:
            yield from (t.get_text() for t in legend.get_texts())
    for legend in fig.legends:
        yield from (t.get_text() for t in legend.get_texts())


@pytest.mark.parametrize("name", list(plots.FIGURES))
def test_labels_are_mathtext_like_the_captions(name):
    import re

    for text in _texts(plots.FIGURES[name]()):
        outside = re.sub(r"\$[^$]*\$", "", text)
        assert not MATHS & set(outside), (name, text)


@pytest.mark.parametrize("name", [*plots.FIGURES, "trained_spectra"])
def test_figures_fit_the_printed_page_and_legends_print_at_eight_points(name):
    if name == "trained_spectra":
        omega = [0.0, 0.5]
        fig = plots.trained_spectra([("rope", omega, [0.5, 0.5], [0.4, 0.6])])
    else:
        fig = plots.FIGURES[name]()
    assert fig.get_figwidth() <= plots.PAGE_WIDTH  # the report prints it at its natural size
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    for legend in legends:
        assert min(t.get_fontsize() for t in legend.get_texts()) >= 8, name
