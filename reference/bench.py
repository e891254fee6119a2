"""`make bench`: C against PyTorch on this CPU (and a GPU): matrix products, a training step.

For each model below, runs the same training step (forward, cross-entropy,
backward, Adam update) on the same shapes, from the same starting weights (a
checkpoint of PyTorch's initialisation, build/bench/NAME.safetensors), in two
fresh processes, one the C program (build/08_training --bench CHECKPOINT ...)
and one PyTorch (this module with --worker), each with the same number of
threads, and prints

    model, threads, C ms/step, PyTorch ms/step (eager), speed-up (PyTorch / C),
    its lowest and highest round, the rounds that reach SPEED_UP_AIM,
    PyTorch ms/step with torch.compile, its speed-up, C ms/step on one thread,
    C peak memory, PyTorch peak memory, PyTorch memory before training

Then each step's model FLOPs (the matrix products of the forward, counted
twice more for the backward's two products per layer: 6 M K N per linear
layer of M rows, and 3 x 4 N H Lq Lk Dh for the attention's two products;
the element-wise work is left out) and the share of the machine's peak that
C's step reaches: FLOPs / C's time, against the best GFLOP/s that any matrix
product of the table below reached on as many threads (C's or torch.mm's),
the peak this machine's multiply-adds show in practice.

torch.compile (the default inductor backend) compiles the model's forward,
and so its backward, in a third process before its first step; the compile
is not timed (the warm-up steps include it), only the steps after it.
Inductor writes C++ and needs a C++ compiler (g++): where the compiling
worker fails, its error is printed, its columns say n/a and a line after
the table names the failed command.

Each side warms up for a few steps, then reports the median of several
timed runs of `steps` steps (the median resists a busy neighbour on a shared
machine). The C and eager PyTorch workers take turns, `rounds` times (the
machine's speed drifts by 10-30 % over minutes, and a round compares the two
within seconds): the row gives the median of each side's times and the
median of the rounds' speed-ups, then the lowest and highest round and how
many rounds reached the speed-up the step aims for (SPEED_UP_AIM).
torch.compile and C on one thread are measured once. Peak memory is each
process's own high-water mark of resident memory (the highest of the
rounds), VmHWM in /proc/self/status, read at its end (the rusage a parent
gets would also count the Python parent's pages from before the exec).
PyTorch's includes the interpreter and its libraries, so its resident
memory just before the first step is printed as well.

Both sides train with the model's dropout: 0 for the CPU rows, 0.1 for
"imdb6", where it is every dropout of nn.TransformerEncoderLayer, the
attention weights' included, on both sides (C draws its masks on the GPU,
chapter 05's Philox).

The GPU table follows when torch sees a CUDA device and the CUDA build of
the program, build/cuda/08_training, exists (`make cuda`); otherwise one
line says why there is none. It times the same step on the GPU, for every
model, the paper's base size ("base", GPU only: far too slow for a small
CPU) included: the C program with --device cuda against PyTorch with the
model and every input on "cuda", and prints

    model, C GPU ms/step, PyTorch GPU ms/step (eager, then torch.compile),
    speed-up against each, C GPU memory, PyTorch GPU memory (eager)

Both sides compute in full float32: PyTorch's TF32 is switched off for
matrix products and cuDNN, as the C code uses none. Both copy the loss back
to the host at the end of every step (C does; PyTorch calls loss.item()),
so every step ends with the GPU done, and each timed run ends with a device
synchronisation. GPU memory is each side's own peak of device memory
allocated: what the C program allocated, against
torch.cuda.max_memory_allocated(); neither counts the CUDA context (the
driver's few hundred MB per process), nor PyTorch's cached but unused blocks.

Before the training steps, a table of matrix products: GFLOP/s of C's
matmul_nn, matmul_nt and matmul_tn (build/00_foundations --bench) against
torch.mm on the same shapes, with 1 thread and with every core: squares of
64 to 1024 in every form, and the products the two models' linear layers
make in the form they make them (forward nt, input gradient nn, weight
gradient tn). Each figure is the best of several runs of about 20 ms, and the
two sides take turns, shape list by shape list, MATMUL_ROUNDS times, each
keeping its best: a busy neighbour on a shared machine slows a run, never
speeds one up.

After the training table, the busy-neighbour rows: the same C training step
(default threads, as a user runs it) while another process spins on one
core, against C's own single-thread step on the idle machine measured just
before (each the best of BUSY_RUNS runs, the training table's "C 1t" too).
The program must adapt (chapter 00's threads_adapt): the ratio should stay
at most 1.3.

Last, decoding: greedy decoding of 32 Taylor test sources to the full 84
tokens by the shipped models/taylor.safetensors, with chapter 07's
key/value cache and without it (the decoder re-run over the whole prefix at
every step), in ms per sequence.
"""

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "build" / "08_training"
CUDA_PROGRAM = ROOT / "build" / "cuda" / "08_training"

