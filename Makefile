# Thin driver over CMake: reads options from Makefile.config (copy it from
# Makefile.config.example) and builds into $(BUILD_DIR).
-include Makefile.config

BUILD_DIR ?= build
USE_CUDA ?= OFF
USE_CUDNN ?= OFF
USE_NCCL ?= ON
USE_MPI ?= ON
USE_OPENCV ?= ON
USE_HDF5 ?= ON
USE_DNNL ?= ON
BUILD_python ?= OFF
BUILD_matlab ?= OFF
CUDA_ARCH ?= 90

CMAKE_FLAGS := -DUSE_CUDA=$(USE_CUDA) -DUSE_CUDNN=$(USE_CUDNN) \
  -DUSE_NCCL=$(USE_NCCL) \
  -DCMAKE_CUDA_ARCHITECTURES=$(CUDA_ARCH) \
  -DUSE_MPI=$(USE_MPI) -DUSE_OPENCV=$(USE_OPENCV) \
  -DUSE_HDF5=$(USE_HDF5) -DUSE_DNNL=$(USE_DNNL) \
  -DBUILD_python=$(BUILD_python) -DBUILD_matlab=$(BUILD_matlab)

.PHONY: all test demo deps clean

all:
	BUILD_DIR=$(BUILD_DIR) bash scripts/build.sh $(CMAKE_FLAGS)

test: all
	cd $(BUILD_DIR) && ctest --output-on-failure -j $$(nproc)

demo:
	BUILD_DIR=$(BUILD_DIR) bash scripts/demo.sh

deps:
	bash scripts/install_deps.sh

clean:
	rm -rf $(BUILD_DIR)
