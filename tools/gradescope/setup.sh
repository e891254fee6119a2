#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image
# (an Ubuntu image; the autograder zip is unpacked in /autograder/source).
# What tools/grader.py grade needs: a C compiler, make, cmocka and cJSON to
# build the chapter programs, util-linux for the sandbox, and python3 with
# numpy and safetensors (the versions the reference pins) to judge outputs.
# PyTorch is not needed here: the hidden cases were drawn on the teacher's
# machine and travel in the zip.
set -euo pipefail
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc make pkg-config libcmocka-dev \
    libcjson-dev python3 python3-venv util-linux >/dev/null
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install -q --disable-pip-version-check \
    $(grep -E '^(numpy|safetensors)==' /autograder/source/transformer/reference/requirements.txt)