# The two sizes issue 4 asks for. "reverse" is seeds 000/004's encoder-only
# labeller; "taylor" is seed 002's seq2seq model (emb 64, 2+2 layers, 8 heads,
# FFN 128, batch 32, source 22, target 85, the Taylor vocabularies of
# chapter 01: 37 source and 30 target ids). "base" is the paper's base model
# (d_model 512, 8 heads, FFN 2048, 6+6 layers, sinusoidal positions,
# embeddings scaled by sqrt(d_model)) with 8000-id vocabularies, batch 32,
# source and target 64: gpu_only, it runs in the GPU table alone.
MODELS = {
    "reverse": dict(config=dict(kind="labeller", src_vocab=10, tgt_vocab=10, d_model=32,
                                nhead=1, dim_feedforward=64, num_encoder_layers=1, max_len=16,
                                final_norm=False, pad_id=-1),
                    batch=128, src_len=16, tgt_len=0, steps=20, repeats=5, rounds=7,
                    busy_warmup=200),
    "taylor": dict(config=dict(kind="seq2seq", src_vocab=37, tgt_vocab=30, d_model=64, nhead=8,
                               dim_feedforward=128, num_encoder_layers=2, num_decoder_layers=2,
                               max_len=85, learned_pos=True, scale_embedding=2, final_norm=True,
                               pad_id=0),
                   batch=32, src_len=22, tgt_len=85, steps=5, repeats=5, rounds=3,
                   busy_warmup=10),
    "base": dict(config=dict(kind="seq2seq", src_vocab=8000, tgt_vocab=8000, d_model=512,
                             nhead=8, dim_feedforward=2048, num_encoder_layers=6,
                             num_decoder_layers=6, max_len=64, learned_pos=False,
                             scale_embedding=1, final_norm=True, pad_id=0),
                 batch=32, src_len=64, tgt_len=64, steps=5, repeats=5, gpu_only=True),
    # The IMDb classifier at the notebook's size (seed 003: 6 layers,
    # d_model 256, 8 heads, FFN 1024, 512 tokens) with dropout 0.1, over
    # chapter 10's 8192 BPE ids: gpu_only.
    "imdb6": dict(config=dict(kind="classifier", src_vocab=8192, tgt_vocab=2, d_model=256,
                              nhead=8, dim_feedforward=1024, num_encoder_layers=6, max_len=512,
                              learned_pos=True, pad_id=0, dropout=0.1),
                  batch=32, src_len=512, tgt_len=0, steps=5, repeats=5, gpu_only=True),
}
WARMUP_STEPS = 3
SPEED_UP_AIM = 3.0      # the CPU step's aim against eager PyTorch (issue 26)
MATMUL_PROGRAM = ROOT / "build" / "00_foundations"

