#!/usr/bin/env bash
# tools/gradescope/pack.sh HIDDEN OUT.zip (make gradescope): the autograder
# zip to upload to a Gradescope programming assignment. It holds, at its
# root, setup.sh and run_autograder (from this folder), transformer/ (this
# tree's tracked files, without the goldens, models and CI) and hidden/ (the
# cases drawn with make hidden). Keep the zip as private as HIDDEN.
#
# tools/gradescope/pack.sh --leaderboard OUT.zip (make gradescope
# LEADERBOARD=1): the zip of chapter 12's optional assignment instead, whose
# run_autograder is run_leaderboard and which carries data/imdb.tsv (make
# imdb) in place of hidden/.
set -euo pipefail
hidden=${1:?usage: tools/gradescope/pack.sh HIDDEN|--leaderboard OUT.zip}
out=${2:?usage: tools/gradescope/pack.sh HIDDEN|--leaderboard OUT.zip}
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ "$hidden" = --leaderboard ]; then
    [ -f "$root/.data/imdb/imdb.tsv" ] || { echo "make gradescope: no .data/imdb/imdb.tsv (make imdb fetches it)" >&2; exit 2; }
else
    [ -f "$hidden/manifest.json" ] || { echo "make gradescope: $hidden has no manifest.json (make hidden HIDDEN=$hidden draws it)" >&2; exit 2; }
fi
case "$out" in *.zip) ;; *) echo "make gradescope: OUT=$out must end in .zip" >&2; exit 2 ;; esac
[ ! -e "$out" ] || { echo "make gradescope: $out exists already; choose a new name" >&2; exit 2; }
[ -d "$(dirname "$out")" ] || { echo "make gradescope: folder $(dirname "$out") does not exist" >&2; exit 2; }
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp -p "$root/tools/gradescope/setup.sh" "$stage/"
if [ "$hidden" = --leaderboard ]; then
    cp -p "$root/tools/gradescope/run_leaderboard" "$stage/run_autograder"
    mkdir "$stage/data"
    cp -p "$root/.data/imdb/imdb.tsv" "$stage/data/"
    cases=data
else
    cp -p "$root/tools/gradescope/run_autograder" "$stage/"
    cp -rp "$hidden" "$stage/hidden"
    cases=hidden
fi
mkdir "$stage/transformer"
(cd "$root" && git ls-files -z --cached --others --exclude-standard |
    grep -zv '^\(\.ci\|golden\|models\)/' | xargs -0 cp --parents -p -t "$stage/transformer")
(cd "$stage" && python3 -m zipfile -c "$out.tmp" setup.sh run_autograder transformer "$cases")
chmod 600 "$out.tmp"
mv "$out.tmp" "$out"
echo "make gradescope: wrote $out ($(du -h "$out" | cut -f1)); upload it as the autograder of a programming assignment"
