#!/usr/bin/env bash
# tools/check-layers.sh (make check-layers; CI runs it): the layers point one
# way. A chapter's sources (chapters/NN_name/*.c, *.h) include only the
# chapters' headers and the C library's, never a header of the programs
# around them (runtime/, cases/, programs/, mpi/, cuda/): those call the
# chapters, the chapters call nothing of theirs. Prints each include that
# points up, and exits 1 if there is one.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=0
for f in chapters/*/*.[ch]; do
    while read -r header; do
        for dir in runtime cases programs mpi cuda; do
            if [ -f "$dir/$header" ]; then
                echo "$f includes $dir/$header: a chapter calls nothing above the chapters"
                bad=1
            fi
        done
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done
[ "$bad" -eq 0 ] && echo "check-layers: no chapter includes runtime/, cases/, programs/, mpi/ or cuda/"
exit "$bad"
