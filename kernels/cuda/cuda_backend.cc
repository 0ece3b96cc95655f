#include "kernels/cuda/cuda_backend.h"

#include <cuda_runtime.h>
#include <nvrtc.h>

#include <deque>
#include <type_traits>
#include <unordered_map>
#include <utility>

namespace tunebase {
namespace {

constexpr double kSecondsPerMillisecond = 1e-3;

std::string cuda_error(cudaError_t status) {
  return std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
}

void check_cuda(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) throw BackendError(what + " failed: " + cuda_error(status));
}

// CUDA's sticky errors: a kernel faulted and the context is unusable; every later call in this
// process fails with the same error until the process ends.
bool is_sticky(cudaError_t status) {
  switch (status) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorMisalignedAddress:
    case cudaErrorIllegalInstruction:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
      return true;
    default:
      return false;
  }
}

constexpr char kContextLostNote[] =
    " (this fault leaves the CUDA context unusable: the next evaluation stops the sweep)";

std::vector<std::string> nvrtc_options(const Defines& defines, const std::string& architecture) {
  std::vector<std::string> options = {"--gpu-architecture=" + architecture, "--std=c++17"};
  for (const auto& [name, value] : defines) options.push_back("-D" + name + "=" + value);
  return options;
}

std::string joined(const std::vector<std::string>& options) {
  std::string text;
  for (const auto& o : options) text += (text.empty() ? "" : " ") + o;
  return text;
}

// NVRTC program with its log; `binary` is the CUBIN (real architecture) or PTX (virtual).
struct NvrtcResult {
  std::string binary;
  std::string log;
};

NvrtcResult nvrtc_compile(const std::string& source, const std::string& program_name,
                          const Defines& defines, const std::string& architecture, bool cubin) {
  nvrtcProgram program = nullptr;
  const std::string file = program_name + ".cu";
  if (auto status = nvrtcCreateProgram(&program, source.c_str(), file.c_str(), 0, nullptr, nullptr);
      status != NVRTC_SUCCESS) {
    throw CompileError(
        "NVRTC could not create program " + file + ": " + nvrtcGetErrorString(status), "");
  }
  const auto options = nvrtc_options(defines, architecture);
  std::vector<const char*> pointers;
  for (const auto& o : options) pointers.push_back(o.c_str());
  const auto status =
      nvrtcCompileProgram(program, static_cast<int>(pointers.size()), pointers.data());
  NvrtcResult result;
  std::size_t log_size = 0;
  if (nvrtcGetProgramLogSize(program, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    result.log.resize(log_size);
    nvrtcGetProgramLog(program, result.log.data());
    result.log.resize(log_size - 1);  // drop the terminating NUL
  }
  if (status == NVRTC_SUCCESS) {
    std::size_t size = 0;
    if (cubin) {
      nvrtcGetCUBINSize(program, &size);
      result.binary.resize(size);
      nvrtcGetCUBIN(program, result.binary.data());
    } else {
      nvrtcGetPTXSize(program, &size);
      result.binary.resize(size);
      nvrtcGetPTX(program, result.binary.data());
    }
  }
  nvrtcDestroyProgram(&program);
  if (status != NVRTC_SUCCESS) {
    throw CompileError("NVRTC build of " + program_name + " with '" + joined(options) +
                           "' failed (" + nvrtcGetErrorString(status) + "):\n" + result.log,
                       result.log);
  }
  return result;
}

class CudaBuffer final : public DeviceBuffer {
 public:
  CudaBuffer(void* pointer, std::size_t bytes) : pointer_(pointer), bytes_(bytes) {}
  ~CudaBuffer() override { cudaFree(pointer_); }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  std::size_t bytes() const override { return bytes_; }
  void* pointer() const { return pointer_; }

 private:
  void* pointer_;
  std::size_t bytes_;
};

class CudaKernel final : public CompiledKernel {
 public:
  CudaKernel(std::string name, cudaLibrary_t library, cudaKernel_t kernel, std::int64_t max_threads)
      : name_(std::move(name)), library_(library), kernel_(kernel), max_threads_(max_threads) {}
  ~CudaKernel() override { cudaLibraryUnload(library_); }
  CudaKernel(const CudaKernel&) = delete;
  CudaKernel& operator=(const CudaKernel&) = delete;
  const std::string& name() const override { return name_; }
  std::int64_t max_work_group_size() const override { return max_threads_; }
  cudaKernel_t kernel() const { return kernel_; }

 private:
  std::string name_;
  cudaLibrary_t library_;
  cudaKernel_t kernel_;
  std::int64_t max_threads_;
};

DeviceInfo describe(int device) {
  cudaDeviceProp properties{};
  check_cuda(cudaGetDeviceProperties(&properties, device),
             "cudaGetDeviceProperties(" + std::to_string(device) + ")");
  int driver = 0;
  cudaDriverGetVersion(&driver);
  DeviceInfo info;
  info.backend = "cuda";
  info.platform = "CUDA";
  info.name = properties.name;
  info.vendor = "NVIDIA";
  info.version = "sm_" + std::to_string(properties.major) + std::to_string(properties.minor);
  info.driver_version = std::to_string(driver);
  info.compute_units = properties.multiProcessorCount;
  info.local_memory_bytes = static_cast<std::int64_t>(properties.sharedMemPerBlock);
  info.max_work_group_size = properties.maxThreadsPerBlock;
  info.global_memory_bytes = static_cast<std::int64_t>(properties.totalGlobalMem);
  info.double_precision = true;
  return info;
}

}  // namespace

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

