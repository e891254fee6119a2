#!/usr/bin/env bash
# tests/grader/run.sh [EXERCISE_COPY]: the trusted grader (tools/grader.py)
# against submissions that try to get points without the work. CI runs it.
#
# It draws a small hidden set (2 cases per op, every chapter; the draw itself
# checks that the solutions score full marks and finds the cases the stubs
# pass, and names the functions each op runs: chapter 04's are checked), then
# grades:
#   correct      the solution tree's own bodies, every chapter: full marks
#   EXERCISE_COPY, if given (make student's copy, unchanged): 0 points
# and, on chapter 04, a submission per cheat below, each of which replaces
# only layernorm_forward's body (the first SOLUTION block of
# chapters/04_layernorm/layernorm.c) and keeps the right code elsewhere:
#   fake_ok      prints cmocka's "[       OK ]" lines for tests, computes nothing
#   exit_early   exit(0) before anything is checked
#   fork_loop    forks, and every process loops forever
#   oob_write    the right values, and one float written before the output
#                (the sanitized build catches it)
#   oob_plain    the right values, and one float written past the output,
#                compiled only where __SANITIZE_ADDRESS__ is not defined: the
#                case harness's guard page catches it in the plain build (it
#                scored 10 of 10 before there was one)
#   sneaky       reads the expected values, the teacher's tree and goldens,
#                writes into the grader's files, connects to a listener on
#                127.0.0.1; computes the right answer only if any of it works
#   incbin       looks at compile time for the compiled solutions in the tree
#                it is built in (an .incbin would embed their machine code)
#   symlink      chapters/04_layernorm is a link to the teacher's solutions
#                (the grader reads submissions as root): 0 on every op of 04
#   golden_copy  hard-codes the committed goldens of chapter 04: their inputs
#                and expected outputs, copied out when the inputs match (the
#                practice make grade gave this 9.6 of 10)
#   tell         prints the case's first inputs and a line of the solutions, and
#                fails: the default feedback (shapes) shows neither, --feedback
#                full the inputs but not the line, --feedback score no case
#   stash        reads the other chapters' solution text in the tree it is
#                graded in, and leaves files in /tmp, /var/tmp, /dev/shm and
#                /run/lock for a later case or student to find (a submission
#                with no code of its own got 90 of 100 this way)
# Each cheat must score 0 on the ops that run layernorm_forward (layernorm,
# and layernorm_backward, whose cases compute the saved statistics with it)
# and full marks on the residual ops (a cheat costs what uses it only); the
# grader's files and the hidden folder must be unchanged, no file may appear
# where sneaky wrote, the listener must see no connection, and no process of
# the sandbox user may outlive the grading.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/tests/grader
py=$root/.venv/bin/python
exercise=${1:-}
[ -x "$py" ] || { echo "tests/grader/run.sh: no $py (make golden or make verify installs it)" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || echo "tests/grader/run.sh: not root: the sandbox runs the student's code as you, in a user namespace"

work=$(mktemp -d /var/tmp/grader-test.XXXXXX)
chmod 700 "$work"
listener=""
cleanup() {
    [ -z "$listener" ] || kill "$listener" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "tests/grader/run.sh: FAIL: $*" >&2; exit 1; }

hidden=$work/hidden
"$py" "$root/tools/grader.py" draw "$hidden" --cases 2 --seed "${GRADER_TEST_SEED:-20261125}"

# The draw names the functions each op runs, by stubbing them one at a time:
# chapter 04's, as its code calls them.
"$py" - "$hidden/manifest.json" <<'EOF'
import json, sys
got = json.load(open(sys.argv[1]))["functions"]["04_layernorm"]
want = {"layernorm": ["layernorm_forward"], "layernorm_backward": ["layernorm_backward", "layernorm_forward"],
        "residual": ["residual_forward"], "residual_backward": ["residual_backward"]}
if got != want:
    sys.exit(f"the draw names {got} as the functions of chapter 04's ops, not {want}")
EOF

# A listener on loopback that records any connection.
port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$py" -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16)
while True:
    c, _ = s.accept(); open(sys.argv[2], "a").write("connected\n"); c.close()
' "$port" "$work/connections" &
listener=$!

# The submissions: copies of chapters/ with layernorm_forward's body replaced.
"$py" - "$root" "$here" "$work" "$hidden" "$port" <<'EOF'
import importlib.util, shutil, sys
from pathlib import Path
from safetensors.numpy import load_file
root, here, work, hidden, port = (Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]),
                             Path(sys.argv[4]), sys.argv[5])
