#!/usr/bin/env bash
# `make student DEST=dir`: writes the exercise copy of this tree to DEST.
#
# Every solution body in chapters/*/*.c, the lines from
#     /* BEGIN SOLUTION */
# to
#     /* END SOLUTION */
# inclusive, becomes
#     return not_implemented(__func__);
# so the copy compiles, each stub prints "not implemented: <function> (<file>)"
# and returns failure, and the chapter's tests fail until the student fills it
# in. Goldens, tests, the reference and the texts are copied unchanged; CI's
# own script (.ci/) is left out.
#
# tests/graded.txt lists the tests `make grade` counts, "chapter test" per
# line: a test of chapter N counts when it fails with chapter N's stubs alone
# in place (every other chapter solved). A test that passes anyway tests code
# the student was given; one that fails only because of an earlier chapter's
# stub would give chapter N's points for chapter M's work. To find them the
# copy is built once per chapter with that chapter's stubs only, and every
# test program is run. The same runs check the promise of the table: with
# only chapter N stubbed, every earlier chapter keeps full marks (a graded
# test of chapter M < N that fails because of chapter N's stubs stops the
# export). A chapter with no graded test (09-11 put the others to work and
# have nothing to write) is shown by make grade as such and gives no points.
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
    # A static helper that only the solutions call is unused in the copy, and
    # the compiler would say so for each: silence that one warning there.
    last_include=$(grep -n '^#include' "$f.stub" | tail -n 1 | cut -d: -f1)
    sed -i "${last_include:-0}a\\
\\
/* Exercise copy: helpers that only the stubbed functions call are unused until\\
 * those are written. */\\
#pragma GCC diagnostic ignored \"-Wunused-function\"" "$f.stub"
    cp -p "$f" "$f.solution"
    rm "$f.count"
done
if grep -l 'SOLUTION \*/' "$tmp"/chapters/*/*.stub "$tmp"/chapters/*/*.h >/dev/null 2>&1; then
    echo "make student: a solution marker survived the export (is it on a line of its own?)" >&2
    exit 1
fi

# The failing tests of every test program: "<program> <test>" lines (a test
# that ran and neither passed nor was skipped: the split test of chapter 10
# skips without the reviews, which the copy does not carry).
failing_tests() {
    for t in "$tmp"/build/test_[0-9][0-9]_*; do
        local name=${t##*/test_} out
        out=$(cd "$tmp" && timeout 300 "$t" 2>/dev/null || true)
        comm -23 <(sed -n 's/^\[ RUN      \] //p' <<<"$out" | sort) \
                 <(sed -n 's/^\[       OK \] //p; s/^\[  SKIPPED \] //p' <<<"$out" | sort) |
            sed "s/^/$name /"
    done
}
build() {
    (cd "$tmp" && make -s -j2 all >/dev/null 2>&1) || {
        echo "make student: the exercise copy does not build $1 (run make in it to see why)" >&2
        exit 1
    }
}

echo "make student: building the copy once per chapter, with only that chapter's stubs, to list the tests each chapter's stubs fail"
build "with the solutions"
failing_tests > "$tmp/failing.none"
[ -s "$tmp/failing.none" ] && { echo "make student: tests fail with every solution in place:" >&2
                                cat "$tmp/failing.none" >&2; exit 1; }
graded="$tmp/tests/graded.txt"
echo "# make grade counts these tests: each fails while its own chapter's code is a stub" > "$graded"
for dir in "$tmp"/chapters/[0-9][0-9]_*; do
    chapter=${dir##*/}
    ls "$dir"/*.c.stub >/dev/null 2>&1 || continue
    for f in "$dir"/*.c.stub; do cp "$f" "${f%.stub}"; done
    build "with the stubs of $chapter alone"
    failing_tests | sed "s/^/$chapter /" > "$tmp/failing.$chapter"
    for f in "$dir"/*.c.solution; do cp "$f" "${f%.solution}"; done
    awk -v c="$chapter" '$2 == c { print $2, $3 }' "$tmp/failing.$chapter" >> "$graded"
done
# With only chapter N stubbed, every graded test of an earlier chapter must
# pass. (Later chapters' tests may fail: they build on chapter N, and make
# grade says which chapter they wait for.)
for f in "$tmp"/failing.[0-9][0-9]_*; do
    awk 'NR == FNR { if ($0 !~ /^#/) graded[$1 " " $2] = 1; next }
         $2 < $1 && ($2 " " $3) in graded { print "  " $2 " " $3 " fails with only " $1 " stubbed" }' \
        "$graded" "$f"
done > "$tmp/leaks"
if [ -s "$tmp/leaks" ]; then
    echo "make student: a graded test depends on another chapter's exercise:" >&2
    cat "$tmp/leaks" >&2
    exit 1
fi
# The points of every chapter with only chapter N stubbed, one row per N (10
# points a chapter, shared by its graded tests, as make grade counts them):
# 0 on the diagonal, 10 to its left (checked just above), and to its right
# what the later chapters lose by building on chapter N.
echo "make student: points with only one chapter stubbed (rows: the stubbed chapter)"
awk 'FNR == NR { if ($0 !~ /^#/) { graded[$1 " " $2] = 1; total[$1]++ } next }
     { stubbed[$1] = 1 }
     ($2 " " $3) in graded { failed[$1 " " $2]++ }
     function sorted(set, out,    k, n, i, j, t) {
         n = 0; for (k in set) out[++n] = k
         for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
             if (out[j] < out[i]) { t = out[i]; out[i] = out[j]; out[j] = t }
         return n
     }
     END {
         rows = sorted(stubbed, r); cols = sorted(total, c)
         printf "  %-16s", "stubbed"
         for (j = 1; j <= cols; j++) printf " %5s", substr(c[j], 1, 2)
         printf "\n"
         for (i = 1; i <= rows; i++) {
             printf "  %-16s", r[i]
             for (j = 1; j <= cols; j++)
                 printf " %5.1f", 10 * (total[c[j]] - failed[r[i] " " c[j]]) / total[c[j]]
             printf "\n"
         }
     }' "$graded" "$tmp"/failing.[0-9][0-9]_* || exit 1

# The exercise copy itself: every stub in place, and it must build.
for f in "$tmp"/chapters/*/*.c.stub; do mv "$f" "${f%.stub}"; done
rm -f "$tmp"/chapters/*/*.c.solution "$tmp"/failing.* "$tmp/leaks"
build "with every stub"
rm -rf "$tmp/build"

rmdir "$dest" 2>/dev/null || true
mv "$tmp" "$dest"
trap - EXIT
echo "make student: wrote $dest with $stubbed solution bodies replaced by stubs"
echo "  in $dest: make test (the stubbed chapters fail), make grade (score table)"
