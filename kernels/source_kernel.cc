#include "kernels/source_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <utility>

#include "core/error.h"
#include "core/json.h"
#include "core/measurements.h"
#include "kernels/gpu_measure.h"
#include "kernels/opencl_backend.h"
#include "kernels/sparse_matrix.h"
#ifdef TUNEBASE_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace tunebase {
namespace {

using gpu::Clock;

constexpr const char* kGridSizeNames[] = {"grid_size_x", "grid_size_y", "grid_size_z"};
constexpr const char* kGridDivFlags[] = {"grid_div_x", "grid_div_y", "grid_div_z"};
constexpr std::int64_t kRandomIntegers = 100;  // "random" integers are 0 to kRandomIntegers - 1

struct TypeName {
  const char* name;
  ArgumentType type;
};
constexpr TypeName kTypeNames[] = {
    {"float32", ArgumentType::float32}, {"float", ArgumentType::float32},
    {"float64", ArgumentType::float64}, {"double", ArgumentType::float64},
    {"int8", ArgumentType::int8},       {"uint8", ArgumentType::uint8},
    {"int16", ArgumentType::int16},     {"uint16", ArgumentType::uint16},
    {"int32", ArgumentType::int32},     {"int", ArgumentType::int32},
    {"uint32", ArgumentType::uint32},   {"uint", ArgumentType::uint32},
    {"int64", ArgumentType::int64},     {"uint64", ArgumentType::uint64},
};

const char* type_name(ArgumentType type) {
  for (const auto& t : kTypeNames) {
    if (t.type == type) return t.name;
  }
  return "?";
}

// Calls f with a value of the C++ type of `type`.
template <typename F>
decltype(auto) with_type(ArgumentType type, F&& f) {
  switch (type) {
    case ArgumentType::int8:
      return f(std::int8_t{});
    case ArgumentType::uint8:
      return f(std::uint8_t{});
    case ArgumentType::int16:
      return f(std::int16_t{});
    case ArgumentType::uint16:
      return f(std::uint16_t{});
    case ArgumentType::int32:
      return f(std::int32_t{});
    case ArgumentType::uint32:
      return f(std::uint32_t{});
    case ArgumentType::int64:
      return f(std::int64_t{});
    case ArgumentType::uint64:
      return f(std::uint64_t{});
    case ArgumentType::float32:
      return f(float{});
    case ArgumentType::float64:
      break;
  }
  return f(double{});
}

std::size_t element_bytes(ArgumentType type) {
  return with_type(type, [](auto zero) { return sizeof(zero); });
}

// Whether `x` is a value of `type` (an integer type holds only whole numbers in its range).
bool representable(ArgumentType type, double x) {
  return with_type(type, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_floating_point_v<T>) {
      return std::isfinite(x);
    } else {
      return x == std::trunc(x) && x >= static_cast<double>(std::numeric_limits<T>::min()) &&
             x <= static_cast<double>(std::numeric_limits<T>::max());
    }
  });
}

std::string allowed_types() {
  std::string out;
  for (const auto& t : kTypeNames) out += (out.empty() ? "" : ", ") + std::string(t.name);
  return out;
}

ArgumentType parse_type(const nlohmann::json& type, const std::string& where) {
  if (type.is_string()) {
    for (const auto& t : kTypeNames) {
      if (type.get<std::string>() == t.name) return t.type;
    }
  }
  throw InvalidInput(where + ": unknown type " + type.dump() + "; allowed: " + allowed_types());
}

double number_of(const nlohmann::json& j, ArgumentType type, const std::string& where) {
  if (!j.is_number() || !representable(type, j.get<double>())) {
    throw InvalidInput(where + " must be a number that is a " + type_name(type) + ", got " +
                       j.dump());
  }
  return j.get<double>();
}

