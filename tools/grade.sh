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
# that file (the solution tree) every test of the program counts (its own
# list: TEST_LIST=1, tests/helpers.h). Under a chapter whose tests ran into
# another chapter's stubs, "blocked by" names them.
#
# A test passes when its "[ RUN      ] name" line is followed by
# "[       OK ] name" and no "[  FAILED  ] name" appears: each test counts
# once, and only the tests the chapter declares count, so lines printed by
# the code under test cannot add points.
#
# A test that ends its program (an exit(), an abort, a crash cmocka does not
# catch) or hangs past TEST_TIMEOUT seconds (default 60, as make test) costs
# that test only: the tests the program did not reach are then run one at a
# time (TEST_ONLY=<name>, at most 20 s each, and at most TEST_TIMEOUT seconds
# for all of one program's), and the lines under the chapter say what
# happened. The exit status is 0 once the table is printed, whatever the
# score (a score is not an error); with GRADE_FULL=1 (make grade FULL=1, as
# CI runs it on the solutions) it is 1 unless every chapter has full marks.
#
# This is the student's practice tool, not the teacher's trusted grade
# (tools/grader.py): OK lines printed by the code under test add nothing, but
# code determined to fool it could.
set -u
# GNU timeout; macOS has it from Homebrew's coreutils as gtimeout.
timeout=$(command -v timeout || command -v gtimeout) ||
    { echo "$0: needs GNU timeout (macOS: brew install coreutils)" >&2; exit 2; }
graded_file=tests/graded.txt
POINTS=10
limit=${TEST_TIMEOUT:-60}
one_limit=20
[ "$limit" -lt "$one_limit" ] && one_limit=$limit
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# cmocka_verdicts and cmocka_ended_by
. "$(dirname "$0")/cmocka-output.sh"

