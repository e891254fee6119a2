#!/usr/bin/env python3
"""The projection of chapter 08's "Data parallelism": steps per second of
data-parallel training on N = 1..64 machines joined by 10 and 100 Gb/s links,
for three models, from one measured number.

    tools/dp-projection.py [--taylor-ms MS] [--out plots/dp_projection.dat]

The measured number: the Taylor step (seed 002's model, batch 32, source 22,
target 84 tokens) of one process on this machine, in ms:
    OMP_NUM_THREADS=1 build/09_translation --bench models/taylor.safetensors \\
        --batch-size 32 --src-len 22 --tgt-len 84 --steps 5 --repeats 5
It gives this machine's rate in float operations per second (the step's
operations, counted below, over its time); the other models' compute per
step is their operations at that rate, on every machine. Per step and
machine, with the global batch shared by N machines:
    compute(N) = compute(1) / N
    comm(N)    = 2 (N - 1) / N * bytes / bandwidth + 2 (N - 1) * latency
    steps/s    = 1 / (compute(N) + comm(N))
comm is the ring all-reduce of the gradient (bytes = 4 per parameter): a
reduce-scatter and an all-gather of N - 1 hops each, every hop carrying
bytes / N. mpi/dist.c's reduce-scatter and all-gather send the same bytes.
Nothing overlaps communication with computation here, as in mpi/dist.c.
The global batch stays what it is on one machine (the same training), so a
model's curve ends where its batch has fewer sequences than machines (the
MPI programs refuse that): at 32 for Taylor and the classifier.
Only the Python standard library.
"""
import argparse

NAN = float("nan")

LINKS = [("10 Gb/s", 10e9 / 8, 20e-6), ("100 Gb/s", 100e9 / 8, 5e-6)]  # bytes/s, latency per hop


def encoder_layer(D, F):       # weights a token passes through: q,k,v,out; two FFN linears
    return 4 * D * D + 2 * D * F


def decoder_layer(D, F):       # self-attention, cross-attention, FFN
    return 8 * D * D + 2 * D * F


def attention(N, L, S, D):     # QK^T and AV: 4 N L S D forward, twice that backward
    return 12 * N * L * S * D


def taylor():
    D, F, N, S, T, Vt = 64, 128, 32, 22, 84, 30
    flops = 6 * (2 * encoder_layer(D, F) * N * S + 2 * decoder_layer(D, F) * N * T + D * Vt * N * T)
    flops += 2 * (attention(N, S, S, D) + attention(N, T, T, D) + attention(N, T, S, D))
    return dict(name="Taylor (d 64, 2+2 layers)", params=184416, flops=flops, batch=N)


def classifier():              # seed 003's size: 6 layers, d_model 256, FFN 1024, BPE 8192
    D, F, L, N, S, V = 256, 1024, 6, 32, 512, 8192
    flops = 6 * L * encoder_layer(D, F) * N * S + L * attention(N, S, S, D)
    params = V * D + S * D + L * (encoder_layer(D, F) + 4 * D + F + D + 4 * D) + 2 * D + 2
    return dict(name="IMDb classifier (d 256, 6 layers)", params=params, flops=flops, batch=N)


def base():                    # the paper's base model: 25,000 + 25,000 tokens a step, shared
    D, F, L, V = 512, 2048, 6, 37000   # embeddings (one matrix for source, target, softmax)
    N, S = 1000, 25
    flops = 6 * (L * encoder_layer(D, F) + L * decoder_layer(D, F) + D * V) * N * S
    flops += L * (attention(N, S, S, D) * 3)
    params = V * D + L * (encoder_layer(D, F) + 4 * D + F + D + 4 * D) \
        + L * (decoder_layer(D, F) + 8 * D + F + D + 6 * D)
    return dict(name="paper's base (d 512, 6+6 layers)", params=params, flops=flops, batch=N)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--taylor-ms", type=float, default=67.2,
                    help="measured ms per Taylor step, one process, one thread")
    ap.add_argument("--out", default="plots/dp_projection.dat")
    a = ap.parse_args()
    models = [taylor(), classifier(), base()]
    rate = models[0]["flops"] / (a.taylor_ms / 1e3)
    print(f"this machine: {rate / 1e9:.1f} GFLOP/s (the Taylor step: "
          f"{models[0]['flops'] / 1e9:.2f} GFLOP in {a.taylor_ms} ms)\n")
    print("| model | parameters | MB all-reduced a step | compute a step, 1 machine |"
          " N where comm = compute, 10 / 100 Gb/s |")
    print("| --- | ---: | ---: | ---: | --- |")
    for m in models:
        m["compute"] = m["flops"] / rate
        m["bytes"] = 4 * m["params"]
        cross = []
        for _, bw, lat in LINKS:
            last = min(64, m["batch"])
            n = next((n for n in range(2, last + 1) if comm(m, n, bw, lat) >= m["compute"] / n),
                     None)
            cross.append(str(n) if n else f"> {last}")
        print(f"| {m['name']} | {m['params']:,} | {m['bytes'] / 1e6:.2f} | "
              f"{m['compute'] * 1e3:,.0f} ms | {cross[0]} / {cross[1]} |")
    rows = []
    header = "# N " + " ".join(f'"{m["name"]}, {link}"' for m in models for link, _, _ in LINKS)
    for n in range(1, 65):
        cols = []
        for m in models:
            for _, bw, lat in LINKS:
                fits = n <= m["batch"]
                cols.append(1.0 / (m["compute"] / n + comm(m, n, bw, lat)) if fits else NAN)
        rows.append((n, cols))
    print("\nsteps per second (speed-up over one machine in brackets):\n")
    print("| N | " + " | ".join(f"{m['name'].split(' (')[0]}, {link}" for m in models
                               for link, _, _ in LINKS) + " |")
    print("| ---: |" + " ---: |" * (len(models) * len(LINKS)))
    for n, cols in rows:
        if n in (1, 2, 4, 8, 16, 32, 64):
            cells = []
            for k, v in enumerate(cols):
                cells.append(f"{v:.3g} ({v / rows[0][1][k]:.1f}x)" if v == v else "-")
            print(f"| {n} | " + " | ".join(cells) + " |")
    with open(a.out, "w") as f:
        f.write("# written by tools/dp-projection.py --taylor-ms %g: data-parallel training\n"
                "# on N machines; columns 2-7 the speed-up over one machine, 8-13 the steps\n"
                "# per second, of these (model, link) in this order:\n" % a.taylor_ms)
        f.write(header + "\n")
        for n, cols in rows:
            speedup = [v / rows[0][1][k] for k, v in enumerate(cols)]
            f.write(f"{n} " + " ".join(f"{v:.6g}" for v in speedup + cols) + "\n")
    print(f"\nwrote {a.out}")


def comm(m, n, bw, lat):
    return 0.0 if n == 1 else 2 * (n - 1) / n * m["bytes"] / bw + 2 * (n - 1) * lat


if __name__ == "__main__":
    main()