KernelArgumentSpec argument_from_json(const nlohmann::json& j, const std::string& where) {
  static const std::vector<std::string> kArrayFields = {"type", "size", "fill", "output"};
  static const std::vector<std::string> kScalarFields = {"type", "value"};
  const std::string forms =
      "an array is {\"type\", \"size\", \"fill\", \"output\"}, a scalar {\"type\", \"value\"}";
  if (!j.is_object()) throw InvalidInput(where + " must be a JSON object: " + forms);
  if (!j.contains("type")) throw InvalidInput(where + " has no \"type\": " + forms);
  KernelArgumentSpec a;
  a.type = parse_type(j["type"], where);
  a.is_array = !j.contains("value");
  if (j.contains("value") && j.contains("size")) {
    throw InvalidInput(where + " has both \"size\" and \"value\": " + forms);
  }
  const auto& fields = a.is_array ? kArrayFields : kScalarFields;
  for (const auto& [key, value] : j.items()) {
    if (std::find(fields.begin(), fields.end(), key) == fields.end()) {
      throw InvalidInput(where + ": unknown field \"" + key + "\"; " + forms);
    }
  }
  if (!a.is_array) {
    a.value = number_of(j["value"], a.type, where + "'s \"value\"");
    return a;
  }
  if (!j.contains("size") || !j["size"].is_number_integer() || j["size"].get<std::int64_t>() < 1) {
    throw InvalidInput(where + " needs a \"size\" of at least 1 element (or a \"value\" for a " +
                       "scalar), got " + (j.contains("size") ? j["size"].dump() : "none"));
  }
  a.size = j["size"].get<std::int64_t>();
  if (j.contains("fill")) {
    const auto& fill = j["fill"];
    static const std::vector<std::string> kFills = {"random", "zeros", "ones", "iota"};
    if (fill.is_string() &&
        std::find(kFills.begin(), kFills.end(), fill.get<std::string>()) != kFills.end()) {
      a.fill = fill.get<std::string>();
    } else if (fill.is_number()) {
      a.fill_value = number_of(fill, a.type, where + "'s \"fill\"");
    } else {
      throw InvalidInput(where + ": unknown \"fill\" " + fill.dump() +
                         "; allowed: random, zeros, ones, iota or a number");
    }
  }
  if (j.contains("output")) {
    if (!j["output"].is_boolean()) {
      throw InvalidInput(where + "'s \"output\" must be true or false, got " + j["output"].dump());
    }
    a.output = j["output"].get<bool>();
  }
  return a;
}

// The initial contents of an array argument, as bytes.
std::vector<unsigned char> initial_bytes(const KernelArgumentSpec& a, Rng& rng) {
  return with_type(a.type, [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> values(static_cast<std::size_t>(a.size));
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (a.fill_value) {
        values[i] = static_cast<T>(*a.fill_value);
      } else if (a.fill == "ones") {
        values[i] = T{1};
      } else if (a.fill == "iota") {
        values[i] = static_cast<T>(i);
      } else if (a.fill == "random") {
        if constexpr (std::is_floating_point_v<T>) {
          values[i] = std::uniform_real_distribution<T>(-1, 1)(rng);
        } else {
          values[i] = static_cast<T>(
              std::uniform_int_distribution<std::int64_t>(0, kRandomIntegers - 1)(rng));
        }
      }
    }
    std::vector<unsigned char> bytes(values.size() * sizeof(T));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
  });
}

ByValue scalar_bytes(const KernelArgumentSpec& a) {
  return with_type(a.type, [&](auto zero) {
    const auto value = static_cast<decltype(zero)>(a.value);
    const auto* bytes = reinterpret_cast<const unsigned char*>(&value);
    return ByValue{{bytes, bytes + sizeof(value)}};
  });
}

double element(ArgumentType type, const std::vector<unsigned char>& bytes, std::size_t i) {
  return with_type(type, [&](auto zero) {
    decltype(zero) value;
    std::memcpy(&value, bytes.data() + i * sizeof(value), sizeof(value));
    return static_cast<double>(value);
  });
}

