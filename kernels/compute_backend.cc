#include "kernels/compute_backend.h"

namespace tunebase {

nlohmann::json DeviceInfo::to_json() const {
  return {{"backend", backend},
          {"platform", platform},
          {"name", name},
          {"vendor", vendor},
          {"version", version},
          {"driver_version", driver_version},
          {"compute_units", compute_units},
          {"local_memory_bytes", local_memory_bytes},
          {"max_work_group_size", max_work_group_size},
          {"global_memory_bytes", global_memory_bytes},
          {"double_precision", double_precision}};
}

Defines defines_from(const SearchSpace& space, const Configuration& config) {
  if (config.size() != space.dimension()) {
    throw InvalidInput("configuration has " + std::to_string(config.size()) +
                       " values but the space has " + std::to_string(space.dimension()) +
                       " parameters");
  }
  Defines defines;
  for (std::size_t i = 0; i < config.size(); ++i) {
    defines[space.parameter(i).name] = to_string(config[i]);
  }
  return defines;
}

std::string to_compile_options(const Defines& defines) {
  std::string options;
  for (const auto& [name, value] : defines) {
    if (!options.empty()) options += ' ';
    options += "-D" + name + "=" + value;
  }
  return options;
}

}  // namespace tunebase
