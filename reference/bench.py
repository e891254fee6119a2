"""`make bench`: the time of one training step, C against PyTorch on this CPU.

For each model below, runs the same training step (forward, cross-entropy,
backward, Adam update) on the same shapes, from the same starting weights (a checkpoint
of PyTorch's initialisation, build/bench/NAME.safetensors), in two fresh
processes, one the C program (build/08_training --bench CHECKPOINT ...) and one PyTorch (this module with
--worker), each with the same number of threads, and prints

    model, threads, C ms/step, PyTorch ms/step, speed-up (PyTorch / C),
    C peak memory, PyTorch peak memory, PyTorch memory before training

Each side warms up for a few steps, then reports the median of several
timed runs of `steps` steps (the median resists a busy neighbour on a shared
machine). Peak memory is each process's own high-water mark of resident
memory, VmHWM in /proc/self/status, read at its end (the rusage a parent
gets would also count the Python parent's pages from before the exec).
PyTorch's includes the interpreter and its libraries, so its resident
memory just before the first step is printed as well.

Both sides train with dropout 0: the C attention has no dropout on its
weights (chapter 05), so a step with dropout would not be the same work.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "build" / "08_training"

# The two sizes issue 4 asks for. "reverse" is seeds 000/004's encoder-only
# labeller; "taylor" is seed 002's seq2seq model (emb 64, 2+2 layers, 8 heads,
# FFN 128, batch 32, source 22, target 85, the Taylor vocabularies of
# chapter 01: 37 source and 30 target ids).
MODELS = {
    "reverse": dict(config=dict(kind="labeller", src_vocab=10, tgt_vocab=10, d_model=32,
                                nhead=1, dim_feedforward=64, num_encoder_layers=1, max_len=16,
                                final_norm=False, pad_id=-1),
                    batch=128, src_len=16, tgt_len=0, steps=20, repeats=5),
    "taylor": dict(config=dict(kind="seq2seq", src_vocab=37, tgt_vocab=30, d_model=64, nhead=8,
                               dim_feedforward=128, num_encoder_layers=2, num_decoder_layers=2,
                               max_len=85, learned_pos=True, scale_embedding=2, final_norm=True,
                               pad_id=0),
                   batch=32, src_len=22, tgt_len=85, steps=5, repeats=5),
}
WARMUP_STEPS = 3


def checkpoint_path(name):
    return ROOT / "build" / "bench" / f"{name}.safetensors"


def write_checkpoint(name):
    """The starting weights both sides load: PyTorch's own initialisation."""
    import torch

    from reference.ch07_model import build_model, full_config, save_checkpoint

    cfg = full_config(**MODELS[name]["config"])
    torch.manual_seed(0)
    checkpoint_path(name).parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(build_model(cfg), cfg, checkpoint_path(name))


def torch_worker(name, threads):
    """Times PyTorch's training step for MODELS[name]; prints one JSON line."""
    import torch
    import torch.nn.functional as F

    from reference.ch07_model import load_checkpoint

    torch.set_num_threads(threads)
    spec = MODELS[name]
    model, cfg = load_checkpoint(checkpoint_path(name))
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    N, S, T = spec["batch"], spec["src_len"], spec["tgt_len"]
    low = 3 if cfg["pad_id"] >= 0 else 0           # keep pad/sos/eos out of the data
    src = torch.randint(low, cfg["src_vocab"], (N, S))
    if cfg["kind"] == "seq2seq":
        tgt = torch.randint(low, cfg["tgt_vocab"], (N, T + 1))
        tgt_in, target = tgt[:, :-1], tgt[:, 1:]
    else:
        tgt_in, target = None, torch.randint(0, cfg["tgt_vocab"], (N, S))
    ignore = cfg["pad_id"] if cfg["pad_id"] >= 0 else -100

    def step():
        opt.zero_grad(set_to_none=False)
        logits = model(src, tgt_in) if tgt_in is not None else model(src)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                               ignore_index=ignore)
        loss.backward()
        opt.step()

    rss_before = resident_mb("VmRSS")
    for _ in range(WARMUP_STEPS):
        step()
    runs = []
    for _ in range(spec["repeats"]):
        started = time.perf_counter()
        for _ in range(spec["steps"]):
            step()
        runs.append((time.perf_counter() - started) / spec["steps"] * 1e3)
    print(json.dumps({"ms_per_step": statistics.median(runs), "rss_before_mb": rss_before,
                      "peak_mb": resident_mb("VmHWM")}))


def resident_mb(field):
    """This process's VmRSS (now) or VmHWM (peak) in MB, from /proc/self/status."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def measure(command, threads):
    """Runs one worker; returns its JSON line as a dict."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    proc = subprocess.run(command, stdout=subprocess.PIPE, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"make bench: {' '.join(map(str, command))} failed "
                         f"(exit {proc.returncode})")
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=["torch"], help=argparse.SUPPRESS)
    parser.add_argument("--model", choices=sorted(MODELS), help="only this model")
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="threads for both sides (default: every core)")
    args = parser.parse_args()
    if args.worker:
        torch_worker(args.model, args.threads)
        return 0
    if not PROGRAM.exists():
        raise SystemExit(f"make bench: {PROGRAM.relative_to(ROOT)} is not built (run make)")

    names = [args.model] if args.model else list(MODELS)
    print(f"make bench: one training step (forward, cross-entropy, backward, Adam), "
          f"{args.threads} threads, median of {MODELS[names[0]]['repeats']} runs")
    header = (f"{'model':<9} {'C ms':>9} {'torch ms':>9} {'speed-up':>9} "
              f"{'C peak MB':>10} {'torch peak MB':>14} {'torch base MB':>14}")
    print(header)
    print("-" * len(header))
    for name in names:
        spec = MODELS[name]
        write_checkpoint(name)
        c = measure([PROGRAM, "--bench", checkpoint_path(name),
                             "--batch-size", str(spec["batch"]), "--src-len", str(spec["src_len"]),
                             "--tgt-len", str(spec["tgt_len"]), "--steps", str(spec["steps"]),
                             "--repeats", str(spec["repeats"]), "--warmup", str(WARMUP_STEPS)],
                            args.threads)
        t = measure([sys.executable, "-m", "reference.bench", "--worker", "torch",
                             "--model", name, "--threads", str(args.threads)], args.threads)
        print(f"{name:<9} {c['ms_per_step']:>9.2f} {t['ms_per_step']:>9.2f} "
              f"{t['ms_per_step'] / c['ms_per_step']:>8.2f}x {c['peak_mb']:>10.1f} "
              f"{t['peak_mb']:>14.1f} "
              f"{t['rss_before_mb']:>14.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