std::int64_t integer_of(const Value& value, const std::string& what) {
  const double x = as_double(value);
  if (x != std::trunc(x)) {
    throw InvalidInput(what + " is " + to_string(value) + ", not a whole number");
  }
  return static_cast<std::int64_t>(x);
}

// The reference: the defaults or the first values when they are valid, else the first valid
// configuration.
Configuration default_reference(const SearchSpace& space) {
  if (auto defaults = space.valid_defaults(); !defaults.empty()) return defaults.front();
  if (space.enumerable() && !space.valid_configurations().empty()) {
    return space.valid_configurations().front();
  }
  throw InvalidInput(
      "neither the space's defaults nor its first values satisfy its restrictions: give the "
      "reference configuration whose outputs the others are checked against");
}

}  // namespace

std::vector<KernelArgumentSpec> kernel_arguments_from_json(const nlohmann::json& arguments) {
  if (!arguments.is_array() || arguments.empty()) {
    throw InvalidInput(
        "kernel arguments must be a JSON array with one entry per kernel argument, in order: "
        "arrays {\"type\": \"float\", \"size\": 1024, \"fill\": \"random\", \"output\": true}, "
        "scalars {\"type\": \"int32\", \"value\": 1024}");
  }
  std::vector<KernelArgumentSpec> specs;
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    specs.push_back(argument_from_json(arguments[i], "argument " + std::to_string(i)));
  }
  return specs;
}

std::vector<KernelArgumentSpec> load_kernel_arguments(const std::string& path) {
  const auto j = parse_json_text(read_maybe_gzipped(path), path, DuplicateKeys::refuse);
  try {
    return kernel_arguments_from_json(j);
  } catch (const InvalidInput& e) {
    throw InvalidInput(path + ": " + e.what());
  }
}

struct SourceKernelEvaluator::Data {
  std::vector<KernelArgumentSpec> specs;
  std::vector<std::vector<unsigned char>> initial;  // per argument; empty for scalars
  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  std::vector<KernelArg> args;
  std::vector<std::vector<unsigned char>> reference;  // per argument; outputs only
  std::vector<unsigned char> result;
};

SourceKernelEvaluator::SourceKernelEvaluator(std::shared_ptr<ComputeBackend> backend,
                                             std::string source, SearchSpace space,
                                             std::vector<KernelArgumentSpec> arguments,
                                             SourceKernelOptions options)
    : backend_(std::move(backend)),
      source_(std::move(source)),
      space_(std::move(space)),
      options_(std::move(options)),
      data_(std::make_unique<Data>()) {
  if (!backend_) throw InvalidInput("source kernel evaluator: no compute backend given");
  if (options_.kernel_name.empty()) throw InvalidInput("the kernel's name is empty");
  const auto& size = options_.problem_size;
  if (size.empty() || size.size() > 3 ||
      std::any_of(size.begin(), size.end(), [](std::int64_t n) { return n < 1; })) {
    throw InvalidInput("the problem size must be 1 to 3 extents of at least 1, e.g. 1024,1024");
  }
  if (!(options_.atol >= 0 && std::isfinite(options_.atol))) {
    throw InvalidInput("atol must be a number >= 0, got " + std::to_string(options_.atol));
  }
  if (options_.gpu.repeats < 1) {
    throw InvalidInput("repeats must be at least 1, got " + std::to_string(options_.gpu.repeats));
  }
  for (std::size_t d = 0; d < 3; ++d) {
    const auto& divisors = options_.grid_div[d];
    if (!divisors) {
      const auto& block = options_.block_size_names[d];
      if (space_.index_of(block)) grid_div_[d].push_back(Expression::parse(block));
    } else {
      for (const auto& text : *divisors) grid_div_[d].push_back(Expression::parse(text));
    }
    for (auto& e : grid_div_[d]) {
      e.bind([&](const std::string& name) {
        if (auto i = space_.index_of(name)) return *i;
        throw InvalidInput(std::string(kGridDivFlags[d]) + " '" + e.text() + "' names " + name +
                           ", which is not a parameter of the space");
      });
    }
  }

  auto& d = *data_;
  d.specs = std::move(arguments);
  // Host and device copies of every array: refused before they are made when they would not
  // fit in half this machine's memory.
  double bytes = 0;
  for (const auto& a : d.specs) {
    if (a.is_array) bytes += 3.0 * static_cast<double>(a.size) * element_bytes(a.type);
  }
  if (const auto memory = static_cast<double>(physical_memory_bytes());
      memory > 0 && bytes > 0.5 * memory) {
    throw InvalidInput("the kernel's arrays need about " + std::to_string(bytes / 1e9) +
                       " GB with their copies, more than half this machine's memory");
  }
  Rng rng(options_.gpu.seed);
  for (const auto& a : d.specs) {
    if (!a.is_array) {
      d.initial.emplace_back();
      d.buffers.emplace_back();
      d.args.emplace_back(scalar_bytes(a));
      continue;
    }
    d.initial.push_back(initial_bytes(a, rng));
    d.buffers.push_back(backend_->allocate(d.initial.back().size()));
    d.args.emplace_back(d.buffers.back().get());
  }

  reference_ = options_.reference ? *options_.reference : default_reference(space_);
  space_.check(reference_);
  GpuEvaluatorOptions once = options_.gpu;
  once.repeats = 1;
  once.time_limit_seconds = 0;
  const Measurement m = run(reference_, once);
  if (d.reference.empty()) {  // its checked launch never ran
    throw InvalidInput("the reference configuration " + space_.config_text(reference_) +
                       " of kernel " + options_.kernel_name + " failed, and every configuration " +
                       "is checked against its outputs: " + m.message);
  }
}

