#!/usr/bin/env bash
# fuzz/run.sh SECONDS TARGET... - what `make fuzz` runs once it has built
# build/fuzz/TARGET for each target (fuzz/fuzz.c lists them).
#
# Each target runs for SECONDS, one after the other, on a fresh corpus:
# build/fuzz/corpus/TARGET, copies of the golden and model files below (what
# the fuzzer adds there is dropped by the next run; golden/ is never
# written). Needs build/08_training for two seed checkpoints. Limits: inputs up to the largest seed's size, 30 s per input
# (a slower one counts as a crash: a "timeout"), 2 GB of memory in all
# (each allocation above 256 MB fails, see fuzz.c). The log of each run is
# build/fuzz/logs/TARGET.log. What crashes is kept as
# build/fuzz/crashes/TARGET/crash-<sha1> (or leak-, timeout-, oom-) and
# named at the end; the exit status is 1 if any target crashed.
set -u
cd "$(dirname "$0")/.."
seconds=${1:?usage: fuzz/run.sh SECONDS TARGET...}
shift

# Two small checkpoints, a labeller and a seq2seq model of a few hundred
# parameters after one tiny epoch of the reverse task (build/08_training
# writes them): in the megabytes of models/ few mutations would land
# anywhere but in the weights.
mkdir -p build/fuzz/seeds
for kind in labeller seq2seq; do
    build/08_training --train --model $kind --epochs 1 --batch-size 4 --seq-len 3 \
        --categories 3 --train-size 8 --test-size 4 --d-model 4 --ffn 4 \
        --checkpoint build/fuzz/seeds/$kind.safetensors >/dev/null ||
        { echo "fuzz/run.sh: build/08_training could not write the seed checkpoints" >&2; exit 1; }
done

# The seed files of a target: files it accepts, for the fuzzer to bend.
# Left out: the golden cases that take seconds under the sanitizers (the
# training runs of train_parity, BPE to 500 and 1000 tokens, the 301x260x270
# products); their mutants would take the fuzzer's minute.
slow='parity_|bpe_gpl_500|bpe_gpl_1000|_301x260x270'
seeds() {
    case $1 in
        safetensors)     ls golden/*/*.safetensors models/*.safetensors ;;
        model_load)      ls models/taylor.safetensors models/set_anomaly.safetensors \
                            golden/07_model/checkpoint_seq2seq.safetensors \
                            build/fuzz/seeds/*.safetensors ;;
        checkpoint_load) ls models/taylor_ckpt.safetensors build/fuzz/seeds/*.safetensors ;;
        digits)          ls reference/data/digits/digits.safetensors ;;
        *)               ls golden/"$1"/*.safetensors | grep -Ev "$slow" ;;
    esac
}

failed=()
for t in "$@"; do
    corpus=build/fuzz/corpus/$t crashes=build/fuzz/crashes/$t log=build/fuzz/logs/$t.log
    rm -rf "$corpus"
    mkdir -p "$corpus" "$crashes" build/fuzz/logs
    # Named by their path (golden/03_mha/x.safetensors -> golden_03_mha_x...):
    # two chapters have files of the same name.
    for f in $(seeds "$t"); do cp "$f" "$corpus/${f//\//_}"; done
    max_len=$(stat -c %s "$corpus"/* | sort -n | tail -n 1)
    # One thread (fuzz.c sets it too): an input runs the same way each time.
    OMP_NUM_THREADS=1 build/fuzz/"$t" -max_total_time="$seconds" -max_len="$max_len" \
        -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$crashes/" "$corpus" >"$log" 2>&1
    rc=$?
    # The last status line: "#<execs> ... cov: <edges> ft: <features> corp: <n>/<size> ..."
    status=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$status")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$status")
    corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$status")
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log")
    if [ $rc -eq 0 ]; then
        printf 'fuzz %-16s %9s execs in %ss, cov %s, ft %s, corpus %s, peak %s MB: no crash\n' \
            "$t" "${execs:-?}" "$seconds" "${cov:-?}" "${ft:-?}" "${corp:-?}" "${rss:-?}"
    else
        unit=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
        echo "fuzz $t: CRASH (exit $rc) after ${execs:-?} execs; input: ${unit:-none written}"
        grep -E '^(==[0-9]+==ERROR|SUMMARY|fuzz:|.*runtime error)' "$log" | head -n 5 | sed 's/^/    /'
        echo "    log: $log; replay: build/fuzz/$t ${unit:-FILE}"
        failed+=("$t: ${unit:-see $log}")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "make fuzz: ${#failed[@]} of $# targets crashed; the inputs:"
    printf '  %s\n' "${failed[@]}"
    exit 1
fi
echo "make fuzz: no crash in $# targets, $seconds s each"
