// Readers for Kernel Tuner cache files and T4 result files, plain or gzip-compressed.
//
// Formats (see ../shared/data/README.md for real examples):
//  - Kernel Tuner cache: {"device_name", "kernel_name", "problem_size", "tune_params_keys",
//    "tune_params": {name: [values]}, "cache": {"v1,v2,...": {name: value, ..., "time": ms or
//    "CompilationFailedConfig", "times": [ms...], other metrics}}}.
//  - T4 results (github.com/odgaard/TuningSchema, results-schema.json): {"schema_version",
//    "metadata": {"timeunit"}, "results": [{"configuration": {...}, "invalidity":
//    "correct"|"compile"|"runtime"|"correctness"|"timeout"|"constraints", "measurements":
//    [{"name": "time", "value": ...}], "times": {"compilation", "runtimes": [...], ...}}]}.
#include "core/measurements.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/error.h"
#include "core/json.h"

namespace tunebase {
namespace {

using nlohmann::json;

constexpr unsigned char kGzipMagic[2] = {0x1f, 0x8b};
// zlib windowBits: 15 = the 32 KiB window every gzip file may use; +16 = expect a gzip
// header and trailer (not a raw zlib stream).
constexpr int kGzipWindowBits = 15 + 16;
constexpr std::size_t kInflateFirstChunk = std::size_t{1} << 20;
// Deflate never compresses better than about 1032:1, which bounds what a gzip trailer's
// size field can honestly claim (used only to pre-allocate).
constexpr std::size_t kMaxDeflateRatio = 1032;
// Size of a gzip header (10) plus trailer (8): anything shorter cannot be complete.
constexpr std::size_t kMinGzipBytes = 18;
// How many allowed values an error message lists before "...".
constexpr std::size_t kMaxListedValues = 20;
constexpr double kMillisecondsPerSecond = 1000.0;

// Kernel Tuner's per-entry timing fields (milliseconds) that add up to what evaluating
// the configuration cost.
constexpr std::string_view kKtCostFields[] = {"compile_time", "verification_time",
                                              "benchmark_time"};
// Kernel Tuner before its failure strings stored a failed configuration's time as 1e20 ms.
constexpr double kKtFailedTime = 1e20;

bool starts_with_gzip_magic(const std::string& bytes, std::size_t at = 0) {
  return bytes.size() >= at + 2 && static_cast<unsigned char>(bytes[at]) == kGzipMagic[0] &&
         static_cast<unsigned char>(bytes[at + 1]) == kGzipMagic[1];
}

/// Owns a zlib inflate stream.
class Inflater {
 public:
  explicit Inflater(const std::string& origin) {
    if (inflateInit2(&stream_, kGzipWindowBits) != Z_OK) {
      throw IoError(origin + ": cannot initialise zlib to decompress the gzip stream");
    }
  }
  ~Inflater() { inflateEnd(&stream_); }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;
  z_stream& stream() { return stream_; }

 private:
  z_stream stream_{};
};

InvalidInput too_large(const std::string& origin, std::size_t limit, const char* what) {
  return InvalidInput(origin + ": " + what + " more than " + std::to_string(limit >> 20) +
                      " MiB of JSON, the most tunebase reads from one measurement file here "
                      "(parsing takes about 8 times that in memory)");
}

std::string gunzip(const std::string& bytes, const std::string& origin, std::size_t limit) {
  const auto truncated = [&] {
    return InvalidInput(origin +
                        ": the gzip stream is truncated (it ends before the compressed "
                        "data does); the file was probably cut off while copying or downloading");
  };
  if (bytes.size() < kMinGzipBytes) throw truncated();

  Inflater inflater(origin);
  z_stream& zs = inflater.stream();

  // The trailer's ISIZE field is the uncompressed size modulo 2^32 (little endian).
  const auto* tail = reinterpret_cast<const unsigned char*>(bytes.data() + bytes.size() - 4);
  const std::size_t claimed =
      static_cast<std::size_t>(tail[0]) | (static_cast<std::size_t>(tail[1]) << 8) |
      (static_cast<std::size_t>(tail[2]) << 16) | (static_cast<std::size_t>(tail[3]) << 24);
  std::string out;
  out.resize(std::max(kInflateFirstChunk,
                      std::min({claimed + 1, bytes.size() * kMaxDeflateRatio, limit})));

  std::size_t consumed = 0;  // bytes handed to zlib so far
  std::size_t produced = 0;
  for (;;) {
    if (zs.avail_in == 0 && consumed < bytes.size()) {
      const std::size_t n = std::min<std::size_t>(bytes.size() - consumed, UINT_MAX);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + consumed));
      zs.avail_in = static_cast<uInt>(n);
      consumed += n;
    }
    if (produced == out.size()) {
      if (out.size() >= limit) throw too_large(origin, limit, "decompresses to");
      out.resize(std::min(out.size() * 2, limit));
    }
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    zs.avail_out = static_cast<uInt>(std::min<std::size_t>(out.size() - produced, UINT_MAX));
    const uInt room = zs.avail_out;
    const int rc = inflate(&zs, Z_NO_FLUSH);
    produced += room - zs.avail_out;

    if (rc == Z_STREAM_END) {
      const std::size_t rest = zs.avail_in + (bytes.size() - consumed);
      if (rest == 0) break;
      // `gzip a b > c` concatenates members; each decompresses in turn.
      if (starts_with_gzip_magic(bytes, bytes.size() - rest)) {
        inflateReset(&zs);
        continue;
      }
      throw InvalidInput(origin + ": the gzip stream is corrupt: " + std::to_string(rest) +
                         " bytes of unexpected data follow its end");
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR) {
      // No progress possible: either the output is full (grown above) or input ran out.
      if (zs.avail_in == 0 && consumed == bytes.size()) throw truncated();
      continue;
    }
    if (rc == Z_MEM_ERROR) throw std::bad_alloc();
    throw InvalidInput(
        origin + ": the gzip stream is corrupt (" +
        (zs.msg != nullptr ? std::string(zs.msg) : "zlib error " + std::to_string(rc)) +
        " at compressed byte " + std::to_string(consumed - zs.avail_in) + ")");
  }
  out.resize(produced);
  return out;
}

