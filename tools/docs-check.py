#!/usr/bin/env python3
"""make docs-check: the numbers the texts take from a command, checked
against that command, and every link of the texts checked to lead somewhere.

The texts are README.md, CONTRIBUTING.md, TOLERANCES.md, cuda/README.md,
docs/*.md and every chapters/NN_name/README.md. What is checked:

  test counts   "N tests" on a line that names build/test_NN_name (a chapter's
                "How to test" block) must be the number of tests that program
                declares: the lines of `TEST_LIST=1 build/test_NN_name`, the
                same list make grade counts (nothing is run)
  grade table   a row "NN_name   P / T   points" of the sample table in
                docs/EXERCISES.md (GRADE_TABLE; the solution tree's: every test
                passes) must have P and T equal to that same count; that text
                must hold such rows (a table moved elsewhere is reported, so
                GRADE_TABLE follows it)
  goldens       "N goldens" or "N golden cases" in chapter NN's text must be
                the number of case files in golden/NN_name/
  links         every relative link and image of the texts, [text](path) or
                ![text](path), must name a file or folder of the tree (what
                follows a # is not checked); an image must also be a file
  figures       docs/figures/ holds what make figures writes there: one PNG per
                plots/*.gp script, named after it, and nothing else; and each
                of them is shown by some text. (Their bytes are not compared:
                they differ between gnuplot builds and fonts.)
  measured      a fenced block of a text that quotes a command's output (timings,
                tables a run printed) is marked by an HTML comment on the line
                just before its fence,
                    <!-- measured: docs/measured/NAME.txt -->
                and docs/measured/NAME.txt is that output, committed: three
                header lines "# command: ...", "# date: ...", "# machine: ...",
                then the raw output. Every non-blank line of the block (spaces
                collapsed; a line "..." stands for lines left out) must be a
                line of the record; the record must exist, have its header and
                be quoted by some text. (Timings cannot be measured again here:
                the record says when and where they were.)
  quoted C      every statement of a ```c block (cut after each ';', '{' and
                '}', comments dropped; "..." or /* ... */ marks code left out)
                must be a statement of the tree's C sources, token for token:
                a renamed field or parameter is not. A definition's head may be
                quoted as a prototype, without 'static'; "float a, b;" is read
                as "float a; float b;" on both sides
  options       every --option a text names must be one a program accepts:
                what each chapter program's --help prints (and the --help of
                each mode it lists, "--train --help"), the option strings of
                reference/ and tools/, and a few of other programs' (mpirun's,
                JPlag's)
  make          in a shell block or a code span, `make TARGET VAR=value`: the
                target must be the Makefile's and each variable one it or the
                scripts of tools/ read
  recipes       the paragraph right after a block that runs `build/NN_name
                --train ...` states the run's settings ("AdamW at 2e-3",
                "weight decay 0.01", "200 warm-up steps", "clipped at 1",
                "batches of 16"): each must be the command's own option or the
                default its --help prints
  lengths       README.md has at most 2,500 words, and each chapter's lesson,
                chapters/NN_name/README.md from its top to its first line
                starting with "## Appendix" (the whole file if it has none),
                at most 3,000 (words: len(text.split()), as wc -w counts);
                reported as "FILE: N words, the limit is M" (LENGTH_LIMITS)

With --evals (make docs-check-evals) it also runs the evaluation of each
shipped model (models/*.safetensors), the commands of EVALS below, and
checks the figures the texts state against what they print now. The
seconds are each command's with OMP_NUM_THREADS=1 on a 2-core Xeon that
was busy with other work (nice 19), about 4 minutes in all:

  taylor        build/09_translation --eval models/taylor.safetensors: greedy
                exact match on the 750 test pairs (3.5 s)
  imdb          build/10_classification --eval models/imdb.safetensors: the
                5,000 IMDb test reviews and the 8,530 Rotten Tomatoes
                sentences (186 s: it also measures the classes and lengths
                apart); skipped, with a note, when .data/imdb is absent (make
                imdb)
  set_anomaly   build/11_set_anomaly --eval models/set_anomaly.safetensors, on
                the 1,000 test sets and with --test-sets 10000 (0.1 s, 1 s)
  imdb_lm       build/12_generation --eval models/imdb_lm.safetensors
                --test-reviews 300: bits per byte of the first 300 test reviews,
                the figure CI measures (41 s; skipped like imdb). The figure
                the texts lead with, on all 5,000 test reviews (1.8386), is not
                checked: 18 times the bytes, about 12 minutes at that pace.

The models are evaluated on the machine that runs the check; a decision
that another CPU's rounding flips (CI's bounds allow for a few) shows as a
stale figure there.

A model's figures are looked for in its chapter's text and, in the other
texts, in each section (heading to heading) that names its file. There a
figure on a test set of D examples is found where a sentence writes it with
its count, the second in parentheses after the first: "0.9867 (740)",
"0.987 (740 of 750)", "0.987 greedy exact match on the 750 test pairs (740
right", "995 of the 1,000 test sets (0.995". Such a pair, a fraction of 3 or
4 decimals and a count, states the figure when N / D rounds to the fraction
(so a stale pair, which was once measured, is still found), or when either
half is the figure measured now (a half-updated one); it must then be the
measured fraction at the precision written and the measured count. A figure
is also found in the phrasings listed with it in EVALS ("the same 4,296" in
a table's PyTorch row, "0.660 on the Rotten Tomatoes sentences"), which is
also how a figure without a count (bits per byte) is found. Each figure must
be found on some line, or the texts were reworded out of the check's sight
and it says so. A paragraph or table that quotes other models' figures on
the same test set (older runs, a faster recipe, PyTorch's own training) is
marked on the line before it:
    <!-- docs-check: other models -->
and is not read for figures.

--self-test feeds the checks made-up texts, outputs and records: a stale
accuracy in a new sentence, a half-updated one, one in a section of the top
README that names the model, a stale PyTorch row, a marked block with a
line its record lacks, a record without its header, a recipe's learning
rate that is not the command's, a renamed field in a quoted struct, a
renamed option, a misspelt make variable, a lesson over its length (and
not one whose words past the limit are in its appendix). It fails unless each
is reported and nothing else is (not the right figures, nor other models'
under their mark, nor a section that does not name the model). It needs
nothing built and takes a fraction of a second.

It needs the test programs built (make all). Each stale number is printed
as FILE:LINE: what the text says, what the command says; the exit status is
1 if there is any, 0 otherwise.
"""
import argparse
import bisect
import glob
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from fractions import Fraction

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRADE_TABLE = os.path.join("docs", "EXERCISES.md")   # the text with the sample grade table


