"""Training throughput of the default spatio-temporal model on MSL instances (wall and CPU time)."""
import os, time, torch
from posenc.data import load_dataset, make_splits
from posenc.models import SpatioTemporalClassifier
torch.set_num_threads(1)
sp = make_splits(load_dataset("msl"), window=128, protocol="dfstrans", seed=0)
X, y = torch.as_tensor(sp.train.X), torch.as_tensor(sp.train.y, dtype=torch.float32)
for enc in ["none", "sinusoidal", "dfstrans_dft"]:
    torch.manual_seed(0)
    m = SpatioTemporalClassifier(55, encoding=enc)  # defaults: 8 windows x 16 steps, d 16, 2 heads
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=1e-2)
    lf = torch.nn.BCEWithLogitsLoss()
    def epoch():
        for i in range(0, len(X), 32):
            loss = lf(m(X[i:i+32]), y[i:i+32]); opt.zero_grad(); loss.backward(); opt.step()
    epoch()
    load = os.getloadavg()[0]
    w, c = time.perf_counter(), time.process_time()
    for _ in range(2): epoch()
    w, c = time.perf_counter() - w, time.process_time() - c
    n = 2 * len(X)
    print(f"{enc}: {n} instances, wall {w:.2f} s -> {n/w:.0f} instances/s ({8*n/w:.0f} windows/s); "
          f"CPU {c:.2f} s -> {n/c:.0f} instances/s ({8*n/c:.0f} windows/s) per busy core; load {load:.1f}")
