#!/usr/bin/env bash
# Installs what the project needs on Debian or Ubuntu (apt-get) or macOS
# (Homebrew), or prints the command.
#
#   tools/install-deps.sh build    C compiler, make, cmocka, cJSON, gnuplot
#   tools/install-deps.sh python   python3 with venv and pip (for the reference)
#   tools/install-deps.sh fuzz     clang with libFuzzer and LLVM's OpenMP (make fuzz)
#   tools/install-deps.sh mpi      OpenMPI: mpicc and mpirun (make mpi)
#   tools/install-deps.sh arm64    a cross compiler for 64-bit ARM, qemu-user, and the
#                                  arm64 builds of cmocka, cJSON and libgomp (make test-arm64)
#
# Only missing packages are installed. Without root (and without sudo that
# works without a password) it prints the apt-get command and exits 1.
# (A devcontainer's image is built by this same script: .devcontainer/.)
set -eu

# macOS: Homebrew's packages, installed as the user (Homebrew needs no root).
# Apple's clang comes with the Command Line Tools; libomp gives it OpenMP,
# coreutils the `timeout` the test runner uses (as gtimeout), and bash a
# newer shell than macOS's 3.2 for the scripts.
if [ "$(uname -s)" = Darwin ]; then
    case "${1:-}" in
        build)  wanted="cmocka cjson gnuplot libomp pkg-config coreutils bash" ;;
        python) wanted="python@3.12" ;;
        mpi)    wanted="open-mpi" ;;
        fuzz|arm64) echo "install-deps.sh $1: not on macOS (make fuzz and make test-arm64 run on" \
                         "Linux; a Mac with Apple silicon runs make test natively on ARM)" >&2; exit 1 ;;
        *) echo "usage: $0 build|python|mpi" >&2; exit 2 ;;
    esac
    if ! command -v cc >/dev/null; then
        echo "no C compiler: install Apple's Command Line Tools with  xcode-select --install" >&2
        exit 1
    fi
    if [ "$1" = python ] && command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null; then
        exit 0
    fi
    if ! command -v brew >/dev/null; then
        echo "Homebrew is not installed: install it (https://brew.sh), then run  brew install $wanted" >&2
        exit 1
    fi
    missing=""
    for p in $wanted; do
        brew list --versions "$p" >/dev/null 2>&1 || missing="$missing $p"
    done
    [ -z "$missing" ] && exit 0
    echo "installing with Homebrew:$missing"
    brew install $missing
    exit 0
fi

case "${1:-}" in
    build)  wanted="gcc make pkg-config libcmocka-dev libcjson-dev gnuplot-nox" ;;
    python) wanted="python3 python3-venv python3-pip" ;;
    # libFuzzer's runtime is libclang-rt-dev, only a recommendation of clang.
    fuzz)   wanted="clang libclang-rt-dev libomp-dev" ;;
    mpi)    wanted="openmpi-bin libopenmpi-dev" ;;
    # Debian's multiarch: arm64 packages beside the machine's own (dpkg
    # --add-architecture arm64, below), run by qemu-aarch64 from /usr/lib/aarch64-linux-gnu.
    arm64)  wanted="gcc-aarch64-linux-gnu qemu-user libc6:arm64 libgomp1:arm64 libcmocka-dev:arm64 libcjson-dev:arm64" ;;
    *) echo "usage: $0 build|python|fuzz|mpi|arm64" >&2; exit 2 ;;
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
[ "$1" = arm64 ] && cmd="dpkg --add-architecture arm64 && $cmd"
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
if [ "$1" = arm64 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $sudo dpkg --add-architecture arm64
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
