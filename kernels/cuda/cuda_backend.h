// CUDA implementation of ComputeBackend: NVRTC compiles each configuration at run time, the
// CUDA runtime (statically linked) loads, launches and times it. Without a driver or device,
// cuda_device_count() is 0 and constructing a CudaBackend throws BackendError.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/compute_backend.h"

namespace tunebase {

/// CUDA devices visible to this process; 0 when there is no driver or no device.
int cuda_device_count();
/// Why there is no CUDA device ("no CUDA-capable device is detected", ...), or "" if there is.
std::string cuda_unavailable_reason();
/// DeviceInfo::to_json() of every CUDA device, for the machine fingerprint; [] without any.
nlohmann::json cuda_devices();

/// Compiles `source` with NVRTC for a virtual architecture ("compute_80") and returns the PTX.
/// Needs no GPU: tests use it to check that every configuration's CUDA source compiles.
/// Throws CompileError with NVRTC's log.
std::string compile_cuda_to_ptx(const std::string& source, const std::string& program_name,
                                const Defines& defines,
                                const std::string& architecture = "compute_80");

/// After a sticky CUDA error (a kernel that faulted: illegal address, launch failure, ...) the
/// context is unusable: the call that met it throws BackendError (LaunchError from launch), so
/// that its configuration is a failed trial, and every later call throws EvaluatorUnavailable.
class CudaBackend final : public ComputeBackend {
 public:
  /// Opens CUDA device `device`. Throws BackendError naming the reason when it is unavailable.
  explicit CudaBackend(int device = 0);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  const DeviceInfo& device() const override;
  std::shared_ptr<CompiledKernel> compile(const std::string& source, const std::string& kernel_name,
                                          const Defines& defines) override;
  std::size_t cached_programs() const override;
  std::unique_ptr<DeviceBuffer> allocate(std::size_t bytes) override;
  void write(DeviceBuffer& buffer, const void* host, std::size_t bytes) override;
  void read(const DeviceBuffer& buffer, void* host, std::size_t bytes) override;
  /// `global` counts threads, as in OpenCL; it must be a multiple of `local` (the block).
  /// LocalMemory arguments add up to the launch's dynamic shared memory.
  double launch(CompiledKernel& kernel, const NdRange& global, const NdRange& local,
                const std::vector<KernelArg>& args) override;

  static constexpr std::size_t kMaxCachedPrograms = 512;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tunebase
