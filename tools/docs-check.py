#!/usr/bin/env python3
"""make docs-check: the numbers the texts take from a command, checked
against that command, and every link of the texts checked to lead somewhere.

The texts are README.md, TOLERANCES.md, cuda/README.md and every
chapters/NN_name/README.md. What is checked:

  test counts   "N tests" on a line that names build/test_NN_name (a chapter's
                "How to test" block) must be the number of tests that program
                declares: the lines of `TEST_LIST=1 build/test_NN_name`, the
                same list make grade counts (nothing is run)
  grade table   a row "NN_name   P / T   points" of the top README's sample
                table (the solution tree's: every test passes) must have P and
                T equal to that same count
  goldens       "N goldens" or "N golden cases" in chapter NN's text must be
                the number of case files in golden/NN_name/
  links         every relative link and image of the texts, [text](path) or
                ![text](path), must name a file or folder of the tree (what
                follows a # is not checked); an image must also be a file
  figures       docs/figures/ holds what make figures writes there: one PNG per
                plots/*.gp script, named after it, and nothing else; and each
                of them is shown by some text. (Their bytes are not compared:
                they differ between gnuplot builds and fonts.)

It needs the test programs built (make all). Each stale number is printed
as FILE:LINE: what the text says, what the command says; the exit status is
1 if there is any, 0 otherwise.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def texts():
    found = ["README.md", "TOLERANCES.md", os.path.join("cuda", "README.md")]
    chapters = os.path.join(ROOT, "chapters")
    for name in sorted(os.listdir(chapters)):
        if re.fullmatch(r"\d\d_\w+", name) and os.path.isfile(os.path.join(chapters, name, "README.md")):
            found.append(os.path.join("chapters", name, "README.md"))
    return [t for t in found if os.path.isfile(os.path.join(ROOT, t))]


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
        if path == "README.md" and row:
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


def main():
    problems = []
    numbers = links = 0
    shown = set()
    for path in texts():
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            lines = f.read().split("\n")
        numbers += check_numbers(path, lines, problems)
        links += check_links(path, lines, problems, shown)
    figures = check_figures(shown, problems)
    for p in problems:
        print(p)
    print(f"docs-check: {numbers} numbers, {links} links and {figures} figures checked in "
          f"{len(texts())} texts, {len(problems)} stale or broken")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
