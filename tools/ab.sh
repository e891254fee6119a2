#!/usr/bin/env bash
# tools/ab.sh REV PROGRAM ARG...: one benchmark, this tree's build against
# the build of an earlier revision, taking turns.
#
#   tools/ab.sh HEAD~1 08_training --bench build/bench/reverse.safetensors \
#       --batch-size 128 --src-len 16 --tgt-len 0 --warmup 3 --steps 40 --repeats 5
#   tools/ab.sh HEAD~1 00_foundations --bench tn:512x512x512
#
# A change of a few percent is smaller than the drift of a shared machine
# over minutes (10-30 %), so two timings taken minutes apart cannot show it.
# Here the two builds run one after the other, ROUNDS times (default 5), and
# the summary is the median of each side and of the rounds' ratios. REV is
# built in a worktree of its own, build/ab/REV (make all there; delete the
# folder to rebuild); PROGRAM is a name under build/, run from the
# repository root with the same arguments. Each run's last line must be
# JSON holding ms_per_step (08_training --bench) or gflops (00_foundations
# --bench, one shape); both lines are printed, then the summary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ $# -lt 2 ]; then
    echo "usage: tools/ab.sh REV PROGRAM [ARG...] (ROUNDS=5 in the environment)" >&2
    exit 2
fi
rev=$1 program=$2
shift 2
rounds=${ROUNDS:-5}
commit=$(git rev-parse --verify --quiet "$rev^{commit}") ||
    { echo "tools/ab.sh: $rev is not a revision of this repository" >&2; exit 2; }
[ -x "build/$program" ] || { echo "tools/ab.sh: build/$program is not built (run make)" >&2; exit 2; }
base=build/ab/$(git rev-parse --short "$commit")
if [ ! -x "$base/build/$program" ]; then
    git worktree prune
    [ -d "$base" ] || git worktree add --detach --quiet "$base" "$commit"
    make -C "$base" -j"$(nproc)" all > "$base.make.log" 2>&1 ||
        { echo "tools/ab.sh: building $rev failed; see $base.make.log" >&2; exit 1; }
fi

for ((i = 1; i <= rounds; i++)); do
    for side in base this; do
        exe=build/$program
        [ "$side" = base ] && exe=$base/build/$program
        echo "$side $("$exe" "$@" | tail -n 1)"
    done
done | python3 -c "$(cat <<'PY'
import json, statistics, sys
runs = {"base": [], "this": []}
for line in sys.stdin:
    print(line, end="")
    side, text = line.split(" ", 1)
    d = json.loads(text)
    runs[side].append(d["ms_per_step"] if "ms_per_step" in d else d["gflops"])
unit = "ms per step" if "ms_per_step" in d else "GFLOP/s"
base, this = runs["base"], runs["this"]
ratios = [t / b for b, t in zip(base, this)]
print(f"median {unit}: base {statistics.median(base):.4g}, this {statistics.median(this):.4g}; "
      f"this / base, median of {len(ratios)} rounds {statistics.median(ratios):.3f} "
      f"(lowest {min(ratios):.3f}, highest {max(ratios):.3f})")
PY
)"
