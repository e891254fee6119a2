#!/usr/bin/env bash
# Runs every chapter's cmocka test program to the end, even when one fails or
# crashes, then exits non-zero if any did. Used by `make test`.
set -u
failed=()
for t in "$@"; do
    echo "== $t"
    "$t"
    rc=$?
    if [ $rc -ne 0 ]; then
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