printf '%-22s %16s %14s\n' chapter "passed / total" points
printf '%-22s %16s %14s\n' ---------------------- ---------------- --------------
sum_got=0; sum_max=0; all=1
for t in "$@"; do
    name=${t##*/test_}
    # The tests that count: graded.txt's, or the program's own list.
    graded_word=''
    if [ -f "$graded_file" ]; then
        graded_word='graded '
        awk -v c="$name" '$1 == c && !seen[$2]++ { print $2 }' "$graded_file" > "$tmp/declared"
        if [ ! -s "$tmp/declared" ]; then
            printf '%-22s %16s %14s\n' "$name" "-" "nothing to write"
            continue
        fi
    else
        { TEST_LIST=1 $timeout --kill-after=5 "$one_limit" "$t" < /dev/null 2>/dev/null |
            awk '/^[^ ]+$/ && !seen[$0]++' > "$tmp/declared"; } 2>/dev/null
    fi
    # (The braces keep bash's own "Aborted" and "Segmentation fault" notices
    # out of the table.)
    { $timeout --kill-after=10 "$limit" "$t" < /dev/null > "$tmp/out" 2>&1; rc=$?; } 2>/dev/null
    cmocka_verdicts "$tmp/out" > "$tmp/verdicts"
    cp "$tmp/out" "$tmp/all"
    notes=()
    row_note=""
    # The tests that did not run to a verdict, but the one the program ended
    # in, are run one at a time. (All ran when the program reached its end.)
    running=$(sed -n 's/^running //p' "$tmp/verdicts")
    awk -v running="$running" 'FILENAME == ARGV[1] { if ($1 == "done") seen[$2] = 1; next }
                               !($0 in seen) && $0 != running' "$tmp/verdicts" "$tmp/declared" \
        > "$tmp/todo"
    todo_n=$(grep -c . "$tmp/todo")
    if ! grep -q '^run ' "$tmp/verdicts" || [ -n "$running" ] || [ $rc -eq 124 ] ||
       [ $rc -eq 137 ]; then
        cmocka_ended_by "$rc" "$limit"
        declared_n=$(sed -n 's/^declared //p' "$tmp/verdicts")
        done_n=$(grep -c '^done ' "$tmp/verdicts")
        row_note="  ($cause)"
        if [ -z "$declared_n" ]; then
            line="${t##*/} ended before its tests started ($status): $cause"
        elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            line="${t##*/} was $status (TEST_TIMEOUT), after $done_n of $declared_n tests: $cause"
        else
            line="${t##*/} exited after $done_n of $declared_n tests ($status): $cause"
        fi
        [ -n "$running" ] && line+=" (it was running $running)"
        notes+=("$line")
    fi
    if [ "$todo_n" -gt 0 ]; then
        deadline=$((SECONDS + limit))
        crashed=() late=0
        while IFS= read -r test; do
            if [ $SECONDS -ge $deadline ]; then
                late=$((late + 1))
                continue
            fi
            left=$((deadline - SECONDS))
            [ "$left" -lt "$one_limit" ] && s=$left || s=$one_limit
            { TEST_ONLY=$test $timeout --kill-after=5 "$s" "$t" < /dev/null > "$tmp/one" 2>&1
              one_rc=$?; } 2>/dev/null
            cat "$tmp/one" >> "$tmp/all"
            cmocka_verdicts "$tmp/one" | grep -Fx -e "pass $test" -e "skip $test" -e "fail $test" \
                                        -e "done $test" >> "$tmp/verdicts"
            if ! grep -qFx "done $test" "$tmp/verdicts"; then
                cmocka_ended_by "$one_rc" "$s"
                crashed+=("$test ($status)")
            fi
        done < "$tmp/todo"
        line="the $todo_n ${graded_word}tests it did not reach were run one at a time"
        if [ ${#crashed[@]} -gt 0 ]; then
            line+="; ${#crashed[@]} of them ended the program too: "
            line+=$(printf '%s, ' "${crashed[@]:0:5}" | sed 's/, $//')
            [ ${#crashed[@]} -le 5 ] || line+=" and $((${#crashed[@]} - 5)) more"
        fi
        notes+=("$line")
        if [ $late -gt 0 ]; then
            line="$late tests were not run: the runs one at a time used up their"
            notes+=("$line TEST_TIMEOUT ($limit s); they count as failed")
        fi
    fi
    # Passed: declared tests with a pass and no failure, each once.
    if [ -s "$tmp/declared" ]; then
        total=$(grep -c . "$tmp/declared")
        passed=$(awk 'FILENAME == ARGV[1] { want[$0] = 1; next }
                      $1 == "pass" { ok[$2] = 1 } $1 == "fail" { bad[$2] = 1 }
                      END { n = 0; for (k in ok) if ((k in want) && !(k in bad)) n++; print n }' \
                     "$tmp/declared" "$tmp/verdicts")
    else
        # The program could not list its tests: its Running line and passes.
        total=$(sed -n 's/^declared //p' "$tmp/verdicts")
        [ -n "$total" ] || total=0
        passed=$(awk '$1 == "pass" { ok[$2] = 1 } $1 == "fail" { bad[$2] = 1 }
                      END { n = 0; for (k in ok) if (!(k in bad)) n++; print n }' "$tmp/verdicts")
    fi
    [ "$passed" -le "$total" ] || passed=$total
    # points = POINTS * passed / total, to one decimal, in integer arithmetic
    tenths=$(( total > 0 ? (POINTS * 10 * passed + total / 2) / total : 0 ))
    printf '%-22s %7d / %-6d %8d.%d / %d%s\n' "$name" "$passed" "$total" \
        $((tenths / 10)) $((tenths % 10)) "$POINTS" "$row_note"
    [ ${#notes[@]} -eq 0 ] || printf '    %s\n' "${notes[@]}"
    # The stubs of other chapters this chapter's tests ran into: its points
    # wait for them ("not implemented: f (chapters/NN_name/file.c)").
    sed -n 's/^not implemented: \([^ ]*\) (chapters\/\([0-9][0-9]_[a-z_]*\)\/.*$/\2 \1/p' "$tmp/all" |
        awk -v c="$name" '$1 != c && !seen[$0]++ { f[$1] = f[$1] (f[$1] ? ", " : "") $2 }
                          END { for (k in f) print "    blocked by " k ": " f[k] }' | sort
    sum_got=$((sum_got + tenths)); sum_max=$((sum_max + POINTS * 10))
    [ "$passed" -eq "$total" ] && [ "$total" -gt 0 ] || all=0
done
printf '%-22s %16s %8d.%d / %d\n' total "" $((sum_got / 10)) $((sum_got % 10)) $((sum_max / 10))
if [ -f "$graded_file" ]; then
    echo
    echo "A chapter's total counts its graded tests: those that fail while its exercises are"
    echo "stubs (tests/graded.txt). build/test_NN_name runs them all, the given code's too, and"
    echo "prints the larger count."
fi
[ "${GRADE_FULL:-0}" != 1 ] || [ $all -eq 1 ]
