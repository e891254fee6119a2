#!/usr/bin/env bash
# Runs every chapter's cmocka test program to the end, even when one fails,
# crashes or hangs, then exits non-zero if any did. Used by `make test`.
#
# A program that runs longer than TEST_TIMEOUT seconds (default 900: the
# slowest, chapter 08 under the sanitizers, takes about 150) is stopped and
# counted as failed, so a stub with an endless loop cannot hang the run.
set -u
limit=${TEST_TIMEOUT:-900}
failed=()
for t in "$@"; do
    echo "== $t"
    timeout --kill-after=10 "$limit" "$t"
    rc=$?
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        echo "$t: stopped after $limit s (TEST_TIMEOUT): a test loops or waits forever"
        failed+=("$t (timed out after $limit s)")
    elif [ $rc -ne 0 ]; then
        failed+=("$t (exit $rc)")
    fi
    echo
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "make test: ${#failed[@]} of $# test programs failed:"
    printf '  %s\n' "${failed[@]}"
    exit 1
fi
echo "make test: all $# test programs passed"
