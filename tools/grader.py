#!/usr/bin/env python3
"""The trusted grade: a student's solution bodies, run on hidden cases in a sandbox.

The student's own `make test` and `make grade` are practice tools: they run in
the student's tree, on goldens the student holds, in the student's process.
This grader is the teacher's:

    .venv/bin/python tools/grader.py draw HIDDEN [--seed N] [--cases K]
        draws K fresh cases per op of chapters 00-08 and 12 with the PyTorch reference
        (make verify's generator, under a secret seed) into the private folder
        HIDDEN: each case split into what the student's program reads
        (op-k.in.safetensors) and what the grader keeps (op-k.expected.safetensors).
        It then grades the solution tree (it must score full marks, or the
        draw is refused), the exercise copy's stubs (a case the stubs pass
        tests given code, and carries no points), and each function stubbed
        alone (to name the functions each op runs in the feedback).

    python3 tools/grader.py grade SUBMISSION --hidden HIDDEN [--results FILE]
            [--junit FILE] [--chapters 00_foundations,...]
        grades one submission: a student's exercise copy, or any folder with
        its chapters/ in it. Needs numpy and safetensors, not PyTorch.

    python3 tools/grader.py grade-all SUBMISSIONS --hidden HIDDEN --out DIR
        grades every folder in SUBMISSIONS (one per student) and writes
        DIR/grades.csv (a row per student, a column per chapter) and, per
        student, DIR/NAME/results.json and DIR/NAME/junit.xml.

    python3 tools/grader.py leaderboard SUBMISSION [--results FILE] [--max-bpb X]
        chapter 12's optional assignment: the bits per byte of the student's
        trained model (SUBMISSION/imdb_lm.safetensors) on the test reviews,
        measured in the sandbox by this tree's program, as a Gradescope
        leaderboard entry.

    python3 tools/grader.py export SUBMISSIONS --out DIR
        lays out every submission's solution bodies for a plagiarism checker:
        DIR/base (the exercise copy) and DIR/students/NAME (docs/TEACHING.md).

How one submission is graded. From each chapters/NN_name/*.c of the
submission only the lines between `/* BEGIN SOLUTION */` and
`/* END SOLUTION */` are taken. Chapter N is graded in a pristine copy of
this tree with the student's chapter-N bodies spliced in and the project's
own code everywhere else, so a chapter's points come from its own functions
alone. The copy is built twice, plain and with AddressSanitizer and
UndefinedBehaviorSanitizer, by the sandbox user. Each hidden case runs as
its own process in each build (`build/NN_name --case IN --out OUT`, in the
sandbox, with a time and memory limit), and this process, outside the
sandbox, compares OUT with the expected values under the case's own
tolerance (torch.allclose's rule, as make verify). A case scores when both
builds write the right outputs and the sanitizers report nothing. Nothing
the student's code prints, writes elsewhere or exits with counts; a crash,
a time-out or a missing output costs that case only.

Points: 10 per chapter, shared equally by the ops that have counted cases,
each op's share shared equally by its cases.

The sandbox (util-linux's unshare, setpriv and prlimit, present on every
Debian and Ubuntu): new network, mount and PID namespaces, so there is no
network, the hidden folder, this tree (with the solutions) and the
submissions folder are covered by empty mounts, /tmp, /var/tmp, /dev/shm
and /run/lock are private and empty in every run (a case or a build), and
every process the student's code starts dies with it. No solution text is
in the tree a chapter is graded in: the other chapters' bodies are stubbed
in their sources, and the program links their objects, built outside the
sandbox from the pristine sources. As root the student's code
runs as an unprivileged user (--user, default nobody) with no capabilities;
without root, in a user namespace as the calling user with no capabilities
(the home folder is covered too). Limits: --case-timeout seconds of wall
time per case, --memory-mb of address space (the sanitized build's
allocator limit instead), 256 processes, no core files. See README.md,
"Grading a course", for what this protects against and what it does not.
"""

import argparse
import csv
import io
import json
import os
import random
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN = re.compile(rb"^[ \t]*/\* BEGIN SOLUTION \*/[ \t]*$")
END = re.compile(rb"^[ \t]*/\* END SOLUTION \*/[ \t]*$")
STUB = b"return not_implemented(__func__);"
POINTS = 10
MAX_SOURCE_BYTES = 2 << 20          # a submitted source file larger than this is refused
MAX_OUTPUT_BYTES = 256 << 20        # an output file larger than this fails its case
# What a chapter program needs to build; goldens, models, the reference and
# the texts stay out of the copies the student's code runs in.
# (cuda/ would carry the plain C twins of the kernels: only its make rules go.)
TREE_PARTS = ["Makefile", "chapters", "runtime", "cases", "programs", "tools", "cuda/cuda.mk"]
# The folders any user may write on a Debian or Ubuntu machine: private and
# empty in every run of the sandbox (/tmp first).
SHARED_WRITABLE = ["/tmp", "/var/tmp", "/dev/shm", "/run/lock"]


class GradeError(Exception):
    """A problem with the grader's own inputs: one line, exit status 2."""


# --------------------------------------------------------------------------
# Solution bodies
# --------------------------------------------------------------------------

def solution_blocks(lines):
    """The (begin, end) line indices of each marker pair, in order, or an
    error string when the markers do not pair up."""
    blocks, begin = [], None
    for i, line in enumerate(lines):
        if BEGIN.match(line):
            if begin is not None:
                return f"line {i + 1}: BEGIN SOLUTION inside another"
            begin = i
        elif END.match(line):
            if begin is None:
                return f"line {i + 1}: END SOLUTION without BEGIN"
            blocks.append((begin, i))
            begin = None
    if begin is not None:
        return f"line {begin + 1}: BEGIN SOLUTION never ended"
    return blocks


def graded_files(tree):
    """chapters/NN_name/*.c files of `tree` that hold solution blocks, by chapter."""
    files = {}
    for path in sorted((tree / "chapters").glob("[0-9][0-9]_*/*.c")):
        if any(BEGIN.match(line) for line in path.read_bytes().split(b"\n")):
            rel = path.relative_to(tree).as_posix()
            files.setdefault(path.parent.name, []).append(rel)
    return files


def linked(submission, path):
    """Whether path, a file of the submission, is or lies under a link, or
    resolves outside the submission. The grader reads as root: a link (to
    the teacher's solutions, say) is refused wherever it is on the way."""
    return any(p.is_symlink() for p in [path, *path.parents] if submission in [p, *p.parents]) \
        or submission.resolve() not in path.resolve().parents


def read_bodies(submission, rel, expected_count):
    """The solution bodies of submission/rel (a list of byte strings, one per
    block), or (None, why) when they cannot be used (a link among them)."""
    path = submission / rel
    if not path.is_file():
        return None, f"{rel}: missing from the submission"
    if linked(submission, path):
        return None, f"{rel}: a link; submit the file itself"
    if path.stat().st_size > MAX_SOURCE_BYTES:
        return None, f"{rel}: larger than {MAX_SOURCE_BYTES >> 20} MB"
    lines = path.read_bytes().replace(b"\r\n", b"\n").split(b"\n")
    blocks = solution_blocks(lines)
    if isinstance(blocks, str):
        return None, f"{rel}: {blocks}"
    if len(blocks) != expected_count:
        return None, (f"{rel}: {len(blocks)} SOLUTION blocks, the exercise has {expected_count} "
                      f"(the markers must stay as the exercise copy has them)")
    return [b"\n".join(lines[b + 1:e]) for b, e in blocks], None


