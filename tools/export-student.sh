#!/usr/bin/env bash
# `make student DEST=dir`: writes the exercise copy of this tree to DEST.
#
# Every solution body in chapters/*/*.c, the lines between
#     /* BEGIN SOLUTION */
# and
#     /* END SOLUTION */
# becomes the one line `return not_implemented(__func__);`, and the markers
# stay around it, at their indentation:
#     /* BEGIN SOLUTION */
#     return not_implemented(__func__);
#     /* END SOLUTION */
# so the copy compiles, each stub prints "not implemented: <function> (<file>)"
# and returns failure, and the chapter's tests fail until the student fills it
# in. The student writes each function's code between its markers, in place
# of the stub, and leaves the marker lines as they are: the teacher's grader
# takes only the lines between the markers from a submitted copy and puts
# them into a pristine tree, so only what is between them is graded
# (a helper written outside them, or a changed header or test, is not).
#
# The copy ships no solution anywhere else. Goldens, tests, the reference and
# the texts are copied unchanged; CI's own script (.ci/) is left out, and so is
# the CUDA side (cuda/: a kernel and a plain C twin of every layer, the
# solutions in another form; the copy's `make cuda` and `make test-cuda` say
# so), and the MPI side (mpi/: its step is chapter 08's train_step in another
# form; `make mpi` says so). Before anything is built, every distinctive line of every solution body
# is looked for in every text file of the copy, and one found outside the
# stub blocks (a README or a test quoting a body) stops the export with its
# file:line; see leak_scan below.
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

# The tracked files (or, outside git, everything but build outputs), less
# CI's script and the CUDA side.
cd "$root"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard
else
    find . -type f -not -path './build/*' -not -path './.venv/*' -not -path './.git/*' -print0
fi | grep -zv '^\(\./\)\?\(\.ci\|cuda\|mpi\)/' | while IFS= read -r -d '' f; do
    [ -f "$f" ] || continue
    mkdir -p "$tmp/$(dirname "$f")"
    cp -p "$f" "$tmp/$f"
done

# Each block's lines become the stub; its marker lines stay, at the BEGIN
# line's indentation. x.c.stub is the exercise file, x.c.solution the original.
stubbed=0
for f in "$tmp"/chapters/*/*.c; do
    grep -q 'SOLUTION \*/' "$f" || continue
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
            indent = substr($0, 1, RLENGTH)
            print indent "/* BEGIN SOLUTION */"
            print indent "return not_implemented(__func__);"
            next
        }
        /^[ \t]*\/\* END SOLUTION \*\/[ \t]*$/ {
            if (!inside) { printf "%s:%d: END SOLUTION without BEGIN\n", file, NR > "/dev/stderr"; exit 1 }
            inside = 0
            print indent "/* END SOLUTION */"
            next
        }
        /SOLUTION \*\// { printf "%s:%d: a solution marker must be on a line of its own\n", file, NR > "/dev/stderr"; exit 1 }
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
# Every block of the copy holds the stub line and nothing else, and no marker
# is left in a file the export does not stub (a header, cases/, tests/).
if ! awk '/^[ \t]*\/\* BEGIN SOLUTION \*\/$/ { inside = 1; begin = FNR; body = 0; stub = 0; next }
          /^[ \t]*\/\* END SOLUTION \*\/$/ {
              if (body != 1 || stub != 1) {
                  printf "  %s:%d: the block holds more than the stub line\n", FILENAME, begin
                  bad = 1
              }
              inside = 0; next
          }
          inside { body++; if ($0 ~ /^[ \t]*return not_implemented\(__func__\);$/) stub++ }
          END { exit bad }' "$tmp"/chapters/*/*.c.stub >&2; then
    echo "make student: a solution block of the copy is not the stub alone (above)" >&2
    exit 1
fi
stray=$(cd "$tmp" && find . -type f \( -name '*.c' -o -name '*.h' \) -print0 |
        { grep -zv '^\./chapters/[^/]*/[^/]*\.c$' || true; } | xargs -0 -r grep -l 'SOLUTION \*/' || true)
if [ -n "$stray" ]; then
    echo "make student: solution markers in files the export does not stub; move them to chapters/*/*.c:" >&2
    echo "$stray" >&2
    exit 1
fi

