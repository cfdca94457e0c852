# The Debian package: `cpack -G DEB` in a build tree (scripts/package.sh deb)
# makes poseidon_<version>_<arch>.deb holding the runtime, dev and python
# components (cmake/Install.cmake) under /usr. `apt install ./poseidon_...deb`
# pulls the shared libraries it links (found by dpkg-shlibdeps, so the list
# follows the build's options) and the Python modules pycaffe imports.
set(CPACK_PACKAGE_NAME poseidon)
set(CPACK_PACKAGE_VENDOR "The Poseidon developers")
set(CPACK_PACKAGE_CONTACT "The Poseidon developers <poseidon@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Caffe-compatible deep learning framework with built-in distributed training")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
    "Nets and solvers in Caffe's prototxt, .caffemodel and .solverstate files, "
    "trained on one machine with poseidon_train and on a cluster with mpirun "
    "or psd_run (parameter server, sufficient factor broadcasting and "
    "allreduce chosen per layer). Includes the data tools, the C++ headers "
    "with find_package(Poseidon) and pkg-config, and the pycaffe-compatible "
    "Python package (import caffe).")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR})
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL runtime dev)
if(BUILD_python)
  list(APPEND CPACK_COMPONENTS_ALL python)
endif()
# One package holding the components above (the wheel's is built by pip).
set(CPACK_DEB_COMPONENT_INSTALL OFF)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libposeidon.so is in the package itself.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS
    ${CMAKE_BINARY_DIR}/lib)
# Beyond the linked libraries: mpirun for distributed runs and psd_run,
# Python 3 for psd_run and the log tools, pycaffe's imports, and the headers
# a C++ user compiles against (the dev component's find_package and
# pkg-config name them).
set(POSEIDON_DEB_DEPENDS
    "openmpi-bin, python3, libprotobuf-dev, libgoogle-glog-dev, libgflags-dev, libopenblas-dev, pkg-config")
if(BUILD_python)
  string(APPEND POSEIDON_DEB_DEPENDS ", python3-numpy, python3-protobuf")
endif()
set(CPACK_DEBIAN_PACKAGE_DEPENDS ${POSEIDON_DEB_DEPENDS})
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3-matplotlib, python3-skimage")
include(CPack)