def splice(pristine, bodies):
    """The pristine source with its solution bodies replaced by `bodies`."""
    lines = pristine.split(b"\n")
    blocks = solution_blocks(lines)
    out, last = [], 0
    for (b, e), body in zip(blocks, bodies):
        out.extend(lines[last:b + 1])
        out.append(body)
        last = e
    out.extend(lines[last:])
    return b"\n".join(out)


def stub_bodies(pristine):
    """The exercise copy's bodies: the stub line, indented as the marker."""
    lines = pristine.split(b"\n")
    return [re.match(rb"^[ \t]*", lines[b]).group(0) + STUB for b, _ in solution_blocks(lines)]


def pristine_bodies(pristine):
    lines = pristine.split(b"\n")
    return [b"\n".join(lines[b + 1:e]) for b, e in solution_blocks(lines)]


def find_chapters_root(submission):
    """The folder of a submission that holds chapters/ (it or one level down)."""
    if (submission / "chapters").is_dir():
        return submission
    found = [d for d in sorted(submission.iterdir()) if d.is_dir() and (d / "chapters").is_dir()]
    if len(found) == 1:
        return found[0]
    raise GradeError(f"{submission}: no chapters/ folder in it or in one folder below it")


# --------------------------------------------------------------------------
# The sandbox
# --------------------------------------------------------------------------

