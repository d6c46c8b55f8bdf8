"""posenc-bench: positional encodings compared on multivariate time-series anomaly detection.

A sibling of :mod:`posenc` built on its public API only (the library never imports it): data
(:mod:`posenc_bench.data`), the experiment — configurations, training, run records, comparison —
(:mod:`posenc_bench.experiment`), the models (:mod:`posenc_bench.models`,
:mod:`posenc_bench.detectors`) and the ``posenc bench`` command (:mod:`posenc_bench.cli`), which
reaches the ``posenc`` command line through :mod:`posenc_bench.plugin`.

Importing it registers the encodings that exist for the benchmark's reproductions only
(``dfstrans_dft``); it imports neither torch nor matplotlib.
"""

from posenc import registry

if "dfstrans_dft" not in registry.ENCODINGS:
    registry.register(
        "dfstrans_dft",
        "posenc_bench.dfstrans:DFStransDFTEncoding",
        family="input",
        scales=True,
        summary="DFT encoding as the DFStrans code implements it: decays in place on every call",
        source="Labaien et al. 2023, code dfstrans/DFStrans (a reproduction, not a recommendation)",
    )
