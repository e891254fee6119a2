#!/usr/bin/env bash
# Runs every chapter's cmocka test program to the end, even when one fails,
# crashes or hangs, then exits non-zero if any did. Used by `make test` and
# `make sanitize`.
#
# A program passes only when it ran every test it declares and each passed
# (or was skipped): cmocka's "[==========] Running N test(s)." at the start,
# its summary "[==========] N test(s) run." at the end, N tests passed or
# skipped, and exit status 0. A program that ends before its summary fails,
# whatever its exit status: an exit(0) in the code under test would
# otherwise pass for success after a few of its tests. The line says after
# how many tests, and which test was running:
#   build/test_04_layernorm: exited after 8 of 70 tests (exit 0): a test
#   ended the program (it was running layernorm_c1_3x1)
# (`make grade` then runs the tests after it one at a time; TEST_ONLY=<name>
# runs one test of a program alone, TEST_LIST=1 lists them: tests/helpers.h.)
#
# A program that runs longer than TEST_TIMEOUT seconds is stopped and counts
# as failed, so an endless loop cannot hang the run. The default, 60 s, is for
# the plain build, where each program takes about a second at most; make
# sanitize sets 900, for the many times slower sanitized build.
set -u
# GNU timeout; macOS has it from Homebrew's coreutils as gtimeout.
timeout=$(command -v timeout || command -v gtimeout) ||
    { echo "$0: needs GNU timeout (macOS: brew install coreutils)" >&2; exit 2; }
limit=${TEST_TIMEOUT:-60}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# cmocka_verdicts and cmocka_ended_by
. "$(dirname "$0")/cmocka-output.sh"

# summarise LOG: "declared N", "run N", "running NAME" as cmocka_verdicts
# says them, and "done N", "passed N", "skipped N": how many distinct tests.
summarise() {
    cmocka_verdicts "$1" | awk '$1 == "done" || $1 == "pass" || $1 == "skip" { n[$1 " " $2] = 1; next }
                                { print }
                                END { for (k in n) { split(k, f, " "); c[f[1]]++ }
                                      print "done", c["done"] + 0; print "passed", c["pass"] + 0
                                      print "skipped", c["skip"] + 0 }'
}

failed=()
for t in "$@"; do
    echo "== $t"
    $timeout --kill-after=10 "$limit" "$t" < /dev/null 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    declared='' run='' done=0 passed=0 skipped=0 running=''
    while read -r key value; do
        case $key in
            declared) declared=$value ;; run) run=$value ;; done) done=$value ;;
            passed) passed=$value ;; skipped) skipped=$value ;; running) running=$value ;;
        esac
    done < <(summarise "$log")
    problem=''
    if [ -z "$declared" ] || [ -z "$run" ] || [ -n "$running" ] || [ "$rc" -eq 124 ] ||
       [ "$rc" -eq 137 ]; then
        cmocka_ended_by "$rc" "$limit"
        if [ -z "$declared" ]; then
            problem="ended before its tests started ($status): $cause"
        elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            problem="$status (TEST_TIMEOUT), after $done of $declared tests: $cause"
            [ -n "$running" ] && problem+=" (it was running $running)"
        else
            problem="exited after $done of $declared tests ($status): $cause"
            [ -n "$running" ] && problem+=" (it was running $running)"
        fi
    elif [ "$rc" -ne 0 ]; then
        problem="$((run - passed - skipped)) of $declared tests failed (exit $rc)"
    elif [ "$run" -ne "$declared" ] || [ $((passed + skipped)) -ne "$declared" ]; then
        problem="only $((passed + skipped)) of $declared tests passed (exit 0)"
    fi
    if [ -n "$problem" ]; then
        echo "$t: $problem"
        failed+=("$t: $problem")
    fi
    echo
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "make test: ${#failed[@]} of $# test programs failed:"
    printf '  %s\n' "${failed[@]}"
    exit 1
fi
echo "make test: all $# test programs passed"