SourceKernelEvaluator::~SourceKernelEvaluator() = default;

nlohmann::json SourceKernelEvaluator::task() const {
  return {{"problem_size", options_.problem_size}};
}

SourceKernelEvaluator::Launch SourceKernelEvaluator::launch_for(const Configuration& config) const {
  Launch launch{defines_from(space_, config), {}, {}};
  for (std::size_t d = 0; d < 3; ++d) {
    const auto& name = options_.block_size_names[d];
    const auto index = space_.index_of(name);
    const std::int64_t block =
        index ? integer_of(config.at(*index), name) : kDefaultBlockSize.at(d);
    std::int64_t divisor = 1;
    for (const auto& e : grid_div_[d]) {
      // Kernel Tuner takes int() of each divisor and their product.
      divisor *= static_cast<std::int64_t>(as_double(e.evaluate(config)));
      if (divisor < 1) {
        throw InvalidInput(std::string(kGridDivFlags[d]) + " '" + e.text() +
                           "' is below 1 for this configuration; grid divisors must be positive");
      }
    }
    if (block < 1) throw InvalidInput(name + " is " + std::to_string(block) + ", below 1");
    const std::int64_t extent = d < options_.problem_size.size() ? options_.problem_size[d] : 1;
    // grid = ceil(problem size / product of the divisors)
    const std::int64_t grid = (extent + divisor - 1) / divisor;
    launch.defines[name] = std::to_string(block);
    launch.defines[kGridSizeNames[d]] = std::to_string(grid);
    launch.local.push_back(static_cast<std::size_t>(block));
    launch.global.push_back(static_cast<std::size_t>(grid * block));
  }
  launch.defines["kernel_tuner"] = "1";
  launch.defines = gpu::with_extra(std::move(launch.defines), options_.gpu.defines);
  return launch;
}

Measurement SourceKernelEvaluator::evaluate(const Configuration& config) {
  return run(config, options_.gpu);
}

