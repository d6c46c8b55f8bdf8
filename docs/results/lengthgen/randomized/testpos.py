"""Retrain the --random-positions 64 runs exactly as the bench does (same functions, same RNG streams),
check the standard evaluation reproduces the bench's metrics.json bit for bit, then also evaluate with
random ordered test positions (a fresh ordered sample of 0..M-1 per test example), as Ruoss et al.'s
reference code does at evaluation. Output: /tmp/h45/testpos.json."""
import dataclasses, json, sys, time
from pathlib import Path
import numpy as np
import torch
from posenc.nn import randomized_positions
from posenc_bench.experiment import lengthgen as lg
from posenc_bench.data import lengthgen as data

torch.set_num_threads(1)
M = 64
dev = torch.device("cpu")
base = lg.LengthgenConfig(task="copy", encoding="rope", seed=0, train_length=8, vocab=8, n_layers=4,
                          steps=3000, random_positions=M, weight_decay=0.01)
plan = lg.LengthgenPlan(base=base, tasks=("copy", "reverse"), encodings=("none", "sinusoidal", "rope"),
                        seeds=5, test_multiples=(1.0, 1.25, 1.5, 2.0))
out = {}
for t in ("copy", "reverse"):
    for e in ("sinusoidal", "rope"):
        for s in range(5):
            t0 = time.process_time()
            c = dataclasses.replace(base, task=t, encoding=e, seed=s)
            model, opt, sched = lg._fresh(c, dev)
            model.train()
            for step in range(c.steps):
                batch = lg.training_batch(c, step)
                g = torch.Generator().manual_seed(int(lg._rng(c.seed, "positions", step).integers(2**31)))
                pos = randomized_positions(batch.tokens.shape[1] - 1, M, generator=g)
                loss = lg._loss(model, batch, dev, pos)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
            std = lg.evaluate(model, c, plan, dev)["accuracy"]
            bench = json.loads((c.directory(Path("/tmp/h45/rand64")) / "metrics.json").read_text())["accuracy"]
            model.eval()
            task = data.task(t)
            gtest = torch.Generator().manual_seed(10_000 + s)
            rnd = {}
            with torch.no_grad():
                for n in plan.test_lengths(t):
                    b = task.batch(lg._rng(s, t, "test", n, 500), plan.n_test, n, c.vocab, 0.5)
                    tok = torch.from_numpy(b.tokens)
                    hits = 0
                    for i in range(tok.shape[0]):
                        p = randomized_positions(tok.shape[1] - 1, M, generator=gtest)
                        logits = model(tok[i:i + 1, :-1], positions=p)
                        hits += bool((logits[0, -b.answer:].argmax(-1) == tok[i, -b.answer:]).all())
                    rnd[str(n)] = hits / tok.shape[0]
            out[f"{t}/{e}/{s}"] = {"standard": std, "bench": bench, "identical": std == bench, "random_test": rnd}
            print(t, e, s, "identical" if std == bench else "DIFFERENT", std, "random test:", rnd,
                  f"{time.process_time() - t0:.1f} CPU-s", flush=True)
            Path("/tmp/h45/testpos.json").write_text(json.dumps(out, indent=1))