# (form, M, N, K): C (M, N) from A (M, K) and B (K, N) as the form stores
# them. The model rows are each model's widest linear layers over its batch
# rows (reverse: 128 x 16 = 2048 rows, d_model 32, FFN 64, in_proj 96;
# taylor: 32 x 85 = 2720 decoder rows, d_model 64, FFN 128, in_proj 192).
MATMUL_SHAPES = (
    [(form, n, n, n) for n in (64, 128, 256, 512, 1024) for form in ("nn", "nt", "tn")]
    + [("nt", 2048, 96, 32), ("nt", 2048, 64, 32), ("nn", 2048, 32, 64), ("tn", 64, 32, 2048),
       ("nt", 2720, 192, 64), ("nt", 2720, 128, 64), ("nn", 2720, 64, 128),
       ("tn", 128, 64, 2720), ("nt", 2720, 30, 64)])
MATMUL_ROUNDS = 3
# The busy-neighbour ratio compares two timings that each move by 10-30 %
# on a shared machine: each is the best of this many runs.
BUSY_RUNS = 3


def step_flops(spec):
    """The matrix-product FLOPs of one training step of a MODELS spec."""
    c, N = spec["config"], spec["batch"]
    S, T, D, F, H = spec["src_len"], spec["tgt_len"], c["d_model"], c["dim_feedforward"], c["nhead"]

    def linear(rows, k, n):                    # forward 2 M K N, backward twice that
        return 6 * rows * k * n

    def attention(lq, lk):                     # scores and weighted sum, and their backward
        return 3 * 4 * N * H * lq * lk * (D // H)

    def self_block(rows, lq):                  # in_proj, out_proj, the attention, the FFN
        return (linear(rows, D, 3 * D) + linear(rows, D, D) + attention(lq, lq)
                + linear(rows, D, F) + linear(rows, F, D))

    flops = c["num_encoder_layers"] * self_block(N * S, S)
    if c["kind"] == "seq2seq":
        cross = (linear(N * T, D, D) + linear(N * S, D, 2 * D) + linear(N * T, D, D)
                 + attention(T, S))
        flops += c["num_decoder_layers"] * (self_block(N * T, T) + cross)
        flops += linear(N * T, D, c["tgt_vocab"])
    elif c["kind"] == "classifier":
        flops += linear(N, D, c["tgt_vocab"])
    else:
        flops += linear(N * S, D, c["tgt_vocab"])
    return flops


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


def torch_worker(name, threads, device="cpu", compiled=False):
    """Times PyTorch's training step for MODELS[name] on device ("cpu" or
    "cuda"), with the model through torch.compile when compiled; prints one
    JSON line."""
    import torch
    import torch.nn.functional as F

    from reference.ch07_model import load_checkpoint

    # Subnormals flushed to zero, as the C programs do (tensor.h's
    # flush_subnormals): both sides compute the same way, at the same cost.
    # Set before the threads start, which take the setting with them.
    torch.set_flush_denormal(True)
    torch.set_num_threads(threads)
    cuda = device == "cuda"
    if cuda:
        # Full float32, as the C code computes: no TF32 in cuBLAS's matrix
        # products nor in cuDNN (the C code uses no TF32 anywhere).
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    spec = MODELS[name]
    model, cfg = load_checkpoint(checkpoint_path(name))
    model.to(device)                               # before the optimiser takes the parameters
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    if compiled:
        # Dynamo warns of the graph break in nn.Transformer's causal-mask
        # check (a tensor's .item()) on every run, and inductor that a CPU
        # machine has no CUDA runtime; the compiled step is timed with the
        # break, as a user of torch.compile would meet it, and the record
        # keeps only the tables.
        torch._logging.set_logs(dynamo=logging.ERROR)
        logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    run = torch.compile(model) if compiled else model
    N, S, T = spec["batch"], spec["src_len"], spec["tgt_len"]
    low = 3 if cfg["pad_id"] >= 0 else 0           # keep pad/sos/eos out of the data
    src = torch.randint(low, cfg["src_vocab"], (N, S), device=device)
    if cfg["kind"] == "seq2seq":
        tgt = torch.randint(low, cfg["tgt_vocab"], (N, T + 1), device=device)
        tgt_in, target = tgt[:, :-1], tgt[:, 1:]
    else:
        out_len = (N,) if cfg["kind"] == "classifier" else (N, S)
        tgt_in, target = None, torch.randint(0, cfg["tgt_vocab"], out_len, device=device)
    ignore = cfg["pad_id"] if cfg["pad_id"] >= 0 else -100

    def step():
        opt.zero_grad(set_to_none=False)
        logits = run(src, tgt_in) if tgt_in is not None else run(src)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                               ignore_index=ignore)
        loss.backward()
        opt.step()
        if cuda:
            loss.item()            # the loss back on the host every step, as the C program does

    def synchronize():
        if cuda:
            torch.cuda.synchronize()

    rss_before = resident_mb("VmRSS")
    for _ in range(WARMUP_STEPS):
        step()
    synchronize()
    runs = []
    for _ in range(spec["repeats"]):
        started = time.perf_counter()
        for _ in range(spec["steps"]):
            step()
        synchronize()
        runs.append((time.perf_counter() - started) / spec["steps"] * 1e3)
    result = {"ms_per_step": statistics.median(runs), "rss_before_mb": rss_before,
              "peak_mb": resident_mb("VmHWM")}
    if cuda:
        result["gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
        result["device"] = torch.cuda.get_device_name()
    print(json.dumps(result))


def torch_matmul_worker(threads, shapes):
    """GFLOP/s of torch.mm on each (form, M, N, K), the best of 15 runs of
    about 20 ms; one JSON line per shape, as build/00_foundations --bench."""
    import torch

    torch.set_flush_denormal(True)                 # as in torch_worker
    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    for form, M, N, K in shapes:
        # A and B stored as the C form stores them, and used through .t()
        a = torch.rand((K, M) if form == "tn" else (M, K), generator=gen) - 0.5
        b = torch.rand((N, K) if form == "nt" else (K, N), generator=gen) - 0.5
        a_op = a.t() if form == "tn" else a
        b_op = b.t() if form == "nt" else b
        c = torch.empty(M, N)
        flop = 2.0 * M * N * K
        reps = int(4e8 / flop) + 1
        best = float("inf")
        for run in range(-1, 15):
            started = time.perf_counter()
            for _ in range(reps):
                torch.mm(a_op, b_op, out=c)
            t = (time.perf_counter() - started) / reps
            if run >= 0:
                best = min(best, t)
        print(json.dumps({"form": form, "M": M, "N": N, "K": K, "gflops": flop / best * 1e-9}),
              flush=True)


def matmul_runs(command, threads):
    """Runs one matrix-product worker; returns {(form, M, N, K): GFLOP/s}."""
    found = {}
    for line in worker_lines(command, threads):
        r = json.loads(line)
        found[(r["form"], r["M"], r["N"], r["K"])] = r["gflops"]
    missing = [s for s in MATMUL_SHAPES if s not in found]
    if missing:
        raise SystemExit(f"make bench: {command[0]} gave no figure for {missing[0]}")
    return found


def matmul_table(thread_counts):
    if not MATMUL_PROGRAM.exists():
        raise SystemExit(f"make bench: {MATMUL_PROGRAM.relative_to(ROOT)} is not built (run make)")
    specs = [f"{f}:{M}x{N}x{K}" for f, M, N, K in MATMUL_SHAPES]
    best = {}                                   # (side, threads, shape) -> GFLOP/s
    for _ in range(MATMUL_ROUNDS):              # the sides take turns
        for threads in thread_counts:
            for side, command in (("c", [str(MATMUL_PROGRAM), "--bench", *specs]),
                                  ("torch", [sys.executable, "-m", "reference.bench", "--worker",
                                             "matmul", "--threads", str(threads)])):
                for shape, g in matmul_runs(command, threads).items():
                    key = (side, threads, shape)
                    best[key] = max(best.get(key, 0.0), g)
    print(f"make bench: matrix products, GFLOP/s (best of {MATMUL_ROUNDS} x 15 runs per side), "
          f"C matmul_* against torch.mm")
    cols = "".join(f" {'C ' + str(t) + 't':>8} {'torch':>8} {'ratio':>6}" for t in thread_counts)
    header = f"{'form':<4} {'M':>5} {'N':>5} {'K':>5}{cols}"
    print(header)
    print("-" * len(header))
    worst = float("inf")
    for shape in MATMUL_SHAPES:
        row = f"{shape[0]:<4} {shape[1]:>5} {shape[2]:>5} {shape[3]:>5}"
        for t in thread_counts:
            c, py = best[("c", t, shape)], best[("torch", t, shape)]
            worst = min(worst, c / py)
            row += f" {c:>8.1f} {py:>8.1f} {c / py:>6.2f}"
        print(row, flush=True)
    print(f"lowest ratio C / torch: {worst:.2f} (target >= 0.9)")
    return {t: max(g for (side, threads, shape), g in best.items() if threads == t)
            for t in thread_counts}


def resident_mb(field):
    """This process's VmRSS (now) or VmHWM (peak) in MB, from /proc/self/status."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def worker_lines(command, threads):
    """Runs one worker on `threads` threads; returns its output lines."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    proc = subprocess.run(command, stdout=subprocess.PIPE, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"make bench: {' '.join(map(str, command))} failed "
                         f"(exit {proc.returncode})")
    return proc.stdout.decode().strip().splitlines()


