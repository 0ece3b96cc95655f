#include "core/machine.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <set>
#include <string_view>
#include <thread>
#include <utility>

namespace tunebase {

namespace {

constexpr std::size_t kMaxHostName = 256;
constexpr std::uint64_t kBytesPerKiB = 1024;
// FNV-1a 64-bit parameters (offset basis and prime).
constexpr std::uint64_t kFnvOffsetBasis = 1469598103934665603ULL;
constexpr std::uint64_t kFnvPrime = 1099511628211ULL;

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(first, last - first + 1));
}

// Splits a "key : value" line of /proc/cpuinfo or /proc/meminfo.
std::pair<std::string, std::string> split_field(const std::string& line) {
  const auto colon = line.find(':');
  if (colon == std::string::npos) return {trim(line), {}};
  return {trim(std::string_view(line).substr(0, colon)),
          trim(std::string_view(line).substr(colon + 1))};
}

void read_cpuinfo(nlohmann::json& fp) {
  std::ifstream in("/proc/cpuinfo");
  if (!in) return;
  std::string model;
  // A physical core is a distinct (socket, core) pair; hyper-threads share one.
  std::set<std::pair<std::string, std::string>> cores;
  std::string socket;
  std::string line;
  while (std::getline(in, line)) {
    auto [key, value] = split_field(line);
    // x86 says "model name"; some ARM kernels say "Model name" or only "Hardware".
    if (model.empty() &&
        (key == "model name" || key == "Model name" || key == "Hardware" || key == "cpu model")) {
      model = value;
    } else if (key == "physical id") {
      socket = value;
    } else if (key == "core id") {
      cores.emplace(socket, value);
    }
  }
  if (!model.empty()) fp["cpu_model"] = model;
  if (!cores.empty()) fp["physical_cores"] = cores.size();
}

void read_meminfo(nlohmann::json& fp) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    auto [key, value] = split_field(line);
    if (key != "MemTotal") continue;
    // The value reads "16318412 kB".
    try {
      fp["memory_bytes"] = static_cast<std::uint64_t>(std::stoull(value)) * kBytesPerKiB;
    } catch (const std::exception&) {
      // An unreadable total is left out rather than guessed.
    }
    return;
  }
}

std::string compiler_description() {
#if defined(__clang__)
  return std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("gcc ") + __VERSION__;
#else
  return "unknown";
#endif
}

}  // namespace

std::string stable_json_hash(const nlohmann::json& j) {
  std::uint64_t h = kFnvOffsetBasis;
  for (unsigned char c : j.dump()) {
    // h = (h xor byte) * prime, modulo 2^64
    h ^= c;
    h *= kFnvPrime;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

void refresh_fingerprint_hash(MachineInfo& info) {
  info.fingerprint_hash = stable_json_hash(info.fingerprint);
}

std::string similar_machine_name(const std::string& name, const std::vector<std::string>& names) {
  // Case, spaces, dashes and underscores left out: "tesla v100-pcie", "TeslaV100 PCIE".
  const auto folded = [](const std::string& text) {
    std::string out;
    for (const unsigned char c : text) {
      if (c != ' ' && c != '\t' && c != '-' && c != '_') {
        out += static_cast<char>(std::tolower(c));
      }
    }
    return out;
  };
  const auto wanted = folded(name);
  std::string similar;
  for (const auto& n : names) {
    if (n == name) return "";
    if (similar.empty() && folded(n) == wanted) similar = n;
  }
  return similar;
}

MachineInfo detect_machine() {
  MachineInfo info;
  nlohmann::json& fp = info.fingerprint;
  fp = nlohmann::json::object();

  read_cpuinfo(fp);
  if (const unsigned logical = std::thread::hardware_concurrency(); logical > 0) {
    fp["logical_cores"] = logical;
    if (!fp.contains("physical_cores")) fp["physical_cores"] = logical;
  }
  read_meminfo(fp);

  struct utsname uts {};
  if (uname(&uts) == 0) {
    fp["os"] = uts.sysname;
    fp["kernel_release"] = uts.release;
    fp["arch"] = uts.machine;
  }
  fp["compiler"] = compiler_description();
  fp["devices"] = nlohmann::json::array();

  char host[kMaxHostName] = {};
  if (gethostname(host, sizeof host - 1) == 0 && host[0] != '\0') {
    info.name = host;
  } else {
    info.name = "localhost";
  }
  refresh_fingerprint_hash(info);
  return info;
}

}  // namespace tunebase
