"""End to end: a tiny `posenc bench` run, then `posenc analyze --checkpoint` and `posenc report --runs` on it."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from posenc import analysis

torch = pytest.importorskip("torch")


pytestmark = pytest.mark.slow  # the module fixture trains a small benchmark


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "posenc",
            "bench",
            "--epochs",
            "1",
            "--seeds",
            "1",
            "--encodings",
            "learned,learnable_frequency,t5",
            "--d-model",
            "8",
            "--heads",
            "2",
            "--layers",
            "1",
            "--no-baseline",
            "--no-shuffle-control",
            "--no-progress",
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return out


def _run_dir(bench, encoding):
    return next((bench / "runs").glob(f"*/{encoding}-native/split0-seed0"))


def _analyze(*args):
    return subprocess.run(
        [sys.executable, "-m", "posenc", "analyze", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_trained_learned_table_is_scored_from_the_checkpoint(bench):
    run = _run_dir(bench, "learned")
    proc = _analyze("learned", "--checkpoint", str(run), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert list(data["values"]) == list(analysis.CRITERIA) == list(data["initial"])
    assert set(data["attention_form"]) == {"initial", "trained"}
    # independent: the trained table straight from the checkpoint's state dict
    state = torch.load(run / "checkpoint.pt", map_location="cpu", weights_only=True)["model"]
    E = state["encoder.encoding.weight"].double().numpy()
    diff = np.linalg.norm(E[:, None, :] - E[None, :, :], axis=-1)
    assert data["values"]["min_distance"] == pytest.approx(diff[np.triu_indices(len(E), 1)].min(), rel=1e-9)
    G = E @ E.T
    assert data["values"]["toeplitz_error"] == pytest.approx(analysis.toeplitz_deviation(G), rel=1e-9)
    assert data["values"]["min_distance"] != data["initial"]["min_distance"]  # one epoch moved the table
    # Su's form: H = diag(γ) W_Qᵀ W_K diag(γ) / √d_h of layer 0
    W = state["encoder.layers.0.attention.qkv.weight"].double().numpy()
    g = state["encoder.layers.0.norm1.weight"].double().numpy()
    H = (W[:8] * g).T @ (W[8:16] * g) / np.sqrt(4)
    assert data["attention_form"]["trained"]["diagonal_share"] == pytest.approx(
        np.linalg.norm(np.diag(H)) / np.linalg.norm(H), rel=1e-9
    )
    assert data["attention_form"]["trained"]["form_toeplitz_error"] == pytest.approx(
        analysis.toeplitz_deviation(E @ H @ E.T), rel=1e-9
    )


def test_trained_frequencies_and_t5_bias(bench):
    run = _run_dir(bench, "learnable_frequency")
    data = json.loads(_analyze("learnable_frequency", "--checkpoint", str(run), "--json").stdout)
    state = torch.load(run / "checkpoint.pt", map_location="cpu", weights_only=True)["model"]
    w = state["encoder.encoding.frequencies"].double().numpy()
    assert data["values"]["largest_period"] == pytest.approx(2 * np.pi / w[w > 0].min(), rel=1e-12)
    assert data["values"]["low_pass_fraction"] == pytest.approx(np.mean(w < 2 * np.pi / 8))
    assert data["values"]["shift_residual"] < 1e-12  # still sinusoidal: the exact operator at the new w
    assert 0 < data["attention_form"]["trained"]["relative_share"] < 1
    t5 = json.loads(_analyze("t5", "--checkpoint", str(_run_dir(bench, "t5")), "--json").stdout)
    assert t5["family"] == "bias" and t5["attention_form"] == {"initial": None, "trained": None}
    assert t5["values"]["toeplitz_error"] < 1e-12


def test_checkpoint_errors_name_the_problem(bench, tmp_path):
    proc = _analyze("learned", "--checkpoint", str(_run_dir(bench, "t5")))
    assert proc.returncode == 2 and "is a run of encoding 't5', not 'learned'" in proc.stderr
    proc = _analyze("learned", "--checkpoint", str(tmp_path))
    assert proc.returncode == 2 and "no config.json" in proc.stderr
    # a checkpoint of another model next to the learned run's config: named, not a traceback
    import shutil

    mixed = tmp_path / "mixed"
    shutil.copytree(_run_dir(bench, "learned"), mixed)
    shutil.copy(_run_dir(bench, "t5") / "checkpoint.pt", mixed / "checkpoint.pt")
    proc = _analyze("learned", "--checkpoint", str(mixed))
    assert proc.returncode == 2 and "holds weights of another model" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_report_with_runs_has_the_trained_section(bench, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "posenc", "report", "--out", str(tmp_path), "--runs", str(bench)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "<section id='trained'>" in page and "Trained encodings: initial vs trained" in page
    for encoding in ("learned-native", "learnable_frequency-native", "t5-native", "sinusoidal-native"):
        assert encoding in page
    assert page.count("id='fig-bilinear_parts'") == 2  # the random H and a trained H
    assert "id='fig-trained_spectra'" in page
    runs = json.loads((tmp_path / "scorecards.json").read_text())["runs"]
    assert len(runs) == 5 and all(set(r["initial"]) == set(analysis.CRITERIA) for r in runs)


def test_trained_spectrum_is_the_tables_power_along_positions(bench):
    run = _run_dir(bench, "learned")
    data = json.loads(_analyze("learned", "--checkpoint", str(run), "--json").stdout)
    state = torch.load(run / "checkpoint.pt", map_location="cpu", weights_only=True)["model"]
    E = state["encoder.encoding.weight"].double().numpy()  # [S, d]
    power = (np.abs(np.fft.rfft(E, axis=0)) ** 2).mean(axis=1)  # along positions, averaged over features
    S = E.shape[0]
    power[1 : (S + 1) // 2] *= 2.0  # two conjugate terms per inner bin
    np.testing.assert_allclose(data["spectrum"]["trained"]["power"], power / power.sum(), atol=1e-12)
    np.testing.assert_allclose(data["spectrum"]["trained"]["omega"], 2 * np.pi * np.arange(S // 2 + 1) / S)