def measure_or_why(command, threads):
    """(ms per step, None) from measure(), or (None, why) where the worker
    fails: for the columns a machine may lack (its error is printed above)."""
    try:
        return measure(command, threads)["ms_per_step"], None
    except SystemExit as failed:
        return None, str(failed)


def measure(command, threads, keys=("ms_per_step", "peak_mb")):
    """Runs one worker; returns its JSON line as a dict, which must hold keys."""
    lines = worker_lines(command, threads)
    shown = " ".join(map(str, command))
    try:
        result = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise SystemExit(f"make bench: {shown} printed no JSON line last") from None
    missing = [k for k in keys if k not in result]
    if missing:
        raise SystemExit(f"make bench: {shown} printed no {', '.join(missing)}")
    return result


def c_command(program, name, device=None, warmup=WARMUP_STEPS):
    """The C program's --bench command line for MODELS[name]."""
    spec = MODELS[name]
    return ([program, "--bench", checkpoint_path(name)]
            + (["--device", device] if device else [])
            + ["--batch-size", str(spec["batch"]), "--src-len", str(spec["src_len"]),
               "--tgt-len", str(spec["tgt_len"]), "--steps", str(spec["steps"]),
               "--repeats", str(spec["repeats"]), "--warmup", str(warmup)])