std::string read_file_bytes(const std::string& path, std::size_t max_bytes) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw IoError("cannot read " + path + ": it is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw IoError("cannot open " + path + ": " + std::strerror(errno));
  }
  std::string bytes;
  in.seekg(0, std::ios::end);
  const auto size = in.tellg();
  if (size > 0 && static_cast<std::size_t>(size) > max_bytes) {
    throw too_large(path, max_bytes, "holds");
  }
  if (size > 0) {
    bytes.resize(static_cast<std::size_t>(size));
    in.seekg(0, std::ios::beg);
    in.read(bytes.data(), size);
    if (!in) throw IoError("reading " + path + " failed");
  }
  return bytes;
}

// ---------------------------------------------------------------- JSON helpers

/// A measured time: a positive number of milliseconds (a failure is marked as the format
/// marks it, `failure_hint`, not with 0 or -1).
double measured_time(double ms, const std::string& where,
                     const char* failure_hint =
                         "a failed configuration is a string such as \"RuntimeFailedConfig\"") {
  if (!(ms > 0.0) || !std::isfinite(ms)) {
    throw InvalidInput(where + ": \"time\" must be a positive number of milliseconds, got " +
                       json(ms).dump() + " (" + failure_hint + ")");
  }
  return ms;
}

json parse_json(const std::string& text, const std::string& origin) {
  try {
    return parse_json_text(text, origin);
  } catch (const ParseError& e) {
    throw ParseError(
        std::string(e.what()) + "; expected a Kernel Tuner cache file or a T4 results file",
        e.position());
  }
}

// Python's json module writes NaN, Infinity and -Infinity, which JSON does not have; Kernel
// Tuner reads them back. Outside strings they become null. Returns how many were replaced.
std::size_t replace_python_non_finite(std::string& text) {
  static constexpr std::string_view kLiterals[] = {"-Infinity", "Infinity", "NaN"};
  std::string out;
  std::size_t replaced = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        out += c;
        if (++i < text.size()) out += text[i];
        continue;
      }
      if (c == '"') in_string = false;
      out += c;
      continue;
    }
    if (c == '"') in_string = true;
    const auto literal = std::find_if(std::begin(kLiterals), std::end(kLiterals), [&](auto l) {
      return std::string_view(text).substr(i, l.size()) == l;
    });
    if (literal != std::end(kLiterals)) {
      out += "null";
      i += literal->size() - 1;
      ++replaced;
      continue;
    }
    out += c;
  }
  if (replaced > 0) text = std::move(out);
  return replaced;
}

// A Kernel Tuner cache is written entry by entry: the header without its closing braces, then
// "key": {...}, per configuration. A run that was interrupted (or is still going) leaves it
// open, ending in a comma; Kernel Tuner closes it when it reads it, as here.
std::string closed_cache(std::string_view text) {
  const auto end = text.find_last_not_of(" \t\r\n");
  if (end == std::string_view::npos) return std::string(text);
  std::string out(text.substr(0, text[end] == ',' ? end : end + 1));
  out += "}\n}";
  return out;
}

// The JSON of a measurement file, read as Kernel Tuner reads its own caches when strict JSON
// fails: NaN and Infinity (as null), and a cache left open. `text` becomes what was parsed;
// `notes` says what was done. What these do not explain keeps the strict parser's error.
json parse_measurement_json(std::string& text, const std::string& origin,
                            std::vector<std::string>& notes) {
  try {
    return parse_json(text, origin);
  } catch (const ParseError&) {
    const std::exception_ptr strict = std::current_exception();
    std::string lenient = text;
    const std::size_t non_finite = replace_python_non_finite(lenient);
    const auto parses = [&](const std::string& candidate) -> std::optional<json> {
      try {
        return parse_json_text(candidate, origin);
      } catch (const Error&) {
        return std::nullopt;
      }
    };
    std::optional<json> root = non_finite > 0 ? parses(lenient) : std::nullopt;
    bool closed = false;
    if (!root) {
      std::string candidate = closed_cache(lenient);
      root = parses(candidate);
      closed = root && root->is_object() && root->contains("cache");
      if (!closed) std::rethrow_exception(strict);
      lenient = std::move(candidate);
    }
    if (non_finite > 0) {
      notes.push_back(std::to_string(non_finite) +
                      " NaN or Infinity value(s), which Python writes and JSON lacks, read as "
                      "null");
    }
    if (closed) {
      notes.push_back(
          "the cache was not closed (a Kernel Tuner run that was interrupted or is still "
          "going); read up to its last complete entry, as Kernel Tuner does");
    }
    text = std::move(lenient);
    return std::move(*root);
  }
}

std::string short_dump(const json& j) {
  constexpr std::size_t kMaxShown = 60;
  std::string s = j.dump();
  if (s.size() > kMaxShown) s = s.substr(0, kMaxShown) + "...";
  return s;
}

std::string describe(const json& j) { return std::string(j.type_name()) + " " + short_dump(j); }

const json& required(const json& object, const std::string& key, const std::string& where,
                     const char* what_file) {
  auto it = object.find(key);
  if (it == object.end()) {
    throw InvalidInput(where + " has no \"" + key + "\" key, which " + what_file + " must have");
  }
  return *it;
}

std::string optional_string(const json& object, const std::string& key, const std::string& where) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return {};
  if (!it->is_string()) {
    throw InvalidInput(where + ": \"" + key + "\" must be a string, got " + describe(*it));
  }
  return it->get<std::string>();
}

