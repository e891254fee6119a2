#!/usr/bin/env bash
# tests/mpi/run-gpu.sh - make test-mpi-cuda: the MPI and CUDA build
# (build/mpi-cuda/, --device nccl) on this machine's GPUs, chapter 08's
# reverse task, labeller and encoder-decoder:
#   1. one rank     mpirun -np 1 with --device nccl runs the GPU step of
#                   --device cuda with NCCL's all-reduce (a copy, with one
#                   rank) between backward and Adam: its log and checkpoint
#                   must be the cuda run's, bit for bit
#   2. resume       a one-rank run stopped after epoch 1 and resumed ends bit
#                   for bit where the uninterrupted run ends
#   3. refusal      more ranks than GPUs: one clear line, a non-zero exit
#   4. two ranks    (two GPUs or more) two 2-rank runs bit-identical; against
#                   one GPU with the same global batch, within the bounds of
#                   tests/mpi/run.sh (the same reason: another sum order)
# Without a GPU it says so and exits 0; with one, step 4 says it did not run.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail() { echo "test-mpi-cuda: $*" >&2; exit 1; }

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [ "$gpus" -eq 0 ] || ! build/cuda/run_cases --probe >/dev/null 2>&1; then
    echo "make test-mpi-cuda: no usable GPU on this machine; built everything, ran no test"
    exit 0
fi
dir=$(mktemp -d build/mpi-cuda/test.XXXXXX)
trap 'rm -rf "$dir"' EXIT

# The bounds of step 4 and their reason, values(), loss_diff() and within_bounds().
. tests/mpi/agreement.sh
same() {    # same RUN_A RUN_B WHAT: logs and checkpoints bit-identical
    cmp -s <(values "$1.csv") <(values "$2.csv") || fail "$3: the logs differ"
    build/mpi/compare "$1.st" "$2.st" --bits >/dev/null || fail "$3: the checkpoints differ"
}

for model in labeller seq2seq; do
    run="--model $model --train-size 3200 --test-size 500 --batch-size 32 --epochs 2 --clip 1"
    [ "$model" = seq2seq ] && run="$run --heads 2 --dropout 0.1"
    d="$dir/$model"
    mkdir -p "$d"
    echo "== $model: 2 epochs of 100 steps on the GPU"

    # 1. one rank of nccl against cuda
    build/cuda/08_training --train --device cuda $run --checkpoint "$d/cuda.st" \
        --log "$d/cuda.csv" >"$d/cuda.out"
    mpirun -np 1 build/mpi-cuda/08_training --train --device nccl $run \
        --checkpoint "$d/one.st" --log "$d/one.csv" >"$d/one.out"
    grep -q 'training on 1 GPU(s), one per MPI rank' "$d/one.out" ||
        { cat "$d/one.out"; fail "$model: the run did not train on --device nccl"; }
    same "$d/cuda" "$d/one" "$model: one nccl rank against the cuda device"
    echo "one rank: log and checkpoint bit-identical to --device cuda"

    # 2. resume
    mpirun -np 1 build/mpi-cuda/08_training --train --device nccl $run --stop-after 1 \
        --checkpoint "$d/half.st" --log "$d/half.csv" >/dev/null
    cp "$d/half.st" "$d/first.st" && cp "$d/half.csv" "$d/first.csv"
    mpirun -np 1 build/mpi-cuda/08_training --train --device nccl $run --resume "$d/half.st" \
        --checkpoint "$d/half.st" --log "$d/half.csv" >/dev/null
    same "$d/one" "$d/half" "$model: the resumed one-rank run"
    echo "resume on one rank: checkpoint and log bit-identical to the uninterrupted run"

    # 4. two ranks, where there are two GPUs
    if [ "$gpus" -lt 2 ]; then
        echo "two ranks: not run (this machine has $gpus GPU)"
        continue
    fi
    for k in a b; do
        mpirun -np 2 build/mpi-cuda/08_training --train --device nccl $run \
            --checkpoint "$d/two_$k.st" --log "$d/two_$k.csv" >"$d/two_$k.out"
    done
    grep -q 'training on 2 GPU(s)' "$d/two_a.out" || fail "$model: did not train on 2 GPUs"
    same "$d/two_a" "$d/two_b" "$model: two 2-rank runs"
    echo "determinism: two 2-rank runs, logs and checkpoints bit-identical"
    if [ "$model" = seq2seq ]; then
        echo "agreement: not measured (each rank drops units of its own with dropout)"
        continue
    fi
    mpirun -np 2 build/mpi-cuda/08_training --train --device nccl $run --stop-after 1 \
        --checkpoint "$d/two_first.st" --log "$d/two_first.csv" >/dev/null
    losses=$(loss_diff "$d/first.csv" "$d/two_first.csv")
    weights=$(build/mpi/compare "$d/first.st" "$d/two_first.st" --except in_proj_bias)
    echo "agreement, 1 GPU against 2 after 100 steps: $losses; $weights"
    why=$(within_bounds "$losses" "$weights") || fail "$model: 2 GPUs against one: $why"
done

# 3. more ranks than GPUs
if mpirun -np $((gpus + 1)) --oversubscribe build/mpi-cuda/08_training --train --device nccl \
          --train-size 320 --test-size 50 --batch-size 32 --epochs 1 >"$dir/refused.out" 2>&1; then
    fail "$((gpus + 1)) ranks on $gpus GPU(s) were not refused"
fi
grep -aq 'one rank per GPU' "$dir/refused.out" || { cat "$dir/refused.out"; fail "no clear line"; }
echo "refused: $(grep -a -m1 'one rank per GPU' "$dir/refused.out")"
echo "make test-mpi-cuda: all passed"