std::string cuda_unavailable_reason() {
  int count = 0;
  const auto status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) return cuda_error(status);
  return count == 0 ? "no CUDA device found" : "";
}

nlohmann::json cuda_devices() {
  nlohmann::json result = nlohmann::json::array();
  const int count = cuda_device_count();
  for (int d = 0; d < count; ++d) result.push_back(describe(d).to_json());
  return result;
}

std::string compile_cuda_to_ptx(const std::string& source, const std::string& program_name,
                                const Defines& defines, const std::string& architecture) {
  return nvrtc_compile(source, program_name, defines, architecture, false).binary;
}

struct CudaBackend::Impl {
  int device = 0;
  DeviceInfo info;
  std::string architecture;  // sm_XY: NVRTC emits a CUBIN for exactly this device
  std::unordered_map<std::string, std::shared_ptr<CudaKernel>> programs;
  std::deque<std::string> insertion_order;
  // The call that hit a sticky error, once one did; the context is lost from then on.
  std::string lost_after;

  // The configuration that faulted is a failed trial; the ones after it are not: none can run.
  void require_context() const {
    if (lost_after.empty()) return;
    throw EvaluatorUnavailable("the CUDA context was lost after " + lost_after +
                               "; no configuration can run in this process any more: resume the "
                               "sweep (or restart the worker) in a new process, the trials "
                               "measured so far are kept");
  }

  // check_cuda that remembers a sticky error.
  void check(cudaError_t status, const std::string& what) {
    if (status == cudaSuccess) return;
    const std::string message = what + " failed: " + cuda_error(status);
    if (!is_sticky(status)) throw BackendError(message);
    lost_after = message;
    throw BackendError(message + kContextLostNote);
  }
};

CudaBackend::CudaBackend(int device) : impl_(std::make_unique<Impl>()) {
  int count = 0;
  const auto status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    // cudaErrorInsufficientDriver also means "no NVIDIA driver at all", as on a machine
    // without a GPU: said plainly, with what runs here instead.
    const bool no_driver = status == cudaErrorInsufficientDriver || status == cudaErrorNoDevice;
    throw BackendError(
        "no CUDA device available (" +
        (no_driver ? std::string("no NVIDIA GPU or driver on this machine, CUDA says: ") +
                         cuda_error(status)
         : status != cudaSuccess ? cuda_error(status)
                                 : std::string("0 devices")) +
        "); the opencl-gemm, opencl-spmv and opencl-conv kernels run the same kinds of kernel "
        "through OpenCL, on this CPU with PoCL");
  }
  if (device < 0 || device >= count) {
    throw BackendError("CUDA device " + std::to_string(device) +
                       " does not exist: " + std::to_string(count) + " device(s) found");
  }
  impl_->device = device;
  check_cuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  impl_->info = describe(device);
  impl_->architecture = impl_->info.version;
}

CudaBackend::~CudaBackend() = default;

const DeviceInfo& CudaBackend::device() const { return impl_->info; }

std::size_t CudaBackend::cached_programs() const { return impl_->programs.size(); }

std::shared_ptr<CompiledKernel> CudaBackend::compile(const std::string& source,
                                                     const std::string& kernel_name,
                                                     const Defines& defines) {
  impl_->require_context();
  std::string key =
      kernel_name + '\n' + joined(nvrtc_options(defines, impl_->architecture)) + '\n' + source;
  if (auto it = impl_->programs.find(key); it != impl_->programs.end()) return it->second;

  const auto cubin = nvrtc_compile(source, kernel_name, defines, impl_->architecture, true);
  cudaLibrary_t library = nullptr;
  if (auto status = cudaLibraryLoadData(&library, cubin.binary.data(), nullptr, nullptr, 0, nullptr,
                                        nullptr, 0);
      status != cudaSuccess) {
    throw CompileError("loading the CUBIN of " + kernel_name + " failed: " + cuda_error(status),
                       cubin.log);
  }
  cudaKernel_t kernel = nullptr;
  if (auto status = cudaLibraryGetKernel(&kernel, library, kernel_name.c_str());
      status != cudaSuccess) {
    cudaLibraryUnload(library);
    throw CompileError("kernel " + kernel_name + " not found in its program: " + cuda_error(status),
                       cubin.log);
  }
  cudaFuncAttributes attributes{};
  std::int64_t max_threads = impl_->info.max_work_group_size;
  if (cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(kernel)) == cudaSuccess) {
    max_threads = attributes.maxThreadsPerBlock;
  }
  auto compiled = std::make_shared<CudaKernel>(kernel_name, library, kernel, max_threads);
  if (impl_->programs.size() >= kMaxCachedPrograms) {
    impl_->programs.erase(impl_->insertion_order.front());
    impl_->insertion_order.pop_front();
  }
  impl_->insertion_order.push_back(key);
  impl_->programs.emplace(std::move(key), compiled);
  return compiled;
}

