#!/usr/bin/env bash
# `make student DEST=dir`: writes the exercise copy of this tree to DEST.
#
# Every solution body in chapters/*/*.c, the lines from
#     /* BEGIN SOLUTION */
# to
#     /* END SOLUTION */
# inclusive, becomes
#     return not_implemented(__func__);
# so the copy compiles, each stub prints "not implemented: <function>" and
# returns failure, and the chapter's tests fail until the student fills it in.
# Goldens, tests, the reference and the texts are copied unchanged; CI's own
# script (.ci/) is left out. The copy is built and its tests run once, and the
# tests that fail there are listed in tests/graded.txt: `make grade` counts
# only those (a test of code the student was given passes from the start).
#
# The copy is assembled in a temporary folder and moved into place only when
# complete; an existing non-empty DEST is refused, so nothing is overwritten.
set -euo pipefail

dest=${1:?usage: tools/export-student.sh DEST}
root=$(cd "$(dirname "$0")/.." && pwd)

if [ -e "$dest" ] && [ -n "$(ls -A "$dest" 2>/dev/null)" ]; then
    echo "make student: $dest exists and is not empty; choose a new folder" >&2
    exit 1
fi
parent=$(dirname "$dest")
mkdir -p "$parent"
tmp=$(mktemp -d "$parent/.student.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The tracked files (or, outside git, everything but build outputs).
cd "$root"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard
else
    find . -type f -not -path './build/*' -not -path './.venv/*' -not -path './.git/*' -print0
fi | grep -zv '^\(\./\)\?\.ci/' | while IFS= read -r -d '' f; do
    [ -f "$f" ] || continue
    mkdir -p "$tmp/$(dirname "$f")"
    cp -p "$f" "$tmp/$f"
done

stubbed=0
for f in "$tmp"/chapters/*/*.c; do
    grep -q 'BEGIN SOLUTION' "$f" || continue
    rel=${f#"$tmp"/}
    if ! grep -q '#include "error.h"' "$f" && ! grep -q 'not_implemented' "$f"; then
        echo "make student: $rel has solution markers but does not include \"error.h\"" >&2
        exit 1
    fi
    awk -v file="$rel" '
        /^[ \t]*\/\* BEGIN SOLUTION \*\/[ \t]*$/ {
            if (inside) { printf "%s:%d: BEGIN SOLUTION inside another\n", file, NR > "/dev/stderr"; exit 1 }
            inside = 1; n++
            match($0, /^[ \t]*/)
            print substr($0, 1, RLENGTH) "return not_implemented(__func__);"
            next
        }
        /^[ \t]*\/\* END SOLUTION \*\/[ \t]*$/ {
            if (!inside) { printf "%s:%d: END SOLUTION without BEGIN\n", file, NR > "/dev/stderr"; exit 1 }
            inside = 0
            next
        }
        !inside { print }
        END {
            if (inside) { printf "%s: BEGIN SOLUTION never ended\n", file > "/dev/stderr"; exit 1 }
            printf "%d\n", n > "/dev/stderr"
        }' "$f" > "$f.stub" 2> "$f.count" || { cat "$f.count" >&2; exit 1; }
    stubbed=$((stubbed + $(cat "$f.count")))
    mv "$f.stub" "$f"
    rm "$f.count"
done
if grep -rl --include='*.c' --include='*.h' 'SOLUTION \*/' "$tmp/chapters" >/dev/null; then
    echo "make student: a solution marker survived the export (is it on a line of its own?)" >&2
    exit 1
fi

echo "make student: building the exercise copy to list the tests its stubs fail"
(cd "$tmp" && make -s all >/dev/null 2>&1) || {
    echo "make student: the exercise copy does not build (run make in it to see why)" >&2
    exit 1
}
graded="$tmp/tests/graded.txt"
echo "# make grade counts these tests: they fail until the student's code is written" > "$graded"
for t in "$tmp"/build/test_[0-9][0-9]_*; do
    name=${t##*/test_}
    out=$(cd "$tmp" && timeout 300 "$t" 2>/dev/null || true)
    comm -23 <(sed -n 's/^\[ RUN      \] //p' <<<"$out" | sort) \
             <(sed -n 's/^\[       OK \] //p' <<<"$out" | sort) | sed "s/^/$name /" >> "$graded"
done
rm -rf "$tmp/build"

rmdir "$dest" 2>/dev/null || true
mv "$tmp" "$dest"
trap - EXIT
echo "make student: wrote $dest with $stubbed solution bodies replaced by stubs"
echo "  in $dest: make test (the stubbed chapters fail), make grade (score table)"
