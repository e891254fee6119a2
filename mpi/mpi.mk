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

MPICC ?= mpicc

MPI_PROGRAMS := build/mpi/08_training build/mpi/09_translation build/mpi/10_classification \
                build/mpi/11_set_anomaly build/mpi/12_generation

.PHONY: mpi test-mpi mpi-deps

mpi-deps: deps
	@tools/install-deps.sh mpi

# The task programs: each main.c as it is, runtime/device.c compiled again
# with WITH_MPI (which opens the ranks through dist.h), and mpi/dist.c. The
# linker takes device.o from here, so the library's MPI-free copy is never
# pulled in.
build/mpi/device.o: runtime/device.c mpi/dist.h build/flags | mpi-deps
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -DWITH_MPI -Impi -MMD -MP -c $< -o $@

build/mpi/dist.o: mpi/dist.c build/flags | mpi-deps
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -Impi -MMD -MP -c $< -o $@

$(MPI_PROGRAMS): build/mpi/%: build/obj/chapters/%/main.o build/mpi/device.o build/mpi/dist.o \
                              build/libtransformer.a
	$(MPICC) $(CFLAGS) $^ -o $@ $(LDLIBS)

mpi: all $(MPI_PROGRAMS)

# The checkpoints' comparison of tests/mpi/run.sh (plain C, no MPI).
build/mpi/compare: tests/mpi/compare.c build/libtransformer.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

test-mpi: mpi build/mpi/compare
	tests/mpi/run.sh

-include $(wildcard build/mpi/*.d)
