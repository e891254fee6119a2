# cuda/cuda.mk - the CUDA side's build, included by the top Makefile.
#
#   make cuda        compile every cuda/*.cu with nvcc into build/cuda/, link
#                    build/cuda/run_cases (the GPU case runner, with cuBLAS and
#                    build/libtransformer.a for the safetensors reader), and
#                    build the CPU test of cuda/hostdev.h. Needs nvcc, not a GPU.
#   make test-cuda   run the CPU test of hostdev.h; then, if there is a GPU,
#                    every golden case on it (build/cuda/run_cases golden) and
#                    the reverse task trained on it by the chapter 08 program
#                    (labeller and seq2seq, each to 99.5 % held-out accuracy),
#                    and one epoch of the Taylor task by the chapter 09 program
#                    (validation loss below 1.4, as CI asks of the CPU), and
#                    CI's short IMDb training by the chapter 10 program (test
#                    loss below 0.68, as on the CPU; it needs make imdb).
#                    Without a GPU it says so and exits 0.
#
# NVCC_ARCH: native code for sm_90 (H100, H200) plus compute_90 PTX, which
# the driver compiles for any newer GPU. Add e.g.
#     make cuda NVCC_ARCH="-gencode arch=compute_80,code=sm_80"
# for an A100.

NVCC       ?= nvcc
NVCC_ARCH  ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
# Warnings are errors, from nvcc and from the host compiler it drives.
NVCC_FLAGS := -std=c++17 -O2 -g $(NVCC_ARCH) --Werror all-warnings \
              -Xcompiler -Wall,-Wextra,-Wno-unused-parameter,-Werror \
              $(addprefix -I,$(wildcard chapters/*)) -Iruntime -Icases -Iprograms -Icuda
CUDA_LIBS  := -lcublas -lcjson -lm -lgomp

CUDA_KERNEL_SRC := $(filter-out cuda/run_cases.cu,$(wildcard cuda/*.cu))
CUDA_KERNEL_OBJ := $(CUDA_KERNEL_SRC:cuda/%.cu=build/cuda/%.o)
CUDA_LIB        := build/cuda/libtransformer_cuda.a

.PHONY: cuda test-cuda check-nvcc

NO_NVCC_MSG := make cuda: $(NVCC) not found; install the CUDA toolkit (nvcc, cuBLAS) \
               or run make cuda NVCC=/path/to/nvcc

check-nvcc:
	@command -v $(NVCC) >/dev/null || { echo "$(NO_NVCC_MSG)" >&2; exit 1; }

build/cuda/%.o: cuda/%.cu | check-nvcc
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -MMD -MP -c $< -o $@

$(CUDA_LIB): $(CUDA_KERNEL_OBJ)
	@rm -f $@
	ar rcs $@ $^

build/cuda/run_cases: build/cuda/run_cases.o $(CUDA_LIB) build/libtransformer.a
	$(NVCC) $(NVCC_ARCH) $^ -o $@ $(CUDA_LIBS)

# The task programs with --device cuda: each programs/NN_name.c as it is, and
# runtime/device.c compiled again with WITH_CUDA (which opens the GPU
# through gpu.h). The linker takes device.o from here, so the library's
# CPU-only copy is never pulled in.
build/cuda/device.o: runtime/device.c cuda/gpu.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DWITH_CUDA -Icuda -MMD -MP -c $< -o $@

CUDA_PROGRAMS := build/cuda/08_training build/cuda/09_translation build/cuda/10_classification \
                 build/cuda/12_generation

$(CUDA_PROGRAMS): build/cuda/%: build/obj/programs/%.o build/cuda/device.o \
                                $(CUDA_LIB) build/libtransformer.a
	$(NVCC) $(NVCC_ARCH) $^ -o $@ $(CUDA_LIBS)

# The CPU test of hostdev.h: plain C, gcc, cmocka; no CUDA at all. It also
# links the chapters' library to compare the helpers with the C functions.
build/cuda/test_hostdev: cuda/test_hostdev.c cuda/hostdev.h build/libtransformer.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Icuda cuda/test_hostdev.c build/libtransformer.a -o $@ $(LDLIBS) -lcmocka

cuda: deps build/cuda/run_cases build/cuda/test_hostdev $(CUDA_PROGRAMS)

NO_GPU_MSG := make test-cuda: no GPU on this machine; built everything, ran the CPU part only, ran no GPU test

test-cuda: cuda
	build/cuda/test_hostdev
	@if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then \
	    echo "$(NO_GPU_MSG) (nvidia-smi -L lists no GPU)"; \
	elif ! build/cuda/run_cases --probe; then \
	    echo "$(NO_GPU_MSG) (the CUDA runtime finds no usable device)"; \
	else \
	    build/cuda/run_cases golden && \
	    build/cuda/08_training --train --device cuda --min-accuracy 0.995 \
	        --checkpoint build/cuda/reverse.safetensors && \
	    build/cuda/08_training --train --device cuda --min-accuracy 0.995 --model seq2seq \
	        --heads 2 --epochs 3 --checkpoint build/cuda/reverse_seq2seq.safetensors && \
	    build/cuda/09_translation --train --device cuda --epochs 1 --warmup 100 \
	        --target-loss 1.4 && \
	    build/cuda/10_classification --train --device cuda --epochs 1 --bpe-reviews 2000 \
	        --vocab-size 1024 --max-len 64 --d-model 32 --heads 2 --layers 1 --ffn 64 \
	        --warmup 100 --lr 2e-3 --target-loss 0.68; \
	fi

-include $(wildcard build/cuda/*.d)
