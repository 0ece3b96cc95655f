// The machine a measurement was taken on: a name plus a fingerprint of its hardware and
// software, so that measurements from different machines are never mixed up.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tunebase {

struct MachineInfo {
  /// Human name; detect_machine() uses the host name. Unique in a database.
  std::string name;
  /// What identifies the machine: cpu_model, logical_cores, physical_cores, memory_bytes,
  /// os, kernel_release, arch, compiler, and `devices` (an array that accelerator back ends
  /// fill with one object per device, e.g. {"platform": ..., "name": ..., "driver": ...}).
  /// After changing it, call refresh_fingerprint_hash().
  nlohmann::json fingerprint = nlohmann::json::object();
  /// stable_json_hash(fingerprint).
  std::string fingerprint_hash;
};

/// The one of `names` that `name` matches but for case, spaces, dashes and underscores
/// ("tesla k20m" for "Tesla K20m"), empty when none does or `name` is one of them itself: what
/// a misspelt machine name probably meant.
std::string similar_machine_name(const std::string& name, const std::vector<std::string>& names);

/// Describes the machine this process runs on (reads /proc/cpuinfo, /proc/meminfo, uname).
/// Fields that cannot be read are left out rather than guessed; `devices` starts empty.
MachineInfo detect_machine();

/// Recomputes `info.fingerprint_hash` from `info.fingerprint` (after devices were added).
void refresh_fingerprint_hash(MachineInfo& info);

/// Stable 64-bit content hash (FNV-1a, 16 hex digits) of the compact JSON text. Object keys
/// are sorted by nlohmann::json, so equal documents hash equally. Not for security.
std::string stable_json_hash(const nlohmann::json& j);

}  // namespace tunebase