std::vector<double> durations(const json& list, const std::string& where, double scale) {
  if (!list.is_array())
    throw InvalidInput(where + " must be a list of numbers, got " + describe(list));
  std::vector<double> out;
  out.reserve(list.size());
  for (const auto& x : list) {
    if (!x.is_number()) {
      throw InvalidInput(where + " must be a list of numbers, but holds " + describe(x));
    }
    const double v = x.get<double>() * scale;
    if (!(v >= 0.0) || !std::isfinite(v)) {
      throw InvalidInput(where + " must be times of 0 or more, but holds " + describe(x));
    }
    out.push_back(v);
  }
  return out;
}

std::string allowed_values(const Parameter& p) {
  std::string s;
  for (std::size_t i = 0; i < p.values.size() && i < kMaxListedValues; ++i) {
    if (i > 0) s += ", ";
    s += to_string(p.values[i]);
  }
  if (p.values.size() > kMaxListedValues) s += ", ...";
  return s;
}

Value scalar_value(const json& j, const std::string& where, const std::string& name) {
  try {
    return value_from_json(j);
  } catch (const InvalidInput&) {
    throw InvalidInput(where + ": parameter '" + name +
                       "' must be a number, a string or true/false (read as 1/0), got " +
                       describe(j));
  }
}

/// The listed value of `p` equal to `j` (so 2.0 in an entry becomes the listed 2).
Value domain_value(const Parameter& p, const json& j, const std::string& where,
                   const char* domain_name) {
  const Value v = scalar_value(j, where, p.name);
  const auto index = p.index_of(v);
  if (!index) {
    throw InvalidInput(where + ": value " + j.dump() + " of parameter '" + p.name + "' is not in " +
                       domain_name + " (allowed: " + allowed_values(p) + ")");
  }
  return p.values[*index];
}

// ---------------------------------------------------------------- Kernel Tuner

