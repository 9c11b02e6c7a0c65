# train_llama: CPU targets always build; CUDA targets when nvcc is found.
# MPI (Open MPI: mpicxx) and NCCL are detected: with them the trainers run on many
# processes (mpirun, srun); without them they build as one-process programs. MPI=0 or
# NCCL=0 on the command line leaves them out.
#
#   make tinystories        prepare TinyStories, build, train (CUDA build on a GPU, else CPU)
#   make test               every CPU test (and a compile of the CUDA build when nvcc exists)
#   make dit                build train_dit and train the video DiT on generated clips (GIFs in runs/dit)
#   make train_llama_cpu test_llama_cpu           CPU build (g++ -fopenmp -DLLMC_CPU)
#   make train_llama test_llama [PRECISION=FP32] [CUDA_ARCH=90]   CUDA build
#   make cuda USE_CUDNN=1   the bf16 CUDA build with cuDNN's fused attention (--attention cudnn)

CXX ?= g++
CPU_FLAGS = -O3 -march=native -fopenmp -std=c++17 -DLLMC_CPU -Wall -Wextra -Wno-unused-function -I.
HEADERS = $(wildcard llmc/*/*.h llmc/*/*.cuh llmc/kernels/cpu/*.h)

NVCC ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
# compute capability of the first visible GPU (9.0 -> 90); sm_90 (H100/H200) when there is none
CUDA_ARCH ?= $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d '. ')
ifeq ($(strip $(CUDA_ARCH)),)
CUDA_ARCH = 90
endif
NVCC_FLAGS = -O3 -std=c++17 -I. -gencode arch=compute_$(CUDA_ARCH),code=sm_$(CUDA_ARCH) \
             -Xcompiler -Wall,-Wno-unused-function --expt-relaxed-constexpr
NVCC_LIBS = -lcublasLt -lcublas
PRECISION ?= BF16
ifeq ($(PRECISION),FP32)
NVCC_FLAGS += -DENABLE_FP32
CUDA_SUFFIX = _fp32
else
CUDA_SUFFIX =
endif

# cuDNN's fused attention (--attention cudnn, llmc/kernels/cudnn_attention.h): USE_CUDNN=1 adds it
# to the bf16 CUDA programs (an FP32 build has no use for it: it refuses --attention cudnn). cuDNN 9
# (cudnn.h, libcudnn.so.9) comes with the CUDA Toolkit here or a cuDNN package; the cudnn-frontend
# headers are downloaded once, pinned, by scripts/ensure_cudnn_frontend.sh into build/. The frontend
# is compiled in its own translation unit, once, into build/cudnn_attention.o (minutes: the headers
# are large), so that the trainers' own compile stays as it was; nvrtc, which the frontend calls for
# its runtime-compiled engines, is linked beside libcudnn.
USE_CUDNN ?= 0
CUDNN_FE_VERSION := 1.32.0
CUDNN_FE_INC := build/cudnn-frontend/$(CUDNN_FE_VERSION)/include
CUDNN_OBJ := build/cudnn_attention.o
CUDNN_LIBS := $(CUDNN_OBJ) -lcudnn -lnvrtc
# is cuDNN there at all (make test compiles with it when it is)
CUDNN_FOUND := $(if $(NVCC),$(if $(and $(wildcard $(dir $(NVCC))../include/cudnn.h),$(wildcard $(dir $(NVCC))../lib64/libcudnn.so)),1))
ifeq ($(USE_CUDNN),1)
ifneq ($(PRECISION),FP32)
BF16_CUDNN_FLAGS := -DUSE_CUDNN
BF16_CUDNN_DEPS := $(CUDNN_OBJ)
BF16_CUDNN_LIBS := $(CUDNN_LIBS)
endif
endif

# The CPU build's matrix products (llmc/kernels/cpu/matmul.h) on a BLAS library; BLAS=0 keeps the
# blocked loops. Which library was chosen by measurement (docs/results/cpu_blas_choice.md:
# the candidates on the trainers' GEMM shapes and inside the training step): oneDNN's
# dnnl_sgemm, with Debian's OpenMP OpenBLAS as the fallback where oneDNN is missing.
# BLAS_LIB=auto (the default) takes the first one installed of BLAS_ORDER; BLAS_LIB=onednn,
# openblas or blis names one (none if it is missing). All three run on the trainer's OpenMP
# threads instead of a second pool of threads that competes with them for the cores. None
# is told the processor type (no OPENBLAS_CORETYPE): each detects it itself.
BLAS ?= 1
BLAS_LIB ?= auto
BLAS_ORDER = onednn openblas
# oneDNN (Debian's libdnnl-dev): dnnl_sgemm, JIT kernels for the instruction set cpuid
# reports (avx2, avx512_core, ...), on OpenMP threads
BLAS_OK_onednn := $(if $(and $(wildcard /usr/include/oneapi/dnnl/dnnl.h),$(wildcard /usr/lib/*/libdnnl.so)),1)
BLAS_CFLAGS_onednn := -DUSE_DNNL
BLAS_LIBS_onednn := -ldnnl
BLAS_NAME_onednn := oneDNN dnnl_sgemm (libdnnl-dev)
# BLIS, its OpenMP build (Debian's libblis-openmp-dev): a configuration per processor family
# (zen3, skx, haswell, ...) chosen at run time from cpuid; measured, not the default
BLIS_DIR := $(firstword $(wildcard /usr/lib/*/blis-openmp))
BLIS_INC := $(firstword $(wildcard /usr/include/*/blis-openmp))
BLAS_OK_blis := $(if $(and $(wildcard $(BLIS_DIR)/libblis.so),$(wildcard $(BLIS_INC)/blis.h)),1)
BLAS_CFLAGS_blis := -DUSE_BLAS -DUSE_BLIS -isystem $(BLIS_INC)
BLAS_LIBS_blis := -L$(BLIS_DIR) -lblis -Wl,-rpath,$(BLIS_DIR)
BLAS_NAME_blis := BLIS (libblis-openmp-dev)
# OpenBLAS, its OpenMP build (Debian's libopenblas-openmp-dev); the rpath picks this build at
# run time, whichever one the system's alternatives name
OPENBLAS_PC_DIR := $(firstword $(wildcard /usr/lib/*/openblas-openmp/pkgconfig))
OPENBLAS_PC := $(if $(OPENBLAS_PC_DIR),PKG_CONFIG_PATH=$(OPENBLAS_PC_DIR) ,)pkg-config
BLAS_OK_openblas = $(shell $(OPENBLAS_PC) --exists openblas 2>/dev/null && echo 1)
BLAS_CFLAGS_openblas = -DUSE_BLAS $(shell $(OPENBLAS_PC) --cflags openblas)
BLAS_LIBS_openblas = $(shell $(OPENBLAS_PC) --libs openblas) -Wl,-rpath,$(shell $(OPENBLAS_PC) --variable=libdir openblas)
BLAS_NAME_openblas := OpenBLAS (libopenblas-openmp-dev)
ifeq ($(BLAS),1)
ifeq ($(BLAS_LIB),auto)
BLAS_USED := $(firstword $(foreach b,$(BLAS_ORDER),$(if $(BLAS_OK_$(b)),$(b))))
else
BLAS_USED := $(if $(BLAS_OK_$(BLAS_LIB)),$(BLAS_LIB))
endif
endif
BLAS_FOUND := $(if $(BLAS_USED),1)
BLAS_CFLAGS := $(if $(BLAS_USED),$(BLAS_CFLAGS_$(BLAS_USED)))
CPU_BLAS_LIBS := $(if $(BLAS_USED),$(BLAS_LIBS_$(BLAS_USED)))
CPU_FLAGS += $(BLAS_CFLAGS)

# detected, not required
MPI ?= 1
NCCL ?= 1
MPI_FOUND := $(if $(filter 1,$(MPI)),$(shell command -v mpicxx >/dev/null 2>&1 && echo 1))
# NCCL needs its header and its library: an image with the header alone would fail to link
NCCL_HEADER := $(shell ls /usr/include/nccl.h /usr/local/include/nccl.h /usr/local/cuda/include/nccl.h 2>/dev/null | head -n1)
NCCL_LIB := $(shell ls /usr/lib/*/libnccl.so /usr/lib64/libnccl.so /usr/local/lib/libnccl.so /usr/local/cuda/lib64/libnccl.so \
              /usr/local/cuda/targets/*/lib/libnccl.so 2>/dev/null | head -n1)
NCCL_FOUND := $(if $(filter 1,$(NCCL)),$(if $(NCCL_LIB),$(NCCL_HEADER)))
ifeq ($(MPI_FOUND),1)
# the C bindings only (OMPI_SKIP_MPICXX): the C++ ones are deprecated and not needed
MPI_CFLAGS := -DUSE_MPI -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX $(shell mpicxx --showme:compile)
MPI_LIBS := $(filter-out -lmpi_cxx,$(shell mpicxx --showme:link))
CPU_FLAGS += $(MPI_CFLAGS)
NVCC_FLAGS += -DUSE_MPI -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX $(shell mpicxx --showme:compile)
NVCC_LIBS += $(foreach f,$(MPI_LIBS),$(if $(filter -L%,$(f)),-Xlinker -rpath=$(patsubst -L%,%,$(f)) $(f),$(f)))
# NCCL's unique ids travel over MPI: NCCL is used only with MPI
ifneq ($(NCCL_FOUND),)
NVCC_FLAGS += -DUSE_NCCL
NVCC_LIBS += -L$(dir $(NCCL_LIB)) -Xlinker -rpath=$(dir $(NCCL_LIB)) -lnccl
endif
endif

# OpenMP in the CUDA build's host code too: start-up work on every core (llmc/core/rand.h's
# parallel initialisation, the staged bf16 conversion of llmc/kernels/device.cuh's uploads)
NVCC_FLAGS += -Xcompiler -fopenmp
NVCC_LIBS += -lgomp

CPU_LIBS = $(MPI_LIBS) $(CPU_BLAS_LIBS)

PYTHON = $(shell bash scripts/ensure_python_deps.sh 2>/dev/null | tail -n1)

.PHONY: gpu-bin all cpu cuda test test-full dit tinystories sweep compare data data512 clean info cuda-compile cudnn-available FORCE print-cpu-flags

# `make USE_CUDNN=1` alone means the CUDA programs with cuDNN's attention too
all: cpu $(if $(filter 1,$(USE_CUDNN)),cuda)

cpu: train_llama_cpu test_llama_cpu train_dit_cpu test_dit_cpu

# rebuilt when the flags change (MPI found or not, MPI=0)
build/cpu-config: FORCE
	@mkdir -p build
	@echo "$(CXX) $(CPU_FLAGS) $(CPU_LIBS)" | cmp -s - $@ || echo "$(CXX) $(CPU_FLAGS) $(CPU_LIBS)" > $@

FORCE:

train_llama_cpu: train_llama.cu $(HEADERS) build/cpu-config
	$(CXX) $(CPU_FLAGS) -x c++ $< -o $@ -lm $(CPU_LIBS)

test_llama_cpu: test_llama.cu train_llama.cu $(HEADERS) build/cpu-config
	$(CXX) $(CPU_FLAGS) -x c++ $< -o $@ -lm $(CPU_LIBS)

# the one-process CPU builds, as on a machine without MPI (make test builds and runs them)
build/train_llama_cpu_nompi: train_llama.cu $(HEADERS) build/cpu-config
	@mkdir -p build
	$(CXX) $(filter-out $(MPI_CFLAGS),$(CPU_FLAGS)) -x c++ $< -o $@ -lm $(CPU_BLAS_LIBS)
build/train_dit_cpu_nompi: train_dit.cu $(HEADERS) build/cpu-config
	@mkdir -p build
	$(CXX) $(filter-out $(MPI_CFLAGS),$(CPU_FLAGS)) -x c++ $< -o $@ -lm $(CPU_BLAS_LIBS)

train_llama$(CUDA_SUFFIX): train_llama.cu $(HEADERS) build/cuda-config $(BF16_CUDNN_DEPS)
	@test -n "$(NVCC)" || { echo "nvcc not found: install the CUDA Toolkit or use the CPU targets"; exit 1; }
	$(NVCC) $(NVCC_FLAGS) $(BF16_CUDNN_FLAGS) $< -o $@ $(NVCC_LIBS) $(BF16_CUDNN_LIBS)

test_llama$(CUDA_SUFFIX): test_llama.cu train_llama.cu $(HEADERS) build/cuda-config $(BF16_CUDNN_DEPS)
	@test -n "$(NVCC)" || { echo "nvcc not found: install the CUDA Toolkit or use the CPU targets"; exit 1; }
	$(NVCC) $(NVCC_FLAGS) $(BF16_CUDNN_FLAGS) $< -o $@ $(NVCC_LIBS) $(BF16_CUDNN_LIBS)

train_dit_cpu: train_dit.cu $(HEADERS) build/cpu-config
	$(CXX) $(CPU_FLAGS) -x c++ $< -o $@ -lm $(CPU_LIBS)

test_dit_cpu: test_dit.cu train_dit.cu $(HEADERS) build/cpu-config
	$(CXX) $(CPU_FLAGS) -x c++ $< -o $@ -lm $(CPU_LIBS)

train_dit$(CUDA_SUFFIX): train_dit.cu $(HEADERS) build/cuda-config $(BF16_CUDNN_DEPS)
	@test -n "$(NVCC)" || { echo "nvcc not found: install the CUDA Toolkit or use the CPU targets"; exit 1; }
	$(NVCC) $(NVCC_FLAGS) $(BF16_CUDNN_FLAGS) $< -o $@ $(NVCC_LIBS) $(BF16_CUDNN_LIBS)

test_dit$(CUDA_SUFFIX): test_dit.cu train_dit.cu $(HEADERS) build/cuda-config $(BF16_CUDNN_DEPS)
	@test -n "$(NVCC)" || { echo "nvcc not found: install the CUDA Toolkit or use the CPU targets"; exit 1; }
	$(NVCC) $(NVCC_FLAGS) $(BF16_CUDNN_FLAGS) $< -o $@ $(NVCC_LIBS) $(BF16_CUDNN_LIBS)

cuda: train_llama$(CUDA_SUFFIX) test_llama$(CUDA_SUFFIX) train_dit$(CUDA_SUFFIX) test_dit$(CUDA_SUFFIX)

# rebuilt when the CUDA programs' flags change (USE_CUDNN, PRECISION, MPI found or not)
build/cuda-config: FORCE
	@mkdir -p build
	@echo "$(NVCC) $(NVCC_FLAGS) $(BF16_CUDNN_FLAGS) $(NVCC_LIBS) $(BF16_CUDNN_LIBS)" | cmp -s - $@ || \
	  echo "$(NVCC) $(NVCC_FLAGS) $(BF16_CUDNN_FLAGS) $(NVCC_LIBS) $(BF16_CUDNN_LIBS)" > $@

$(CUDNN_FE_INC)/cudnn_frontend.h:
	@bash scripts/ensure_cudnn_frontend.sh

# host code only (no kernels of ours): -isystem keeps the frontend's own warnings out, -O1
# because building a graph is not on any hot path and the headers compile slowly
$(CUDNN_OBJ): llmc/kernels/cudnn_attention.cpp llmc/kernels/cudnn_attention.h llmc/core/common.h $(CUDNN_FE_INC)/cudnn_frontend.h
	@test -n "$(NVCC)" || { echo "nvcc not found: install the CUDA Toolkit"; exit 1; }
	@test -n "$(CUDNN_FOUND)" || { echo "USE_CUDNN=1: cudnn.h or libcudnn.so not found beside $(NVCC) (install cuDNN 9)"; exit 1; }
	@mkdir -p build
	$(NVCC) -O1 -std=c++17 -I. -isystem $(CUDNN_FE_INC) -Xcompiler -Wall,-Wextra,-Wno-unused-function -c $< -o $@

build/test_dataloader: dev/test/test_dataloader.c llmc/io/dataloader.h
	@mkdir -p build
	$(CXX) -O2 -x c++ -Wall -Wextra -I. $< -o $@

# llmc/parallel/comm.h on the CPU build (run under mpirun by dev/test/dp_tests.sh)
build/test_comm: dev/test/test_comm.c llmc/parallel/comm.h llmc/core/common.h llmc/kernels/cpu/device.h build/cpu-config
	@mkdir -p build
	$(CXX) $(CPU_FLAGS) -x c++ $< -o $@ -lm $(CPU_LIBS)

build/test_tokenizer: dev/test/test_tokenizer.c llmc/io/tokenizer.h
	@mkdir -p build
	$(CXX) -O2 -x c++ -Wall -Wextra -I. $< -o $@

# compiles both CUDA precisions into build/ (no GPU needed); part of make test, which runs it
# with -j2: one nvcc per target, so the six compile side by side
CUDA_COMPILE_BF16 := build/train_llama build/test_llama build/train_dit build/test_dit
CUDA_COMPILE_FP32 := build/test_llama_fp32 build/test_dit_fp32
# The bf16 programs with cuDNN's attention (USE_CUDNN=1) wherever it can be had: cuDNN beside nvcc
# and the frontend headers downloaded (make cudnn-available says 1 or 0, and why on stderr);
# USE_CUDNN=0 on the command line leaves it out
cuda-compile:
	@if [ -z "$(NVCC)" ]; then echo "nvcc not found: skipping the CUDA compile"; \
	else c=$(if $(filter command line,$(origin USE_CUDNN)),$(USE_CUDNN),$$($(MAKE) -s --no-print-directory cudnn-available)); \
	  $(MAKE) --no-print-directory USE_CUDNN=$$c $(CUDA_COMPILE_BF16) $(CUDA_COMPILE_FP32); fi

cudnn-available:
	@if [ -z "$(CUDNN_FOUND)" ]; then echo "no cuDNN beside $(NVCC): the CUDA build without --attention cudnn" >&2; echo 0; \
	elif ! bash scripts/ensure_cudnn_frontend.sh >&2; then echo "the cudnn-frontend headers could not be downloaded: the CUDA build without --attention cudnn" >&2; echo 0; \
	else echo 1; fi

# -Xptxas -v: ptxas' registers, spills and shared memory of every kernel, kept in
# build/<target>.ptxas for dev/test/ptxas_gate.py (make test), at no extra compile; the
# compile's other messages still reach the terminal, and its exit status is kept
PTXAS_REPORT = 2> $@.ptxas; rc=$$?; grep -v -e '^ptxas info' -e '^    [0-9]* bytes stack frame' $@.ptxas >&2; exit $$rc

$(CUDA_COMPILE_BF16): build/%: %.cu $(HEADERS) $(BF16_CUDNN_DEPS) FORCE
	@mkdir -p build
	$(NVCC) $(NVCC_FLAGS) $(BF16_CUDNN_FLAGS) -Xptxas -v $< -o $@ $(NVCC_LIBS) $(BF16_CUDNN_LIBS) $(PTXAS_REPORT)

$(CUDA_COMPILE_FP32): build/%_fp32: %.cu $(HEADERS) FORCE
	@mkdir -p build
	$(NVCC) $(NVCC_FLAGS) -DENABLE_FP32 -Xptxas -v $< -o $@ $(NVCC_LIBS) $(PTXAS_REPORT)

# The binaries a GPU session carries (scripts/gpu_check.sh; device tool: carry gpu_bin and
# dev/cuda/build), built here so that no device time goes to compiling: gpu_bin/ without MPI
# or NCCL (nothing to load but CUDA's own libraries, and cuDNN for the bf16 programs when it is
# here: --attention cudnn), gpu_bin/nocudnn/ the bf16 programs again without cuDNN for a machine
# where libcudnn.so.9 cannot be loaded, gpu_bin/mpi/ the MPI test programs for the 2-rank steps
# (when mpicxx is here; they run there only if Open MPI is there too), the ladders in
# dev/cuda/build/bf16, and BUILD_INFO (nvcc release, cuDNN, commit) that the GPU machine compares
# with its own nvcc before it trusts them.
GPU_BIN_BF16 := train_llama test_llama train_dit test_dit
GPU_BIN := $(addprefix gpu_bin/,$(GPU_BIN_BF16)) gpu_bin/train_llama_fp32 gpu_bin/test_llama_fp32 gpu_bin/test_dit_fp32 \
           $(if $(CUDNN_FOUND),$(addprefix gpu_bin/nocudnn/,$(GPU_BIN_BF16)))
gpu-bin:
	@test -n "$(NVCC)" || { echo "nvcc not found: install the CUDA Toolkit"; exit 1; }
	@$(MAKE) --no-print-directory MPI=0 NCCL=0 $(GPU_BIN)
	@if [ "$(MPI_FOUND)" = 1 ]; then $(MAKE) --no-print-directory gpu_bin/mpi/test_llama gpu_bin/mpi/test_dit; fi
	@$(MAKE) --no-print-directory -C dev/cuda compile CUDA_ARCH=$(CUDA_ARCH)
	@{ echo "nvcc: $$($(NVCC) --version | grep -o 'release [0-9.]*' | head -n1)"; echo "arch: sm_$(CUDA_ARCH)"; \
	   echo "cudnn: $(if $(CUDNN_FOUND),$$(sed -n 's/^#define CUDNN_\(MAJOR\|MINOR\|PATCHLEVEL\) *\([0-9]*\).*/\2/p' \
	     $(dir $(NVCC))../include/cudnn_version.h | paste -sd.) (frontend $(CUDNN_FE_VERSION)) in the bf16 programs; gpu_bin/nocudnn without,none)"; \
	   echo "commit: $$(git rev-parse --short HEAD 2>/dev/null)$$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"; \
	   echo "built: $$(date -u '+%Y-%m-%d %H:%M UTC') on $$(hostname -s)"; } > gpu_bin/BUILD_INFO
	@cat gpu_bin/BUILD_INFO; du -sh gpu_bin dev/cuda/build
	@# one compressed file to carry: the two folders pass the device tool's 64 MiB uncompressed
	@mkdir -p gpu_carry && tar cf - gpu_bin dev/cuda/build | xz -T0 -6 > gpu_carry/carry.tar.xz && du -sh gpu_carry/carry.tar.xz

# the bf16 programs with cuDNN's attention when cuDNN is here
GPU_BIN_CUDNN_DEPS := $(if $(CUDNN_FOUND),$(CUDNN_OBJ))
GPU_BIN_CUDNN_FLAGS := $(if $(CUDNN_FOUND),-DUSE_CUDNN)
GPU_BIN_CUDNN_LIBS := $(if $(CUDNN_FOUND),$(CUDNN_LIBS))
gpu_bin/%: %.cu $(HEADERS) $(GPU_BIN_CUDNN_DEPS)
	@mkdir -p gpu_bin
	$(NVCC) $(NVCC_FLAGS) $(GPU_BIN_CUDNN_FLAGS) $< -o $@ $(NVCC_LIBS) $(GPU_BIN_CUDNN_LIBS)

gpu_bin/nocudnn/%: %.cu $(HEADERS)
	@mkdir -p gpu_bin/nocudnn
	$(NVCC) $(NVCC_FLAGS) $< -o $@ $(NVCC_LIBS)

gpu_bin/%_fp32: %.cu $(HEADERS)
	@mkdir -p gpu_bin
	$(NVCC) $(NVCC_FLAGS) -DENABLE_FP32 $< -o $@ $(NVCC_LIBS)

gpu_bin/mpi/%: %.cu $(HEADERS)
	@mkdir -p gpu_bin/mpi
	$(NVCC) $(NVCC_FLAGS) $< -o $@ $(NVCC_LIBS)

# make test samples what has outgrown 20 minutes on 2 cores (dev/test/run_tests.sh says what);
# make test-full is make test with all of it (CI runs it; under 60 minutes)
test-full:
	@TEST_FULL=1 $(MAKE) --no-print-directory test

# Open MPI and oneDNN first (scripts/ensure_build_deps.sh), then a fresh make so that the build sees
# them (one compiler a core: the eleven programs take about a minute on 2 cores one at a time)
test:
	@bash scripts/ensure_build_deps.sh
	@$(MAKE) --no-print-directory -j$(shell nproc 2>/dev/null || echo 2) cpu build/test_dataloader build/test_tokenizer build/train_llama_cpu_nompi build/train_dit_cpu_nompi build/test_comm build/test_video_data
	@bash dev/test/run_tests.sh

# the shared sample when it is there (no network), else the official download
data:
	@if [ -d ../shared/data/tinystories ]; then $(PYTHON) data/prepare_tinystories.py; \
	else $(PYTHON) data/prepare_tinystories.py --download; fi

# the 512-piece SentencePiece tokenizer trained on the sample, and its shards (stories260K)
data512:
	@if [ -d ../shared/data/tinystories ]; then $(PYTHON) data/prepare_tinystories.py --vocab-size 512; \
	else $(PYTHON) data/prepare_tinystories.py --vocab-size 512 --download; fi

# (the script prepares the data it needs: make data on a GPU, make data512 on the CPU)
tinystories:
	@bash scripts/run_tinystories.sh

# the main CPU model trained by train_llama_cpu and by PyTorch from the same start: one PNG
compare: data512
	@bash scripts/run_compare.sh

# the video DiT: dit-tiny on the CPU (dit-S with the CUDA build on a GPU), moving-digit clips, GIF samples
dit:
	@bash scripts/run_dit.sh

# tok/s and peak memory across memory-flag combinations (docs/results/, table and PNG)
sweep: data
	@bash scripts/run_sweep.sh

info:
	@echo "CXX=$(CXX) NVCC=$(NVCC) CUDA_ARCH=$(CUDA_ARCH) PRECISION=$(PRECISION)"
	@echo "BLAS (CPU matmul): $(if $(BLAS_FOUND),$(BLAS_NAME_$(BLAS_USED)) - $(CPU_BLAS_LIBS),none - the blocked loops of llmc/kernels/cpu/matmul.h$(if $(filter 1,$(BLAS)),; apt-get install libdnnl-dev (or libopenblas-openmp-dev)$(if $(filter-out auto,$(BLAS_LIB)), ($(BLAS_LIB) not found)),; BLAS=0))"
	@echo "MPI: $(if $(MPI_FOUND),yes - multi-process builds ($(MPI_LIBS)),no - one-process builds; apt-get install openmpi-bin libopenmpi-dev)"
	@echo "NCCL: $(if $(and $(MPI_FOUND),$(NCCL_FOUND)),yes - the CUDA build has --comm nccl ($(NCCL_FOUND) $(NCCL_LIB)),no - CUDA multi-process runs use --comm mpi ($(if $(NCCL_HEADER),$(if $(NCCL_LIB),NCCL needs MPI for its ids,header $(NCCL_HEADER) but no libnccl.so),no nccl.h)))"

clean:
	rm -rf build train_llama_cpu test_llama_cpu train_llama test_llama train_llama_fp32 test_llama_fp32 \
	       train_dit_cpu test_dit_cpu train_dit test_dit train_dit_fp32 test_dit_fp32

# for dev/bench/bench_cpu_step.py: the CPU flags, the BLAS library's compile flags, its link flags and its name, one line each
print-cpu-flags:
	@echo "$(CPU_FLAGS)"
	@echo "$(BLAS_CFLAGS)"
	@echo "$(CPU_BLAS_LIBS)"
	@echo "$(BLAS_USED)"

# llmc/io/video_data.h (moving digits, clip files) and llmc/io/image_write.h (GIF, PNG); make test runs it
build/test_video_data: dev/test/test_video_data.c $(HEADERS)
	@mkdir -p build
	$(CXX) -O2 -x c++ -DLLMC_CPU -Wall -Wextra -Wno-unused-function -I. $< -o $@ -lm

# llmc/train/flow_batch.h's label dropout (train_dit --label-dropout): none at p = 0, all at p = 1, a
# binomial fraction at p = 0.25, the same labels for the same seed (make test runs it)
test: build/test_flow_batch
build/test_flow_batch: dev/test/test_flow_batch.c $(HEADERS)
	@mkdir -p build
	$(CXX) -O2 -fopenmp -x c++ -DLLMC_CPU -Wall -Wextra -Wno-unused-function -I. $< -o $@ -lm

# llmc/core/rand.h's parallel fills against the sequential generator, bit for bit, and their time
# (make test runs it); build/init_bench: the host side of llama3-1B's start-up (fill, bf16
# conversion, staging copy) at any size and thread count, with cuda_bf16.h's own
# conversion when the CUDA Toolkit is here
test: build/test_rand
build/test_rand: dev/test/test_rand.c llmc/core/rand.h
	@mkdir -p build
	$(CXX) -O3 -march=native -fopenmp -x c++ -Wall -Wextra -I. $< -o $@ -lm
build/init_bench: dev/bench/init_bench.c llmc/core/rand.h
	@mkdir -p build
	$(CXX) -O3 -march=native -fopenmp -x c++ -Wall -Wextra -I. $(if $(NVCC),-I$(dir $(NVCC))../include) $< -o $@ -lm

# ring attention's log-sum-exp merge (llmc/kernels/cpu/attention_merge.h) against whole attention
# (llmc/kernels/cpu/attention.h), forward and backward, on the CPU twins (make test runs it)
test: build/test_attention_merge
build/test_attention_merge: dev/test/test_attention_merge.c llmc/kernels/cpu/attention_merge.h llmc/kernels/cpu/attention.h llmc/kernels/cpu/vmath.h llmc/core/common.h
	@mkdir -p build
	$(CXX) -O3 -march=native -fopenmp -x c++ -DLLMC_CPU -Wall -Wextra -I. $< -o $@ -lm

# llmc/parallel/pipeline_schedule.h's 1f1b and interleaved op lists, all ranks simulated together with
# blocking transfers: no deadlock, every dependency, activations held and bubble against the formulas (make test runs it)
test: build/test_pp_schedule
build/test_pp_schedule: dev/test/test_pp_schedule.c llmc/parallel/pipeline_schedule.h llmc/core/common.h
	@mkdir -p build
	$(CXX) -O2 -x c++ -DLLMC_CPU -Wall -Wextra -Wno-unused-function -I. $< -o $@ -lm
