#!/usr/bin/env bash
# `make plots`: writes the data the figures need, then renders every
# plots/*.gp into build/plots/*.png.
#
# A chapter program that makes plot data has the command `--plot-data DIR`
# (its --help lists it); each one found writes into build/plots. Then gnuplot
# runs each script with build/plots as its working folder, so a script reads
# its data by file name, and with two variables set:
#   terminal   pngcairo where this gnuplot has it, else png (libgd)
#   output     the PNG to write, named after the script
# A script with a "# needs: FILE..." line is skipped, with a message, while
# one of those files is missing (the training plots need `make demo` first).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=build/plots

if ! command -v gnuplot >/dev/null; then
    echo "make plots: gnuplot is missing (tools/install-deps.sh build installs it)" >&2
    exit 1
fi
mkdir -p "$out"

for main in programs/[0-9][0-9]_*.c; do
    program=build/$(basename "$main" .c)
    [ -x "$program" ] || { echo "make plots: $program is not built (run make)" >&2; exit 1; }
    "$program" --help | grep -q -- '--plot-data DIR' || continue
    "$program" --plot-data "$out"
done

# Tables committed beside the scripts (plots/*.dat: the MPI projection of
# tools/dp-projection.py) are read from the build folder too.
cp plots/*.dat "$out"/ 2>/dev/null || true

if gnuplot -e 'set terminal' 2>&1 | grep -qw pngcairo; then terminal=pngcairo; else terminal=png; fi
count=0
for script in plots/*.gp; do
    [ -e "$script" ] || continue
    name=$(basename "$script" .gp)
    missing=""
    for data in $(sed -n 's/^# needs: //p' "$script"); do
        [ -e "$out/$data" ] || missing="$missing $data"
    done
    if [ -n "$missing" ]; then
        echo "skipped $out/$name.png: no$missing yet (make demo writes it)"
        continue
    fi
    (cd "$out" && gnuplot -e "terminal='$terminal'; output='$name.png'" "$root/$script")
    echo "wrote $out/$name.png"
    count=$((count + 1))
done
echo "make plots: $count figures in $out ($terminal terminal)"
