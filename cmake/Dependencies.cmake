# Every dependency comes from Debian packages (scripts/setup.sh installs them).
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(SQLite3 REQUIRED)
# libssl-dev: SHA-256 and random bytes for API tokens (db/).
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
find_package(ZLIB REQUIRED)
find_package(dlib REQUIRED)
find_package(Boost 1.74 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(spdlog REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
if(TUNEBASE_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(TUNEBASE_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
# PETSc (Debian petsc-dev: sequential-capable, built with hypre and Open MPI) ships no CMake
# package, only pkg-config files; its headers include <mpi.h>, found through mpi-c.pc.
find_package(PkgConfig REQUIRED)
pkg_check_modules(PETSC REQUIRED IMPORTED_TARGET PETSc)
pkg_check_modules(MPI_C REQUIRED IMPORTED_TARGET mpi-c)