def torch_command(name, threads, device=None, compiled=False):
    """This module's worker command line for MODELS[name]."""
    return ([sys.executable, "-m", "reference.bench", "--worker", "torch", "--model", name,
             "--threads", str(threads)] + (["--device", device] if device else [])
            + (["--compile"] if compiled else []))


def no_gpu_reason():
    """Why there can be no GPU rows, or None when there can."""
    import torch

    reasons = []
    if not torch.cuda.is_available():       # counts devices; makes no CUDA context here
        reasons.append("torch sees no CUDA device")
    if not CUDA_PROGRAM.exists():
        reasons.append(f"{CUDA_PROGRAM.relative_to(ROOT)} is not built (make cuda)")
    return "; ".join(reasons) or None


def cpu_table(names, threads, written, peak):
    """The training-step table, then each step's FLOPs against peak (the best
    GFLOP/s of the matrix-product table, by threads; empty without it);
    returns {name: C's single-thread ms} for the busy-neighbour rows."""
    if not PROGRAM.exists():
        raise SystemExit(f"make bench: {PROGRAM.relative_to(ROOT)} is not built (run make)")
    print(f"make bench: one training step (forward, cross-entropy, backward, Adam), "
          f"{threads} threads (and C on 1), median of {MODELS[names[0]]['repeats']} runs; "
          f"C and eager PyTorch take turns for several rounds (speed-up: the median "
          f"round, the lowest and highest, the rounds at {SPEED_UP_AIM:g}x or more)")
    header = (f"{'model':<9} {'C ms':>9} {'torch ms':>9} {'speed-up':>9} {'rounds':>10} "
              f"{'>= aim':>7} {'compile ms':>11} {'speed-up':>9} {'C 1t ms':>9} "
              f"{'C peak MB':>10} {'torch peak MB':>14} {'torch base MB':>14}")
    print(header)
    print("-" * len(header))
    single, c_ms, why = {}, {}, None
    for name in names:
        write_checkpoint(name)
        written.add(name)
        cs, ts = [], []
        for _ in range(MODELS[name]["rounds"]):
            cs.append(measure(c_command(PROGRAM, name), threads))
            ts.append(measure(torch_command(name, threads), threads,
                              keys=("ms_per_step", "peak_mb", "rss_before_mb")))
        ratios = [t["ms_per_step"] / c["ms_per_step"] for c, t in zip(cs, ts)]
        c_ms[name] = statistics.median(c["ms_per_step"] for c in cs)
        t_ms = statistics.median(t["ms_per_step"] for t in ts)
        single[name] = min(measure(c_command(PROGRAM, name), 1)["ms_per_step"]
                           for _ in range(BUSY_RUNS))
        tc, failed = measure_or_why(torch_command(name, threads, compiled=True), threads)
        why = why or failed
        compiled = (f"{tc:>11.2f} {tc / c_ms[name]:>8.2f}x" if tc is not None
                    else f"{'n/a':>11} {'n/a':>9}")
        spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
        reached = f"{sum(r >= SPEED_UP_AIM for r in ratios)}/{len(ratios)}"
        print(f"{name:<9} {c_ms[name]:>9.2f} {t_ms:>9.2f} "
              f"{statistics.median(ratios):>8.2f}x {spread:>10} {reached:>7} {compiled} "
              f"{single[name]:>9.2f} {max(c['peak_mb'] for c in cs):>10.1f} "
              f"{max(t['peak_mb'] for t in ts):>14.1f} "
              f"{statistics.median(t['rss_before_mb'] for t in ts):>14.1f}", flush=True)
    if why:
        print(f"make bench: no torch.compile figure: {why}")
    if peak:
        print(f"make bench: each step's model FLOPs, and C's share of the best GFLOP/s of the "
              f"matrix-product table ({threads} threads: {peak[threads]:.1f}; "
              f"1 thread: {peak[1]:.1f})")
        header = (f"{'model':<9} {'MFLOP/step':>11} {'C GFLOP/s':>10} {'share':>6} "
                  f"{'C 1t GFLOP/s':>13} {'share':>6}")
        print(header)
        print("-" * len(header))
        for name in names:
            f = step_flops(MODELS[name])
            g, g1 = f / c_ms[name] * 1e-6, f / single[name] * 1e-6
            print(f"{name:<9} {f * 1e-6:>11.1f} {g:>10.1f} {g / peak[threads]:>6.2f} "
                  f"{g1:>13.1f} {g1 / peak[1]:>6.2f}", flush=True)
    return single