def texts(root=ROOT):
    found = ["README.md", "CONTRIBUTING.md", "TOLERANCES.md", os.path.join("cuda", "README.md")]
    docs = os.path.join(root, "docs")
    found += sorted(os.path.join("docs", f) for f in os.listdir(docs) if f.endswith(".md")) \
        if os.path.isdir(docs) else []
    chapters = os.path.join(root, "chapters")
    for name in sorted(os.listdir(chapters)) if os.path.isdir(chapters) else []:
        if re.fullmatch(r"\d\d_\w+", name) and os.path.isfile(os.path.join(chapters, name, "README.md")):
            found.append(os.path.join("chapters", name, "README.md"))
    return [t for t in found if os.path.isfile(os.path.join(root, t))]


def read_texts(root=ROOT):
    """{path: its lines} for every text of the tree at root."""
    docs = {}
    for path in texts(root):
        with open(os.path.join(root, path), encoding="utf-8") as f:
            docs[path] = f.read().split("\n")
    return docs


_declared = {}


def declared_tests(chapter, problems, where):
    """The number of tests build/test_<chapter> declares, or None."""
    if chapter not in _declared:
        program = os.path.join(ROOT, "build", "test_" + chapter)
        if not os.access(program, os.X_OK):
            problems.append(f"{where}: build/test_{chapter} is not built (run make all first)")
            _declared[chapter] = None
        else:
            run = subprocess.run([program], cwd=ROOT, env=dict(os.environ, TEST_LIST="1"),
                                 stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                 timeout=60)
            names = {line for line in run.stdout.splitlines() if re.fullmatch(r"[^ ]+", line)}
            if run.returncode != 0 or not names:
                problems.append(f"{where}: TEST_LIST=1 build/test_{chapter} listed no tests "
                                f"(exit status {run.returncode})")
                _declared[chapter] = None
            else:
                _declared[chapter] = len(names)
    return _declared[chapter]


def golden_files(chapter):
    folder = os.path.join(ROOT, "golden", chapter)
    if not os.path.isdir(folder):
        return None
    return len([f for f in os.listdir(folder) if f.endswith(".safetensors")])


def number(text):
    return int(text.replace(",", ""))


def check_numbers(path, lines, problems):
    m = re.fullmatch(r"chapters/(\d\d_\w+)/README\.md", path)
    own_chapter = m.group(1) if m else None
    checked = 0
    for i, line in enumerate(lines, 1):
        where = f"{path}:{i}"
        program = re.search(r"build/test_(\d\d_\w+)", line)
        said = re.search(r"#.*?\b(\d[\d,]*) tests\b", line)
        if program and said:
            want = declared_tests(program.group(1), problems, where)
            if want is not None:
                checked += 1
                if number(said.group(1)) != want:
                    problems.append(f"{where}: says {said.group(1)} tests, build/test_"
                                    f"{program.group(1)} declares {want} (TEST_LIST=1)")
        row = re.fullmatch(r"(\d\d_\w+)\s+(\d+) / (\d+)\s+\S+ / \d+\s*", line)
        if path == GRADE_TABLE and row:
            want = declared_tests(row.group(1), problems, where)
            if want is not None:
                checked += 1
                if (int(row.group(2)), int(row.group(3))) != (want, want):
                    problems.append(f"{where}: the sample grade table says {row.group(2)} / "
                                    f"{row.group(3)} for {row.group(1)}, build/test_"
                                    f"{row.group(1)} declares {want} tests (all pass here)")
        if own_chapter:
            for said in re.finditer(r"\b(\d[\d,]*) golden(?:s| cases)\b", line):
                want = golden_files(own_chapter)
                checked += 1
                if want is None or number(said.group(1)) != want:
                    problems.append(f"{where}: says {said.group(1)} goldens, golden/{own_chapter}/ "
                                    f"holds {want} case files")
    return checked


def check_grade_table(docs, problems):
    """GRADE_TABLE must hold the sample grade table check_numbers reads."""
    row = re.compile(r"(\d\d_\w+)\s+(\d+) / (\d+)\s+\S+ / \d+\s*")
    if not any(row.fullmatch(line) for line in docs.get(GRADE_TABLE, [])):
        problems.append(f"{GRADE_TABLE} holds no row of the sample grade table (moved? then "
                        "GRADE_TABLE in tools/docs-check.py follows it)")


# The longest a text may be, in words: the top README, and a chapter's lesson
# (its README before the first "## Appendix" line).
LENGTH_LIMITS = {"README.md": 2500, "lesson": 3000}