Measurement SourceKernelEvaluator::run(const Configuration& config,
                                       const GpuEvaluatorOptions& options) {
  const auto start = Clock::now();
  if (auto invalid = gpu::check_config(space_, config, start)) return *invalid;
  Launch launch;
  try {
    launch = launch_for(config);
  } catch (const InvalidInput& e) {
    return gpu::failure(TrialStatus::failed, e.what(), start);
  }
  std::optional<Measurement> failed;
  auto kernel = gpu::compile_or_fail(*backend_, source_.c_str(), options_.kernel_name,
                                     launch.defines, failed, start);
  if (!kernel) return *failed;
  const auto work_group =
      static_cast<std::int64_t>(launch.local[0] * launch.local[1] * launch.local[2]);
  if (auto too_big = gpu::check_work_group(*kernel, work_group, backend_->device(), start)) {
    return *too_big;
  }

  auto& d = *data_;
  bool first = true;
  auto run_once = [&] {
    // Every array starts from its initial contents: stale outputs of another configuration
    // must not pass the check.
    if (first) {
      for (std::size_t i = 0; i < d.specs.size(); ++i) {
        if (d.buffers[i]) backend_->write(*d.buffers[i], d.initial[i].data(), d.initial[i].size());
      }
    }
    return backend_->launch(*kernel, launch.global, launch.local, d.args);
  };
  auto check = [&]() -> std::string {
    first = false;
    const bool recording = d.reference.empty();
    if (recording) d.reference.resize(d.specs.size());
    for (std::size_t i = 0; i < d.specs.size(); ++i) {
      const auto& a = d.specs[i];
      if (!a.is_array || !a.output) continue;
      d.result.resize(d.initial[i].size());
      backend_->read(*d.buffers[i], d.result.data(), d.result.size());
      if (recording) {
        d.reference[i] = d.result;
        continue;
      }
      std::size_t wrong = 0;
      std::string first_wrong;
      for (std::size_t k = 0; k < static_cast<std::size_t>(a.size); ++k) {
        const double x = element(a.type, d.result, k);
        const double expected = element(a.type, d.reference[i], k);
        // |x - reference| <= atol + rtol |reference| (numpy.allclose); NaN fails
        const double allowed = options_.atol + kRelativeTolerance * std::fabs(expected);
        if (!(std::fabs(x - expected) <= allowed) && wrong++ == 0) {
          std::ostringstream s;
          s << "output argument " << i << " differs from the reference configuration's at "
            << "element " << k << ": " << x << " instead of " << expected
            << " (allowed difference atol + 1e-5 |reference| = " << allowed << ")";
          first_wrong = s.str();
        }
      }
      if (wrong > 0) {
        return first_wrong + "; " + std::to_string(wrong) + " of " + std::to_string(a.size) +
               " elements differ";
      }
    }
    return "";
  };
  return gpu::measure(run_once, check, options, /*flops=*/0.0, start);
}

std::unique_ptr<Evaluator> make_source_kernel_evaluator(const std::string& backend,
                                                        std::size_t device, std::string source,
                                                        SearchSpace space,
                                                        std::vector<KernelArgumentSpec> arguments,
                                                        SourceKernelOptions options) {
  std::shared_ptr<ComputeBackend> compute;
  if (backend == "opencl") {
    compute = std::make_shared<OpenclBackend>(device);
  } else if (backend == "cuda") {
#ifdef TUNEBASE_HAVE_CUDA
    // CudaBackend's own message points to the built-in OpenCL kernels, no help for this one.
    if (cuda_device_count() == 0) {
      throw BackendError("no CUDA device available (" + cuda_unavailable_reason() +
                         "): a CUDA kernel runs only on one; an OpenCL version of it runs "
                         "here with --kernel opencl-source");
    }
    compute = std::make_shared<CudaBackend>(static_cast<int>(device));
#else
    throw BackendError("a CUDA kernel needs CUDA, but tunebase was built without it " +
                       std::string("(configure with -DTUNEBASE_WITH_CUDA=ON where nvcc is "
                                   "installed)"));
#endif
  } else {
    throw InvalidInput("unknown back end '" + backend + "'; allowed: opencl, cuda");
  }
  return std::make_unique<SourceKernelEvaluator>(std::move(compute), std::move(source),
                                                 std::move(space), std::move(arguments),
                                                 std::move(options));
}

}  // namespace tunebase
