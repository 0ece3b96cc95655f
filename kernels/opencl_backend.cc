#include "kernels/opencl_backend.h"

#define CL_HPP_ENABLE_EXCEPTIONS
#define CL_HPP_MINIMUM_OPENCL_VERSION 120
#define CL_HPP_TARGET_OPENCL_VERSION 120
#include <CL/opencl.hpp>
#include <deque>
#include <sstream>
#include <type_traits>
#include <unordered_map>
#include <utility>

namespace tunebase {
namespace {

constexpr double kNanosecondsPerSecond = 1e9;

struct PlatformDevice {
  cl::Platform platform;
  cl::Device device;
};

// All devices of all platforms, in platform order then device order. No platform -> empty.
std::vector<PlatformDevice> all_devices() {
  std::vector<PlatformDevice> result;
  std::vector<cl::Platform> platforms;
  try {
    cl::Platform::get(&platforms);
  } catch (const cl::Error&) {
    return result;  // the ICD loader found no platform (CL_PLATFORM_NOT_FOUND_KHR)
  }
  for (const auto& platform : platforms) {
    std::vector<cl::Device> devices;
    try {
      platform.getDevices(CL_DEVICE_TYPE_ALL, &devices);
    } catch (const cl::Error&) {
      continue;  // a platform without devices reports CL_DEVICE_NOT_FOUND
    }
    for (auto& device : devices) result.push_back({platform, device});
  }
  return result;
}

DeviceInfo describe(const PlatformDevice& pd) {
  DeviceInfo info;
  info.backend = "opencl";
  info.platform = pd.platform.getInfo<CL_PLATFORM_NAME>();
  info.name = pd.device.getInfo<CL_DEVICE_NAME>();
  info.vendor = pd.device.getInfo<CL_DEVICE_VENDOR>();
  info.version = pd.device.getInfo<CL_DEVICE_VERSION>();
  info.driver_version = pd.device.getInfo<CL_DRIVER_VERSION>();
  info.compute_units = pd.device.getInfo<CL_DEVICE_MAX_COMPUTE_UNITS>();
  info.local_memory_bytes =
      static_cast<std::int64_t>(pd.device.getInfo<CL_DEVICE_LOCAL_MEM_SIZE>());
  info.max_work_group_size =
      static_cast<std::int64_t>(pd.device.getInfo<CL_DEVICE_MAX_WORK_GROUP_SIZE>());
  info.global_memory_bytes =
      static_cast<std::int64_t>(pd.device.getInfo<CL_DEVICE_GLOBAL_MEM_SIZE>());
  info.double_precision = pd.device.getInfo<CL_DEVICE_DOUBLE_FP_CONFIG>() != 0;
  // Trailing NULs and spaces appear in some drivers' strings.
  for (std::string* s :
       {&info.platform, &info.name, &info.vendor, &info.version, &info.driver_version}) {
    while (!s->empty() && (s->back() == '\0' || s->back() == ' ')) s->pop_back();
  }
  return info;
}

std::string describe_error(const std::string& what, const cl::Error& e) {
  return what + ": " + e.what() + " returned " + opencl_error_name(e.err());
}

class OpenclBuffer final : public DeviceBuffer {
 public:
  OpenclBuffer(cl::Buffer buffer, std::size_t bytes) : buffer_(std::move(buffer)), bytes_(bytes) {}
  std::size_t bytes() const override { return bytes_; }
  const cl::Buffer& buffer() const { return buffer_; }

 private:
  cl::Buffer buffer_;
  std::size_t bytes_;
};

class OpenclKernel final : public CompiledKernel {
 public:
  OpenclKernel(std::string name, cl::Program program, cl::Kernel kernel, std::int64_t max_wg)
      : name_(std::move(name)),
        program_(std::move(program)),
        kernel_(std::move(kernel)),
        max_work_group_size_(max_wg) {}
  const std::string& name() const override { return name_; }
  std::int64_t max_work_group_size() const override { return max_work_group_size_; }
  cl::Kernel& kernel() { return kernel_; }