class Sandbox:
    """Runs commands as the sandbox user, under limits, with no network and
    the given folders covered (see the module's docstring).

    Where namespaces are refused (a container without CAP_SYS_ADMIN, as some
    course platforms run) and the grader is root, it falls back to the user
    switch alone: the folders to hide must then be closed to other users by
    their modes (checked), the network stays open, /tmp and the other shared
    folders are the machine's (what the sandbox user left there is deleted
    after each run, or the grading stops), and every
    process of the sandbox user is killed after each run."""

    def __init__(self, hide, user="nobody", memory_mb=2048, keep=None):
        self.root = os.geteuid() == 0
        # The grader's own folder (the trees and the cases' folders), kept
        # reachable where it lies inside a shared folder the sandbox covers.
        self.keep = str(Path(keep).resolve()) if keep else None
        # A folder inside another is covered with it (and could not be
        # mounted on once its parent is covered).
        folders = sorted({Path(p).resolve() for p in hide if Path(p).is_dir()})
        self.hide = [str(p) for p in folders if not any(q in p.parents for q in folders)]
        self.memory_mb = memory_mb
        self.namespaces = True
        self.warning = ""
        if self.root:
            import pwd
            try:
                pw = pwd.getpwnam(user)
            except KeyError:
                raise GradeError(f"--user: no user '{user}' on this machine (useradd it, or name another)")
            if pw.pw_uid == 0:
                raise GradeError(f"--user: '{user}' is root; the student's code needs an unprivileged user")
            self.uid, self.gid = pw.pw_uid, pw.pw_gid
        else:
            self.uid, self.gid = os.getuid(), os.getgid()
            home = Path.home().resolve()
            self.hide = [p for p in self.hide if home not in Path(p).parents] + [str(home)]
        probe = self.run(["/bin/true"], cwd="/", timeout=30)
        if probe.returncode == 0:
            return
        why = (probe.stderr or b"").decode(errors="replace").strip().splitlines()
        why = why[-1] if why else "no reason given"
        if not self.root:
            raise GradeError(f"the sandbox cannot start here (unshare of the user, network, mount and "
                             f"PID namespaces failed: {why}); run the grader as root")
        self.namespaces = False
        for p in self.hide:
            if not self.closed(Path(p)):
                raise GradeError(f"no namespaces here ({why}), so {p} must be closed to the sandbox "
                                 f"user {user} by its mode: chmod go-rwx {p}")
        self.warning = (f"no namespaces here ({why}): the student's code ran as {user} with the "
                        f"network open; {', '.join(SHARED_WRITABLE)} are shared, and what "
                        f"{user} left there was removed after each run")
        print(f"tools/grader.py: warning: {self.warning}", file=sys.stderr)

    def closed(self, path):
        """Whether the sandbox user can reach nothing in `path`: it or a
        folder above it is closed to that user by its mode."""
        for p in [path, *path.parents]:
            st = os.stat(p)
            if st.st_uid == self.uid:
                continue
            allowed = st.st_mode & (0o010 if st.st_gid == self.gid else 0o001)
            if not allowed:
                return True
        return False

    def owner(self):
        return self.uid, self.gid

    def run(self, argv, cwd, timeout, env=None, limit_memory=True):
        """subprocess.CompletedProcess of argv in the sandbox; returncode 124
        on a time-out (every process the command started is killed)."""
        # RLIMIT_NPROC counts every process and thread of the user: the
        # sandbox user's alone as root, the calling user's whole desktop without.
        limits = ["--nproc=%d" % (256 if self.root else 8192), "--core=0", "--fsize=%d" % (1 << 30)]
        if limit_memory:
            limits.append(f"--as={self.memory_mb << 20}")
        drop = ["--no-new-privs", "--inh-caps=-all", "--bounding-set=-all"]
        if self.root:
            drop = [f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups"] + drop
        confine = ["setpriv", *drop, "prlimit", *limits, "--"]
        clean_env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp",
                     "OMP_NUM_THREADS": "1"}
        clean_env.update(env or {})
        if self.namespaces:
            mounts = ["set -e", "mount --make-rprivate /"]
            mounts += [f'mount -t tmpfs -o size=4k,mode=0 none "{p}"' for p in self.hide]
            # Every folder anyone may write is a fresh, private tmpfs, gone
            # when the namespace ends: nothing written in one run (a case, a
            # build) is there for the next, of this student or another.
            # A kept folder inside one of them is opened first (fd 3) and
            # bound back onto its path in the new tmpfs (mount -c, so that the
            # kernel follows /proc/self/fd/3 to the folder itself).
            for p in SHARED_WRITABLE:
                size = "256m" if p == "/tmp" else "64m"
                cover = [f'mount -t tmpfs -o size={size} none {p}']
                if self.keep and Path(p) in Path(self.keep).parents:
                    cover = ([f'exec 3<"{self.keep}"'] + cover +
                             [f'mkdir -p "{self.keep}"',
                              f'mount -c --bind /proc/self/fd/3 "{self.keep}"', 'exec 3<&-'])
                mounts.append(f'if [ -d {p} ]; then {"; ".join(cover)}; fi')
            # The shell stays as the namespace's PID 1 (it does not exec):
            # it keeps unshare's parent-death signal, which a change of user
            # would clear, so when unshare is killed it dies, and with PID 1
            # the kernel kills every process of the namespace.
            script = "; ".join(mounts) + '; cd "$0"; "$@"'
            ns = ["unshare", "--net", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc"]
            if not self.root:
                ns[1:1] = ["--user", "--map-root-user"]
            command = ns + ["/bin/sh", "-c", script, str(cwd)] + confine + list(argv)
        else:
            command = confine + list(argv)
        try:
            return subprocess.run(command, cwd=cwd, env=clean_env, capture_output=True,
                                  timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            # unshare is killed, and --kill-child takes the PID namespace with it.
            return subprocess.CompletedProcess(argv, 124, e.stdout or b"", e.stderr or b"")
        finally:
            if self.root:   # and anything of the sandbox user's that escaped
                subprocess.run(["pkill", "-KILL", "-U", str(self.uid)], capture_output=True)
            if not self.namespaces:
                self.clean_shared()

    def clean_shared(self):
        """Without namespaces the SHARED_WRITABLE folders are the machine's:
        everything the sandbox user left in them goes after each run, so no
        run finds what an earlier one wrote (the guarantee the private
        mounts give). Its processes are killed first (run's finally)."""
        for folder in SHARED_WRITABLE:
            if os.path.isdir(folder):
                subprocess.run(["find", folder, "-xdev", "-mindepth", "1", "-user", str(self.uid),
                                "-delete"], capture_output=True)
                left = subprocess.run(["find", folder, "-xdev", "-mindepth", "1", "-user",
                                       str(self.uid), "-print", "-quit"], capture_output=True)
                if left.stdout.strip():
                    raise GradeError(f"no namespaces here, and {left.stdout.decode().strip()}, "
                                     f"which the sandbox user left, cannot be removed: grading "
                                     f"would carry it to the next run")


# --------------------------------------------------------------------------
# Safetensors outputs, read by the grader and never trusted
# --------------------------------------------------------------------------

def read_output(case_dir, uid):
    """The tensors of case_dir/out.safetensors as numpy arrays, or (None, why).
    A link, a file the sandbox user does not own, or one shared by another
    name is refused: the student's code must not point the grader at a file
    it could not read itself."""
    from safetensors.numpy import load
    try:
        fd = os.open(case_dir / "out.safetensors", os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        return None, f"no output file ({e.strerror})"
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != uid:
            return None, "the output is not a plain file written by the program"
        if st.st_size > MAX_OUTPUT_BYTES:
            return None, f"the output file is larger than {MAX_OUTPUT_BYTES >> 20} MB"
        data = f.read()
    try:
        return load(data), None
    except Exception as e:  # a malformed file is the program's failure, never the grader's
        return None, f"the output is not a readable safetensors file ({str(e).splitlines()[0][:120]})"


def compare(name, expected, actual, atol, rtol, show_expected=True):
    """None when `actual` matches, else one line naming the first difference
    (with the expected value only when show_expected)."""
    import numpy as np
    if actual.shape != expected.shape:
        return f"{name}: shape {list(actual.shape)}, expected {list(expected.shape)}"
    if expected.dtype.kind != "f":
        if actual.dtype != expected.dtype:
            return f"{name}: dtype {actual.dtype}, expected {expected.dtype}"
        if np.array_equal(actual, expected):
            return None
        at = tuple(int(i) for i in np.argwhere(actual != expected)[0])
        if not show_expected:
            return f"{name}{list(at)} = {actual[at]}, a wrong value (must be exact)"
        return f"{name}{list(at)} = {actual[at]}, expected {expected[at]} (must be equal)"
    if actual.dtype.kind != "f":
        return f"{name}: dtype {actual.dtype}, expected {expected.dtype}"
    e, a = expected.astype(np.float64), actual.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        ok = np.abs(a - e) <= atol + rtol * np.abs(e)
        ok |= (e == a)                                  # matching infinities
        ok |= np.isnan(e) & np.isnan(a)                 # a loss over no rows is NaN in both
    if ok.all():
        return None
    at = tuple(int(i) for i in np.argwhere(~ok)[0])
    count = int((~ok).sum())
    if not show_expected:
        return (f"{name}{list(at)} = {a[at]:.9g}, outside the tolerance (atol {atol:g} + rtol "
                f"{rtol:g} * |expected|); {count} of {e.size} values differ")
    return (f"{name}{list(at)} = {a[at]:.9g}, expected {e[at]:.9g} "
            f"(|diff| {abs(a[at] - e[at]):.3g} > atol {atol:g} + rtol {rtol:g} * |expected|); "
            f"{count} of {e.size} values differ")


# The signals of a crash, named in the feedback (128 + N is the shell's
# status for a program it ran that died of signal N).
SIGNALS = {4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 11: "SIGSEGV"}


def teacher_lines():
    """The lines of every solution body of this tree (stripped, 12 characters
    or more): what no feedback may quote."""
    lines = set()
    for rels in graded_files(ROOT).values():
        for rel in rels:
            for body in pristine_bodies((ROOT / rel).read_bytes()):
                lines.update(l.strip() for l in body.decode(errors="replace").split("\n")
                             if len(l.strip()) >= 12)
    return lines


def scrub(text, teacher):
    """text with each line that holds a line of a solution body replaced."""
    out = []
    for line in text.split("\n"):
        if any(t in line for t in teacher):
            line = "[a line of the teacher's solutions, withheld]"
        out.append(line)
    return "\n".join(out)


def describe_case(in_path):
    """'shape of each input, options' of a case, for the student's feedback."""
    from safetensors import safe_open
    with safe_open(str(in_path), "numpy") as f:
        meta = f.metadata() or {}
        shapes = [f"{k} {list(f.get_slice(k).get_shape())}" for k in f.keys()]
    if len(shapes) > 6:
        shapes = shapes[:6] + [f"... ({len(shapes)} tensors)"]
    skip = {"op", "outputs", "atol", "rtol", "seed", "torch_version"}
    options = [f"{k}={v}" for k, v in sorted(meta.items()) if k not in skip]
    return f"{meta.get('op', '?')} with " + ", ".join(shapes + options)


# --------------------------------------------------------------------------
# Hidden cases
# --------------------------------------------------------------------------

@dataclass
class HiddenSet:
    folder: Path
    manifest: dict
    cases: dict = field(default_factory=dict)   # chapter -> [(op, case_id)]

    @staticmethod
    def open(folder):
        folder = Path(folder)
        manifest_path = folder / "manifest.json"
        if not manifest_path.is_file():
            raise GradeError(f"--hidden {folder}: no manifest.json (draw the cases with "
                             f"tools/grader.py draw {folder})")
        mode = folder.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise GradeError(f"--hidden {folder}: readable by others (mode {stat.filemode(mode)}); "
                             f"chmod 700 {folder}")
        try:
            manifest = json.loads(manifest_path.read_text())
            cases = {ch: [tuple(c) for c in lst] for ch, lst in manifest["cases"].items()}
        except (ValueError, KeyError, TypeError) as e:
            raise GradeError(f"{manifest_path}: not a manifest the grader wrote ({e})")
        return HiddenSet(folder, manifest, cases)

    def functions(self, chapter, op):
        """The student's functions the op's cases run (from the draw)."""
        return self.manifest.get("functions", {}).get(chapter, {}).get(op, [])

    def counted(self, chapter):
        given = {tuple(c) for c in self.manifest.get("given", {}).get(chapter, [])}
        return [c for c in self.cases.get(chapter, []) if c not in given]


def split_case(case, in_path, expected_path):
    """Writes what the program reads and what the grader keeps. The "info."
    metadata (condition numbers, the loss PyTorch reported) and the seed stay
    with the expected values: the programs never read them."""
    from reference.common import Case, write_case
    outputs = case.meta["outputs"].split(",")
    # A round trip (chapter 07's checkpoint: every tensor read is written back
    # unchanged) needs its outputs as inputs; any other case's outputs stay here.
    kept = set() if set(outputs) == set(case.tensors) else set(outputs)
    # Nor the seed the case was drawn with: with it, the exercise copy's own
    # reference would rebuild the case, expected values and all.
    write_case(in_path, Case(case.name, {k: v for k, v in case.tensors.items() if k not in kept},
                             {k: v for k, v in case.meta.items()
                              if not k.startswith("info.") and k != "seed"},
                             case.keep_float64))
    write_case(expected_path, Case(case.name, {k: case.tensors[k] for k in outputs}, case.meta,
                                   case.keep_float64))


def draw(args):
    sys.path.insert(0, str(ROOT))
    from reference import chapter_modules
    import torch
    torch.set_num_threads(1)
    out = Path(args.hidden)
    check_new_folder(out, "HIDDEN")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    chapters = graded_files(ROOT)
    wanted = [c.strip() for c in (args.chapters or "").split(",") if c.strip()]
    for c in wanted:
        if c not in chapters:
            raise GradeError(f"--chapters: no graded chapter '{c}' (there are: {', '.join(chapters)})")
    tmp = Path(tempfile.mkdtemp(prefix=".hidden.", dir=out.parent))
    grader = None
    try:
        os.chmod(tmp, 0o700)
        rng = random.Random(seed)
        cases = {}
        for module in chapter_modules():
            if module.CHAPTER not in chapters or (wanted and module.CHAPTER not in wanted):
                continue
            (tmp / module.CHAPTER).mkdir()
            for op in module.VERIFY_OPS:
                for k in range(args.cases):
                    case = module.random_case(op, rng.randrange(2**31))
                    cid = f"{op}-{k}"
                    split_case(case, tmp / module.CHAPTER / f"{cid}.in.safetensors",
                               tmp / module.CHAPTER / f"{cid}.expected.safetensors")
                    cases.setdefault(module.CHAPTER, []).append((op, cid))
            print(f"draw: {module.CHAPTER}: {len(cases[module.CHAPTER])} cases "
                  f"({len(module.VERIFY_OPS)} ops)", flush=True)
        manifest = {"seed": seed, "cases_per_op": args.cases, "torch_version": torch.__version__,
                    "commit": tree_commit(), "cases": cases, "given": {}}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
        hidden = HiddenSet.open(tmp)

        # Calibration: the solutions must pass every case; a case the stubs
        # pass tests given code and earns nothing.
        grader = Grader(hidden, args, hide_extra=[tmp])
        print("draw: grading the solution tree on the new cases (it must pass every one)", flush=True)
        sol = grader.grade({rel: pristine_bodies((ROOT / rel).read_bytes())
                            for files in chapters.values() for rel in files}, errors={})
        failed = [f"  {r.chapter} {r.case_id}: {r.message}" for r in sol.results if not r.passed]
        if failed:
            raise GradeError("the solutions fail some drawn cases (a case too close to its tolerance?); "
                             "draw again with another --seed:\n" + "\n".join(failed[:20]))
        print("draw: grading the stubs of the exercise copy (cases they pass carry no points)",
              flush=True)
        stubs = grader.grade({rel: stub_bodies((ROOT / rel).read_bytes())
                              for files in chapters.values() for rel in files}, errors={})
        for r in stubs.results:
            if r.passed:
                manifest["given"].setdefault(r.chapter, []).append((r.op, r.case_id))
        manifest["functions"], unrun = functions_of_ops(grader, {ch: chapters[ch] for ch in cases})
        manifest["not_run"] = unrun
        if unrun:
            print("draw: no drawn case runs these functions, so they earn nothing here (the "
                  "practice tests check them): " + ", ".join(f"{c}: {f}" for c, f in unrun), flush=True)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
        os.rename(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if grader:
            grader.close()
    n = sum(len(v) for v in cases.values())
    given = sum(len(v) for v in manifest["given"].values())
    print(f"draw: wrote {out}: {n} hidden cases under seed {seed}, {n - given} counted "
          f"({given} pass with the stubs and test given code); keep the folder private")
    return 0


def block_functions(source):
    """The name of the function each solution block is in: the identifier
    before the "(" of the last line at column 0 above the block that opens a
    definition."""
    lines = source.split(b"\n")
    names = []
    for begin, _ in solution_blocks(lines):
        name = "?"
        for line in reversed(lines[:begin]):
            hit = re.match(rb"^[A-Za-z_][\w \t\*]*?\b(\w+)\(", line)
            if hit and not line.startswith((b"typedef", b"return")):
                name = hit.group(1).decode()
                break
        names.append(name)
    return names


def functions_of_ops(grader, chapters):
    """({chapter: {op: [the student's functions its cases run]}}, [(chapter,
    function) no op runs]): each function stubbed alone (plain build only),
    and a case that fails says which stub it ran into ("not implemented: f")."""
    print("draw: stubbing one function at a time, to name the functions each op runs", flush=True)
    found, unrun = {}, []
    for chapter, files in chapters.items():
        solved = {rel: pristine_bodies((ROOT / rel).read_bytes()) for rel in files}
        for rel in files:
            stubs = stub_bodies((ROOT / rel).read_bytes())
            for i, name in enumerate(block_functions((ROOT / rel).read_bytes())):
                bodies = dict(solved, **{rel: solved[rel][:i] + [stubs[i]] + solved[rel][i + 1:]})
                report = grader.grade(bodies, errors={}, chapters=[chapter], flavours=("plain",))
                ran = False
                for r in report.results:
                    hit = re.search(r"not implemented: (\w+)", r.message)
                    if hit:
                        found.setdefault(chapter, {}).setdefault(r.op, set()).add(hit.group(1))
                        ran = True
                if not ran:
                    unrun.append((chapter, name))
    return {ch: {op: sorted(names) for op, names in ops.items()} for ch, ops in found.items()}, unrun


def tree_commit():
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# --------------------------------------------------------------------------
# Grading
# --------------------------------------------------------------------------

@dataclass
class CaseResult:
    chapter: str
    op: str
    case_id: str
    passed: bool
    message: str = ""


@dataclass
class Report:
    results: list = field(default_factory=list)
    notes: dict = field(default_factory=dict)     # chapter -> [lines] (build errors, markers)
    seconds: float = 0.0


def build_pristine(dest, chapters, flavour="plain"):
    """Copies this tree's sources to dest and builds the chapter programs
    `chapters` there, outside any sandbox: the teacher's code only."""
    for part in TREE_PARTS:
        src = ROOT / part
        if src.is_dir():
            shutil.copytree(src, dest / part, symlinks=True,
                            ignore=shutil.ignore_patterns("build", "*.o"))
        elif src.exists():
            (dest / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / part)
    programs = [f"build/{ch}" for ch in chapters]
    extra = ["SANITIZE=1"] if flavour == "sanitize" else []
    proc = subprocess.run(["make", "-s", "-j2", *extra, *programs], cwd=dest,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise GradeError(f"the pristine tree does not build ({flavour}):\n{proc.stderr[-2000:]}")


class Grader:
    def __init__(self, hidden, args, hide_extra=()):
        self.hidden = hidden
        self.case_timeout = args.case_timeout
        self.build_timeout = args.build_timeout
        # Not under /tmp: the sandbox has a private /tmp of its own.
        self.work = Path(tempfile.mkdtemp(prefix="transformer-grade.", dir=args.work))
        os.chmod(self.work, 0o711)
        hide = [ROOT, hidden.folder, self.work / "base", *hide_extra]
        hide += [Path(p) for p in getattr(args, "hide", []) or []]
        for p in hide:
            if Path(p).resolve() in self.work.resolve().parents:
                raise GradeError(f"{p}: the sandbox would cover the grader's own folder {self.work} "
                                 f"(give another --work)")
        self.sandbox = Sandbox(hide, args.user, args.memory_mb, keep=self.work)
        self.base = {}
        self.feedback = getattr(args, "feedback", "full")
        self.teacher = teacher_lines()

    def close(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def base_tree(self, flavour):
        """A pristine copy of the tree with every chapter program built, once."""
        if flavour in self.base:
            return self.base[flavour]
        base = self.work / "base" / flavour
        base.mkdir(parents=True)
        os.chmod(self.work / "base", 0o700)
        build_pristine(base, list(self.hidden.cases), flavour)
        self.base[flavour] = base
        return base

    def chapter_tree(self, chapter, flavour, sources):
        """A copy of the base tree with `sources` (rel -> bytes) written in,
        built by the sandbox user. (tree, None) or (None, compiler output)."""
        base = self.base_tree(flavour)
        tree = self.work / f"{chapter}.{flavour}"
        shutil.rmtree(tree, ignore_errors=True)
        shutil.copytree(base, tree, symlinks=True)
        # The compiled solutions of this chapter go before the student's code
        # is compiled: its objects, the library that holds them and every
        # program linked with it. (An `.incbin` in a body would otherwise
        # embed the teacher's machine code, to be called at run time.)
        shutil.rmtree(tree / "build" / "obj" / "chapters" / chapter)
        (tree / "build" / "libtransformer.a").unlink()
        for program in (tree / "build").glob("[0-9][0-9]_*"):
            program.unlink()
        # No solution text of any chapter is readable in the tree: the other
        # chapters' solution bodies are stubbed in their sources, and their
        # objects, compiled from the pristine sources outside the sandbox,
        # are what the program links. Each stubbed source keeps its file
        # time, older than its object, so make does not compile the stub.
        for other, rels in graded_files(ROOT).items():
            if other == chapter:
                continue
            for rel in rels:
                path = tree / rel
                times = path.stat()
                path.write_bytes(splice(path.read_bytes(), stub_bodies(path.read_bytes())))
                os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))
        for rel, text in sources.items():
            (tree / rel).write_bytes(text)
        uid, gid = self.sandbox.owner()
        chown_tree(tree, uid, gid)
        extra = ["SANITIZE=1"] if flavour == "sanitize" else []
        proc = self.sandbox.run(["make", "-s", *extra, f"build/{chapter}"], cwd=tree,
                                timeout=self.build_timeout, limit_memory=False)
        # The sandbox user wrote the tree; from here on it is the grader's,
        # read-only to the student's code (a case must not change the next).
        chown_tree(tree, 0 if os.geteuid() == 0 else os.getuid(), os.getgid())
        if proc.returncode != 0:
            text = (proc.stderr or b"").decode(errors="replace")
            lines = [l for l in text.splitlines() if "error" in l or "Error" in l] or text.splitlines()
            why = "build timed out" if proc.returncode == 124 else "\n".join(lines[:15])
            return None, why
        return tree, None

    def run_case(self, tree, chapter, flavour, cid, index):
        """None when the case's outputs are right, else why not."""
        case_dir = self.work / "cases" / f"{chapter}.{flavour}.{index}"
        case_dir.mkdir(parents=True)
        os.chmod(self.work / "cases", 0o711)
        shutil.copy(self.hidden.folder / chapter / f"{cid}.in.safetensors", case_dir / "in.safetensors")
        uid, gid = self.sandbox.owner()
        os.chown(case_dir, uid, gid)
        os.chmod(case_dir, 0o700)
        os.chmod(case_dir / "in.safetensors", 0o444)
        env = {}
        if flavour == "sanitize":
            env = {"ASAN_OPTIONS": "exitcode=86:detect_leaks=0:hard_rss_limit_mb=%d:"
                                   "allocator_may_return_null=1:symbolize=0" % self.sandbox.memory_mb,
                   "UBSAN_OPTIONS": "exitcode=86:print_stacktrace=0"}
        proc = self.sandbox.run([str(tree / "build" / chapter), "--case", "in.safetensors",
                                 "--out", "out.safetensors"], cwd=case_dir,
                                timeout=self.case_timeout, env=env, limit_memory=(flavour == "plain"))
        try:
            # What the program printed reaches the student only with
            # --feedback full, scrubbed of the teacher's lines: a program can
            # print its hidden inputs, to be tabulated elsewhere.
            said = (proc.stderr or b"").decode(errors="replace").strip().splitlines()
            said = [l for l in said if l.strip()][:3]
            full = self.feedback == "full"
            heard = (f"; the program said: {' | '.join(scrub(s[:200], self.teacher) for s in said)}"
                     if said and full else "")
            if proc.returncode == 124:
                return f"timed out after {self.case_timeout} s" + heard
            if proc.returncode == 86 and flavour == "sanitize":
                report = [l for l in said if "Sanitizer" in l or "runtime error" in l]
                if not full:       # the kind alone: a word from the sanitizer's own list
                    kind = re.search(r"AddressSanitizer: [a-z-]+", report[0]) if report else None
                    return ("the sanitizers found " + (
                        f"a memory error ({kind.group(0)})" if kind else
                        "undefined behaviour" if report and "runtime error" in report[0]
                        else "a memory error or undefined behaviour"))
                return "the sanitizers found a memory error or undefined behaviour" + \
                       (f": {scrub(report[0][:300], self.teacher)}" if report else heard)
            if proc.returncode != 0:
                sig = proc.returncode - 128
                crash = f"the program crashed ({SIGNALS[sig]})" if sig in SIGNALS else None
                if not full:       # an exit status could carry a byte of the inputs
                    return crash or "the program failed (a non-zero exit status)"
                return (crash or f"the program failed (exit status {proc.returncode})") + heard
            actual, why = read_output(case_dir, uid)
            if actual is None:
                return why + heard
            from safetensors.numpy import load_file
            expected_path = self.hidden.folder / chapter / f"{cid}.expected.safetensors"
            expected = load_file(str(expected_path))
            from safetensors import safe_open
            with safe_open(str(expected_path), "numpy") as f:
                meta = f.metadata()
            atol, rtol = float(meta["atol"]), float(meta["rtol"])
            for name in meta["outputs"].split(","):
                if name not in actual:
                    return f"output '{name}' missing" + heard
                diff = compare(name, expected[name], actual[name], atol, rtol,
                               show_expected=self.feedback == "full")
                if diff:
                    return diff + heard
            return None
        finally:
            shutil.rmtree(case_dir, ignore_errors=True)

    def grade(self, bodies, errors, chapters=None, flavours=("plain", "sanitize")):
        """Report of the submission whose bodies are `bodies` (rel -> list of
        bodies, or absent where `errors` says why)."""
        started = time.time()
        report = Report()
        files = graded_files(ROOT)
        index = 0
        for chapter, cases in self.hidden.cases.items():
            if chapters and chapter not in chapters:
                continue
            notes = [errors[rel] for rel in files.get(chapter, []) if rel in errors]
            sources = {}
            for rel in files.get(chapter, []):
                pristine = (ROOT / rel).read_bytes()
                mine = bodies.get(rel) or stub_bodies(pristine)
                sources[rel] = splice(pristine, mine)
            trees, build_error = {}, None
            for flavour in flavours:
                trees[flavour], why = self.chapter_tree(chapter, flavour, sources)
                if why and not build_error:
                    build_error = f"chapter {chapter} does not build with your code:\n{why}"
            if build_error:
                notes.append(scrub(build_error, self.teacher))
            report.notes[chapter] = notes
            for op, cid in cases:
                message = None
                if build_error:
                    message = "the chapter did not build (see its note)"
                else:
                    for flavour in flavours:
                        message = self.run_case(trees[flavour], chapter, flavour, cid, index)
                        index += 1
                        if message:
                            if flavour == "sanitize":
                                message = "with the sanitizers: " + message
                            break
                if message:
                    message = (f"{describe_case(self.hidden.folder / chapter / (cid + '.in.safetensors'))}:"
                               f" {message}")
                report.results.append(CaseResult(chapter, op, cid, message is None, message or ""))
            for flavour in flavours:
                shutil.rmtree(self.work / f"{chapter}.{flavour}", ignore_errors=True)
        report.seconds = time.time() - started
        return report


def chown_tree(tree, uid, gid):
    """Gives the tree to uid:gid, readable by everyone and writable by its
    owner alone, whatever modes the teacher's umask gave the copies."""
    for dirpath, dirnames, filenames in os.walk(tree):
        os.lchown(dirpath, uid, gid)
        os.chmod(dirpath, 0o755)
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            os.lchown(path, uid, gid)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                os.chmod(path, 0o755 if st.st_mode & 0o111 else 0o644)


# --------------------------------------------------------------------------
# Scores and the formats course platforms read
# --------------------------------------------------------------------------

def scores(report, hidden):
    """{chapter: {"score", "max", "ops": {op: (score, max, passed, counted, [messages],
    [the functions it runs])}}}."""
    out = {}
    for chapter in report.notes:
        counted = set(hidden.counted(chapter))
        by_op = {}
        for r in report.results:
            if r.chapter != chapter or (r.op, r.case_id) not in counted:
                continue
            by_op.setdefault(r.op, []).append(r)
        ops = {}
        for op, rs in by_op.items():
            share = POINTS / len(by_op)
            got = share * sum(r.passed for r in rs) / len(rs)
            ops[op] = (got, share, sum(r.passed for r in rs), len(rs),
                       [f"{r.case_id}: {r.message}" for r in rs if not r.passed],
                       hidden.functions(chapter, op))
        out[chapter] = {"score": sum(o[0] for o in ops.values()),
                        "max": POINTS if ops else 0, "ops": ops}
    return out


def gradescope_json(table, report, extra_output="", feedback="shapes", visibility="visible"):
    """Gradescope's results.json: a test per op, its output what `feedback`
    allows (score: the count of right cases alone), shown per `visibility`
    (Gradescope's: visible, hidden, after_due_date, after_published)."""
    tests = []
    for chapter, ch in table.items():
        for note in report.notes.get(chapter, []):
            tests.append({"name": f"{chapter}: your code", "score": 0, "max_score": 0,
                          "output": note, "visibility": visibility})
        for op, (got, share, passed, n, fails, functions) in sorted(ch["ops"].items()):
            runs = f" Its cases run your {', '.join(functions)}." if functions else ""
            shown = [] if feedback == "score" else fails
            lines = [f"{passed} of {n} hidden cases right.{runs}"] + shown[:5]
            if len(shown) > 5:
                lines.append(f"... and {len(shown) - 5} more")
            tests.append({"name": f"{chapter}: {op}", "score": round(got, 4),
                          "max_score": round(share, 4), "output": "\n".join(lines),
                          "visibility": visibility})
    return {"score": round(sum(c["score"] for c in table.values()), 2),
            "max_score": sum(c["max"] for c in table.values()),
            "output": (extra_output + f"Graded on hidden cases in {report.seconds:.0f} s.").strip(),
            "visibility": "visible", "stdout_visibility": "hidden", "tests": tests}


def junit_xml(table, report, hidden, name):
    suites = ET.Element("testsuites", name=f"transformer grade: {name}")
    by_key = {(r.chapter, r.case_id): r for r in report.results}
    for chapter, ch in table.items():
        counted = hidden.counted(chapter)
        fails = sum(1 for c in counted if not by_key[(chapter, c[1])].passed)
        suite = ET.SubElement(suites, "testsuite", name=chapter, tests=str(len(counted)),
                              failures=str(fails), errors="0")
        ET.SubElement(suite, "properties")
        for op, cid in counted:
            r = by_key[(chapter, cid)]
            tc = ET.SubElement(suite, "testcase", classname=f"{chapter}.{op}", name=cid)
            if not r.passed:
                ET.SubElement(tc, "failure", message=r.message[:500]).text = r.message
        for note in report.notes.get(chapter, []):
            ET.SubElement(suite, "system-err").text = note
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def write_atomic(path, text):
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def check_output_path(option, path, inputs):
    """Refuses an output path before any work: its folder must exist and be
    writable, and it must not be inside an input."""
    path = Path(path).resolve()
    if not path.parent.is_dir():
        raise GradeError(f"{option} {path}: folder {path.parent} does not exist")
    if not os.access(path.parent, os.W_OK):
        raise GradeError(f"{option} {path}: folder {path.parent} is not writable")
    if path.is_dir():
        raise GradeError(f"{option} {path}: is a folder")
    for p in inputs:
        p = Path(p).resolve()
        if path == p or p in path.parents:
            raise GradeError(f"{option} {path}: inside the input {p}")
    return path


def check_new_folder(path, what):
    path = Path(path)
    if path.exists():
        raise GradeError(f"{what} {path}: exists already; choose a new folder")
    if not path.parent.is_dir():
        raise GradeError(f"{what} {path}: folder {path.parent} does not exist")


def table_text(table):
    lines = [f"{'chapter':<22} {'cases right':>12} {'points':>14}"]
    for chapter, ch in table.items():
        right = sum(o[2] for o in ch["ops"].values())
        n = sum(o[3] for o in ch["ops"].values())
        lines.append(f"{chapter:<22} {right:>5} / {n:<5} {ch['score']:>7.2f} / {ch['max']}")
    lines.append(f"{'total':<22} {'':>12} {sum(c['score'] for c in table.values()):>7.2f} / "
                 f"{sum(c['max'] for c in table.values())}")
    return "\n".join(lines)


def submission_bodies(submission):
    """(bodies, errors): the usable bodies of each graded file, and why others
    are not (they count as not written)."""
    root = find_chapters_root(submission)
    bodies, errors = {}, {}
    for files in graded_files(ROOT).values():
        for rel in files:
            count = len(solution_blocks((ROOT / rel).read_bytes().split(b"\n")))
            got, why = read_bodies(root, rel, count)
            if got is None:
                errors[rel] = why + "; its functions count as not written"
            else:
                bodies[rel] = got
    return bodies, errors


def grade_one(grader, submission, chapters, name):
    bodies, errors = submission_bodies(submission)
    report = grader.grade(bodies, errors, chapters)
    return report, scores(report, grader.hidden)


def parse_chapters(text, hidden):
    if not text:
        return None
    wanted = [c.strip() for c in text.split(",") if c.strip()]
    for c in wanted:
        if c not in hidden.cases:
            raise GradeError(f"--chapters: no graded chapter '{c}' (there are: {', '.join(hidden.cases)})")
    return wanted


def cmd_grade(args):
    submission = Path(args.submission)
    if not submission.is_dir():
        raise GradeError(f"SUBMISSION {submission}: not a folder")
    inputs = [submission, args.hidden]
    results = check_output_path("--results", args.results, inputs) if args.results else None
    junit = check_output_path("--junit", args.junit, inputs) if args.junit else None
    try:
        hidden = HiddenSet.open(args.hidden)
        chapters = parse_chapters(args.chapters, hidden)
        grader = Grader(hidden, args, hide_extra=[submission.resolve().parent]
                        if args.hide_siblings else [])
    except GradeError as e:
        if results:   # Gradescope shows this file even when grading could not start
            write_atomic(results, json.dumps({"score": 0, "output": f"grading failed: {e}",
                                              "tests": []}, indent=1) + "\n")
        raise
    try:
        try:
            report, table = grade_one(grader, submission, chapters, submission.resolve().name)
        except GradeError as e:
            if results:
                write_atomic(results, json.dumps({"score": 0, "output": str(e), "tests": []},
                                                 indent=1) + "\n")
            raise
    finally:
        grader.close()
    print(table_text(table))
    for chapter, notes in report.notes.items():
        for note in notes:
            print(f"{chapter}: {note}")
    print(f"graded in {report.seconds:.0f} s")
    if results:
        said = grader.sandbox.warning + "\n" if grader.sandbox.warning else ""
        write_atomic(results, json.dumps(gradescope_json(table, report, said, args.feedback,
                                                         args.visibility), indent=1) + "\n")
    if junit:
        write_atomic(junit, junit_xml(table, report, hidden, submission.resolve().name))
    return 0


def submission_folders(folder, out, inputs=()):
    """The students' folders of SUBMISSIONS `folder` (one per student), after
    checking that --out `out` is new and outside folder and the other inputs."""
    folder = Path(folder)
    if not folder.is_dir():
        raise GradeError(f"SUBMISSIONS {folder}: not a folder")
    check_new_folder(out, "--out")
    for p in (folder, *map(Path, inputs)):
        if p.resolve() == out.resolve().parent or p.resolve() in out.resolve().parents:
            raise GradeError(f"--out {out}: inside the input {p}")
    students = sorted(d for d in folder.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not students:
        raise GradeError(f"SUBMISSIONS {folder}: no submission folders in it")
    return students


def cmd_grade_all(args):
    folder, out = Path(args.submissions), Path(args.out)
    students = submission_folders(folder, out, [args.hidden])
    hidden = HiddenSet.open(args.hidden)
    chapters = parse_chapters(args.chapters, hidden)
    grader = Grader(hidden, args, hide_extra=[folder])
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    rows = []
    try:
        for i, student in enumerate(students, 1):
            started = time.time()
            try:
                report, table = grade_one(grader, student, chapters, student.name)
            except GradeError as e:
                print(f"[{i}/{len(students)}] {student.name}: {e}")
                rows.append({"student": student.name, "total": 0, "note": str(e)})
                continue
            (tmp / student.name).mkdir()
            (tmp / student.name / "results.json").write_text(
                json.dumps(gradescope_json(table, report, "", args.feedback, args.visibility),
                           indent=1) + "\n")
            (tmp / student.name / "junit.xml").write_text(junit_xml(table, report, hidden, student.name))
            row = {"student": student.name}
            row.update({ch: f"{t['score']:.2f}" for ch, t in table.items()})
            row["total"] = f"{sum(t['score'] for t in table.values()):.2f}"
            row["note"] = "; ".join(n.splitlines()[0] for ns in report.notes.values() for n in ns)
            rows.append(row)
            print(f"[{i}/{len(students)}] {student.name}: {row['total']} / "
                  f"{sum(t['max'] for t in table.values())} ({time.time() - started:.0f} s)", flush=True)
        columns = ["student"] + (chapters or list(hidden.cases)) + ["total", "note"]
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(rows)
        (tmp / "grades.csv").write_text(buf.getvalue())
        os.chmod(tmp, 0o755)
        os.rename(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        grader.close()
    print(f"grade-all: wrote {out}/grades.csv and per-student results.json and junit.xml")
    return 0


def cmd_export(args):
    """The solution bodies of every submission, for a plagiarism checker:
    OUT/base/chapters/NN_name/*.c is the exercise copy (each graded file with
    its stub bodies) and OUT/students/NAME/chapters/NN_name/*.c the same
    files with the student's bodies spliced in. The given code is then the
    same in every folder, and the checker's base-code option discounts it;
    nothing but a body can differ. A file the grader could not use (missing,
    a link, markers moved) is left out of that student's folder."""
    out = Path(args.out)
    students = submission_folders(args.submissions, out)
    files = [rel for chapter in graded_files(ROOT).values() for rel in chapter]
    pristine = {rel: (ROOT / rel).read_bytes() for rel in files}
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        def write(dest, rel, bodies):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(splice(pristine[rel], bodies))

        for rel in files:
            write(tmp / "base", rel, stub_bodies(pristine[rel]))
        for student in students:
            try:
                bodies, errors = submission_bodies(student)
            except GradeError as e:
                print(f"export: {student.name}: {e}; left out")
                continue
            for rel, got in bodies.items():
                write(tmp / "students" / student.name, rel, got)
            print(f"export: {student.name}: {len(bodies)} of {len(files)} files"
                  + (f" ({len(errors)} unusable: {', '.join(sorted(errors))})" if errors else ""))
        os.chmod(tmp, 0o755)
        os.rename(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"export: wrote {out}/base (the exercise copy) and {out}/students; e.g.\n"
          f"  java -jar jplag.jar -l c --base-code {out}/base {out}/students")
    return 0


LM_MODEL_NAMES = ["imdb_lm.safetensors", "models/imdb_lm.safetensors"]
MAX_MODEL_BYTES = 64 << 20


def lm_measure(args, submission):
    """(bits per byte, None) of the submission's language model on the test
    reviews, or (None, why not)."""
    found = [submission / n for n in LM_MODEL_NAMES if (submission / n).exists()]
    if not found:
        return None, f"no {' or '.join(LM_MODEL_NAMES)} in the submission"
    model = found[0]
    if linked(submission, model) or not model.is_file():
        return None, f"{model.relative_to(submission)}: a link or not a file; submit the file itself"
    if model.stat().st_size > MAX_MODEL_BYTES:
        return None, f"{model.relative_to(submission)}: larger than {MAX_MODEL_BYTES >> 20} MB"
    work = Path(tempfile.mkdtemp(prefix="transformer-lm.", dir=args.work))
    try:
        os.chmod(work, 0o711)
        tree = work / "tree"
        tree.mkdir()
        build_pristine(tree, ["12_generation"])
        run_dir = work / "run"
        (run_dir / "data").mkdir(parents=True)
        shutil.copy(model, run_dir / "model.safetensors")
        shutil.copy(Path(args.data) / "imdb.tsv", run_dir / "data" / "imdb.tsv")
        sandbox = Sandbox([ROOT, Path(args.data), tree / "chapters", submission.resolve().parent,
                           *[Path(p) for p in args.hide or []]],
                          args.user, args.memory_mb, keep=work)
        uid, _ = sandbox.owner()
        os.chown(run_dir, uid, -1)
        os.chmod(run_dir, 0o755)
        proc = sandbox.run([str(tree / "build" / "12_generation"), "--eval", "model.safetensors",
                            "--data", "data", "--test-reviews", str(args.test_reviews)],
                           cwd=run_dir, timeout=args.timeout)
        if proc.returncode == 124:
            return None, f"the measure timed out after {args.timeout:.0f} s"
        # The teacher's program printed this, about the student's own file.
        said = (proc.stderr or b"").decode(errors="replace").strip().splitlines()
        if proc.returncode != 0:
            return None, (said[-1] if said else f"the measure failed (exit status {proc.returncode})")
        for line in (proc.stdout or b"").decode(errors="replace").splitlines():
            if line.startswith("{") and "bits_per_byte" in line:
                return json.loads(line)["bits_per_byte"], None
        return None, "the measure printed no result"
    finally:
        shutil.rmtree(work, ignore_errors=True)


def cmd_leaderboard(args):
    """Chapter 12's optional assignment: the bits per byte of the student's
    trained language model on the first --test-reviews test reviews,
    measured by the teacher's program, as Gradescope's leaderboard entry;
    --points when it is at most --max-bpb."""
    submission = Path(args.submission)
    if not submission.is_dir():
        raise GradeError(f"SUBMISSION {submission}: not a folder")
    if not (Path(args.data) / "imdb.tsv").is_file():
        raise GradeError(f"--data {args.data}: no imdb.tsv in it (make imdb writes it)")
    results = check_output_path("--results", args.results, [submission]) if args.results else None
    started = time.time()
    bpb, why = lm_measure(args, submission)
    passed = bpb is not None and (args.max_bpb == 0 or bpb <= args.max_bpb)
    score = args.points if passed else 0
    if bpb is None:
        text = f"not measured: {why}"
    else:
        bound = f" (the bound: {args.max_bpb:.4f})" if args.max_bpb else ""
        text = (f"{bpb:.4f} bits per byte on the first {args.test_reviews} test reviews"
                f"{bound}; measured in {time.time() - started:.0f} s")
    print(text)
    if results:
        out = {"score": score, "max_score": args.points, "output": text,
               "visibility": "visible", "stdout_visibility": "hidden",
               "tests": [{"name": "12_generation: bits per byte", "score": score,
                          "max_score": args.points, "output": text}]}
        if bpb is not None:
            out["leaderboard"] = [{"name": "bits per byte", "value": round(bpb, 4),
                                   "order": "asc"}]
        write_atomic(results, json.dumps(out, indent=1) + "\n")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tools/grader.py",
                                     description="the trusted grade: hidden cases, a sandbox, "
                                                 "results.json / JUnit / CSV")
    sub = parser.add_subparsers(dest="command", required=True)

    def limits(p):
        p.add_argument("--user", default="nobody",
                       help="unprivileged user the student's code runs as, when run as root "
                            "(default nobody)")
        p.add_argument("--case-timeout", type=float, default=10.0, metavar="S",
                       help="seconds of wall time per case (default 10)")
        p.add_argument("--build-timeout", type=float, default=300.0, metavar="S",
                       help="seconds to build one chapter (default 300)")
        p.add_argument("--memory-mb", type=int, default=2048, metavar="MB",
                       help="memory limit of a case (default 2048)")
        p.add_argument("--work", default="/var/tmp", metavar="DIR",
                       help="where the grader makes its temporary folder (default /var/tmp; "
                            "not /tmp, which the sandbox replaces)")
        p.add_argument("--hide", action="append", metavar="DIR",
                       help="another folder the student's code must not see (repeatable)")

    def policy(p):
        p.add_argument("--feedback", choices=["full", "shapes", "score"], default="shapes",
                       help="what a failed case shows: full (shapes, options, the first wrong "
                            "value and the expected one, what the program printed), shapes "
                            "(the default: no expected value and nothing the program printed), "
                            "score (points only)")
        p.add_argument("--visibility", default="visible",
                       choices=["visible", "hidden", "after_due_date", "after_published"],
                       help="Gradescope's visibility of the tests in results.json (default visible)")

    p = sub.add_parser("draw", help="draw hidden cases with the PyTorch reference (.venv/bin/python)")
    p.add_argument("hidden", metavar="HIDDEN", help="new folder for the hidden cases")
    p.add_argument("--seed", type=int, help="secret seed (default: a random one)")
    p.add_argument("--cases", type=int, default=5, help="cases per op (default 5)")
    p.add_argument("--chapters", help="only these chapters, comma-separated (default: 00-08 and 12)")
    limits(p)

    p = sub.add_parser("grade", help="grade one submission")
    p.add_argument("submission", metavar="SUBMISSION")
    p.add_argument("--hidden", required=True)
    p.add_argument("--results", help="write Gradescope's results.json here")
    p.add_argument("--junit", help="write JUnit XML here")
    p.add_argument("--chapters", help="only these chapters, comma-separated")
    p.add_argument("--hide-siblings", action="store_true",
                   help="also cover the folder that holds SUBMISSION (other students' work)")
    limits(p)
    policy(p)

    p = sub.add_parser("grade-all", help="grade every submission folder in SUBMISSIONS")
    p.add_argument("submissions", metavar="SUBMISSIONS")
    p.add_argument("--hidden", required=True)
    p.add_argument("--out", required=True, help="new folder for grades.csv and each student's files")
    p.add_argument("--chapters", help="only these chapters, comma-separated")
    limits(p)
    policy(p)

    p = sub.add_parser("export", help="every submission's solution bodies, laid out for a "
                                      "plagiarism checker (JPlag, MOSS, copydetect)")
    p.add_argument("submissions", metavar="SUBMISSIONS")
    p.add_argument("--out", required=True, help="new folder: base/ and students/NAME/")

    p = sub.add_parser("leaderboard", help="chapter 12's optional assignment: the bits per byte "
                                           "of a submitted language model, for a leaderboard")
    p.add_argument("submission", metavar="SUBMISSION",
                   help=f"a folder holding {' or '.join(LM_MODEL_NAMES)}")
    p.add_argument("--data", default=str(ROOT / ".data" / "imdb"),
                   help="the folder of imdb.tsv (default .data/imdb)")
    p.add_argument("--test-reviews", type=int, default=500, metavar="N",
                   help="measure the first N test reviews (default 500)")
    p.add_argument("--results", help="write Gradescope's results.json here, with the leaderboard")
    p.add_argument("--points", type=float, default=10.0, help="the points of the assignment (default 10)")
    p.add_argument("--max-bpb", type=float, default=0.0, metavar="X",
                   help="the points only at X bits per byte or fewer (default 0: any model measured)")
    p.add_argument("--timeout", type=float, default=600.0, metavar="S",
                   help="seconds for the measure (default 600)")
    p.add_argument("--user", default="nobody", help="the sandbox user, as root (default nobody)")
    p.add_argument("--memory-mb", type=int, default=2048, metavar="MB",
                   help="memory limit of the measure (default 2048)")
    p.add_argument("--work", default="/var/tmp", metavar="DIR", help="where to work (default /var/tmp)")
    p.add_argument("--hide", action="append", metavar="DIR",
                   help="another folder the measure must not see (repeatable)")

    args = parser.parse_args(argv)
    if getattr(args, "cases", 1) < 1:
        parser.error("--cases: at least 1")
    try:
        return {"draw": draw, "grade": cmd_grade, "grade-all": cmd_grade_all,
                "export": cmd_export, "leaderboard": cmd_leaderboard}[args.command](args)
    except GradeError as e:
        print(f"tools/grader.py {args.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
