#!/usr/bin/env bash
# `make grade`: runs every chapter's tests and prints a score table.
#
#   chapter               passed / total   points
#
# Each chapter is worth 10 points, shared equally among its graded tests. In
# an exercise copy, tests/graded.txt (written by `make student`) lists the
# tests that fail while the solutions are stubs, "chapter test" per line; only
# those count, so tests of code the student was given earn nothing, and a
# chapter with none (nothing to write) is listed without points. Without
# that file (the solution tree) every test counts. Under a chapter whose
# tests ran into another chapter's stubs, "blocked by" names them. A test
# program that crashes or hangs (5 minutes) keeps the points of the tests it
# passed before. The
# exit status is 0 once the table is printed, whatever the score (a score is
# not an error); with GRADE_FULL=1 (make grade FULL=1, as CI runs it on the
# solutions) it is 1 unless every chapter has full marks.
set -u
graded_file=tests/graded.txt
POINTS=10
timeout_s=300
printf '%-22s %16s %14s\n' chapter "passed / total" points
printf '%-22s %16s %14s\n' ---------------------- ---------------- --------------
sum_got=0; sum_max=0; all=1
for t in "$@"; do
    name=${t##*/test_}
    out=$(timeout "$timeout_s" "$t" 2>&1)
    rc=$?
    if [ -f "$graded_file" ]; then
        graded=$(awk -v c="$name" '$1 == c { print $2 }' "$graded_file")
        total=$(printf '%s' "$graded" | grep -c . || true)
        passed=0
        [ "$total" -gt 0 ] && passed=$(printf '%s\n' "$out" | sed -n 's/^\[       OK \] //p' |
                                     grep -Fxc -f <(printf '%s\n' "$graded") || true)
    else
        total=$(printf '%s\n' "$out" | sed -n 's/^\[==========\] Running \([0-9]*\) test(s)\./\1/p' | head -n 1)
        passed=$(printf '%s\n' "$out" | grep -c '^\[       OK \]')
    fi
    [ -n "$total" ] || total=0
    if [ -f "$graded_file" ] && [ "$total" -eq 0 ]; then
        printf '%-22s %16s %14s\n' "$name" "-" "nothing to write"
        continue
    fi
    note=""
    [ $rc -ge 124 ] && note="  (crashed or timed out: exit $rc)"
    # points = POINTS * passed / total, to one decimal, in integer arithmetic
    tenths=$(( total > 0 ? (POINTS * 10 * passed + total / 2) / total : 0 ))
    printf '%-22s %7d / %-6d %8d.%d / %d%s\n' "$name" "$passed" "$total" \
        $((tenths / 10)) $((tenths % 10)) "$POINTS" "$note"
    # The stubs of other chapters this chapter's tests ran into: its points
    # wait for them ("not implemented: f (chapters/NN_name/file.c)").
    printf '%s\n' "$out" |
        sed -n 's/^not implemented: \([^ ]*\) (chapters\/\([0-9][0-9]_[a-z_]*\)\/.*$/\2 \1/p' |
        awk -v c="$name" '$1 != c { f[$1] = f[$1] (f[$1] ? ", " : "") $2 }
                          END { for (k in f) print "    blocked by " k ": " f[k] }' | sort
    sum_got=$((sum_got + tenths)); sum_max=$((sum_max + POINTS * 10))
    [ "$passed" -eq "$total" ] && [ "$total" -gt 0 ] || all=0
done
printf '%-22s %16s %8d.%d / %d\n' total "" $((sum_got / 10)) $((sum_got % 10)) $((sum_max / 10))
[ "${GRADE_FULL:-0}" != 1 ] || [ $all -eq 1 ]
