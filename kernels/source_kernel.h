// The user's own kernel source tuned as Kernel Tuner's tune_kernel() tunes it: every tune
// parameter becomes a -D define, the work-group comes from block_size_x/y/z, the grid from the
// problem size divided by grid_div_x/y/z, the arguments from a small JSON description, and
// every configuration's outputs are checked against those of a reference configuration.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/expression.h"
#include "core/space.h"
#include "core/trial.h"
#include "kernels/compute_backend.h"
#include "kernels/evaluator.h"
#include "kernels/gpu_evaluators.h"

namespace tunebase {

/// Element type of a kernel argument: numpy's names, with float, double, int and uint as the
/// C names of float32, float64, int32 and uint32.
enum class ArgumentType {
  int8,
  uint8,
  int16,
  uint16,
  int32,
  uint32,
  int64,
  uint64,
  float32,
  float64
};

/// One kernel argument, in kernel-argument order: an array of `size` elements filled by
/// `fill` ("random": uniform in [-1, 1) for reals, integers in [0, 99]; "zeros", "ones", "iota":
/// 0, 1, 2, ...; or `fill_value`), or a scalar passed by value.
struct KernelArgumentSpec {
  ArgumentType type = ArgumentType::float32;
  bool is_array = true;
  std::int64_t size = 0;
  std::string fill = "zeros";
  std::optional<double> fill_value;
  /// Arrays compared with the reference after each configuration's checked launch.
  bool output = false;
  /// A scalar's value.
  double value = 0.0;
};

/// Reads the arguments from a JSON array of {"type", "size", "fill", "output"} (arrays) and
/// {"type", "value"} (scalars). Throws InvalidInput naming the argument, the field and what is
/// allowed.
std::vector<KernelArgumentSpec> kernel_arguments_from_json(const nlohmann::json& arguments);
/// The same from a file; IoError when it cannot be read.
std::vector<KernelArgumentSpec> load_kernel_arguments(const std::string& path);

/// What tune_kernel() takes beside the source, space and arguments.
struct SourceKernelOptions {
  /// The kernel function in the source; also the name the measurements are stored under.
  std::string kernel_name;
  /// 1 to 3 extents; missing dimensions are 1.
  std::vector<std::int64_t> problem_size;
  /// Per dimension, expressions over the parameters whose product divides the problem size
  /// into the grid (Kernel Tuner's grid_div_x/y/z). nullopt: the block-size parameter of the
  /// dimension when the space has it, else 1.
  std::array<std::optional<std::vector<std::string>>, 3> grid_div;
  /// Names of the parameters that give the work-group (block) size per dimension; a dimension
  /// whose parameter the space lacks has kDefaultBlockSize.
  std::array<std::string, 3> block_size_names = {"block_size_x", "block_size_y", "block_size_z"};
  /// An output element passes when |x - reference| <= atol + kRelativeTolerance |reference|,
  /// numpy.allclose's test, which Kernel Tuner uses.
  double atol = 1e-6;
  /// The configuration whose outputs are the reference; nullopt: the space's defaults (the
  /// first values of Kernel Tuner's tune_params), or its first valid configuration.
  std::optional<Configuration> reference;
  GpuEvaluatorOptions gpu;
};

/// Tunes a kernel the user wrote. The objective is the median kernel time in milliseconds
/// over GpuEvaluatorOptions::repeats launches, metrics wall_time_ms; compile errors (with the
/// build log), launch errors and outputs that differ from the reference are failed
/// measurements. The reference configuration runs when the evaluator is built: InvalidInput
/// says so when it fails, as nothing could be checked.
class SourceKernelEvaluator final : public Evaluator {
 public:
  /// numpy.allclose's default rtol.
  static constexpr double kRelativeTolerance = 1e-5;
  /// Kernel Tuner's block size of a dimension whose parameter is not tuned: 256 in x, 1 else.
  static constexpr std::array<std::int64_t, 3> kDefaultBlockSize = {256, 1, 1};

  SourceKernelEvaluator(std::shared_ptr<ComputeBackend> backend, std::string source,
                        SearchSpace space, std::vector<KernelArgumentSpec> arguments,
                        SourceKernelOptions options);
  ~SourceKernelEvaluator() override;

  std::string kernel_name() const override { return options_.kernel_name; }
  std::string objective_unit() const override { return "ms"; }
  const SearchSpace& space() const override { return space_; }
  /// {"problem_size": [...]}, as Kernel Tuner's cache files record it.
  nlohmann::json task() const override;
  Measurement evaluate(const Configuration& config) override;

  const Configuration& reference() const { return reference_; }

  /// What one configuration compiles and launches: the parameters' defines plus Kernel
  /// Tuner's block_size_x/y/z, grid_size_x/y/z and kernel_tuner; work-items = grid * block.
  /// Throws InvalidInput when a block size or grid divisor is below 1.
  struct Launch {
    Defines defines;
    NdRange global;
    NdRange local;
  };
  Launch launch_for(const Configuration& config) const;

 private:
  struct Data;
  Measurement run(const Configuration& config, const GpuEvaluatorOptions& options);

  std::shared_ptr<ComputeBackend> backend_;
  std::string source_;
  SearchSpace space_;
  SourceKernelOptions options_;
  std::array<std::vector<Expression>, 3> grid_div_;
  Configuration reference_;
  std::unique_ptr<Data> data_;
};

/// The evaluator on device `device` of back end "opencl" or "cuda". Throws BackendError when
/// the back end is not built or has no such device.
std::unique_ptr<Evaluator> make_source_kernel_evaluator(const std::string& backend,
                                                        std::size_t device, std::string source,
                                                        SearchSpace space,
                                                        std::vector<KernelArgumentSpec> arguments,
                                                        SourceKernelOptions options);

}  // namespace tunebase