def check_length(path, lines, problems):
    """README.md and each chapter's lesson within LENGTH_LIMITS."""
    if path == "README.md":
        limit = LENGTH_LIMITS["README.md"]
    elif re.fullmatch(r"chapters/\d\d_\w+/README\.md", path):
        limit = LENGTH_LIMITS["lesson"]
        lines = next((lines[:i] for i, line in enumerate(lines) if line.startswith("## Appendix")),
                     lines)
    else:
        return 0
    words = len("\n".join(lines).split())
    if words > limit:
        problems.append(f"{path}: {words:,} words, the limit is {limit:,}")
    return 1


def check_links(path, lines, problems, shown):
    base = os.path.dirname(os.path.join(ROOT, path))
    checked = 0
    in_code = False
    for i, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        line = re.sub(r"`[^`]*`", "", line)       # code spans hold no links
        for m in re.finditer(r"(!?)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", line):
            image, target = m.group(1) == "!", m.group(2)
            if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue                           # http:, mailto:, an anchor of this page
            target = target.split("#", 1)[0]
            full = os.path.normpath(os.path.join(base, target))
            checked += 1
            if image:
                shown.add(full)
            if image and not os.path.isfile(full):
                problems.append(f"{path}:{i}: the image {target} is not a file of the tree")
            elif not os.path.exists(full):
                problems.append(f"{path}:{i}: the link {target} leads to nothing")
    return checked


def check_figures(shown, problems):
    folder = os.path.join(ROOT, "docs", "figures")
    scripts = {f[:-3] for f in os.listdir(os.path.join(ROOT, "plots")) if f.endswith(".gp")}
    have = set(os.listdir(folder)) if os.path.isdir(folder) else set()
    for name in sorted(scripts):
        if name + ".png" not in have:
            problems.append(f"docs/figures/{name}.png is missing (plots/{name}.gp; make figures)")
        elif os.path.join(folder, name + ".png") not in shown:
            problems.append(f"docs/figures/{name}.png is shown by no text")
    for name in sorted(have - {s + ".png" for s in scripts}):
        problems.append(f"docs/figures/{name} is no plots/*.gp script's figure (make figures "
                        "removes it)")
    return len(scripts)


# ---- the code in the texts: quoted C, options, make targets, recipes ----

C_TOKEN = (r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|[A-Za-z_]\w*|\d[\w.]*|->|\+\+|--|<<=|>>=|'
           r'<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|<<|>>|\.\.\.|\S')
ELIDED = "\x01"
C_SOURCES = ["chapters/*/*.[ch]", "programs/*.[ch]", "runtime/*.[ch]", "cases/*.[ch]",
             "mpi/*.[ch]", "cuda/*.cu", "cuda/*.cuh", "cuda/*.h", "tests/*.[ch]"]


def c_statements(text, quoted=False):
    """The statements of C text as token tuples, cut after every ';', '{' and
    '}', comments and preprocessor lines dropped, and a declaration of
    several names ("float a, *b;") made one per name. In a quoted block a
    line "..." or a comment "/* ... */" marks code left out."""
    if quoted:
        text = re.sub(r"/\*\s*\.\.\.\s*\*/|^\s*\.\.\.\s*$", f" {ELIDED} ", text, flags=re.M)
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"^\s*#.*$", " ", text, flags=re.M)
    out, cur = [], []
    for t in re.findall(C_TOKEN + "|" + ELIDED, text):
        if t != ELIDED:
            cur.append(t)
        if t in (";", "{", "}", ELIDED) and cur:
            out.append(tuple(cur))
            cur = []
    if cur:
        out.append(tuple(cur))
    return [d for c in out if any(re.match(r"\w", t) for t in c) for d in one_per_name(c)]


def one_per_name(c):
    """'float a, *b;' -> 'float a;', 'float *b;'; anything else unchanged."""
    if c[-1] != ";" or "," not in c or any(t in c for t in "()=[{"):
        return [c]
    parts, cur = [], []
    for t in c[:-1]:
        if t == ",":
            parts.append(cur)
            cur = []
        else:
            cur.append(t)
    parts.append(cur)
    k = len(parts[0]) - 1
    while k > 0 and parts[0][k - 1] == "*":
        k -= 1
    if k == 0:
        return [c]
    kind = parts[0][:k]
    return [tuple(kind + (p if i else parts[0][k:]) + [";"]) for i, p in enumerate(parts)]


def source_statements(root=ROOT):
    """Every statement of the tree's C sources, with the forms a text may
    quote it in: a definition's head as a prototype (';' for '{', or
    neither at a block's end) and without 'static'."""
    known = set()
    for pattern in C_SOURCES:
        for path in glob.glob(os.path.join(root, pattern)):
            with open(path, encoding="utf-8", errors="replace") as f:
                for c in c_statements(f.read()):
                    forms = [c, c[1:]] if c[0] == "static" else [c]
                    for form in forms:
                        known.add(form)
                        if form[-1] in ("{", ";"):
                            known.add(form[:-1])
                        if len(form) > 1 and form[-2:] == (")", "{"):
                            known.add(form[:-1] + (";",))
    return known


def check_quoted_code(path, lines, problems, known):
    """Each statement of a ```c block must be one of the sources' (a
    renamed field or parameter is not)."""
    checked, i = 0, 0
    while i < len(lines):
        if lines[i].strip() != "```c":
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        for c in c_statements("\n".join(lines[i + 1:j]), quoted=True):
            checked += 1
            if c not in known:
                problems.append(f"{path}:{i + 1}: the quoted C '{' '.join(c)[:120]}' is in no "
                                f"source file")
        i = j + 1
    return checked


OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
# Options of other programs the texts name: Apple's and Microsoft's
# installers, JPlag, Open MPI's mpirun.
OTHER_PROGRAMS_OPTIONS = {"--install", "--base-code", "--hostfile", "--bind-to", "--map-by"}