spec = importlib.util.spec_from_file_location("grader", root / "tools" / "grader.py")
grader = importlib.util.module_from_spec(spec)
spec.loader.exec_module(grader)
rel = "chapters/04_layernorm/layernorm.c"
pristine = (root / rel).read_bytes()
solution = grader.pristine_bodies(pristine)

def golden_copy():
    lines = ["    /* The committed goldens of chapter 04, hard-coded. */"]
    table = []
    for i, path in enumerate(sorted((root / "golden" / "04_layernorm").glob("layernorm_*.safetensors"))):
        t = load_file(str(path))
        if "backward" in path.name or "output" not in t or "input" not in t:
            continue
        x, y = t["input"].ravel(), t["output"].ravel()
        lines.append(f"    static const float in{i}[] = {{{', '.join(repr(float(v)) + 'f' for v in x)}}};")
        lines.append(f"    static const float out{i}[] = {{{', '.join(repr(float(v)) + 'f' for v in y)}}};")
        table.append(f"{{{x.size}, in{i}, out{i}}}")
    lines += ["    static const struct { long n; const float *in, *out; } golden[] = {",
              "        " + ", ".join(table) + "};",
              "    long n = (long)N * T * D;",
              f"    for (int g = 0; g < {len(table)}; g++) {{",
              "        int same = golden[g].n == n;",
              "        for (long i = 0; same && i < n; i++) same = golden[g].in[i] == inp[i];",
              "        if (!same) continue;",
              "        for (long i = 0; i < n; i++) out[i] = golden[g].out[i];",
              "        return 0;",
              "    }",
              "    return not_implemented(__func__);"]
    return "\n".join(lines).encode()

# symlink: chapter 04's folder is a link to the teacher's solutions.
dest = work / "submissions" / "symlink"
shutil.copytree(root / "chapters", dest / "chapters")
shutil.rmtree(dest / "chapters" / "04_layernorm")
(dest / "chapters" / "04_layernorm").symlink_to(root / "chapters" / "04_layernorm")

# A line of the solution tell prints (no quote or backslash, for its C string).
teacher_line = next(l.strip() for l in solution[0].split(b"\n")
                    if len(l.strip()) >= 20 and b'"' not in l and b"\\" not in l)
(work / "teacher_line").write_bytes(teacher_line)
cheats = {p.stem: p.read_bytes() for p in sorted(here.glob("*.body"))}
cheats["golden_copy"] = golden_copy()
cheats["correct"] = solution[0]
for name, body in cheats.items():
    body = (body.replace(b"@SOLUTION@", solution[0]).replace(b"@HIDDEN@", str(hidden).encode())
                .replace(b"@ROOT@", str(root).encode()).replace(b"@WORK@", str(work).encode())
                .replace(b"@PORT@", port.encode()).replace(b"@TEACHER_LINE@", teacher_line)
                .rstrip(b"\n"))
    dest = work / "submissions" / name
    shutil.copytree(root / "chapters", dest / "chapters")
    (dest / rel).write_bytes(grader.splice(pristine, [body] + solution[1:]))
EOF

