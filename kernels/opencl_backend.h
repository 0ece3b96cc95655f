// OpenCL implementation of ComputeBackend (any ICD: PoCL on a CPU, a GPU driver elsewhere).
#pragma once

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/compute_backend.h"

namespace tunebase {

/// Every OpenCL device of every platform, in the order OpenclBackend numbers them.
std::vector<DeviceInfo> list_opencl_devices();

/// The same as a JSON array of DeviceInfo::to_json() objects (name, vendor, version, compute
/// units, local memory, max work-group size...), for the machine fingerprint. An empty array
/// when no OpenCL platform is installed.
nlohmann::json opencl_devices();

class OpenclBackend final : public ComputeBackend {
 public:
  /// Opens device `device_index` of list_opencl_devices() with a profiling queue. Throws
  /// BackendError when there is no such device (naming how many there are).
  explicit OpenclBackend(std::size_t device_index = 0);
  ~OpenclBackend() override;
  OpenclBackend(const OpenclBackend&) = delete;
  OpenclBackend& operator=(const OpenclBackend&) = delete;

  const DeviceInfo& device() const override;
  std::shared_ptr<CompiledKernel> compile(const std::string& source, const std::string& kernel_name,
                                          const Defines& defines) override;
  std::size_t cached_programs() const override;
  std::unique_ptr<DeviceBuffer> allocate(std::size_t bytes) override;
  void write(DeviceBuffer& buffer, const void* host, std::size_t bytes) override;
  void read(const DeviceBuffer& buffer, void* host, std::size_t bytes) override;
  double launch(CompiledKernel& kernel, const NdRange& global, const NdRange& local,
                const std::vector<KernelArg>& args) override;

  /// At most this many compiled programs are kept; the oldest is dropped first.
  static constexpr std::size_t kMaxCachedPrograms = 512;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Name of an OpenCL error code ("CL_INVALID_WORK_GROUP_SIZE"), or "OpenCL error <code>".
std::string opencl_error_name(int code);

}  // namespace tunebase
