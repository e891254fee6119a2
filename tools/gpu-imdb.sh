#!/usr/bin/env bash
# tools/gpu-imdb.sh - the IMDb classifier at the notebook's size on one GPU,
# with its dropout, in about 8 minutes (issue 40, item 5). Run it from the
# repository root on a machine with a GPU, nvcc, and a python3 with torch:
#
#     tools/gpu-imdb.sh [OUT]        (OUT: where the logs go; default build/gpu-imdb)
#
# The reviews must be in .data/imdb (make imdb; a machine without network
# needs .data/imdb/imdb.tsv and rotten_tomatoes.tsv copied there).
#
# 1. Builds the GPU programs (build/cuda/10_classification, 08_training).
# 2. Trains two recipes at seed 003's size (6 layers, d_model 256, 8 heads,
#    FFN 1024, 512 tokens, dropout 0.1, batch 32, 3 epochs), differing only
#    in the peak learning rate (1e-3, the shipped small model's, and 3e-4),
#    side by side on the one GPU, each with --no-test: they see the
#    validation reviews only.
# 3. Chooses the recipe with the higher last validation accuracy, and
#    measures its model once on the test reviews (--eval).
# 4. Times one training step of that size against PyTorch on the same GPU,
#    eager and torch.compile (make bench's GPU table, the "imdb6" row).
#
# Every step's output is kept in OUT, so a run stopped early leaves what it
# had. The masks are drawn on the GPU (chapter 05's Philox), so the GPU
# drops the units the CPU would with the same seed.
set -euo pipefail

out=${1:-build/gpu-imdb}
mkdir -p "$out"
python=${PYTHON:-python3}
started=$(date +%s)
stamp() { echo "[$(( $(date +%s) - started )) s] $*" | tee -a "$out/summary.txt"; }

for f in .data/imdb/imdb.tsv .data/imdb/rotten_tomatoes.tsv; do
    [ -f "$f" ] || { echo "gpu-imdb: $f is missing (make imdb)" >&2; exit 1; }
done
"$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' ||
    { echo "gpu-imdb: $python's torch sees no GPU" >&2; exit 1; }

stamp "building build/cuda/10_classification and build/cuda/08_training"
make -j"$(nproc)" build/cuda/10_classification build/cuda/08_training > "$out/build.log" 2>&1 ||
    { tail -20 "$out/build.log" >&2; exit 1; }

size=(--layers 6 --d-model 256 --heads 8 --ffn 1024 --max-len 512 --dropout 0.1
      --batch-size 32 --epochs 3)
lrs=(1e-3 3e-4)
stamp "training ${#lrs[@]} recipes side by side: ${size[*]}, --lr ${lrs[*]}"
pids=()
for lr in "${lrs[@]}"; do
    build/cuda/10_classification --train --device cuda "${size[@]}" --lr "$lr" --no-test \
        --out "$out/imdb6_lr$lr.safetensors" --log "$out/imdb6_lr$lr.csv" \
        > "$out/train_lr$lr.log" 2>&1 &
    pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done

# The last row with a validation accuracy: the end of the last epoch.
best='' best_acc=-1
for lr in "${lrs[@]}"; do
    acc=$(awk -F, 'NR > 1 && $6 != "" { a = $6 } END { print a }' "$out/imdb6_lr$lr.csv")
    stamp "lr $lr: last validation accuracy $acc"
    if awk -v a="$acc" -v b="$best_acc" 'BEGIN { exit !(a > b) }'; then best=$lr best_acc=$acc; fi
done
stamp "chosen on validation: lr $best ($best_acc); its test accuracy, measured once:"
build/cuda/10_classification --eval "$out/imdb6_lr$best.safetensors" 2>&1 |
    tee "$out/eval.log" | grep -E "IMDb test|Rotten" | tee -a "$out/summary.txt"

stamp "one training step against PyTorch on this GPU (eager, torch.compile)"
"$python" -m reference.bench --model imdb6 2>&1 | tee "$out/bench.log" |
    grep -vE "^make bench: no CPU rows" | tee -a "$out/summary.txt"
stamp "done"
