"""Detection data: nominal training arrays paired with labelled test arrays, checked before training."""

from __future__ import annotations

import numpy as np
import pytest

from posenc_bench.data import fit_normalisation, make_synthetic
from posenc_bench.data.nominal import detection_data


def test_synthetic_nominal_arrays_share_the_channel_and_hold_no_events():
    ds = make_synthetic(n_series=2, length=4096, nominal_length=4096)
    names = [s.name for s in ds.series]
    assert names == ["synthetic-0", "synthetic-0:train", "synthetic-1", "synthetic-1:train"]
    train = ds.series[1]
    assert train.train_only and train.events == [] and not train.labels.any()
    assert not np.allclose(train.values, ds.series[0].values)
    # the same channel: the sensors' per-feature means (offset + mixing) agree, other channels' do not
    close = np.abs(train.values[:, :4].mean(0) - ds.series[0].values[:, :4].mean(0)).max()
    far = np.abs(train.values[:, :4].mean(0) - ds.series[2].values[:, :4].mean(0)).max()
    assert close < 0.15 and far > 1.0
    # the labelled series do not depend on whether training arrays are made
    assert np.array_equal(make_synthetic(n_series=2, length=4096).series[1].values, ds.series[2].values)


def test_detection_data_pairs_splits_and_normalises_per_channel():
    ds = make_synthetic(n_series=2, length=1024, nominal_length=1000)
    data = detection_data(ds, window=16, horizon=2, holdout=0.2)
    assert [c.name for c in data.channels] == ["synthetic-0", "synthetic-1"] and data.targets == tuple(
        range(6)
    )
    c = data.channels[1]
    raw = ds.series[3].values
    assert len(c.fit) == 800 and len(c.holdout) == 200 and c.index == 1
    center, scale = fit_normalisation(np.concatenate([ds.series[1].values[:800], raw[:800]]))
    np.testing.assert_allclose(c.holdout, (raw[800:] - center) / scale, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(c.test, (ds.series[2].values - center) / scale, rtol=1e-6, atol=1e-6)


def test_no_nominal_data_or_short_arrays_are_refused_before_training():
    with pytest.raises(ValueError, match="needs nominal training arrays.*include_train.*nominal_length"):
        detection_data(make_synthetic(n_series=1, length=1024), window=16)
    ds = make_synthetic(n_series=1, length=1024, nominal_length=600)
    with pytest.raises(
        ValueError, match="'synthetic-0': its held-out part has 120 steps, shorter than window"
    ):
        detection_data(ds, window=118, horizon=4)
    with pytest.raises(ValueError, match="holdout must be a fraction"):
        detection_data(ds, window=16, holdout=1.0)
