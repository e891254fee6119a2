# mpi/mpi.mk - the MPI build, included by the top Makefile.
#
#   make mpi         build/mpi/08_training .. 12_generation: the task programs
#                    with --device mpi, chosen by itself under mpirun with more
#                    than one rank (mpi/dist.h). Needs OpenMPI's mpicc
#                    (tools/install-deps.sh mpi installs it); the plain build
#                    never does.
#   make test-mpi    tests/mpi/run.sh: two ranks (mpirun -np 2 --oversubscribe)
#                    against one process, run twice, and resumed; a refused
#                    launch.
#   make mpi-cuda    build/mpi-cuda/08_training .. 12_generation: the same with
#                    --device nccl, one GPU per rank (mpi/nccl.c). Needs mpicc,
#                    nvcc (cuda/cuda.mk) and NCCL: NCCL_HOME holds its include/
#                    and lib/ (by default the CUDA toolkit's, else the PyTorch
#                    wheel's copy in .venv, else /usr).
#   make test-mpi-cuda  tests/mpi/run-gpu.sh: --device nccl against --device
#                    cuda on this machine's GPUs; without a GPU it says so
#                    and exits 0.

MPICC ?= mpicc

MPI_PROGRAMS := build/mpi/08_training build/mpi/09_translation build/mpi/10_classification \
                build/mpi/11_set_anomaly build/mpi/12_generation

.PHONY: mpi test-mpi mpi-deps mpi-cuda test-mpi-cuda

mpi-deps: deps
	@tools/install-deps.sh mpi

# The task programs: each programs/NN_name.c as it is, runtime/device.c compiled again
# with WITH_MPI (which opens the ranks through dist.h), and mpi/dist.c. The
# linker takes device.o from here, so the library's MPI-free copy is never
# pulled in.
build/mpi/device.o: runtime/device.c mpi/dist.h build/flags | mpi-deps
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -DWITH_MPI -Impi -MMD -MP -c $< -o $@

build/mpi/dist.o: mpi/dist.c build/flags | mpi-deps
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -Impi -MMD -MP -c $< -o $@

$(MPI_PROGRAMS): build/mpi/%: build/obj/programs/%.o build/mpi/device.o build/mpi/dist.o \
                              build/libtransformer.a
	$(MPICC) $(CFLAGS) $^ -o $@ $(LDLIBS)

mpi: all $(MPI_PROGRAMS)

# The checkpoints' comparison of tests/mpi/run.sh (plain C, no MPI).
build/mpi/compare: tests/mpi/compare.c build/libtransformer.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

test-mpi: mpi build/mpi/compare
	tests/mpi/run.sh

# The MPI and CUDA build: device.c again with all three, mpi/nccl.c, and
# cuda/'s library; linked by the MPI compiler, with the CUDA runtime,
# cuBLAS and NCCL found again at run time where they were at link time.
CUDA_HOME ?= $(abspath $(dir $(shell command -v $(NVCC)))..)
NCCL_HOME ?= $(firstword $(patsubst %/include/nccl.h,%,$(wildcard $(CUDA_HOME)/include/nccl.h \
                 .venv/lib/python3*/site-packages/nvidia/nccl/include/nccl.h)) /usr)
NCCL_NEEDS := -I$(NCCL_HOME)/include -I$(CUDA_HOME)/include
MPI_CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++ \
                 -L$(NCCL_HOME)/lib -Wl,-rpath,$(abspath $(NCCL_HOME)/lib) -l:libnccl.so.2
MPI_CUDA_PROGRAMS := $(CUDA_PROGRAMS:build/cuda/%=build/mpi-cuda/%)

build/mpi-cuda/device.o: runtime/device.c mpi/dist.h cuda/gpu.h build/flags | mpi-deps
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -DWITH_CUDA -DWITH_MPI -DWITH_NCCL -Icuda -Impi -MMD -MP -c $< -o $@

build/mpi-cuda/nccl.o: mpi/nccl.c build/flags | mpi-deps
	@mkdir -p $(dir $@)
	@test -f $(NCCL_HOME)/include/nccl.h || { echo "make mpi-cuda: no nccl.h in \
	NCCL_HOME=$(NCCL_HOME)/include; name the folder that holds NCCL's include/ and lib/" >&2; exit 1; }
	$(MPICC) $(CFLAGS) -Icuda -Impi $(NCCL_NEEDS) -MMD -MP -c $< -o $@

$(MPI_CUDA_PROGRAMS): build/mpi-cuda/%: build/obj/programs/%.o build/mpi-cuda/device.o \
                                    build/mpi-cuda/nccl.o build/mpi/dist.o $(CUDA_LIB) \
                                    build/libtransformer.a
	$(MPICC) $(CFLAGS) $^ -o $@ $(MPI_CUDA_LIBS) $(LDLIBS)

mpi-cuda: cuda mpi $(MPI_CUDA_PROGRAMS)

test-mpi-cuda: mpi-cuda build/mpi/compare
	tests/mpi/run-gpu.sh

-include $(wildcard build/mpi/*.d build/mpi-cuda/*.d)
