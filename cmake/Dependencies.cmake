# Finds Poseidon's dependencies (all Debian packages) and fills POSEIDON_DEPS
# and POSEIDON_DEFINITIONS for the library target.
find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(GLOG REQUIRED IMPORTED_TARGET libglog)
pkg_check_modules(GFLAGS REQUIRED IMPORTED_TARGET gflags)
pkg_check_modules(LMDB REQUIRED IMPORTED_TARGET lmdb)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
find_package(ZLIB REQUIRED)  # gzipped MNIST files (convert_mnist_data)
# LevelDB (libleveldb-dev), the second database backend of util/db. Found
# directly: Debian's leveldbConfig.cmake asks to link "snappy" by name, whose
# unversioned .so only libsnappy-dev ships; the shared library needs no help.
find_path(LEVELDB_INCLUDE_DIR leveldb/db.h)
find_library(LEVELDB_LIBRARY leveldb)
if(NOT LEVELDB_INCLUDE_DIR OR NOT LEVELDB_LIBRARY)
  message(FATAL_ERROR "LevelDB not found: apt-get install libleveldb-dev "
                      "(scripts/install_deps.sh installs it)")
endif()
include_directories(SYSTEM ${LEVELDB_INCLUDE_DIR})

set(POSEIDON_DEPS PkgConfig::GLOG PkgConfig::GFLAGS PkgConfig::LMDB
    ${LEVELDB_LIBRARY} PkgConfig::OPENBLAS ZLIB::ZLIB Threads::Threads)
set(POSEIDON_DEFINITIONS "")

# oneDNN (libdnnl-dev) for the float GEMM on AVX-512 CPUs (util/sgemm.hpp).
# Debian builds it on OpenMP; Poseidon sets the calling thread's OpenMP
# thread count, so it links libgomp itself. Only util/sgemm.cpp sees oneDNN
# (USE_DNNL is defined for that file alone: CMakeLists.txt).
set(POSEIDON_HAVE_DNNL OFF)
if(USE_DNNL)
  find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.h)
  find_library(DNNL_LIBRARY dnnl)
  find_library(GOMP_LIBRARY NAMES gomp libgomp.so.1)
  if(DNNL_INCLUDE_DIR AND DNNL_LIBRARY AND GOMP_LIBRARY AND
     EXISTS ${DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_config.h)
    file(STRINGS ${DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_config.h DNNL_RUNTIME
         REGEX "^#define DNNL_CPU_RUNTIME ")
  endif()
  if(DNNL_RUNTIME MATCHES "DNNL_RUNTIME_OMP")
    list(APPEND POSEIDON_DEPS ${DNNL_LIBRARY} ${GOMP_LIBRARY})
    set(POSEIDON_HAVE_DNNL ON)
    message(STATUS "oneDNN (float GEMM on AVX-512 CPUs): ${DNNL_LIBRARY}")
  elseif(DNNL_LIBRARY)
    message(WARNING "oneDNN at ${DNNL_LIBRARY} is not an OpenMP build "
                    "(${DNNL_RUNTIME}); float GEMM stays on OpenBLAS")
  else()
    message(STATUS "oneDNN not found (apt-get install libdnnl-dev): float "
                   "GEMM stays on OpenBLAS")
  endif()
endif()

if(USE_OPENCV)
  # Only the image modules are needed; Debian splits them into packages that
  # ship no CMake config, so find the headers and libraries directly.
  find_path(OpenCV_INCLUDE_DIR opencv2/core.hpp PATH_SUFFIXES opencv4 REQUIRED)
  foreach(module core imgproc imgcodecs)
    find_library(OpenCV_${module}_LIBRARY opencv_${module} REQUIRED)
  endforeach()
  # imgcodecs only through the plugin (util/image_codecs.hpp).
  list(APPEND POSEIDON_DEPS ${OpenCV_core_LIBRARY} ${OpenCV_imgproc_LIBRARY})
  include_directories(SYSTEM ${OpenCV_INCLUDE_DIR})
  list(APPEND POSEIDON_DEFINITIONS USE_OPENCV)
endif()

if(USE_HDF5)
  # The C library and its high-level (H5LT) part; Debian's serial build.
  find_package(HDF5 REQUIRED COMPONENTS C HL)
  list(APPEND POSEIDON_DEPS hdf5::hdf5_hl hdf5::hdf5)
  list(APPEND POSEIDON_DEFINITIONS USE_HDF5)
endif()

if(USE_MPI)
  find_package(MPI REQUIRED COMPONENTS CXX)
  list(APPEND POSEIDON_DEPS MPI::MPI_CXX)
  list(APPEND POSEIDON_DEFINITIONS USE_MPI)
endif()

if(USE_CUDA)
  find_package(CUDAToolkit REQUIRED)
  list(APPEND POSEIDON_DEPS CUDA::cudart CUDA::cublas CUDA::curand)
  list(APPEND POSEIDON_DEFINITIONS USE_CUDA)
  if(USE_CUDNN)
    # cuDNN 9 ships beside the toolkit here; elsewhere give CUDNN_ROOT.
    find_path(CUDNN_INCLUDE_DIR cudnn.h
              HINTS ${CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
              PATH_SUFFIXES include REQUIRED)
    find_library(CUDNN_LIBRARY cudnn
                 HINTS ${CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR}
                       ${CUDAToolkit_LIBRARY_ROOT}
                 PATH_SUFFIXES lib lib64 REQUIRED)
    file(STRINGS ${CUDNN_INCLUDE_DIR}/cudnn_version.h CUDNN_MAJOR_LINE
         REGEX "^#define CUDNN_MAJOR [0-9]+")
    string(REGEX MATCH "[0-9]+" CUDNN_MAJOR "${CUDNN_MAJOR_LINE}")
    if(CUDNN_MAJOR LESS 9)
      message(FATAL_ERROR "cuDNN ${CUDNN_MAJOR} found at ${CUDNN_INCLUDE_DIR}; "
                          "Poseidon needs cuDNN 9")
    endif()
    include_directories(SYSTEM ${CUDNN_INCLUDE_DIR})
    list(APPEND POSEIDON_DEPS ${CUDNN_LIBRARY})
    list(APPEND POSEIDON_DEFINITIONS USE_CUDNN)
    message(STATUS "cuDNN ${CUDNN_MAJOR}: ${CUDNN_LIBRARY}")
  endif()
  if(USE_NCCL)
    # NCCL for device workers on several GPUs of one process
    # (distributed/nccl_reducer.hpp); beside the toolkit here, else NCCL_ROOT.
    find_path(NCCL_INCLUDE_DIR nccl.h
              HINTS ${NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
              PATH_SUFFIXES include)
    find_library(NCCL_LIBRARY nccl
                 HINTS ${NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR}
                       ${CUDAToolkit_LIBRARY_ROOT}
                 PATH_SUFFIXES lib lib64)
    if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
      include_directories(SYSTEM ${NCCL_INCLUDE_DIR})
      list(APPEND POSEIDON_DEPS ${NCCL_LIBRARY})
      list(APPEND POSEIDON_DEFINITIONS USE_NCCL)
      message(STATUS "NCCL: ${NCCL_LIBRARY}")
    else()
      message(WARNING "NCCL not found (give NCCL_ROOT): device workers on "
                      "several GPUs of one process are off")
    endif()
  endif()
else()
  list(APPEND POSEIDON_DEFINITIONS CPU_ONLY)
endif()