def busy_table(names, threads, single):
    """C's step with every core asked for while another process spins on one,
    against its own single-thread step on the idle machine."""
    print(f"make bench: the same C step, {threads} threads asked for, beside a process "
          f"that spins on one core")
    header = f"{'model':<9} {'C 1t idle ms':>13} {'C busy ms':>10} {'ratio':>6}"
    print(header)
    print("-" * len(header))
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        for name in names:
            # Warm-up long enough for the program to see the neighbour
            # (threads_adapt looks every 0.2 s).
            busy = min(measure(c_command(PROGRAM, name, warmup=MODELS[name]["busy_warmup"]),
                               threads)["ms_per_step"] for _ in range(BUSY_RUNS))
            print(f"{name:<9} {single[name]:>13.2f} {busy:>10.2f} {busy / single[name]:>6.2f}",
                  flush=True)
    finally:
        spinner.kill()
        spinner.wait()
    print("target: ratio <= 1.3")


def gpu_table(names, threads, written):
    header = (f"{'model':<9} {'C GPU ms':>9} {'torch GPU ms':>12} {'speed-up':>9} "
              f"{'compiled ms':>11} {'speed-up':>9} {'C GPU MB':>9} {'torch GPU MB':>12}")
    for i, name in enumerate(names):
        if name not in written:
            write_checkpoint(name)
            written.add(name)
        c = measure(c_command(CUDA_PROGRAM, name, "cuda"), threads,
                    keys=("ms_per_step", "gpu_mb"))
        t = measure(torch_command(name, threads, "cuda"), threads,
                    keys=("ms_per_step", "gpu_mb", "device"))
        tc, _ = measure_or_why(torch_command(name, threads, "cuda", compiled=True), threads)
        compiled = (f"{tc:>11.2f} {tc / c['ms_per_step']:>8.2f}x"
                    if tc is not None else f"{'n/a':>11} {'n/a':>9}")
        if i == 0:          # the title names the GPU, which only the worker asks torch for
            print(f"make bench: the same step on the GPU ({t['device']}), full float32 "
                  f"(TF32 off), the loss copied back every step, median of "
                  f"{MODELS[name]['repeats']} runs")
            print(header)
            print("-" * len(header))
        print(f"{name:<9} {c['ms_per_step']:>9.2f} {t['ms_per_step']:>12.2f} "
              f"{t['ms_per_step'] / c['ms_per_step']:>8.2f}x {compiled} {c['gpu_mb']:>9.1f} "
              f"{t['gpu_mb']:>12.1f}", flush=True)


