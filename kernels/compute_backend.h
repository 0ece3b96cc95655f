// A small compute-device interface shared by the OpenCL and CUDA back ends: compile a kernel
// source with -D defines, move buffers, launch over an ND-range and time the launch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "core/error.h"
#include "core/space.h"

namespace tunebase {

/// What a device is and what it allows; the limits become constraints of a kernel's space.
struct DeviceInfo {
  std::string backend;  ///< "opencl" or "cuda"
  std::string platform;
  std::string name;
  std::string vendor;
  std::string version;  ///< device version (OpenCL) or compute capability (CUDA)
  std::string driver_version;
  std::int64_t compute_units = 0;
  std::int64_t local_memory_bytes = 0;   ///< per work-group (shared memory per block)
  std::int64_t max_work_group_size = 0;  ///< work-items (threads) per work-group
  std::int64_t global_memory_bytes = 0;
  bool double_precision = false;

  nlohmann::json to_json() const;
};

/// Preprocessor definitions passed as -DNAME=VALUE. Ordered by name, so that the same set
/// always gives the same compile options and the same program-cache key.
using Defines = std::map<std::string, std::string>;

/// One define per parameter of `config`, named like the parameter, valued by its text.
Defines defines_from(const SearchSpace& space, const Configuration& config);
/// "-DA=1 -DB=2" in name order.
std::string to_compile_options(const Defines& defines);

/// The kernel source did not compile; what() names the kernel and carries the build log.
class CompileError : public BackendError {
 public:
  CompileError(const std::string& message, std::string log)
      : BackendError(message), log_(std::move(log)) {}
  const std::string& log() const { return log_; }

 private:
  std::string log_;
};

/// A launch was refused or failed (work-group too large, out of resources, ...).
class LaunchError : public BackendError {
 public:
  using BackendError::BackendError;
};

/// Memory on the device. Released when destroyed.
class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  virtual std::size_t bytes() const = 0;
};

/// A compiled kernel, ready to launch.
class CompiledKernel {
 public:
  virtual ~CompiledKernel() = default;
  virtual const std::string& name() const = 0;
  /// The largest work-group this kernel can be launched with on its device (it may be lower
  /// than the device maximum for kernels that use many registers).
  virtual std::int64_t max_work_group_size() const = 0;
};

/// Dynamically sized local (shared) memory passed as a kernel argument.
struct LocalMemory {
  std::size_t bytes = 0;
};

/// Raw bytes passed by value (a struct argument; in CUDA it lands in constant memory).
struct ByValue {
  std::vector<unsigned char> bytes;
};

/// One kernel argument; scalars are passed by value with exactly these types.
using KernelArg = std::variant<const DeviceBuffer*, std::int32_t, std::int64_t, float, double,
                               LocalMemory, ByValue>;

/// Work-items per dimension (1 to 3 dimensions).
using NdRange = std::vector<std::size_t>;

/// A device plus a queue. Not thread-safe: one evaluator (and thread) per backend object.
class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;

  virtual const DeviceInfo& device() const = 0;

  /// Compiles `source` with `defines` and returns its kernel `kernel_name`. Programs are
  /// cached per (source, defines, kernel), so a configuration measured twice compiles once.
  /// Throws CompileError carrying the compiler's log.
  virtual std::shared_ptr<CompiledKernel> compile(const std::string& source,
                                                  const std::string& kernel_name,
                                                  const Defines& defines) = 0;
  /// Number of compiled programs held in the cache.
  virtual std::size_t cached_programs() const = 0;

  /// Allocates `bytes` of device memory; throws BackendError when that fails.
  virtual std::unique_ptr<DeviceBuffer> allocate(std::size_t bytes) = 0;
  /// Blocking copies between host and device; `bytes` must not exceed the buffer.
  virtual void write(DeviceBuffer& buffer, const void* host, std::size_t bytes) = 0;
  virtual void read(const DeviceBuffer& buffer, void* host, std::size_t bytes) = 0;

  /// Runs `kernel` over `global` work-items (a multiple of `local` in each dimension) in
  /// work-groups of `local`, waits for it, and returns the device time of the launch in
  /// seconds, taken from the device's own events. Throws LaunchError with the device's error.
  virtual double launch(CompiledKernel& kernel, const NdRange& global, const NdRange& local,
                        const std::vector<KernelArg>& args) = 0;
};

/// Smallest multiple of `multiple` that is >= `value`.
constexpr std::size_t round_up(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

}  // namespace tunebase