 private:
  std::string name_;
  cl::Program program_;  // keeps the program alive as long as the kernel
  cl::Kernel kernel_;
  std::int64_t max_work_group_size_;
};

cl::NDRange to_nd_range(const NdRange& r, const char* what) {
  switch (r.size()) {
    case 1:
      return cl::NDRange(r[0]);
    case 2:
      return cl::NDRange(r[0], r[1]);
    case 3:
      return cl::NDRange(r[0], r[1], r[2]);
    default:
      throw LaunchError(std::string("OpenCL launch: the ") + what + " range has " +
                        std::to_string(r.size()) + " dimensions; 1 to 3 are allowed");
  }
}

}  // namespace

struct OpenclBackend::Impl {
  DeviceInfo info;
  cl::Device device;
  cl::Context context;
  cl::CommandQueue queue;
  std::unordered_map<std::string, std::shared_ptr<OpenclKernel>> programs;
  std::deque<std::string> insertion_order;
};

std::vector<DeviceInfo> list_opencl_devices() {
  std::vector<DeviceInfo> result;
  try {
    for (const auto& pd : all_devices()) result.push_back(describe(pd));
  } catch (const cl::Error& e) {
    throw BackendError(describe_error("listing OpenCL devices", e));
  }
  return result;
}

nlohmann::json opencl_devices() {
  nlohmann::json result = nlohmann::json::array();
  for (const auto& info : list_opencl_devices()) result.push_back(info.to_json());
  return result;
}

OpenclBackend::OpenclBackend(std::size_t device_index) : impl_(std::make_unique<Impl>()) {
  const auto devices = all_devices();
  if (device_index >= devices.size()) {
    throw BackendError("OpenCL device " + std::to_string(device_index) +
                       " does not exist: " + std::to_string(devices.size()) +
                       " device(s) found (install an ICD such as pocl-opencl-icd)");
  }
  try {
    impl_->device = devices[device_index].device;
    impl_->info = describe(devices[device_index]);
    impl_->context = cl::Context(impl_->device);
    impl_->queue = cl::CommandQueue(impl_->context, impl_->device, CL_QUEUE_PROFILING_ENABLE);
  } catch (const cl::Error& e) {
    throw BackendError(describe_error("opening OpenCL device " + std::to_string(device_index), e));
  }
}

OpenclBackend::~OpenclBackend() = default;

const DeviceInfo& OpenclBackend::device() const { return impl_->info; }

std::size_t OpenclBackend::cached_programs() const { return impl_->programs.size(); }

std::shared_ptr<CompiledKernel> OpenclBackend::compile(const std::string& source,
                                                       const std::string& kernel_name,
                                                       const Defines& defines) {
  const std::string options = to_compile_options(defines);
  std::string key = kernel_name + '\n' + options + '\n' + source;
  if (auto it = impl_->programs.find(key); it != impl_->programs.end()) return it->second;

  cl::Program program;
  try {
    program = cl::Program(impl_->context, source);
  } catch (const cl::Error& e) {
    throw CompileError(describe_error("creating OpenCL program for " + kernel_name, e), "");
  }
  try {
    program.build(std::vector<cl::Device>{impl_->device}, options.c_str());
  } catch (const cl::Error& e) {
    std::string log;
    try {
      log = program.getBuildInfo<CL_PROGRAM_BUILD_LOG>(impl_->device);
    } catch (const cl::Error&) {
      log = "(no build log)";
    }
    throw CompileError("OpenCL build of " + kernel_name + " with '" + options + "' failed (" +
                           opencl_error_name(e.err()) + "):\n" + log,
                       log);
  }
  std::shared_ptr<OpenclKernel> compiled;
  try {
    cl::Kernel kernel(program, kernel_name.c_str());
    const auto max_wg = static_cast<std::int64_t>(
        kernel.getWorkGroupInfo<CL_KERNEL_WORK_GROUP_SIZE>(impl_->device));
    compiled = std::make_shared<OpenclKernel>(kernel_name, program, kernel, max_wg);
  } catch (const cl::Error& e) {
    throw CompileError(describe_error("creating OpenCL kernel " + kernel_name, e), "");
  }

  if (impl_->programs.size() >= kMaxCachedPrograms) {
    impl_->programs.erase(impl_->insertion_order.front());
    impl_->insertion_order.pop_front();
  }
  impl_->insertion_order.push_back(key);
  impl_->programs.emplace(std::move(key), compiled);
  return compiled;
}

std::unique_ptr<DeviceBuffer> OpenclBackend::allocate(std::size_t bytes) {
  try {
    return std::make_unique<OpenclBuffer>(cl::Buffer(impl_->context, CL_MEM_READ_WRITE, bytes),
                                          bytes);
  } catch (const cl::Error& e) {
    throw BackendError(
        describe_error("allocating " + std::to_string(bytes) + " bytes on " + impl_->info.name, e));
  }
}

void OpenclBackend::write(DeviceBuffer& buffer, const void* host, std::size_t bytes) {
  auto& b = dynamic_cast<OpenclBuffer&>(buffer);
  if (bytes > b.bytes()) {
    throw BackendError("OpenCL write of " + std::to_string(bytes) + " bytes into a buffer of " +
                       std::to_string(b.bytes()));
  }
  try {
    impl_->queue.enqueueWriteBuffer(b.buffer(), CL_TRUE, 0, bytes, host);
  } catch (const cl::Error& e) {
    throw BackendError(describe_error("writing an OpenCL buffer", e));
  }
}

void OpenclBackend::read(const DeviceBuffer& buffer, void* host, std::size_t bytes) {
  const auto& b = dynamic_cast<const OpenclBuffer&>(buffer);
  if (bytes > b.bytes()) {
    throw BackendError("OpenCL read of " + std::to_string(bytes) + " bytes from a buffer of " +
                       std::to_string(b.bytes()));
  }
  try {
    impl_->queue.enqueueReadBuffer(b.buffer(), CL_TRUE, 0, bytes, host);
  } catch (const cl::Error& e) {
    throw BackendError(describe_error("reading an OpenCL buffer", e));
  }
}

double OpenclBackend::launch(CompiledKernel& compiled, const NdRange& global, const NdRange& local,
                             const std::vector<KernelArg>& args) {
  auto& k = dynamic_cast<OpenclKernel&>(compiled);
  if (global.size() != local.size()) {
    throw LaunchError("OpenCL launch of " + k.name() + ": global and local ranges differ in rank");
  }
  try {
    for (std::size_t i = 0; i < args.size(); ++i) {
      const auto index = static_cast<cl_uint>(i);
      std::visit(
          [&](const auto& arg) {
            using T = std::decay_t<decltype(arg)>;
            if constexpr (std::is_same_v<T, const DeviceBuffer*>) {
              k.kernel().setArg(index, dynamic_cast<const OpenclBuffer&>(*arg).buffer());
            } else if constexpr (std::is_same_v<T, LocalMemory>) {
              k.kernel().setArg(index, cl::Local(arg.bytes));
            } else if constexpr (std::is_same_v<T, ByValue>) {
              k.kernel().setArg(index, arg.bytes.size(), arg.bytes.data());
            } else {
              k.kernel().setArg(index, arg);
            }
          },
          args[i]);
    }
    cl::Event event;
    impl_->queue.enqueueNDRangeKernel(k.kernel(), cl::NullRange, to_nd_range(global, "global"),
                                      to_nd_range(local, "local"), nullptr, &event);
    event.wait();
    const auto start = event.getProfilingInfo<CL_PROFILING_COMMAND_START>();
    const auto end = event.getProfilingInfo<CL_PROFILING_COMMAND_END>();
    return static_cast<double>(end - start) / kNanosecondsPerSecond;
  } catch (const cl::Error& e) {
    std::ostringstream ranges;
    ranges << " (global";
    for (auto g : global) ranges << ' ' << g;
    ranges << ", local";
    for (auto l : local) ranges << ' ' << l;
    ranges << ")";
    throw LaunchError(describe_error("launching OpenCL kernel " + k.name() + ranges.str(), e));
  }
}

std::string opencl_error_name(int code) {
  switch (code) {
#define TUNEBASE_CL_ERROR(name) \
  case name:                    \
    return #name;
    TUNEBASE_CL_ERROR(CL_DEVICE_NOT_FOUND)
    TUNEBASE_CL_ERROR(CL_DEVICE_NOT_AVAILABLE)
    TUNEBASE_CL_ERROR(CL_COMPILER_NOT_AVAILABLE)
    TUNEBASE_CL_ERROR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    TUNEBASE_CL_ERROR(CL_OUT_OF_RESOURCES)
    TUNEBASE_CL_ERROR(CL_OUT_OF_HOST_MEMORY)
    TUNEBASE_CL_ERROR(CL_PROFILING_INFO_NOT_AVAILABLE)
    TUNEBASE_CL_ERROR(CL_BUILD_PROGRAM_FAILURE)
    TUNEBASE_CL_ERROR(CL_INVALID_VALUE)
    TUNEBASE_CL_ERROR(CL_INVALID_DEVICE)
    TUNEBASE_CL_ERROR(CL_INVALID_CONTEXT)
    TUNEBASE_CL_ERROR(CL_INVALID_COMMAND_QUEUE)
    TUNEBASE_CL_ERROR(CL_INVALID_MEM_OBJECT)
    TUNEBASE_CL_ERROR(CL_INVALID_BUILD_OPTIONS)
    TUNEBASE_CL_ERROR(CL_INVALID_PROGRAM)
    TUNEBASE_CL_ERROR(CL_INVALID_PROGRAM_EXECUTABLE)
    TUNEBASE_CL_ERROR(CL_INVALID_KERNEL_NAME)
    TUNEBASE_CL_ERROR(CL_INVALID_KERNEL)
    TUNEBASE_CL_ERROR(CL_INVALID_ARG_INDEX)
    TUNEBASE_CL_ERROR(CL_INVALID_ARG_VALUE)
    TUNEBASE_CL_ERROR(CL_INVALID_ARG_SIZE)
    TUNEBASE_CL_ERROR(CL_INVALID_KERNEL_ARGS)
    TUNEBASE_CL_ERROR(CL_INVALID_WORK_DIMENSION)
    TUNEBASE_CL_ERROR(CL_INVALID_WORK_GROUP_SIZE)
    TUNEBASE_CL_ERROR(CL_INVALID_WORK_ITEM_SIZE)
    TUNEBASE_CL_ERROR(CL_INVALID_GLOBAL_WORK_SIZE)
    TUNEBASE_CL_ERROR(CL_INVALID_EVENT)
    TUNEBASE_CL_ERROR(CL_INVALID_OPERATION)
    TUNEBASE_CL_ERROR(CL_INVALID_BUFFER_SIZE)
#undef TUNEBASE_CL_ERROR
    default:
      return "OpenCL error " + std::to_string(code);
  }
}

}  // namespace tunebase