/// Whether the cache key names the same values as the entry. Kernel Tuner writes the key as
/// Python's str() of each value joined by commas, so compare value by value (1.0 and 1 are
/// the same number) rather than as text.
bool key_matches(std::string_view key, const Configuration& config) {
  std::vector<std::string_view> pieces;
  std::size_t start = 0;
  for (;;) {
    const auto comma = key.find(',', start);
    pieces.push_back(key.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  // A string value holding a comma splits into several pieces: compare the whole text, as
  // Kernel Tuner writes it (Python's str() of each value, unescaped).
  if (pieces.size() != config.size()) {
    std::string joined;
    for (std::size_t i = 0; i < config.size(); ++i) {
      if (i) joined += ',';
      joined += python_text(config[i]);
    }
    return key == joined;
  }
  for (std::size_t i = 0; i < config.size(); ++i) {
    std::string_view piece = pieces[i];
    // A string is compared as it is (" sp" is not "sp"); a number may follow a space.
    if (const auto* s = std::get_if<std::string>(&config[i])) {
      if (piece != *s) return false;
      continue;
    }
    while (!piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
    // Python's str() of a boolean value, read as 1 or 0 (value_from_json).
    if (piece == "True" || piece == "False") {
      if (as_double(config[i]) != (piece == "True" ? 1.0 : 0.0)) return false;
      continue;
    }
    double parsed = 0.0;
    const auto [end, ec] = std::from_chars(piece.data(), piece.data() + piece.size(), parsed);
    if (ec != std::errc() || end != piece.data() + piece.size()) return false;
    if (parsed != as_double(config[i])) return false;
  }
  return true;
}

double kt_cost_seconds(const json& entry, const std::vector<double>& raw,
                       const std::string& where) {
  double ms = 0.0;
  bool benchmark_known = false;
  for (std::string_view field : kKtCostFields) {
    auto it = entry.find(std::string(field));
    if (it != entry.end() && it->is_number()) {
      if (!(it->get<double>() >= 0.0)) {
        throw InvalidInput(where + ": \"" + std::string(field) +
                           "\" must be a time of 0 ms or more, got " + it->dump());
      }
      ms += it->get<double>();
      if (field == "benchmark_time") benchmark_known = true;
    }
  }
  // Caches without timing fields (the GPU benchmarking paper's) still cost their repeats.
  if (!benchmark_known) {
    for (double t : raw) ms += t;
  }
  return ms / kMillisecondsPerSecond;
}

Observation parse_kt_entry(const std::string& key, const json& entry, const SearchSpace& space,
                           const std::unordered_set<std::string>& reserved,
                           const std::string& objective, const std::string& origin) {
  const std::string where = origin + ": cache entry \"" + key + "\"";
  if (!entry.is_object()) throw InvalidInput(where + " must be an object, got " + describe(entry));
  Observation obs;
  obs.config.reserve(space.dimension());
  for (const auto& p : space.parameters()) {
    auto it = entry.find(p.name);
    if (it == entry.end()) {
      throw InvalidInput(where + " has no value for parameter '" + p.name + "'");
    }
    obs.config.push_back(domain_value(p, *it, where, "tune_params"));
  }
  if (!key_matches(key, obs.config)) {
    std::string python_key;
    for (std::size_t i = 0; i < obs.config.size(); ++i)
      python_key += (i > 0 ? "," : "") + python_text(obs.config[i]);
    throw InvalidInput(where + " does not match its values: they give the key \"" + python_key +
                       "\" (the key must be the values of tune_params_keys joined by commas)");
  }

  std::vector<double> raw;
  if (auto it = entry.find("times"); it != entry.end())
    raw = durations(*it, where + ": \"times\"", 1.0);
  const double cost = kt_cost_seconds(entry, raw, where);

  auto time = entry.find("time");
  // A cache of another objective: an entry that did not fail (no "time" naming a failure) has
  // it as a number; its time, when it has one, and its times are metrics, as a replay of that
  // objective keeps them.
  if (objective != "time" && (time == entry.end() || time->is_number())) {
    const auto value = entry.find(objective);
    if (value == entry.end() || !value->is_number() || !std::isfinite(value->get<double>())) {
      throw InvalidInput(where + " has no number in \"" + objective +
                         "\", the cache's objective, and no \"time\" naming its failure (such "
                         "as \"RuntimeFailedConfig\")");
    }
    obs.result = Measurement::success(value->get<double>(), {}, cost);
    for (auto it = entry.begin(); it != entry.end(); ++it) {
      if (!space.index_of(it.key())) obs.result.metrics[it.key()] = it.value();
    }
    return obs;
  }
  if (time == entry.end()) {
    throw InvalidInput(where +
                       " has no \"time\" (milliseconds, or a string such as "
                       "\"CompilationFailedConfig\" for a failed configuration)");
  }
  if (time->is_number() && time->get<double>() >= kKtFailedTime) {
    obs.result = Measurement::failure(
        TrialStatus::failed,
        "time " + time->dump() + ": older Kernel Tuner versions' mark of a failed configuration",
        cost);
    obs.result.raw = std::move(raw);
  } else if (time->is_number()) {
    obs.result =
        Measurement::success(measured_time(time->get<double>(), where), std::move(raw), cost);
  } else if (time->is_string()) {
    // A number written as a string is a broken file, not a failure: Kernel Tuner writes times
    // as numbers and failures by name.
    const auto text = time->get<std::string>();
    double number = 0.0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
    if (!text.empty() && ec == std::errc() && end == text.data() + text.size()) {
      throw InvalidInput(where + ": \"time\" is the string \"" + text +
                         "\"; a time is a number (milliseconds), and a string names the "
                         "failure (e.g. \"RuntimeFailedConfig\")");
    }
    // Kernel Tuner's InvalidConfig is a configuration its restrictions or the device refuse;
    // the times a failure ran before it failed are kept.
    obs.result = Measurement::failure(
        text == "InvalidConfig" ? TrialStatus::invalid : TrialStatus::failed, text, cost);
    obs.result.raw = std::move(raw);
  } else {
    throw InvalidInput(
        where +
        ": \"time\" must be a number (milliseconds) or a string naming the "
        "failure (e.g. \"RuntimeFailedConfig\"), got " +
        (time->is_null() ? std::string("null (NaN and Infinity read as null)") : describe(*time)) +
        "; nothing of the file is read: mend or remove that entry");
  }
  for (auto it = entry.begin(); it != entry.end(); ++it) {
    if (!reserved.count(it.key())) obs.result.metrics[it.key()] = it.value();
  }
  return obs;
}

/// A SAX reader that looks only at the structure (objects, arrays, keys) and ignores values;
/// a parse error ends it (the full parse reports it).
class KeyScanner : public nlohmann::json_sax<json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }
};

/// The keys of the top-level "cache" object in the order the file lists them (duplicates
/// included); parsing stops once the cache closes.
class CacheKeys : public KeyScanner {
 public:
  std::vector<std::string> keys;

  bool start_object(std::size_t) override {
    ++depth_;
    if (depth_ == kCacheDepth && root_key_ == "cache") in_cache_ = true;
    return true;
  }
  bool key(string_t& k) override {
    if (depth_ == kRootDepth) root_key_ = k;
    if (depth_ == kCacheDepth && in_cache_) keys.push_back(k);
    return true;
  }
  bool end_object() override {
    if (depth_ == kCacheDepth && in_cache_) return false;  // done
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }

 private:
  static constexpr int kRootDepth = 1;   // keys of the top-level object
  static constexpr int kCacheDepth = 2;  // the "cache" object
  int depth_ = 0;
  std::string root_key_;
  bool in_cache_ = false;
};

std::vector<std::string> cache_keys_in_file_order(const std::string& text) {
  CacheKeys sax;
  json::sax_parse(text, &sax);
  return std::move(sax.keys);
}

MeasuredDataset parse_kernel_tuner(const json& root, const std::string& text,
                                   const std::string& origin) {
  constexpr const char* kWhat = "a Kernel Tuner cache file";
  std::string device_name = optional_string(root, "device_name", origin);
  std::string kernel_name = optional_string(root, "kernel_name", origin);
  json problem_size;
  if (auto it = root.find("problem_size"); it != root.end()) problem_size = *it;

  const json& keys = required(root, "tune_params_keys", origin, kWhat);
  if (!keys.is_array() || keys.empty()) {
    throw InvalidInput(origin +
                       ": \"tune_params_keys\" must be a non-empty list of parameter "
                       "names, got " +
                       describe(keys));
  }
  std::vector<std::string> order;
  for (const auto& k : keys) {
    if (!k.is_string()) {
      throw InvalidInput(origin +
                         ": \"tune_params_keys\" must list parameter names (strings), "
                         "but holds " +
                         describe(k));
    }
    order.push_back(k.get<std::string>());
  }
  const json& tune_params = required(root, "tune_params", origin, kWhat);
  if (!tune_params.is_object()) {
    throw InvalidInput(origin +
                       ": \"tune_params\" must be an object {\"name\": [values...]}, got " +
                       describe(tune_params));
  }
  for (const auto& [name, values] : tune_params.items()) {
    if (std::find(order.begin(), order.end(), name) == order.end()) {
      throw InvalidInput(origin + ": tune_params has parameter '" + name +
                         "' that tune_params_keys does not list");
    }
  }
  auto space = [&] {
    try {
      return SearchSpace::from_kernel_tuner(tune_params, {}, order);
    } catch (const ParseError& e) {
      throw ParseError(origin + ": " + e.what(), e.position());
    } catch (const InvalidInput& e) {
      throw InvalidInput(origin + ": " + e.what());
    }
  }();

  const json& cache = required(root, "cache", origin, kWhat);
  if (!cache.is_object()) {
    throw InvalidInput(origin + ": \"cache\" must be an object {\"key\": {entry}}, got " +
                       describe(cache));
  }
  std::unordered_set<std::string> reserved(order.begin(), order.end());
  reserved.insert({"time", "times"});
  // Kernel Tuner's caches name their objective without saying which way is better, and are
  // read as times; tunebase's export of a study of another objective says both.
  std::string objective = "time";
  bool maximize = false;
  if (const auto higher = root.find("objective_higher_is_better"); higher != root.end()) {
    const auto named = root.find("objective");
    if (!higher->is_boolean() || named == root.end() || !named->is_string() ||
        named->get<std::string>().empty()) {
      throw InvalidInput(origin +
                         ": \"objective_higher_is_better\" must be true or false, beside the "
                         "name of the entries' field it is about in \"objective\"; got " +
                         describe(*higher) +
                         (named == root.end() ? std::string(" and no \"objective\"")
                                              : " and \"objective\": " + describe(*named)));
    }
    objective = named->get<std::string>();
    maximize = higher->get<bool>();
    if (objective == "time" && maximize) {
      throw InvalidInput(origin +
                         ": \"objective_higher_is_better\" is true for the objective \"time\"; "
                         "a time is better lower");
    }
  }
  // In the file's order, which is the order Kernel Tuner measured them in (the parsed object
  // is sorted by key).
  std::vector<std::string> cache_keys = cache_keys_in_file_order(text);
  if (cache_keys.size() != cache.size()) {
    std::unordered_set<std::string> listed;
    for (const auto& key : cache_keys) {
      if (!listed.insert(key).second) {
        throw InvalidInput(origin + ": the cache lists the key \"" + key +
                           "\" twice; a configuration is measured once");
      }
    }
    cache_keys.clear();
    for (auto it = cache.begin(); it != cache.end(); ++it) cache_keys.push_back(it.key());
  }
  std::vector<Observation> entries;
  entries.reserve(cache.size());
  std::unordered_map<std::string, std::string> key_of_config;
  for (const auto& key : cache_keys) {
    const auto it = cache.find(key);
    entries.push_back(parse_kt_entry(key, *it, space, reserved, objective, origin));
    const auto [seen, fresh] = key_of_config.emplace(space.key(entries.back().config), key);
    if (!fresh) {
      throw InvalidInput(origin + ": cache entries \"" + seen->second + "\" and \"" + key +
                         "\" are the same configuration; a configuration is measured once");
    }
  }
  // Kernel Tuner may have tuned another objective (a rate, higher is better): what is read
  // here is each entry's time all the same, lower is better.
  std::vector<std::string> notes;
  if (const auto named = root.find("objective");
      objective == "time" && named != root.end() && named->is_string() && *named != "time") {
    notes.push_back("the cache names its objective \"" + named->get<std::string>() +
                    "\"; tunebase reads each entry's \"time\" (milliseconds, lower is better)");
  }
  return MeasuredDataset{.device_name = std::move(device_name),
                         .kernel_name = std::move(kernel_name),
                         .format = "kernel_tuner",
                         .problem_size = std::move(problem_size),
                         .space = std::move(space),
                         .entries = std::move(entries),
                         .notes = std::move(notes),
                         .objective = std::move(objective),
                         .maximize = maximize};
}

// ---------------------------------------------------------------- T4

/// Records the key order of results[0].configuration and stops parsing there: nlohmann::json
/// sorts object keys, and the T4 format has no other record of the parameter order.
class FirstConfigurationKeys : public KeyScanner {
 public:
  std::vector<std::string> keys;

  bool start_object(std::size_t) override {
    ++depth_;
    if (depth_ == kResultDepth && in_results_ && !seen_first_result_) {
      in_first_result_ = seen_first_result_ = true;
    }
    if (depth_ == kConfigurationDepth && in_first_result_ && result_key_ == "configuration") {
      recording_ = true;
    }
    return true;
  }
  bool key(string_t& k) override {
    if (depth_ == kRootDepth) root_key_ = k;
    if (depth_ == kResultDepth) result_key_ = k;
    if (recording_ && depth_ == kConfigurationDepth) keys.push_back(k);
    return true;
  }
  bool end_object() override {
    // Done once the first configuration (or the first result, lacking one) closes.
    if (depth_ == kConfigurationDepth && recording_) return false;
    if (depth_ == kResultDepth && in_first_result_) return false;
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    ++depth_;
    if (depth_ == kResultsDepth && root_key_ == "results") in_results_ = true;
    return true;
  }
  bool end_array() override {
    if (depth_ == kResultsDepth) in_results_ = false;
    --depth_;
    return true;
  }

 private:
  static constexpr int kRootDepth = 1;           // keys of the top-level object
  static constexpr int kResultsDepth = 2;        // the "results" array
  static constexpr int kResultDepth = 3;         // one result object
  static constexpr int kConfigurationDepth = 4;  // its "configuration" object
  int depth_ = 0;
  std::string root_key_;
  std::string result_key_;
  bool in_results_ = false;
  bool seen_first_result_ = false;
  bool in_first_result_ = false;
  bool recording_ = false;
};

/// Milliseconds per unit of the T4 metadata's "timeunit", which the runtimes (and a time
/// measurement that names no unit of its own) are in; milliseconds when there is none.
double t4_time_scale(const json& root, const std::string& origin) {
  auto meta = root.find("metadata");
  if (meta == root.end() || !meta->is_object()) return 1.0;
  auto unit = meta->find("timeunit");
  if (unit == meta->end()) return 1.0;
  if (!unit->is_string()) {
    throw InvalidInput(origin + ": metadata \"timeunit\" must be a string, got " + describe(*unit));
  }
  return milliseconds_per(unit->get<std::string>(), origin + ": metadata timeunit");
}

struct T4Status {
  TrialStatus status;
  const char* description;
};

T4Status t4_status(const std::string& invalidity, const std::string& where) {
  static const std::map<std::string, T4Status, std::less<>> kStatuses = {
      {"correct", {TrialStatus::ok, "correct"}},
      {"compile", {TrialStatus::failed, "compilation failed"}},
      {"runtime", {TrialStatus::failed, "the kernel failed at run time"}},
      {"correctness", {TrialStatus::failed, "the kernel gave a wrong result"}},
      {"timeout", {TrialStatus::timeout, "the kernel timed out"}},
      {"constraints", {TrialStatus::invalid, "the configuration violates a constraint"}}};
  auto it = kStatuses.find(invalidity);
  if (it == kStatuses.end()) {
    throw InvalidInput(where + ": unknown invalidity \"" + invalidity +
                       "\"; allowed: correct, compile, runtime, correctness, timeout, constraints");
  }
  return it->second;
}

/// Distinct values of one parameter, numbers ascending then strings in text order.
struct SeenValues {
  std::map<double, Value> numbers;
  std::map<std::string, Value> strings;

  void add(const Value& v) {
    if (const auto* s = std::get_if<std::string>(&v))
      strings.emplace(*s, v);
    else
      numbers.emplace(as_double(v), v);
  }
  json to_json_list() const {
    json list = json::array();
    for (const auto& [key, v] : numbers) list.push_back(tunebase::to_json(v));
    for (const auto& [key, v] : strings) list.push_back(tunebase::to_json(v));
    return list;
  }
};

MeasuredDataset parse_t4(const json& root, const std::string& text, const std::string& origin) {
  constexpr const char* kWhat = "a T4 results file";
  constexpr int kSupportedMajor = 1;
  std::string device_name;
  std::string kernel_name;
  json problem_size;

  const json& version = required(root, "schema_version", origin, kWhat);
  if (!version.is_string()) {
    throw InvalidInput(origin + ": \"schema_version\" must be a string such as \"1.0.0\", got " +
                       describe(version));
  }
  const std::string v = version.get<std::string>();
  if (v.substr(0, v.find('.')) != std::to_string(kSupportedMajor)) {
    throw InvalidInput(origin + ": T4 schema_version \"" + v + "\" is not supported; supported: " +
                       std::to_string(kSupportedMajor) + ".x.y");
  }
  const double scale = t4_time_scale(root, origin);
  const auto meta_object = root.find("metadata");
  const bool unit_declared =
      meta_object != root.end() && meta_object->is_object() && meta_object->contains("timeunit");
  bool unit_assumed = false;  // a time with no unit of its own, and none in the metadata
  // T4 has no standard place for these; accept them in metadata when a producer writes them.
  if (auto meta = root.find("metadata"); meta != root.end() && meta->is_object()) {
    device_name = optional_string(*meta, "device_name", origin + ": metadata");
    kernel_name = optional_string(*meta, "kernel_name", origin + ": metadata");
    if (auto ps = meta->find("problem_size"); ps != meta->end()) problem_size = *ps;
  }

  const json& results = required(root, "results", origin, kWhat);
  if (!results.is_array()) {
    throw InvalidInput(origin + ": \"results\" must be a list of result objects, got " +
                       describe(results));
  }

  std::vector<std::string> order;
  if (!results.empty()) {
    FirstConfigurationKeys sax;
    json::sax_parse(text, &sax);
    order = std::move(sax.keys);
    const auto& first = results.front();
    if (first.is_object()) {
      auto config = first.find("configuration");
      // The scan only fails on input that the full parse accepted if a producer wrote the
      // keys in an unusual nesting; fall back to the (sorted) names of the first result.
      if (config != first.end() && config->is_object() && order.size() != config->size()) {
        order.clear();
        for (const auto& [name, value] : config->items()) order.push_back(name);
      }
    }
  }

  std::vector<SeenValues> seen(order.size());
  std::vector<Observation> entries;
  entries.reserve(results.size());
  std::string other_objectives;  // the first result's "objectives" when not ["time"]
  for (std::size_t i = 0; i < results.size(); ++i) {
    const std::string where = origin + ": results[" + std::to_string(i) + "]";
    const json& r = results[i];
    if (!r.is_object()) throw InvalidInput(where + " must be an object, got " + describe(r));
    if (auto objectives = r.find("objectives");
        objectives != r.end() && other_objectives.empty() && *objectives != json::array({"time"})) {
      other_objectives = objectives->dump();
    }
    const json& config = required(r, "configuration", where, "every T4 result");
    if (!config.is_object()) {
      throw InvalidInput(where + ": \"configuration\" must be an object {\"name\": value}, got " +
                         describe(config));
    }
    if (order.empty()) {
      throw InvalidInput(where + ": \"configuration\" names no parameter");
    }
    Observation obs;
    obs.config.reserve(order.size());
    for (std::size_t p = 0; p < order.size(); ++p) {
      auto it = config.find(order[p]);
      if (it == config.end()) {
        throw InvalidInput(where + ": configuration has no value for parameter '" + order[p] +
                           "' (results[0] has it)");
      }
      obs.config.push_back(scalar_value(*it, where, order[p]));
      seen[p].add(obs.config.back());
    }
    if (config.size() != order.size()) {
      for (const auto& [name, value] : config.items()) {
        if (std::find(order.begin(), order.end(), name) == order.end()) {
          throw InvalidInput(where + ": configuration has parameter '" + name +
                             "' that results[0] does not have");
        }
      }
    }

    const json& invalidity = required(r, "invalidity", where, "every T4 result");
    if (!invalidity.is_string()) {
      throw InvalidInput(where + ": \"invalidity\" must be a string, got " + describe(invalidity));
    }
    const T4Status status = t4_status(invalidity.get<std::string>(), where);

    std::vector<double> raw;
    double cost_ms = 0.0;
    json metrics = json::object();
    if (auto times = r.find("times"); times != r.end()) {
      if (!times->is_object()) {
        throw InvalidInput(where + ": \"times\" must be an object, got " + describe(*times));
      }
      // T4 timing names, and Kernel Tuner's for the same thing (as in its caches).
      static const std::pair<const char*, const char*> kTimeNames[] = {
          {"compilation", "compile_time"},
          {"validation", "verification_time"},
          {"framework", "framework_time"},
          {"search_algorithm", "strategy_time"}};
      for (const auto& [t4_name, kt_name] : kTimeNames) {
        auto it = times->find(t4_name);
        if (it == times->end()) continue;
        if (!it->is_number()) {
          throw InvalidInput(where + ": times \"" + t4_name + "\" must be a number, got " +
                             describe(*it));
        }
        metrics[kt_name] = it->get<double>() * scale;
      }
      if (auto rt = times->find("runtimes"); rt != times->end()) {
        raw = durations(*rt, where + ": times \"runtimes\"", scale);
        unit_assumed = unit_assumed || !unit_declared;
      }
      for (const char* cost_name : {"compile_time", "verification_time"}) {
        if (metrics.contains(cost_name)) cost_ms += metrics[cost_name].get<double>();
      }
      for (double t : raw) cost_ms += t;
    }

    const json* time_value = nullptr;
    double time_scale = scale;  // a time measurement's own unit wins over the metadata's
    if (auto ms = r.find("measurements"); ms != r.end()) {
      if (!ms->is_array()) {
        throw InvalidInput(where + ": \"measurements\" must be a list, got " + describe(*ms));
      }
      for (const auto& m : *ms) {
        if (!m.is_object() || !m.contains("name") || !m.at("name").is_string() ||
            !m.contains("value")) {
          throw InvalidInput(where +
                             ": each measurement must be {\"name\": ..., \"value\": ...}, "
                             "got " +
                             describe(m));
        }
        const auto& name = m.at("name").get_ref<const std::string&>();
        if (name != "time") {
          metrics[name] = m.at("value");
          continue;
        }
        time_value = &m.at("value");
        const auto own_unit = m.find("unit");
        if (own_unit == m.end() || own_unit->is_null() ||
            (own_unit->is_string() && own_unit->get_ref<const std::string&>().empty())) {
          unit_assumed = unit_assumed || !unit_declared;
        }
        if (auto unit = m.find("unit"); unit != m.end() && !unit->is_null()) {
          if (!unit->is_string()) {
            throw InvalidInput(where + ": the unit of the time measurement must be a string, got " +
                               describe(*unit));
          }
          if (!unit->get_ref<const std::string&>().empty()) {
            time_scale = milliseconds_per(unit->get<std::string>(),
                                          where + ": the unit of the time measurement,");
          }
        }
      }
    }
    if (auto ts = r.find("timestamp"); ts != r.end()) metrics["timestamp"] = *ts;

    const double cost = cost_ms / kMillisecondsPerSecond;
    if (status.status == TrialStatus::ok) {
      double objective = 0.0;
      if (time_value != nullptr && time_value->is_number()) {
        objective = time_value->get<double>() * time_scale;
      } else if (time_value != nullptr) {
        throw InvalidInput(where + ": invalidity is \"correct\" but the \"time\" measurement is " +
                           describe(*time_value) + ", not a number");
      } else if (!raw.empty()) {
        // Kernel Tuner's time is the mean of the repeated runs.
        double sum = 0.0;
        for (double t : raw) sum += t;
        objective = sum / static_cast<double>(raw.size());
      } else {
        throw InvalidInput(where +
                           ": invalidity is \"correct\" but it has neither a measurement "
                           "named \"time\" nor times \"runtimes\"");
      }
      obs.result = Measurement::success(
          measured_time(objective, where,
                        "a T4 result that failed has an \"invalidity\" other than \"correct\""),
          std::move(raw), cost);
    } else {
      // Kernel Tuner writes its failure string (e.g. "CompilationFailedConfig") as the value.
      std::string message = time_value != nullptr && time_value->is_string()
                                ? time_value->get<std::string>()
                                : std::string(status.description) + " (T4 invalidity \"" +
                                      invalidity.get<std::string>() + "\")";
      obs.result = Measurement::failure(status.status, std::move(message), cost);
      obs.result.raw = std::move(raw);
    }
    obs.result.metrics = std::move(metrics);
    entries.push_back(std::move(obs));
  }

  json tune_params = json::object();
  for (std::size_t p = 0; p < order.size(); ++p) tune_params[order[p]] = seen[p].to_json_list();
  if (order.empty()) {
    throw InvalidInput(origin + ": \"results\" is empty, so the file spans no search space");
  }
  auto space = [&] {
    try {
      return SearchSpace::from_kernel_tuner(tune_params, {}, order);
    } catch (const InvalidInput& e) {
      throw InvalidInput(origin + ": " + e.what());
    }
  }();
  // Store the listed values themselves so that every entry compares and prints alike.
  std::unordered_map<std::string, std::size_t> result_of_config;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    auto& obs = entries[i];
    for (std::size_t p = 0; p < order.size(); ++p) {
      const Parameter& param = space.parameter(p);
      obs.config[p] = param.values[*param.index_of(obs.config[p])];
    }
    const auto [earlier, fresh] = result_of_config.emplace(space.key(obs.config), i);
    if (!fresh) {
      throw InvalidInput(origin + ": results[" + std::to_string(earlier->second) +
                         "] and results[" + std::to_string(i) + "] are the same configuration " +
                         space.config_to_json(obs.config).dump() +
                         "; a configuration is measured once");
    }
  }
  std::vector<std::string> notes;
  if (unit_assumed) {
    notes.push_back(
        "times name no unit (no metadata \"timeunit\", none on the measurements): read as "
        "milliseconds");
  }
  // As for a Kernel Tuner cache's "objective": another metric may have been tuned.
  if (!other_objectives.empty()) {
    notes.push_back("the results name their objectives " + other_objectives +
                    "; tunebase reads each result's \"time\" (milliseconds, lower is better) and "
                    "keeps the other measurements as metrics");
  }
  return MeasuredDataset{.device_name = std::move(device_name),
                         .kernel_name = std::move(kernel_name),
                         .format = "t4",
                         .problem_size = std::move(problem_size),
                         .space = std::move(space),
                         .entries = std::move(entries),
                         .notes = std::move(notes)};
}

}  // namespace