def program_options(root=ROOT):
    """Every option a program of the tree accepts: what each chapter
    program's --help prints, with the --help of each of its modes
    ("--train --help"), and the option strings of the Python tools and the
    reference (their argparse and argv parsing)."""
    options = set(OTHER_PROGRAMS_OPTIONS)
    for program in sorted(glob.glob(os.path.join(root, "build", "[0-9][0-9]_*"))):
        todo, seen = [["--help"]], set()
        while todo:
            run = subprocess.run([program] + todo.pop(), cwd=root, capture_output=True,
                                 text=True, timeout=60, stdin=subprocess.DEVNULL)
            said = run.stdout + run.stderr
            options |= set(OPTION.findall(said))
            for mode in re.findall(r"(--[a-z][a-z-]*) --help", said):
                if mode not in seen:
                    seen.add(mode)
                    todo.append([mode, "--help"])
    for pattern in ("reference/*.py", "tools/*.py", "tools/*.sh"):
        for path in glob.glob(os.path.join(root, pattern)):
            with open(path, encoding="utf-8") as f:
                options |= set(re.findall(r"[\"'](--[a-z][a-z0-9-]*)[\"'=]", f.read()))
    return options


def check_options(path, lines, problems, options):
    """Every --option a text names must be one some program accepts."""
    checked = 0
    for i, line in enumerate(lines, 1):
        for o in OPTION.findall(line):
            checked += 1
            if o not in options:
                problems.append(f"{path}:{i}: {o} is an option of no program here (--help)")
    return checked


def make_names(root=ROOT):
    """The Makefile's targets, and the variables it or the scripts it runs read."""
    text = ""
    for path in [os.path.join(root, "Makefile")] + glob.glob(os.path.join(root, "*", "*.mk")):
        with open(path, encoding="utf-8") as f:
            text += f.read() + "\n"
    targets = set(re.findall(r"^([a-z][\w-]*)\s*:(?!=)", text, flags=re.M))
    for phony in re.findall(r"^\.PHONY:((?:.*\\\n)*.*)", text, flags=re.M):
        targets |= set(re.findall(r"[a-z][\w-]*", phony))
    variables = set(re.findall(r"\$\(([A-Z][A-Z0-9_]*)\)", text))
    for path in glob.glob(os.path.join(root, "tools", "*.sh")):
        with open(path, encoding="utf-8") as f:
            variables |= set(re.findall(r"\$\{?([A-Z][A-Z0-9_]*)", f.read()))
    return targets, variables


def check_make(path, lines, problems, targets, variables):
    """`make TARGET VAR=value`: the target must be the Makefile's, and each
    variable one it reads (a misspelt one would be ignored without a word),
    in code: a shell block (```sh) or a `code span`."""
    checked, in_code = 0, False
    for i, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code and line.strip() in ("```sh", "```bash", "```console")
            continue
        spans = [re.sub(r"(^|\s)#.*", "", line)] if in_code else re.findall(r"`([^`]*)`", line)
        runs = [m.group(1) for span in spans
                for m in re.finditer(r"(?:^\s*(?:\$ )?|[;&|(]\s*)make((?: +[A-Za-z][\w-]*(?:=(?:\"[^\"]*\"|\S*))?)+)",
                                     span)]
        for run in runs:
            for w in re.findall(r"[A-Za-z][\w-]*(?:=(?:\"[^\"]*\"|\S*))?", run):
                if "=" in w:
                    name = w.split("=", 1)[0]
                    checked += 1
                    if name not in variables:
                        problems.append(f"{path}:{i}: make {name}= is a variable the Makefile "
                                        f"does not read")
                elif w.islower() or "-" in w:
                    checked += 1
                    if w not in targets:
                        problems.append(f"{path}:{i}: make {w}: no such target")
                else:
                    break
    return checked


# How a text states a training setting in prose, after the command block
# that runs it: the value must be that command's (its option, or the
# option's default in the program's --help).
RECIPE_PHRASES = {
    "--lr": [r"Adam(?:W)? at (?P<v>[\d.e-]+)", r"learning rate (?:of )?(?P<v>[\d.e-]+)"],
    "--weight-decay": [r"weight decay (?:of )?(?P<v>[\d.e-]+)"],
    "--warmup": [r"(?P<v>\d+) warm-up steps"],
    "--clip": [r"clipped at (?P<v>[\d.e-]+)"],
    "--label-smoothing": [r"label smoothing (?:of )?(?P<v>[\d.e-]+)"],
    "--batch-size": [r"batch(?:es)? of (?P<v>\d+)\b(?! ?[%x])"],
}


