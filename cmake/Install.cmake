# Install rules: what `cmake --install`, the Debian package (cmake/Packaging.cmake)
# and the Python wheel (pyproject.toml) put where. Four components:
#
#   runtime  bin/: poseidon_train, the data tools (partition_data too), psd_run;
#            lib/libposeidon.so and its image codecs plugin; share/poseidon/: caffe.proto and the log
#            tools (parse_log.py, plot_training_log.py)
#   dev      include/poseidon/ (with the generated proto/caffe.pb.h and
#            version.hpp),
#            lib/cmake/Poseidon/ (find_package(Poseidon)) and
#            lib/pkgconfig/poseidon.pc
#   python   the `caffe` and `poseidon` packages in POSEIDON_PYTHON_INSTALL_DIR
#            (BUILD_python=ON)
#   wheel    the wheel's layout, relative to site-packages: caffe/ and
#            poseidon/ with libposeidon.so and the tools inside caffe/ (tools
#            in caffe/bin, found by the console scripts of caffe/_cli.py).
#            Excluded from a plain `cmake --install`; pyproject.toml asks for
#            it alone.
#
# Destinations are relative, so one build installs under any prefix; the
# RPATHs below are relative too ($ORIGIN), so an installed tree works from
# wherever it lands.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# lib/, not lib/<multiarch>/: the package and `--prefix` installs look the
# same, and the relative RPATHs below need one depth.
set(POSEIDON_INSTALL_LIBDIR lib)
set(POSEIDON_INSTALL_CMAKEDIR ${POSEIDON_INSTALL_LIBDIR}/cmake/Poseidon)
# Debian's python3 reads /usr/lib/python3/dist-packages (the .deb's prefix is
# /usr); for another prefix point PYTHONPATH there or set this.
set(POSEIDON_PYTHON_INSTALL_DIR lib/python3/dist-packages CACHE STRING
    "Folder of the python component's packages, relative to the prefix")

# ---- runtime ---------------------------------------------------------------
set(POSEIDON_INSTALLED_TOOLS "")
foreach(src ${POSEIDON_TOOLS})
  get_filename_component(name ${src} NAME_WE)
  if(TARGET ${name})
    list(APPEND POSEIDON_INSTALLED_TOOLS ${name})
  endif()
endforeach()
# bin/ -> ../lib (a prefix install) and caffe/bin -> .. (the wheel).
set_target_properties(${POSEIDON_INSTALLED_TOOLS} PROPERTIES
  INSTALL_RPATH "\$ORIGIN/../${POSEIDON_INSTALL_LIBDIR};\$ORIGIN/..")
install(TARGETS ${POSEIDON_INSTALLED_TOOLS}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(TARGETS poseidon
  LIBRARY DESTINATION ${POSEIDON_INSTALL_LIBDIR} COMPONENT runtime)
# The image codecs plugin goes beside the library, where it is looked for.
if(TARGET poseidon_imgcodecs)
  install(TARGETS poseidon_imgcodecs
    LIBRARY DESTINATION ${POSEIDON_INSTALL_LIBDIR} COMPONENT runtime)
endif()
# (scripts/partition_data only finds the build tree's tool, which bin/ holds
# itself.)
install(PROGRAMS scripts/psd_run
  DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(FILES ${POSEIDON_PROTO}
  DESTINATION ${CMAKE_INSTALL_DATADIR}/poseidon COMPONENT runtime)
install(PROGRAMS tools/extra/parse_log.py tools/extra/parse_log.sh
                 tools/extra/plot_training_log.py
  DESTINATION ${CMAKE_INSTALL_DATADIR}/poseidon/tools COMPONENT runtime)

# ---- dev -------------------------------------------------------------------
install(DIRECTORY include/poseidon
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev
  FILES_MATCHING PATTERN "*.hpp" PATTERN "*.cuh")
install(FILES ${PROTO_OUT}/caffe.pb.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/poseidon/proto COMPONENT dev)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/include/poseidon/version.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/poseidon COMPONENT dev)

# The definitions the headers were compiled with (CPU_ONLY or USE_CUDA, ...)
# change class layouts, so users compile with the same ones.
set(POSEIDON_CONFIG_DEFINITIONS ${POSEIDON_DEFINITIONS})
list(JOIN POSEIDON_DEFINITIONS " -D" POSEIDON_PC_DEFINITIONS)
if(POSEIDON_PC_DEFINITIONS)
  set(POSEIDON_PC_DEFINITIONS "-D${POSEIDON_PC_DEFINITIONS}")
endif()
configure_package_config_file(cmake/PoseidonConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/PoseidonConfig.cmake
  INSTALL_DESTINATION ${POSEIDON_INSTALL_CMAKEDIR}
  PATH_VARS POSEIDON_INSTALL_LIBDIR CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(
  ${CMAKE_CURRENT_BINARY_DIR}/PoseidonConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/PoseidonConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/PoseidonConfigVersion.cmake
  DESTINATION ${POSEIDON_INSTALL_CMAKEDIR} COMPONENT dev)
configure_file(cmake/poseidon.pc.in ${CMAKE_CURRENT_BINARY_DIR}/poseidon.pc
               @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/poseidon.pc
  DESTINATION ${POSEIDON_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# ---- python and wheel ------------------------------------------------------
# The packages as python/CMakeLists.txt assembles them in the build tree.
if(BUILD_python)
  foreach(place python wheel)
    if(place STREQUAL python)
      set(dest ${POSEIDON_PYTHON_INSTALL_DIR})
      set(only "")
    else()
      set(dest .)
      set(only EXCLUDE_FROM_ALL)
    endif()
    install(DIRECTORY ${CMAKE_BINARY_DIR}/python/caffe
                      ${CMAKE_BINARY_DIR}/python/poseidon
      DESTINATION ${dest} COMPONENT ${place} ${only}
      PATTERN __pycache__ EXCLUDE
      PATTERN test EXCLUDE
      PATTERN "_caffe*.so" EXCLUDE)
    install(TARGETS _caffe
      LIBRARY DESTINATION ${dest}/caffe COMPONENT ${place} ${only})
  endforeach()
  # The wheel carries the library and the tools inside the package, and the
  # launcher as a module the psd_run console script runs.
  install(TARGETS poseidon
    LIBRARY DESTINATION caffe COMPONENT wheel EXCLUDE_FROM_ALL)
  if(TARGET poseidon_imgcodecs)
    install(TARGETS poseidon_imgcodecs
      LIBRARY DESTINATION caffe COMPONENT wheel EXCLUDE_FROM_ALL)
  endif()
  install(TARGETS ${POSEIDON_INSTALLED_TOOLS}
    RUNTIME DESTINATION caffe/bin COMPONENT wheel EXCLUDE_FROM_ALL)
  install(FILES scripts/psd_run RENAME _psd_run.py
    DESTINATION caffe COMPONENT wheel EXCLUDE_FROM_ALL)
endif()