namespace {

// The power of ten of a millisecond in each unit of time (short_time_unit names them), so
// that factors between units are exact (1000, not 1e-3 / 1e-6).
std::optional<int> milliseconds_exponent(std::string_view unit) {
  const auto name = short_time_unit(unit);
  if (name == "s") return 3;
  if (name == "ms") return 0;
  if (name == "us") return -3;
  if (name == "ns") return -6;
  return std::nullopt;
}

}  // namespace

std::optional<double> milliseconds_in(std::string_view unit) {
  const auto e = milliseconds_exponent(unit);
  if (!e) return std::nullopt;
  return std::pow(10.0, *e);
}

double milliseconds_per(const std::string& unit, const std::string& where) {
  if (const auto ms = milliseconds_in(unit)) return *ms;
  throw InvalidInput(where + " \"" + unit +
                     "\" is not a time unit; allowed: seconds, milliseconds, microseconds, "
                     "nanoseconds (or s, ms, us, ns)");
}

std::string short_time_unit(std::string_view unit) {
  std::string lower;
  for (const unsigned char c : unit) lower += static_cast<char>(std::tolower(c));
  static const std::array<std::pair<std::string_view, std::array<std::string_view, 7>>, 4> kTimes =
      {{{"s", {"s", "sec", "secs", "second", "seconds"}},
        {"ms", {"ms", "msec", "msecs", "millisecond", "milliseconds", "miliseconds"}},
        {"us", {"us", "\u00b5s", "\u03bcs", "usec", "usecs", "microsecond", "microseconds"}},
        {"ns", {"ns", "nsec", "nsecs", "nanosecond", "nanoseconds"}}}};
  for (const auto& [name, spellings] : kTimes) {
    for (const auto spelling : spellings) {
      if (!spelling.empty() && spelling == lower) return std::string(name);
    }
  }
  return {};
}