def program_defaults(root, program, mode):
    """{option: default} of `program mode --help`."""
    run = subprocess.run([os.path.join(root, program), mode, "--help"], cwd=root,
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    return dict(re.findall(r"^\s+(--[a-z-]+) .*\(default ([^)\s]+)\)\s*$", run.stdout, flags=re.M))


def check_recipes(path, lines, problems, defaults_of):
    """The paragraph right after a block that runs `build/NN_name --train
    ...` states its settings (RECIPE_PHRASES) as the command sets them."""
    checked, i = 0, 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        command = " ".join(l.rstrip("\\") for l in lines[i + 1:j])
        m = re.search(r"(build/\d\d_\w+) (--train)\b(.*)", command)
        i = j + 1
        if not m:
            continue
        given = dict(re.findall(r"(--[a-z-]+) ([^-\s]\S*)", m.group(3)))
        defaults = defaults_of(m.group(1), m.group(2))
        k = i
        while k < len(lines) and not lines[k].strip():
            k += 1
        while k < len(lines) and lines[k].strip() and not lines[k].startswith(("```", "#")):
            for option, phrases in RECIPE_PHRASES.items():
                want = given.get(option, defaults.get(option))
                for phrase in phrases:
                    for said in re.finditer(phrase, lines[k]):
                        checked += 1
                        try:
                            same = want is not None and float(said.group("v")) == float(want)
                        except ValueError:
                            same = False
                        if not same:
                            problems.append(f"{path}:{k + 1}: says {said.group(0)!r}, the "
                                            f"command above runs {option} {want}")
            k += 1
    return checked


# ---- measured blocks: a quoted output against its committed record ----

MEASURED_MARK = re.compile(r"<!--\s*measured:\s*(\S+)\s*-->")
RECORD_HEADER = ("command", "date", "machine")


def collapsed(line):
    return " ".join(line.split())


def read_record(root, name):
    """The set of output lines of the record name (collapsed), or an error string."""
    if not re.fullmatch(r"docs/measured/[\w.-]+\.txt", name):
        return None, f"{name}: a record is docs/measured/NAME.txt"
    full = os.path.join(root, name)
    if not os.path.isfile(full):
        return None, f"{name} is not a file of the tree (the command's output, committed)"
    with open(full, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for i, key in enumerate(RECORD_HEADER):
        if i >= len(lines) or not re.match(rf"# {key}: \S", lines[i]):
            return None, (f"{name}: line {i + 1} is not '# {key}: ...' (a record starts with "
                          "# command:, # date:, # machine:, then the output)")
    return {collapsed(line) for line in lines[len(RECORD_HEADER):] if line.strip()}, None


def check_measured(root, path, lines, problems, quoted):
    """Each marked block of the text against its record; the records named go into quoted."""
    checked = 0
    in_code = False
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        mark = None if in_code else MEASURED_MARK.fullmatch(line.strip())
        if not mark:
            continue
        name = mark.group(1)
        quoted.add(name)
        where = f"{path}:{i + 1}"
        if i + 1 >= len(lines) or not lines[i + 1].lstrip().startswith("```"):
            problems.append(f"{where}: the mark of {name} is not on the line before a fence")
            continue
        record, error = read_record(root, name)
        if error:
            problems.append(f"{where}: {error}")
            continue
        checked += 1
        j = i + 2
        while j < len(lines) and not lines[j].lstrip().startswith("```"):
            said = lines[j].strip()
            if said and said not in ("...", "\u2026") and collapsed(said) not in record:
                problems.append(f"{path}:{j + 1}: the block says '{said}', which is no line "
                                f"of {name}")
            j += 1
    return checked


def check_records(root, quoted, problems):
    folder = os.path.join(root, "docs", "measured")
    names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    for name in names:
        full = "docs/measured/" + name
        record, error = read_record(root, full)
        if error and full not in quoted:         # a quoted one's error is reported at its mark
            problems.append(error)
        elif not error and full not in quoted:
            problems.append(f"{full} is quoted by no text (<!-- measured: {full} --> before "
                            "the fence of the block that quotes it)")
    return len(names)


# ---- the shipped models' figures, against their evaluation (--evals) ----

VALUE = r"(?P<value>\d\.\d{3,4})(?!\d)"                   # a figure as texts write it
COUNT = r"(?P<count>\d{1,3}(?:,\d{3})+|\d+)(?!\d|[.,]\d)"  # 4,296 or 4296
IN_SENTENCE = r"(?:(?!\.\s)[^()|\n]){0,80}?"               # no sentence end, cell or parenthesis
ACCURACY_LINE = r"accuracy (?P<value>\d\.\d+) \((?P<count>\d+) of (?P<size>\d+)\)"


@dataclass
class Figure:
    what: str            # what the report calls it
    output: str          # a regex over the command's output: value, and for a fraction of a
    #                      test set its count and size
    size: int = 0        # the test set's size D (0: a figure without a count)
    forms: tuple = ()    # regexes over the texts: other phrasings of it (value and/or count)


@dataclass
class Eval:
    name: str
    model: str           # its chapter's text, and the sections naming it, hold its figures
    chapter: str
    command: str
    figures: tuple
    needs: str = ""      # a file the command reads that a fresh clone lacks


EVALS = (
    Eval("taylor", "models/taylor.safetensors", "09_translation",
         "build/09_translation --eval models/taylor.safetensors",
         (Figure("greedy exact match on the 750 test pairs",
                 r"^test: exact match (?P<value>\d\.\d+) \((?P<count>\d+) of (?P<size>\d+)\), "
                 r"greedy", 750),)),
    Eval("imdb", "models/imdb.safetensors", "10_classification",
         "build/10_classification --eval models/imdb.safetensors",
         (Figure("accuracy on the 5,000 IMDb test reviews", r"^IMDb test: " + ACCURACY_LINE, 5000,
                 (r"in PyTorch \| the same " + COUNT + r" \|",
                  VALUE + r"\** \(IMDb test\)",
                  r"against " + VALUE + r" on IMDb\b")),
          Figure("accuracy on the 8,530 Rotten Tomatoes sentences",
                 r"^Rotten Tomatoes: " + ACCURACY_LINE, 8530,
                 (VALUE + r"\** (?:on the (?:8,530 )?|\()Rotten Tomatoes\b",))),
         needs=".data/imdb/imdb.tsv"),
    Eval("set_anomaly", "models/set_anomaly.safetensors", "11_set_anomaly",
         "build/11_set_anomaly --eval models/set_anomaly.safetensors",
         (Figure("accuracy on the 1,000 test sets", r"^test sets: " + ACCURACY_LINE, 1000,
                 (r"in PyTorch \| the same " + COUNT + r" \|",)),)),
    Eval("set_anomaly_10000", "models/set_anomaly.safetensors", "11_set_anomaly",
         "build/11_set_anomaly --eval models/set_anomaly.safetensors --test-sets 10000",
         (Figure("accuracy on 10,000 test sets", r"^test sets: " + ACCURACY_LINE, 10000,
                 (COUNT + r" of 10,000\b",)),)),
    Eval("imdb_lm", "models/imdb_lm.safetensors", "12_generation",
         "build/12_generation --eval models/imdb_lm.safetensors --test-reviews 300",
         (Figure("bits per byte on the first 300 test reviews",
                 r"^test reviews: 300 reviews, \d+ bytes, (?P<value>\d\.\d+) bits per byte",
                 0, (r"first 300 test reviews" + r"(?:(?!\.\s)[^|\n]){0,100}?" + VALUE +
                     r" bits per byte",)),),
         needs=".data/imdb/imdb.tsv"),
)


def run_evals(evals, problems):
    """[(eval, its output)]: each command run from the tree's root; those that could not
    run are in problems, those whose data is missing are skipped with a note."""
    results = []
    for e in evals:
        program = e.command.split()[0]
        if e.needs and not os.path.exists(os.path.join(ROOT, e.needs)):
            print(f"docs-check --evals: skipped {e.name}: {e.needs} is missing (make imdb), so "
                  f"its figures are not checked")
            continue
        if not os.access(os.path.join(ROOT, program), os.X_OK):
            problems.append(f"{program} is not built (run make all first)")
            continue
        started = time.time()
        run = subprocess.run(e.command.split(), cwd=ROOT, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=3600)
        seconds = time.time() - started
        if run.returncode != 0:
            problems.append(f"`{e.command}` exited with status {run.returncode}: "
                            f"{run.stderr.strip()[-300:]}")
            continue
        print(f"docs-check --evals: {e.command} ({seconds:.1f} s)")
        results.append((e, run.stdout))
    return results


def measured_figures(e, output, problems):
    """[(figure, value as a Fraction, its printed digits, count)] parsed from the output."""
    found = []
    for f in e.figures:
        m = re.search(f.output, output, re.M)
        if not m:
            problems.append(f"`{e.command}`: no line of its output is {f.what} "
                            f"(/{f.output}/)")
            continue
        if f.size and int(m.group("size")) != f.size:
            problems.append(f"`{e.command}`: {f.what}, but it measured {m.group('size')} "
                            f"examples, not {f.size}")
            continue
        count = int(m.group("count")) if f.size else None
        exact = Fraction(count, f.size) if f.size else Fraction(m.group("value"))
        found.append((f, exact, m.group("value"), count))
    return found


def agrees(written, exact):
    """The figure written with k decimals is exact rounded to k (either way on a tie)."""
    k = len(written.split(".")[1])
    return abs(Fraction(written) - exact) <= Fraction(1, 2 * 10 ** k)


def flatten(lines):
    """The text as one string in which a paragraph's lines are joined by spaces (offsets
    unchanged), a block marked "other models" is blanked, and the start of each line."""
    other = re.compile(r"<!--\s*docs-check:\s*other models\s*-->")
    shown = list(lines)
    in_code = False
    prose = []
    blank_from = None
    for i, line in enumerate(lines):
        fence = line.lstrip().startswith("```")
        if fence:
            in_code = not in_code
        if blank_from is not None:
            if line.strip():
                shown[i] = " " * len(line)
            else:
                blank_from = None
        if not in_code and not fence and other.fullmatch(line.strip()):
            blank_from = i
        prose.append(bool(line.strip()) and not in_code and not fence
                     and not line.lstrip().startswith(("|", "#", "<!--")))
    flat, starts = [], []
    offset = 0
    for i, line in enumerate(shown):
        starts.append(offset)
        joined = i + 1 < len(lines) and prose[i] and prose[i + 1]
        flat.append(line + (" " if joined else "\n"))
        offset += len(line) + 1
    return "".join(flat), starts


def scope(path, lines, e):
    """The lines of the text where e's figures are looked for."""
    if path == f"chapters/{e.chapter}/README.md":
        return set(range(len(lines)))
    sections, start, in_code = [], 0, False
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        elif not in_code and re.match(r"#{1,6} ", line) and i > start:
            sections.append((start, i))
            start = i
    sections.append((start, len(lines)))
    return {i for a, b in sections if any(e.model in lines[j] for j in range(a, b))
            for i in range(a, b)}


def pairs(flat):
    """(offset, the fraction as written, the counts it may go with) for each fraction of
    flat written with a count: "0.9867 (740", or "740 of 750 (0.9867" (any integer of the
    sentence before the parenthesis may be its count)."""
    for m in re.finditer(r"(?<![\d.])" + VALUE + r"\**" + IN_SENTENCE + r"\(\**" + COUNT, flat):
        yield m.start(), m.group("value"), [int(m.group("count").replace(",", ""))]
    for m in re.finditer(r"\(\**" + VALUE, flat):
        window = flat[max(0, m.start() - 80):m.start()]
        cut = max(window.rfind(c) for c in "()|\n")
        window = window[max(cut + 1, window.rfind(". ") + 1):]
        counts = [int(c.group("count").replace(",", ""))
                  for c in re.finditer(r"(?<![\d.,])" + COUNT, window)]
        if counts:
            yield m.start(), m.group("value"), counts


def check_eval_figures(docs, results, problems, places=None):
    """Every place of the texts that states a figure of results against it."""
    measured = {}                                   # model: [(eval, figure, exact, value, count)]
    for e, output in results:
        for f, exact, value, count in measured_figures(e, output, problems):
            measured.setdefault(e.model, []).append((e, f, exact, value, count))
            print(f"docs-check --evals: {e.model}: {f.what}: {value}"
                  + (f" ({count} of {f.size})" if f.size else ""))
    places = {} if places is None else places
    stale = []
    for path, lines in docs.items():
        flat, starts = flatten(lines)

        def line_of(offset):
            return bisect.bisect_right(starts, offset) - 1

        for model, figures in measured.items():
            lines_in = scope(path, lines, figures[0][0])
            if not lines_in:
                continue
            counted = [x for x in figures if x[1].size]
            for offset, value, counts in pairs(flat):
                i = line_of(offset)
                if i not in lines_in:
                    continue
                right, wrong = False, []
                for e, f, exact, printed, count in counted:
                    n = next((n for n in counts if agrees(value, Fraction(n, f.size))),
                             next((n for n in counts if n == count), counts[0]))
                    if agrees(value, Fraction(n, f.size)) or n == count or agrees(value, exact):
                        if agrees(value, exact) and n == count:
                            right = True
                            places.setdefault(f.what, []).append(f"{path}:{i + 1}")
                        else:
                            wrong.append((e, f, printed, count, n))
                if not right:
                    for e, f, printed, count, n in wrong:
                        stale.append(f"{path}:{i + 1}: says {value} ({n:,}) for {f.what} of "
                                     f"{model}, `{e.command}` gives {printed} ({count:,})")
            for e, f, exact, printed, count in figures:
                for form in f.forms:
                    for m in re.finditer(form, flat):
                        i = line_of(m.start())
                        if i not in lines_in:
                            continue
                        said = m.groupdict()
                        ok = True
                        if said.get("value") and not agrees(said["value"], exact):
                            ok = False
                        if said.get("count") and int(said["count"].replace(",", "")) != count:
                            ok = False
                        if ok:
                            places.setdefault(f.what, []).append(f"{path}:{i + 1}")
                        else:
                            stale.append(f"{path}:{i + 1}: says '{m.group(0)}' for {f.what} of "
                                         f"{model}, `{e.command}` gives {printed}"
                                         + (f" ({count:,})" if f.size else ""))
    # In the texts' order, once each (a table row may state the same figure twice).
    order = list(docs)
    stale = sorted(set(stale), key=lambda p: (order.index(p.split(":")[0]), int(p.split(":")[1])))
    problems.extend(stale)
    for figures in measured.values():
        for e, f, exact, printed, count in figures:
            if f.what not in places:
                problems.append(f"{e.model}: no text states its {f.what} ({printed}) where "
                                "docs-check finds it (a figure with its count, or a form of EVALS)")
    return places


# ---- --self-test: the checks above must catch what they are for ----

SELF_TEST_OUTPUTS = ("test: exact match 0.9867 (740 of 750), greedy, 3.4 s\n",
                     "test sets: accuracy 0.9950 (995 of 1000), 0.1 s\n")
SELF_TEST_TEXTS = {
    "chapters/09_translation/README.md": """# Chapter 09

| | greedy |
| --- | --- |
| test, 750 pairs | 0.9867 (740) |

It reaches 0.987 greedy exact match on the 750 test pairs (740 right: the
shipped model). A new sentence says it reaches 0.9853 (739 of 750).
Half-updated, it says 0.9867 (739).

<!-- docs-check: other models -->
A 20-epoch run reaches 0.0933 (70 of 750), PyTorch's 0.0973 (73 of 750).

Seed 002 reports 0.979 +/- 0.005, and an earlier leg the same 732 of 750.
""",
    "chapters/11_set_anomaly/README.md": """# Chapter 11

| test sets | the odd one found |
| --- | --- |
| 1,000 (`--eval`, C) | **0.995 (995)** |
| 10,000 (`--test-sets 10000`) | 0.9935 (9,935) |
| 1,000, the same model file in PyTorch | the same 994 |
""",
    "README.md": """# Top

## The Taylor task

`models/taylor.safetensors` finds 739 of the 750 test
pairs (0.985).

## Another section

A model of its own reaches 0.9853 (739 of 750) here.
""",
    "chapters/00_foundations/README.md": """# Chapter 00

<!-- measured: docs/measured/demo.txt -->
```
  rows   ms
   256   1.5
...
   512   6.0
```

<!-- measured: docs/measured/headless.txt -->
```
x 1
```
""",
}
SELF_TEST_RECORDS = {
    "demo.txt": "# command: build/demo --bench\n# date: 2026-01-01\n# machine: a test\n"
                "rows ms\n256 1.5\n1024 24.0\n",
    "headless.txt": "x 1\n",
}
SELF_TEST_EXPECTED = (
    "chapters/09_translation/README.md:8: says 0.9853 (739)",
    "chapters/09_translation/README.md:9: says 0.9867 (739)",
    "chapters/11_set_anomaly/README.md:7: says 'in PyTorch | the same 994 |'",
    "README.md:6: says 0.985 (739)",
    "chapters/00_foundations/README.md:8: the block says '512   6.0'",
    "chapters/00_foundations/README.md:11: docs/measured/headless.txt: line 1 is not",
)


# The four misses of issue 42's test of the check: a learning rate in a
# recipe, a renamed field in a quoted struct, a renamed option, a misspelt
# make variable; and their right forms, which must pass.
SELF_TEST_SOURCE = """
typedef struct {
    float lr;            /* the base rate */
    float beta1, beta2;
} AdamConfig;
static int front(const float *x,
                 int n)
{
    return 0;
}
"""
SELF_TEST_HELP = {("build/12_generation", "--train"): {"--lr": "0.002", "--weight-decay": "0.01",
                                                       "--warmup": "200"}}
SELF_TEST_CODE = {"chapters/12_generation/README.md": """# Chapter 12

```sh
build/12_generation --train --out build/lm.safetensors --warmup 100
```

AdamW at 1e-3 with weight decay 0.01, 100 warm-up steps.

```c
typedef struct {
    float lr;
    float beta1, beta3;
} AdamConfig;
int front(const float *x, int n);
```

Sample with `--top-q 0.9` or `--top-p 0.9`; `make verify CASE=100` or `make verify CASES=100`.
"""}
# A lesson one word over its limit, and one whose words past the limit are
# all in its appendix (not reported).
SELF_TEST_LENGTHS = {
    "chapters/05_encoder/README.md": "# Chapter 05\n\n" + "word " * 2998 + "\n\n## Appendix: reference\n",
    "chapters/06_decoder/README.md": "# Chapter 06\n\n" + "word " * 2996 + "\n\n## Appendix: reference\n\n"
                                     + "word " * 5000 + "\n",
}
SELF_TEST_LENGTHS_EXPECTED = ("chapters/05_encoder/README.md: 3,001 words, the limit is 3,000",)

SELF_TEST_CODE_EXPECTED = (
    "chapters/12_generation/README.md:7: says 'AdamW at 1e-3'",
    "chapters/12_generation/README.md:9: the quoted C 'float beta3 ;'",
    "chapters/12_generation/README.md:17: --top-q is an option of no program",
    "chapters/12_generation/README.md:17: make CASE= is a variable",
)


def self_test():
    """Made-up texts with stale figures and quotes: each must be reported, nothing else."""
    docs = {path: text.split("\n") for path, text in SELF_TEST_TEXTS.items()}
    problems = []
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "chapters", "00_x"))
        with open(os.path.join(root, "chapters", "00_x", "optim.h"), "w") as f:
            f.write(SELF_TEST_SOURCE)
        known = source_statements(root)
    for path, text in SELF_TEST_CODE.items():
        lines = text.split("\n")
        check_quoted_code(path, lines, problems, known)
        check_options(path, lines, problems, {"--top-p", "--train", "--out", "--warmup"})
        check_make(path, lines, problems, {"verify"}, {"CASES"})
        check_recipes(path, lines, problems, lambda program, mode: SELF_TEST_HELP[program, mode])
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "docs", "measured"))
        for name, text in SELF_TEST_RECORDS.items():
            with open(os.path.join(root, "docs", "measured", name), "w", encoding="utf-8") as f:
                f.write(text)
        quoted = set()
        for path, lines in docs.items():
            check_measured(root, path, lines, problems, quoted)
        check_records(root, quoted, problems)
    evals = [e for name in ("taylor", "set_anomaly") for e in EVALS if e.name == name]
    check_eval_figures(docs, list(zip(evals, SELF_TEST_OUTPUTS)), problems)
    for path, text in SELF_TEST_LENGTHS.items():
        check_length(path, text.split("\n"), problems)
    expected = SELF_TEST_EXPECTED + SELF_TEST_CODE_EXPECTED + SELF_TEST_LENGTHS_EXPECTED
    missed = [want for want in expected if not any(p.startswith(want) for p in problems)]
    extra = [p for p in problems if not any(p.startswith(want) for want in expected)]
    for want in missed:
        print(f"docs-check --self-test: not reported: {want} ...")
    for p in extra:
        print(f"docs-check --self-test: reported, but right: {p}")
    print(f"docs-check --self-test: {len(expected) - len(missed)} of "
          f"{len(expected)} stale figures, quotes, code, options, settings and lengths reported, "
          f"{len(extra)} false alarms")
    return 1 if missed or extra else 0


