#!/usr/bin/env bash
# tests/mpi/run.sh - make test-mpi: the MPI build (build/mpi/) on two ranks of
# this machine (mpirun -np 2 --oversubscribe), chapter 08's reverse task:
#   1. determinism   two 2-rank runs write the same log (but its wall-time column) and
#                    checkpoint, bit for bit
#   2. agreement     40 steps of 2 ranks against 40 steps of one process (the
#                    plain build/08_training) on the same global batches: the
#                    losses and the weights agree to float32 rounding; over 100
#                    steps the losses stay close (tests/mpi/agreement.sh says
#                    why the bounds differ; all printed)
#   3. resume        a 2-rank run stopped after epoch 1 and resumed on 2 ranks ends
#                    bit for bit where the uninterrupted run ends; resumed on one
#                    process it ends within rounding of it
#   4. refusals      ranks started with other options (a seed; --norm-first, --heads or
#                    --dropout on one rank) are refused, and so is the plain build under
#                    mpirun
#   5. a stopped rank  rank 1 stopped with SIGSTOP mid-run: rank 0 ends the job after
#                    --mpi-timeout seconds with a line naming rank 1
# for the labeller and the encoder-decoder. Exits 1 on the first failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
# OpenMPI refuses to run as root (CI does) unless told; only here.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# One thread per rank: two ranks on two cores.
export OMP_NUM_THREADS=1
mpirun="mpirun -np 2 --oversubscribe"
dir=$(mktemp -d build/mpi/test.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "test-mpi: $*" >&2; exit 1; }

# The bounds of the agreement (step 2), values(), loss_diff() and within_bounds().
. tests/mpi/agreement.sh

for model in labeller seq2seq; do
    run="--model $model --train-size 3200 --test-size 500 --batch-size 32 --epochs 2 --clip 1"
    [ "$model" = seq2seq ] && run="$run --heads 2"
    d="$dir/$model"
    mkdir -p "$d"
    echo "== $model: 2 ranks x 2 epochs of 100 steps"

    # 1. determinism
    $mpirun build/mpi/08_training --train $run --checkpoint "$d/a.st" --log "$d/a.csv" >"$d/a.out"
    $mpirun build/mpi/08_training --train $run --checkpoint "$d/b.st" --log "$d/b.csv" >"$d/b.out"
    grep -q 'training on 2 MPI rank(s)' "$d/a.out" || fail "$model: the run did not train on 2 ranks"
    cmp -s <(values "$d/a.csv") <(values "$d/b.csv") ||
        fail "$model: two 2-rank runs wrote different logs"
    build/mpi/compare "$d/a.st" "$d/b.st" --bits >/dev/null ||
        fail "$model: two 2-rank runs wrote different checkpoints"
    echo "determinism: two 2-rank runs, logs and checkpoints bit-identical"

    # 2. agreement: 40 steps of 2 ranks and of one process within the tight
    # bounds; the first epoch of the run above (100 steps) within the long one
    short="${run/--train-size 3200/--train-size 1280} --epochs 1"
    $mpirun build/mpi/08_training --train $short --checkpoint "$d/short2.st" \
        --log "$d/short2.csv" >/dev/null
    build/08_training --train $short --checkpoint "$d/short1.st" --log "$d/short1.csv" >/dev/null
    losses=$(loss_diff "$d/short1.csv" "$d/short2.csv")
    weights=$(build/mpi/compare "$d/short1.st" "$d/short2.st" --except in_proj_bias)
    key_bias=$(build/mpi/compare "$d/short1.st" "$d/short2.st" --each | grep -m1 in_proj_bias)
    echo "agreement, 1 process against 2 ranks after 40 steps: $losses"
    echo "    checkpoints (weights and Adam's moments, but the key bias): $weights"
    echo "    the key bias:$key_bias"
    why=$(within_bounds "$losses" "$weights") || fail "$model: $why"
    $mpirun build/mpi/08_training --train $run --stop-after 1 --checkpoint "$d/half.st" \
        --log "$d/half.csv" >/dev/null
    build/08_training --train $run --stop-after 1 --checkpoint "$d/one.st" --log "$d/one.csv" \
        >/dev/null
    losses=$(loss_diff "$d/one.csv" "$d/half.csv")
    echo "agreement after 100 steps: $losses;"
    echo "    $(build/mpi/compare "$d/one.st" "$d/half.st" --except in_proj_bias)"
    why=$(losses_within_long "$losses") || fail "$model: over 100 steps, $why"

    # 3. resume: on 2 ranks bit for bit, on one process within rounding
    cp "$d/half.st" "$d/resumed.st"
    $mpirun build/mpi/08_training --train $run --resume "$d/resumed.st" \
        --checkpoint "$d/resumed.st" --log "$d/half.csv" >/dev/null
    build/mpi/compare "$d/a.st" "$d/resumed.st" --bits >/dev/null ||
        fail "$model: the resumed 2-rank run does not end where the uninterrupted one does"
    cmp -s <(values "$d/a.csv") <(values "$d/half.csv") ||
        fail "$model: the resumed run's log differs"
    echo "resume on 2 ranks: checkpoint and log bit-identical to the uninterrupted run"
    build/08_training --train $run --resume "$d/half.st" --checkpoint "$d/one_resumed.st" \
        >/dev/null
    echo "resume on 1 process: $(build/mpi/compare "$d/a.st" "$d/one_resumed.st" --except in_proj_bias)"