bool is_rate_unit(std::string_view unit) {
  std::string lower;
  for (const unsigned char c : unit) lower += static_cast<char>(std::tolower(c));
  const auto ends_with = [&](std::string_view end) { return lower.ends_with(end); };
  return ends_with("/s") || ends_with("/sec") || ends_with("/second") || ends_with("per second") ||
         lower.find("flops") != std::string::npos;
}

std::string default_objective_name(std::string_view unit, bool minimize) {
  if (is_time_unit(unit)) return "time";
  if (unit.empty()) return minimize ? "time" : "value";
  return std::string(unit);
}

double time_unit_factor(std::string_view from, std::string_view to) {
  const auto a = milliseconds_exponent(from);
  const auto b = milliseconds_exponent(to);
  return a && b ? std::pow(10.0, *a - *b) : 1.0;
}

std::string gunzip_if_needed(const std::string& bytes, const std::string& origin,
                             std::size_t max_text_bytes) {
  if (!starts_with_gzip_magic(bytes)) return bytes;
  return gunzip(bytes, origin, max_text_bytes);
}

std::string read_maybe_gzipped(const std::string& path, std::size_t max_text_bytes) {
  return gunzip_if_needed(read_file_bytes(path, max_text_bytes), path, max_text_bytes);
}

MeasuredDataset parse_measurements(const std::string& bytes, const std::string& origin,
                                   std::size_t max_text_bytes) {
  const bool compressed = starts_with_gzip_magic(bytes);
  if (!compressed && bytes.size() > max_text_bytes)
    throw too_large(origin, max_text_bytes, "holds");
  std::string text = compressed ? gunzip(bytes, origin, max_text_bytes) : bytes;
  std::vector<std::string> notes;
  const json root = parse_measurement_json(text, origin, notes);
  if (!root.is_object()) {
    throw InvalidInput(origin +
                       ": expected a JSON object (a Kernel Tuner cache file or a T4 "
                       "results file) at the top level, got " +
                       std::string(root.type_name()));
  }
  const bool kernel_tuner =
      root.contains("cache") || root.contains("tune_params") || root.contains("tune_params_keys");
  const bool t4 = root.contains("results") || root.contains("schema_version");
  if (kernel_tuner != t4) {
    auto dataset =
        kernel_tuner ? parse_kernel_tuner(root, text, origin) : parse_t4(root, text, origin);
    if (dataset.entries.empty()) {
      throw InvalidInput(origin + " holds no measurements (its " +
                         (kernel_tuner ? "\"cache\"" : "\"results\"") +
                         " is empty): nothing to import or replay");
    }
    dataset.notes.insert(dataset.notes.begin(), notes.begin(), notes.end());
    return dataset;
  }
  if (const auto format = root.find("format");
      format != root.end() && *format == "tunebase-study") {
    throw InvalidInput(origin +
                       " is a tunebase study export (tunebase export, GET "
                       "/v1/studies/{id}/export), which is not an import format; import the "
                       "Kernel Tuner cache or T4 file it came from, or add its trials to a study "
                       "with POST /v1/studies/{id}/measurements");
  }
  std::string keys;
  for (const auto& [key, value] : root.items()) keys += (keys.empty() ? "" : ", ") + key;
  throw InvalidInput(origin + (kernel_tuner ? " mixes the keys of both formats: it" : "") +
                     " is neither a Kernel Tuner cache file (keys tune_params_keys, "
                     "tune_params, cache) nor a T4 results file (keys schema_version, "
                     "results); its top-level keys are: " +
                     (keys.empty() ? std::string("(none)") : keys));
}

MeasuredDataset read_measurements(const std::string& path) {
  return parse_measurements(read_file_bytes(path, kMaxMeasurementTextBytes), path);
}

}  // namespace tunebase