# No solution body anywhere else in the copy. Every distinctive line of every
# solution body is looked for in every text file the copy ships (the stubbed
# chapter files included: their given code, outside the blocks); a hit is a
# solution quoted somewhere (a README, a comment, a test) and stops the
# export. Lines are compared with their comments cut and their blanks
# squeezed; a line of the copy is also tried without the mark that starts it
# inside a comment or a quote (" * ", "// ", "# ", "> "), so a body quoted
# in a comment is found too.
#
# Distinctive: 25 characters or more once squeezed, and neither a bare
# control line (a `for`, `while`, `if`, `else` or `switch` head with no
# statement after it: `for (int i = 0; i < n; i++) {` is in every file) nor
# a preprocessor line (`#pragma omp parallel for schedule(static)`). A line
# that is still no solution content goes in the allow-list below, with its
# reason.
leak_scan() {
    local sol
    sol=$(cd "$tmp" && pwd)/.solution-lines
    awk '
        function squeeze(s) { gsub(/[ \t\r]+/, " ", s); sub(/^ /, "", s); sub(/ $/, "", s); return s }
        # The code of a line: its comments cut, a block comment followed
        # across lines (in_comment carries it from one line to the next).
        function code(s,    out, i, j, r) {
            out = ""
            while (s != "") {
                if (in_comment) {
                    j = index(s, "*/")
                    if (!j) return squeeze(out)
                    s = substr(s, j + 2); in_comment = 0; out = out " "
                    continue
                }
                i = index(s, "/*"); j = index(s, "//")
                if (j && (!i || j < i)) { out = out substr(s, 1, j - 1); break }
                if (!i) { out = out s; break }
                out = out substr(s, 1, i - 1); s = substr(s, i + 2); in_comment = 1
            }
            return squeeze(out)
        }
        FNR == 1 { in_comment = 0; inside = 0 }
        /^[ \t]*\/\* BEGIN SOLUTION \*\/[ \t]*$/ { inside = 1; next }
        /^[ \t]*\/\* END SOLUTION \*\/[ \t]*$/ { inside = 0; next }
        {
            c = code($0)
            if (!inside || length(c) < 25) next
            if (c ~ /^([}] )?(else )?(for|while|if|switch) ?\(.*\)( ?[{])?$/ || c ~ /^([}] )?else( [{])?$/ || c ~ /^#/) next
            f = FILENAME; sub(/^.*\/chapters\//, "chapters/", f); sub(/\.solution$/, "", f)
            if (!(c in where)) where[c] = f ":" FNR
        }
        END { for (c in where) print where[c] "\t" c }' "$tmp"/chapters/*/*.c.solution > "$sol" || return 1
    [ -s "$sol" ] || { echo "make student: found no solution line to look for" >&2; return 1; }
    # The copy's text files, each stubbed chapter file as its .stub.
    (cd "$tmp" && find . -type f ! -name '*.c.solution' ! -name '.solution-lines' -print0 |
        while IFS= read -r -d '' f; do
            f=${f#./}
            [ -e "$f.stub" ] && continue
            if grep -Iq . "$f"; then printf '%s\0' "$f"; fi
        done | xargs -0 -r awk -v sol="$sol" '
        # Lines that are in a solution body and, here, are not solution content.
        BEGIN {
            allowed["Span *words = malloc((len ? len : 1) * sizeof *words);"]  # word_vocab_build (given) allocates as word_encode does
            allowed["const float *w[3], *b[3];"]                               # a declaration (mha.c; decode.c, given)
            allowed["const ModelConfig *c = &m->cfg;"]                         # the config alias of every model function
            allowed["memset(res, 0, sizeof *res);"]                            # clearing a result struct
            allowed["return error_set(err, \"model_forward failed\");"]         # an error message, in every caller of model_forward
            while ((got = getline line < sol) > 0) {
                t = index(line, "\t")
                where[substr(line, t + 1)] = substr(line, 1, t - 1)
                n++
            }
            if (got < 0 || !n) { print "make student: cannot read " sol > "/dev/stderr"; exit 2 }
        }
        function squeeze(s) { gsub(/[ \t\r]+/, " ", s); sub(/^ /, "", s); sub(/ $/, "", s); return s }
        function uncomment(s,    i, j, r) {
            while ((i = index(s, "/*")) > 0) {
                r = substr(s, i + 2); j = index(r, "*/")
                if (!j) { s = substr(s, 1, i - 1); break }
                s = substr(s, 1, i - 1) " " substr(r, j + 2)
            }
            if ((i = index(s, "//")) > 0) s = substr(s, 1, i - 1)
            return squeeze(s)
        }
        function unlead(s) { sub(/^(\*|\/\/|#|>)+ ?/, "", s); return s }
        function hit(k) { return (k in where) && !(k in allowed) }
        {
            k1 = uncomment($0); k2 = unlead(k1)
            k3 = $0; gsub(/\/\*|\*\//, " ", k3); k3 = unlead(squeeze(k3))
            k = hit(k1) ? k1 : hit(k2) ? k2 : hit(k3) ? k3 : ""
            if (k == "") next
            f = FILENAME; sub(/\.stub$/, "", f)
            printf "  %s:%d: %s   (the solution line of %s)\n", f, FNR, k, where[k]
        }') || { rm -f "$sol"; echo "make student: the leak scan failed" >&2; return 1; }
    rm -f "$sol"
}
leaks=$(leak_scan) || exit 1
if [ -n "$leaks" ]; then
    echo "make student: solution lines outside the stub blocks of the copy:" >&2
    echo "$leaks" >&2
    echo "  cut them from those files, or, if one is no solution content, add it to leak_scan's allow-list" >&2
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