def main():
    parser = argparse.ArgumentParser(description="The numbers the texts take from a command, "
                                     "checked against it (the docstring says what is checked).")
    parser.add_argument("--evals", action="store_true",
                        help="also run each shipped model's evaluation and check the figures "
                             "the texts quote (minutes)")
    parser.add_argument("--self-test", action="store_true",
                        help="check the checker on made-up texts (needs nothing built)")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    problems = []
    numbers = links = blocks = code = lengths = 0
    shown, quoted = set(), set()
    docs = read_texts()
    known, options = source_statements(), program_options()
    targets, variables = make_names()
    defaults = {}

    def defaults_of(program, mode):
        if (program, mode) not in defaults:
            defaults[program, mode] = program_defaults(ROOT, program, mode)
        return defaults[program, mode]

    for path, lines in docs.items():
        numbers += check_numbers(path, lines, problems)
        links += check_links(path, lines, problems, shown)
        blocks += check_measured(ROOT, path, lines, problems, quoted)
        code += (check_quoted_code(path, lines, problems, known) +
                 check_options(path, lines, problems, options) +
                 check_make(path, lines, problems, targets, variables) +
                 check_recipes(path, lines, problems, defaults_of))
        lengths += check_length(path, lines, problems)
    check_grade_table(docs, problems)
    figures = check_figures(shown, problems)
    records = check_records(ROOT, quoted, problems)
    summary = (f"{numbers} numbers, {links} links, {figures} figures, {blocks} measured "
               f"blocks ({records} records), {code} statements, options and settings and "
               f"{lengths} lengths")
    if args.evals:
        results = run_evals(EVALS, problems)
        places = check_eval_figures(docs, results, problems)
        found = 0
        for what, where in places.items():
            where = sorted(set(where), key=lambda w: (w.split(":")[0], int(w.split(":")[1])))
            found += len(where)
            print(f"docs-check --evals: {what}: stated on {', '.join(where)}")
        summary += (f", {sum(len(e.figures) for e, _ in results)} figures of {len(results)} "
                    f"evaluations (stated on {found} lines)")
    for p in problems:
        print(p)
    print(f"docs-check: {summary} checked in {len(docs)} texts, {len(problems)} stale or broken")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