sums() { sha256sum "$root/tools/grader.py" "$hidden/manifest.json" "$hidden"/04_layernorm/*; }
before=$(sums)

echo "== the correct submission, every chapter"
"$py" "$root/tools/grader.py" grade "$work/submissions/correct" --hidden "$hidden" \
    --results "$work/correct.json" --junit "$work/correct.xml"
"$py" - "$work/correct.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
if r["score"] != r["max_score"] or r["max_score"] != 100:
    sys.exit(f"the correct submission got {r['score']} of {r['max_score']}, not 100 of 100")
EOF
python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$work/correct.xml" ||
    fail "the JUnit file does not parse"

if [ -n "$exercise" ]; then
    echo "== the exercise copy, unchanged, every chapter"
    "$py" "$root/tools/grader.py" grade "$exercise" --hidden "$hidden" --results "$work/stubs.json"
    "$py" - "$work/stubs.json" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1]))
if r["score"] != 0:
    sys.exit(f"the unchanged exercise copy got {r['score']}, not 0")
EOF2
fi

echo "== the cheats, chapter 04 (with the correct one beside them)"
started=$(date +%s)
# --feedback full, so that each cheat's reason for failing shows.
"$py" "$root/tools/grader.py" grade-all "$work/submissions" --hidden "$hidden" \
    --chapters 04_layernorm --case-timeout 3 --feedback full --out "$work/grades"
echo "graded in $(( $(date +%s) - started )) s"
cat "$work/grades/grades.csv"

"$py" - "$work/grades" <<'EOF'
import json, sys
from pathlib import Path
grades = Path(sys.argv[1])
# Why each cheat must fail its cases: a cheat that failed for another reason
# (it did not compile, say) would prove nothing about the grader.
reasons = {"fake_ok": "expected", "exit_early": "no output file", "fork_loop": "timed out",
           "oob_write": "with the sanitizers", "oob_plain": "crashed (SIGSEGV)",
           "sneaky": "failed (exit status 1)",
           "golden_copy": "not implemented: layernorm_forward",
           "symlink": "not implemented: layernorm_forward", "incbin": "failed (exit status 1)",
           "stash": "failed (exit status 1)", "tell": "LEAK"}
bad = []
for student in sorted(p for p in grades.iterdir() if p.is_dir()):
    tests = {t["name"]: t for t in json.load(open(student / "results.json"))["tests"]}
    if "04_layernorm: your code" in tests and student.name != "symlink":
        bad.append(f"{student.name}: {tests['04_layernorm: your code']['output']}")
    if student.name in reasons:
        said = tests.get("04_layernorm: layernorm", {}).get("output", "")
        if said.count(reasons[student.name]) < 2:
            bad.append(f"{student.name}: its cases did not fail with '{reasons[student.name]}':\n{said}")
    for op in ("layernorm", "layernorm_backward", "residual", "residual_backward"):
        t = tests.get(f"04_layernorm: {op}")
        if t is None:
            bad.append(f"{student.name}: no result for {op}")
            continue
        # layernorm_backward's cases run the student's forward for the saved
        # mean and rstd: a wrong forward costs both ops, never the residual's.
        cheated = student.name != "correct" and (op.startswith("layernorm") or student.name == "symlink")
        want = 0 if cheated else t["max_score"]
        if abs(t["score"] - want) > 1e-9:
            bad.append(f"{student.name}: {op} scored {t['score']}, expected {want}:\n{t['output']}")
    # Even the full feedback quotes no line of the solutions, and no seed.
    text = (student / "results.json").read_text()
    teacher = (grades.parent / "teacher_line").read_text()
    for leak in (teacher, "seed"):
        if leak in text:
            bad.append(f"{student.name}: results.json holds '{leak}'")
if bad:
    sys.exit("\n".join(bad))
print("every cheat scored 0 on layernorm and layernorm_backward, full marks on the residual ops; "
      "correct: full marks; no results.json quoted the solutions or a seed")
EOF

# The cases the program reads carry no seed; --feedback full shows what the
# program printed, but no line of the solutions.
"$py" - "$hidden" <<'EOF'
import sys
from pathlib import Path
from safetensors import safe_open
for path in Path(sys.argv[1]).glob("*/*.in.safetensors"):
    with safe_open(str(path), "numpy") as f:
        if "seed" in (f.metadata() or {}):
            sys.exit(f"{path} tells the program its seed")
EOF
grep -q "a line of the teacher's solutions, withheld" "$work/grades/tell/results.json" ||
    fail "--feedback full does not withhold the line of the solutions tell printed"
# The default, --feedback shapes: no expected value and nothing the program
# printed; --feedback score: no case at all.
for policy in shapes score; do
    "$py" "$root/tools/grader.py" grade "$work/submissions/tell" --hidden "$hidden" \
        --chapters 04_layernorm --feedback $policy --results "$work/tell_$policy.json" >/dev/null
    for leak in LEAK ', expected ' "$(cat "$work/teacher_line")"; do
        ! grep -qF "$leak" "$work/tell_$policy.json" ||
            fail "--feedback $policy: results.json holds '$leak'"
    done
done
grep -q 'outside the tolerance\|the program failed' "$work/tell_shapes.json" ||
    fail "--feedback shapes does not say how a case failed"
! grep -q 'layernorm-0:' "$work/tell_score.json" || fail "--feedback score shows the cases"
echo "feedback: the cases carry no seed; full withholds the solutions' lines; shapes shows no" \
     "expected value and nothing printed; score no case"

# The export for a plagiarism checker: the exercise copy as the base, each
# student's bodies in the same files, a linked file left out.
"$py" "$root/tools/grader.py" export "$work/submissions" --out "$work/export" >/dev/null
"$py" - "$root" "$work/export" <<'EOF'
import importlib.util, sys
from pathlib import Path
root, export = Path(sys.argv[1]), Path(sys.argv[2])
spec = importlib.util.spec_from_file_location("grader", root / "tools" / "grader.py")
grader = importlib.util.module_from_spec(spec)
spec.loader.exec_module(grader)
rel = "chapters/04_layernorm/layernorm.c"
pristine = (root / rel).read_bytes()
bad = []
if (export / "base" / rel).read_bytes() != grader.splice(pristine, grader.stub_bodies(pristine)):
    bad.append("base: not the exercise copy")
if (export / "students" / "correct" / rel).read_bytes() != pristine:
    bad.append("correct: its layernorm.c is not the solution's")
if (export / "students" / "symlink" / rel).exists():
    bad.append("symlink: a linked file was exported")
tell = (export / "students" / "tell" / rel).read_bytes()
if b"LEAK" not in tell or grader.stub_bodies(tell) != grader.stub_bodies(pristine):
    bad.append("tell: not its own bodies in the given code")
if bad:
    sys.exit("export: " + "; ".join(bad))
EOF
echo "export: the exercise copy as base/, each student's bodies in the given code, links left out"

# Chapter 12's leaderboard: the shipped model is measured and ranked; a
# damaged copy and a link are refused with the reader's reason and score 0.
if [ -f "$root/.data/imdb/imdb.tsv" ]; then
    for who in shipped damaged linked; do mkdir -p "$work/lm/$who"; done
    cp "$root/models/imdb_lm.safetensors" "$work/lm/shipped/"
    "$py" -c 'import sys; d = bytearray(open(sys.argv[1], "rb").read()); d[-100] ^= 1
open(sys.argv[2], "wb").write(d)' "$root/models/imdb_lm.safetensors" "$work/lm/damaged/imdb_lm.safetensors"
    ln -s "$root/models/imdb_lm.safetensors" "$work/lm/linked/imdb_lm.safetensors"
    for who in shipped damaged linked; do
        "$py" "$root/tools/grader.py" leaderboard "$work/lm/$who" --test-reviews 20 \
            --max-bpb 2.2 --results "$work/lm/$who.json" >/dev/null
    done
    "$py" - "$work/lm" <<'EOF'
import json, sys
from pathlib import Path
lm = Path(sys.argv[1])
r = {who: json.load(open(lm / f"{who}.json")) for who in ("shipped", "damaged", "linked")}
bad = []
if r["shipped"]["score"] != 10 or not 1.5 < r["shipped"]["leaderboard"][0]["value"] < 2.2:
    bad.append(f"the shipped model: {r['shipped']['output']}")
for who, why in (("damaged", "checksum"), ("linked", "a link")):
    if r[who]["score"] != 0 or "leaderboard" in r[who] or why not in r[who]["output"]:
        bad.append(f"{who}: {r[who]['output']}")
if bad:
    sys.exit("leaderboard: " + "; ".join(bad))
EOF
    echo "leaderboard: the shipped model ranked, a damaged copy and a link refused"
else
    echo "leaderboard: skipped (no .data/imdb/imdb.tsv; make imdb fetches it)"
fi

[ "$before" = "$(sums)" ] || fail "the grader's files or the hidden cases changed during grading"
[ ! -e "$work/pwned" ] || fail "a submission wrote $work/pwned"
for folder in /tmp /var/tmp /dev/shm /run/lock; do
    [ ! -e "$folder/transformer-stash" ] || fail "a submission left $folder/transformer-stash"
done
[ ! -e "$work/connections" ] || fail "a submission connected to 127.0.0.1:$port"
if [ "$(id -u)" -eq 0 ] && pgrep -u nobody >/dev/null; then
    pgrep -a -u nobody
    fail "processes of the sandbox user outlived the grading"
fi
echo "tests/grader/run.sh: all adversarial submissions got what they deserve"