std::unique_ptr<DeviceBuffer> CudaBackend::allocate(std::size_t bytes) {
  impl_->require_context();
  void* pointer = nullptr;
  impl_->check(cudaMalloc(&pointer, bytes), "cudaMalloc of " + std::to_string(bytes) + " bytes");
  return std::make_unique<CudaBuffer>(pointer, bytes);
}

void CudaBackend::write(DeviceBuffer& buffer, const void* host, std::size_t bytes) {
  impl_->require_context();
  auto& b = dynamic_cast<CudaBuffer&>(buffer);
  if (bytes > b.bytes()) {
    throw BackendError("CUDA write of " + std::to_string(bytes) + " bytes into a buffer of " +
                       std::to_string(b.bytes()));
  }
  impl_->check(cudaMemcpy(b.pointer(), host, bytes, cudaMemcpyHostToDevice),
               "cudaMemcpy to device");
}

void CudaBackend::read(const DeviceBuffer& buffer, void* host, std::size_t bytes) {
  impl_->require_context();
  const auto& b = dynamic_cast<const CudaBuffer&>(buffer);
  if (bytes > b.bytes()) {
    throw BackendError("CUDA read of " + std::to_string(bytes) + " bytes from a buffer of " +
                       std::to_string(b.bytes()));
  }
  impl_->check(cudaMemcpy(host, b.pointer(), bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
}

double CudaBackend::launch(CompiledKernel& compiled, const NdRange& global, const NdRange& local,
                           const std::vector<KernelArg>& args) {
  impl_->require_context();
  auto& k = dynamic_cast<CudaKernel&>(compiled);
  if (global.empty() || global.size() > 3 || global.size() != local.size()) {
    throw LaunchError("CUDA launch of " + k.name() +
                      ": global and local ranges need the same rank, 1 to 3");
  }
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  for (std::size_t i = 0; i < global.size(); ++i) {
    if (local[i] == 0 || global[i] % local[i] != 0) {
      throw LaunchError("CUDA launch of " + k.name() + ": global size " +
                        std::to_string(global[i]) + " is not a multiple of block size " +
                        std::to_string(local[i]) + " in dimension " + std::to_string(i));
    }
    grid[i] = static_cast<unsigned>(global[i] / local[i]);
    block[i] = static_cast<unsigned>(local[i]);
  }

  // cudaLaunchKernel takes one pointer per parameter, pointing at the parameter's value.
  std::vector<void*> device_pointers(args.size(), nullptr);
  std::vector<void*> parameters;
  std::size_t shared_bytes = 0;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::visit(
        [&](const auto& arg) {
          using T = std::decay_t<decltype(arg)>;
          if constexpr (std::is_same_v<T, const DeviceBuffer*>) {
            device_pointers[i] = dynamic_cast<const CudaBuffer&>(*arg).pointer();
            parameters.push_back(&device_pointers[i]);
          } else if constexpr (std::is_same_v<T, LocalMemory>) {
            shared_bytes += arg.bytes;
          } else if constexpr (std::is_same_v<T, ByValue>) {
            parameters.push_back(const_cast<unsigned char*>(arg.bytes.data()));
          } else {
            parameters.push_back(const_cast<T*>(&arg));
          }
        },
        args[i]);
  }

  cudaEvent_t begin = nullptr;
  cudaEvent_t end = nullptr;
  impl_->check(cudaEventCreate(&begin), "cudaEventCreate");
  if (auto status = cudaEventCreate(&end); status != cudaSuccess) {
    cudaEventDestroy(begin);
    impl_->check(status, "cudaEventCreate");
  }
  cudaEventRecord(begin);
  auto status = cudaLaunchKernel(
      reinterpret_cast<const void*>(k.kernel()), dim3(grid[0], grid[1], grid[2]),
      dim3(block[0], block[1], block[2]), parameters.data(), shared_bytes, nullptr);
  cudaEventRecord(end);
  if (status == cudaSuccess) status = cudaEventSynchronize(end);
  float milliseconds = 0.0f;
  if (status == cudaSuccess) status = cudaEventElapsedTime(&milliseconds, begin, end);
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  if (status != cudaSuccess) {
    const std::string message = "launching CUDA kernel " + k.name() + " (grid " +
                                std::to_string(grid[0]) + "x" + std::to_string(grid[1]) + "x" +
                                std::to_string(grid[2]) + ", block " + std::to_string(block[0]) +
                                "x" + std::to_string(block[1]) + "x" + std::to_string(block[2]) +
                                "): " + cuda_error(status);
    if (is_sticky(status)) {
      impl_->lost_after = message;
      throw LaunchError(message + kContextLostNote);
    }
    cudaGetLastError();  // clear a non-sticky error so that the next configuration can run
    throw LaunchError(message);
  }
  return milliseconds * kSecondsPerMillisecond;
}

}  // namespace tunebase
