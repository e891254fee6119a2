# Sourced by tools/run-tests.sh (make test) and tools/grade.sh (make grade):
# what a cmocka test program's output and exit status say.

# cmocka_verdicts FILE: the verdicts in a test program's output, one a line:
#   pass NAME     a "[ RUN      ] NAME" line followed by "[       OK ] NAME"
#   skip NAME     ... followed by "[  SKIPPED ] NAME"
#   fail NAME     a "[  FAILED  ] NAME" line, anywhere
#   done NAME     a RUN line followed by any verdict
#   declared N    its "[==========] Running N test(s)." line
#   run N         its closing "[==========] N test(s) run."
#   running NAME  a RUN line with no verdict after it: the test the program
#                 ended in
# An OK line printed by the code under test, for a test that is not the one
# running, is no pass.
cmocka_verdicts() {
    awk '
        /^\[==========\] Running [0-9]+ test\(s\)\.$/ { if (declared == "") declared = $3; next }
        /^\[==========\] [0-9]+ test\(s\) run\.$/ { run = $2; next }
        /^\[ RUN      \] [^ ]+$/ { cur = $4; next }
        /^\[       OK \] [^ ]+$/ { if ($4 == cur) print "pass", $4; verdict($4); next }
        /^\[  SKIPPED \] [^ ]+$/ { if ($4 == cur) print "skip", $4; verdict($4); next }
        /^\[  FAILED  \] [^ ]+$/ { print "fail", $4; verdict($4); next }
        function verdict(name) { if (name == cur) { print "done", name; cur = "" } }
        END {
            if (declared != "") print "declared", declared
            if (run != "") print "run", run
            if (cur != "") print "running", cur
        }' "$1"
}

# cmocka_ended_by RC SECONDS: why a program that did not reach its summary
# ended, from its exit status; sets status ("exit 0", "stopped after 60 s",
# "killed by SIGABRT, exit 134") and cause ("a test crashed", ...).
cmocka_ended_by() {
    local rc=$1 s=$2
    status="exit $rc" cause="a test ended the program"
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        status="stopped after $s s" cause="a test loops or waits forever"
    elif [ "$rc" -gt 128 ]; then
        status="killed by SIG$(kill -l $((rc - 128)) 2>/dev/null || echo $((rc - 128))), exit $rc"
        cause="a test crashed"
    elif [ "$rc" -eq 86 ] && [[ "${ASAN_OPTIONS:-}${UBSAN_OPTIONS:-}" == *exitcode=86* ]]; then
        cause="a sanitizer report ended the program"
    fi
}