done

# 4. refusals: one clear line, a non-zero exit
run="--train-size 320 --test-size 50 --batch-size 32 --epochs 1"
if mpirun -np 1 --oversubscribe build/mpi/08_training --train $run --seed 0 : \
          -np 1 --oversubscribe build/mpi/08_training --train $run --seed 1 \
          >"$dir/refused.out" 2>&1; then
    fail "ranks started with other options were not refused"
fi
grep -q 'rank 1 of 2 was started with other options or data than rank 0' "$dir/refused.out" ||
    { cat "$dir/refused.out"; fail "no clear line for ranks started with other options"; }
echo "refused: $(grep -m1 'rank 1 of 2' "$dir/refused.out")"
# every model and recipe option counts, not only the data's: one rank with
# --norm-first, --heads 2 or --dropout 0.1 would train another model
for other in --norm-first "--heads 2" "--dropout 0.1"; do
    if mpirun -np 1 --oversubscribe build/mpi/08_training --train $run : \
              -np 1 --oversubscribe build/mpi/08_training --train $run $other \
              >"$dir/refused_other.out" 2>&1; then
        fail "ranks started with and without $other were not refused"
    fi
    grep -q 'rank 1 of 2 was started with other options or data than rank 0' \
        "$dir/refused_other.out" || { cat "$dir/refused_other.out"; fail "no clear line for $other"; }
done
echo "refused: one rank with --norm-first, --heads 2 or --dropout 0.1"
if $mpirun build/08_training --train $run >"$dir/plain.out" 2>&1; then
    fail "the plain build trained under mpirun"
fi
grep -q 'built without MPI' "$dir/plain.out" || { cat "$dir/plain.out"; fail "no clear line"; }
echo "refused: $(grep -m1 'built without MPI' "$dir/plain.out")"
# 5. a stopped rank: rank 1 stopped (SIGSTOP) in the middle of a run; rank 0
# ends the job after --mpi-timeout seconds, naming it, and nothing is left
$mpirun build/mpi/08_training --train --train-size 32000 --test-size 100 --batch-size 32 \
    --epochs 5 --mpi-timeout 2 >"$dir/stopped.out" 2>&1 &
job=$!
stopped=""
for _ in $(seq 100); do         # rank 1, once the progress line shows steps (10 s at most)
    for p in $(pgrep -f 'build/mpi/08_training --train --train-size 32000' || true); do
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' &&
           grep -q '\] step [0-9]' "$dir/stopped.out"; then
            stopped=$p
        fi
    done
    [ -n "$stopped" ] && break
    sleep 0.1
done
[ -n "$stopped" ] || { kill $job; fail "rank 1 of the stopped-rank run never started"; }
kill -STOP "$stopped"
started=$(date +%s)
if wait $job; then fail "the job with a stopped rank ended with status 0"; fi
waited=$(( $(date +%s) - started ))
kill -CONT "$stopped" 2>/dev/null || true
grep -q 'rank 0: waited 2 s for the other ranks at step [0-9]*; rank(s) 1 do not answer' \
    "$dir/stopped.out" ||
    { tail -n 5 "$dir/stopped.out"; fail "no line naming the stopped rank"; }
[ "$waited" -le 30 ] || fail "the job with a stopped rank took $waited s to end"
! pgrep -f 'build/mpi/08_training --train --train-size 32000' >/dev/null ||
    fail "a rank of the stopped-rank run is left running"
echo "stopped rank: $(grep -o 'rank 0: waited.*' "$dir/stopped.out"), after $waited s"
echo "make test-mpi: all passed"
