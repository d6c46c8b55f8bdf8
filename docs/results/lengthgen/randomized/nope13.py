"""rope with NoPE layers 1 and 3 (every other layer), copy and reverse, seeds 0-4: the bench's own
training loop (the functions of posenc_bench.experiment.lengthgen, same RNG streams; the loop of
testpos.py, which reproduced the bench's metrics bit for bit), rope only. Output: /tmp/h45/nope13.json."""
import dataclasses, json, time
from pathlib import Path
import torch
from posenc_bench.experiment import lengthgen as lg

torch.set_num_threads(1)
dev = torch.device("cpu")
base = lg.LengthgenConfig(task="copy", encoding="rope", seed=0, train_length=8, vocab=8, n_layers=4,
                          steps=3000, weight_decay=0.01, no_rope_layers=(1, 3))
plan = lg.LengthgenPlan(base=base, tasks=("copy", "reverse"), encodings=("none", "sinusoidal", "rope"),
                        seeds=5, test_multiples=(1.0, 1.25, 1.5, 2.0))
out = {}
for t in ("copy", "reverse"):
    for s in range(5):
        t0 = time.process_time()
        c = dataclasses.replace(base, task=t, seed=s)
        model, opt, sched = lg._fresh(c, dev)
        assert sorted(i for i, layer in enumerate(model.encoder.layers) if layer.attention.encoding is None) == [1, 3]
        model.train()
        for step in range(c.steps):
            loss = lg._loss(model, lg.training_batch(c, step), dev, None)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
        out[f"{t}/rope/{s}"] = lg.evaluate(model, c, plan, dev)["accuracy"]
        print(t, s, out[f"{t}/rope/{s}"], f"{time.process_time() - t0:.1f} CPU-s", flush=True)
        Path("/tmp/h45/nope13.json").write_text(json.dumps(out, indent=1))
