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
limit=${TEST_TIMEOUT:-60}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# What a test program's output says: "declared N" (its Running line), "run N"
# (its closing summary), "passed N" and "skipped N" (distinct tests whose
# RUN line is followed by OK, or SKIPPED), "done N" (those followed by any
# verdict), "running NAME" (a RUN line with no verdict after it: the test
# the program ended in).
summarise() {
    awk '
        /^\[==========\] Running [0-9]+ test\(s\)\.$/ { if (declared == "") declared = $3; next }
        /^\[==========\] [0-9]+ test\(s\) run\.$/ { run = $2; next }
        /^\[ RUN      \] [^ ]+$/ { cur = $4; next }
        /^\[       OK \] [^ ]+$/ { name = $4; if (name == cur) ok[name] = 1; verdict(name); next }
        /^\[  SKIPPED \] [^ ]+$/ { name = $4; if (name == cur) sk[name] = 1; verdict(name); next }
        /^\[  FAILED  \] [^ ]+$/ { verdict($4); next }
        function verdict(name) { if (name == cur) { done[name] = 1; cur = "" } }
        END {
            n = 0; for (k in done) n++; print "done", n
            n = 0; for (k in ok) n++; print "passed", n
            n = 0; for (k in sk) n++; print "skipped", n
            if (declared != "") print "declared", declared
            if (run != "") print "run", run
            if (cur != "") print "running", cur
        }' "$1"
}

# Why a program that did not reach its summary ended, from its exit status:
# sets status ("exit 0", "killed by SIGABRT, exit 134") and cause.
ended_by() {
    local rc=$1
    status="exit $rc" cause="a test ended the program"
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        status="stopped after $limit s (TEST_TIMEOUT)" cause="a test loops or waits forever"
    elif [ "$rc" -gt 128 ]; then
        status="killed by SIG$(kill -l $((rc - 128)) 2>/dev/null || echo $((rc - 128))), exit $rc"
        cause="a test crashed"
    elif [ "$rc" -eq 86 ] && [[ "${ASAN_OPTIONS:-}${UBSAN_OPTIONS:-}" == *exitcode=86* ]]; then
        cause="a sanitizer report ended the program"
    fi
}

failed=()
for t in "$@"; do
    echo "== $t"
    timeout --kill-after=10 "$limit" "$t" < /dev/null 2>&1 | tee "$log"
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
        ended_by "$rc"
        if [ -z "$declared" ]; then
            problem="ended before its tests started ($status): $cause"
        elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            problem="$status, after $done of $declared tests: $cause"
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
