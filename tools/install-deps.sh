#!/usr/bin/env bash
# Installs what the project needs on Debian or Ubuntu, or prints the command.
#
#   tools/install-deps.sh build    C compiler, make, cmocka, cJSON, gnuplot
#   tools/install-deps.sh python   python3 with venv and pip (for the reference)
#   tools/install-deps.sh fuzz     clang with libFuzzer and LLVM's OpenMP (make fuzz)
#   tools/install-deps.sh mpi      OpenMPI: mpicc and mpirun (make mpi)
#
# Only missing packages are installed. Without root (and without sudo that
# works without a password) it prints the apt-get command and exits 1.
set -eu

case "${1:-}" in
    build)  wanted="gcc make pkg-config libcmocka-dev libcjson-dev gnuplot-nox" ;;
    python) wanted="python3 python3-venv python3-pip" ;;
    # libFuzzer's runtime is libclang-rt-dev, only a recommendation of clang.
    fuzz)   wanted="clang libclang-rt-dev libomp-dev" ;;
    mpi)    wanted="openmpi-bin libopenmpi-dev" ;;
    *) echo "usage: $0 build|python|fuzz|mpi" >&2; exit 2 ;;
esac

# A package counts as present when dpkg says so, or (for python) when a
# python3 that can make virtual environments is already on PATH.
missing=""
if [ "$1" = python ] && command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null; then
    wanted=""
fi
# For fuzz, a clang that links a libFuzzer program with OpenMP is enough,
# whichever packages it came from.
if [ "$1" = fuzz ] && command -v clang >/dev/null &&
   echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' |
   clang -fsanitize=fuzzer -fopenmp -x c - -o /dev/null 2>/dev/null; then
    wanted=""
fi
for p in $wanted; do
    if [ "$p" = gnuplot-nox ] && command -v gnuplot >/dev/null; then continue; fi
    if [ "$p" = gcc ] && command -v cc >/dev/null; then continue; fi
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

cmd="apt-get update && apt-get install -y$missing"
if [ "$(id -u)" -eq 0 ]; then
    sudo=""
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    sudo="sudo"
else
    echo "missing packages:$missing" >&2
    echo "install them with:  sudo sh -c '$cmd'" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null; then
    echo "missing packages:$missing, and this is not a Debian or Ubuntu system (no apt-get);" >&2
    echo "install the equivalents with your package manager" >&2
    exit 1
fi
echo "installing:$missing"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