DECODE_PROGRAM = ROOT / "build" / "09_translation"
SHIPPED_TAYLOR = ROOT / "models" / "taylor.safetensors"
DECODE_SEQUENCES = 32


def decode_table(threads):
    """Greedy decoding of 84-token Taylor targets in C, with the key/value
    cache and without it (the decoder re-run over the whole prefix)."""
    if not SHIPPED_TAYLOR.exists():
        print(f"make bench: no decoding row: {SHIPPED_TAYLOR.relative_to(ROOT)} is missing")
        return
    r = measure([DECODE_PROGRAM, "--bench-decode", SHIPPED_TAYLOR, str(DECODE_SEQUENCES)],
                threads, keys=("ms_per_sequence_cache", "ms_per_sequence_no_cache"))
    print(f"make bench: greedy decoding of {r['sequences']} Taylor test sources to "
          f"{r['tokens']} tokens each, {threads} threads, ms per sequence")
    print(f"{'no cache':>10} {'cache':>10} {'speed-up':>9}")
    print(f"{r['ms_per_sequence_no_cache']:>10.2f} {r['ms_per_sequence_cache']:>10.2f} "
          f"{r['ms_per_sequence_no_cache'] / r['ms_per_sequence_cache']:>8.1f}x", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=["torch", "matmul"], help=argparse.SUPPRESS)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help=argparse.SUPPRESS)           # the worker's device
    parser.add_argument("--compile", action="store_true",
                        help=argparse.SUPPRESS)           # the worker runs torch.compile
    parser.add_argument("--model", choices=sorted(MODELS), help="only this model")
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="threads for both sides (default: every core)")
    args = parser.parse_args()
    if args.worker == "matmul":
        torch_matmul_worker(args.threads, MATMUL_SHAPES)
        return 0
    if args.worker:
        torch_worker(args.model, args.threads, args.device, args.compile)
        return 0

    names = [args.model] if args.model else list(MODELS)
    cpu_names = [n for n in names if not MODELS[n].get("gpu_only")]
    written = set()                         # checkpoints this run has written
    if cpu_names:
        peak = matmul_table(sorted({1, args.threads})) if not args.model else {}
        single = cpu_table(cpu_names, args.threads, written, peak)
        busy_table(cpu_names, args.threads, single)
        if not args.model:
            decode_table(args.threads)
    else:
        print(f"make bench: no CPU rows: {', '.join(names)} runs on the GPU only")
    reason = no_gpu_reason()
    if reason:
        print(f"make bench: no GPU rows: {reason}")
    else:
        gpu_table(names, args.threads, written)
    return 0


if __name__ == "__main__":
    sys.exit(main())
