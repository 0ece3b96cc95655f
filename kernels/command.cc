#include "kernels/command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/measurements.h"

extern char** environ;

namespace tunebase {
namespace {

using Clock = std::chrono::steady_clock;

// Output kept per stream: the objective is usually printed last, so the tail is kept.
constexpr std::size_t kMaxCapturedBytes = std::size_t{1} << 20;
// How much of stderr / stdout a failure message quotes.
constexpr std::size_t kMessageTailBytes = 2000;
// Longest single wait in the polling loop, so that an exit is noticed promptly.
constexpr int kPollMilliseconds = 10;
// After SIGTERM on timeout, how long the group may clean up before SIGKILL.
constexpr double kTerminateGraceSeconds = 0.5;
// After the command ends, how long to wait for stray writers to release the pipes.
constexpr double kDrainSeconds = 1.0;
constexpr std::size_t kReadChunk = 65536;
// Longest line the objective regex is run on. libstdc++'s regex takes stack per character:
// with an 8 MiB stack, "(.|\n)*" crashed on a 16 KiB line and "((.)|(\n))*x" on 8 KiB.
constexpr std::size_t kMaxRegexLineBytes = 4096;
// Names of metrics not kept that a trial's message lists (the others are counted).
constexpr std::size_t kMaxListedDroppedMetrics = 10;
// Why last_number found no objective when the output holds no number at all.
constexpr const char* kNoNumber = "no number in the output";

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

/// A value as one shell word: plain words as they are, anything else single-quoted.
std::string shell_word(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_.,+-/:=@%^", c);
  });
  if (plain) return s;
  std::string quoted = "'";
  for (char c : s) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

/// The last `limit` bytes of `s`, starting at a line boundary when one is near.
std::string tail(const std::string& s, std::size_t limit = kMessageTailBytes) {
  std::string_view v(s);
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.remove_suffix(1);
  if (v.size() <= limit) return std::string(v);
  v = v.substr(v.size() - limit);
  if (auto nl = v.find('\n'); nl != std::string_view::npos && nl + 1 < v.size()) {
    v = v.substr(nl + 1);
  }
  return "..." + std::string(v);
}

/// `text` as valid UTF-8 that is safe to show: each byte that does not start a well-formed
/// sequence becomes U+FFFD, and control characters other than newline and tab are dropped (a
/// program's output is arbitrary bytes; a message is stored and dumped as JSON).
std::string printable_utf8(std::string_view text) {
  constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(text.size());
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const auto continuation = [&](std::size_t i) {
    return i < text.size() && (byte(i) & 0xC0) == 0x80;
  };
  std::size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = byte(i);
    if (c < 0x80) {
      if (c >= 0x20 ? c != 0x7F : (c == '\n' || c == '\t')) out += static_cast<char>(c);
      ++i;
      continue;
    }
    // Length of the sequence c starts and the range its second byte must lie in (which
    // excludes overlong forms, UTF-16 surrogates and code points past U+10FFFF).
    std::size_t length = 0;
    unsigned char low = 0x80;
    unsigned char high = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3;
      if (c == 0xE0) low = 0xA0;
      if (c == 0xED) high = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4;
      if (c == 0xF0) low = 0x90;
      if (c == 0xF4) high = 0x8F;
    }
    bool valid = length > 0 && i + 1 < text.size() && byte(i + 1) >= low && byte(i + 1) <= high;
    for (std::size_t k = 2; valid && k < length; ++k) valid = continuation(i + k);
    if (!valid) {
      out += kReplacement;
      ++i;
      continue;
    }
    // U+0080..U+009F are the C1 control characters.
    const bool c1_control = c == 0xC2 && byte(i + 1) < 0xA0;
    if (!c1_control) out.append(text.substr(i, length));
    i += length;
  }
  return out;
}

/// Appends to a capture buffer, keeping its last kMaxCapturedBytes.
void append_capped(std::string& buffer, const char* data, std::size_t n) {
  buffer.append(data, n);
  if (buffer.size() > 2 * kMaxCapturedBytes) buffer.erase(0, buffer.size() - kMaxCapturedBytes);
}

std::optional<double> parse_whole_number(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  double value = 0.0;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, value);
  // from_chars reads "nan" and "inf" too: neither is an objective.
  if (s.empty() || ec != std::errc() || ptr != end || !std::isfinite(value)) return std::nullopt;
  return value;
}

/// Closes its file descriptor on scope exit.
struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

/// The child's environment: ours, with `extra` entries replacing those of the same name.
std::vector<std::string> merged_environment(const std::vector<std::string>& extra) {
  auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  std::vector<std::string> names;
  names.reserve(extra.size());
  for (const auto& e : extra) names.push_back(name_of(e));
  std::vector<std::string> env;
  for (char** p = environ; p && *p; ++p) {
    std::string entry(*p);
    if (std::find(names.begin(), names.end(), name_of(entry)) == names.end()) {
      env.push_back(std::move(entry));
    }
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

/// Reads what is available on the open descriptors, waiting at most `wait_ms`; closes a
/// descriptor at end of file.
void pump(Fd& out_fd, Fd& err_fd, std::string& out, std::string& err, int wait_ms) {
  pollfd fds[2];
  nfds_t n = 0;
  Fd* owners[2];
  std::string* sinks[2];
  if (out_fd.fd >= 0) {
    fds[n] = {out_fd.fd, POLLIN, 0};
    owners[n] = &out_fd;
    sinks[n++] = &out;
  }
  if (err_fd.fd >= 0) {
    fds[n] = {err_fd.fd, POLLIN, 0};
    owners[n] = &err_fd;
    sinks[n++] = &err;
  }
  const int ready = ::poll(n ? fds : nullptr, n, std::max(wait_ms, 0));
  if (ready <= 0) return;
  char buffer[kReadChunk];
  for (nfds_t i = 0; i < n; ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    const ssize_t got = ::read(fds[i].fd, buffer, sizeof buffer);
    if (got > 0) {
      append_capped(*sinks[i], buffer, static_cast<std::size_t>(got));
    } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
      owners[i]->reset();
    }
  }
}

/// Whether the child has exited, without reaping it (so that its pid, the group id, cannot be
/// reused before the group is killed).
bool has_exited(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == pid;
}

// Whether a run ended as a program stopped by a signal ends: killed by SIGINT, SIGTERM, SIGHUP
// or SIGKILL (a second interrupt kills the command's group with it, as a service manager does
// past its stop timeout), or exited with 128 + one of them (a shell's or a program's own
// handler reports it so).
bool ended_by_stop_signal(const CommandResult& run) {
  constexpr int kShellSignalBase = 128;
  for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGKILL}) {
    if (run.signal == sig || run.exit_code == kShellSignalBase + sig) return true;
  }
  return false;
}

int milliseconds_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, kPollMilliseconds));
}

// Process groups of the running commands (0: a free slot), for kill_running_commands. A few
// slots: evaluators run commands one at a time, benchmarks a few in parallel at most.
constexpr std::size_t kRunningSlots = 64;
std::array<std::atomic<pid_t>, kRunningSlots> g_running{};

// Registers a running group for as long as it lives.
class RunningGroup {
 public:
  explicit RunningGroup(pid_t group) {
    for (auto& slot : g_running) {
      pid_t free = 0;
      if (slot.compare_exchange_strong(free, group)) {
        slot_ = &slot;
        return;
      }
    }
  }
  ~RunningGroup() {
    if (slot_) slot_->store(0);
  }
  RunningGroup(const RunningGroup&) = delete;
  RunningGroup& operator=(const RunningGroup&) = delete;

 private:
  std::atomic<pid_t>* slot_ = nullptr;
};

}  // namespace

std::size_t kill_running_commands() noexcept {
  std::size_t killed = 0;
  for (auto& slot : g_running) {
    if (const pid_t group = slot.load(); group > 0 && ::kill(-group, SIGKILL) == 0) ++killed;
  }
  return killed;
}

CommandResult run_command(const std::string& command, const std::vector<std::string>& environment,
                          double timeout_seconds, const std::string& working_directory) {
  // A command runs where tunebase runs: once that directory is removed (a benchmark that
  // cleans up after itself), every command would fail alike (the shell's getcwd fails).
  if (working_directory.empty()) {
    std::array<char, 4096> here{};
    if (::getcwd(here.data(), here.size()) == nullptr && errno == ENOENT) {
      throw EvaluatorUnavailable(
          "the working directory of tunebase was removed, so no command can run in it; start "
          "again from an existing directory (the study resumes)");
    }
  }
  int out_pipe[2];
  int err_pipe[2];
  // This process out of descriptors or memory: no command can run until that is fixed.
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    throw EvaluatorUnavailable(std::string("cannot create a pipe for the command: ") +
                               std::strerror(errno));
  }
  Fd out_read(out_pipe[0]);
  Fd out_write(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    throw EvaluatorUnavailable(std::string("cannot create a pipe for the command: ") +
                               std::strerror(errno));
  }
  Fd err_read(err_pipe[0]);
  Fd err_write(err_pipe[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_write.fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_write.fd, STDERR_FILENO);
  if (!working_directory.empty()) {
    posix_spawn_file_actions_addchdir_np(&actions, working_directory.c_str());
  }
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // Own process group (so a timeout kills everything it started), default signal handling
  // and an empty signal mask whatever this process set.
  posix_spawnattr_setflags(&attributes,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attributes, 0);
  sigset_t signals;
  sigemptyset(&signals);
  posix_spawnattr_setsigmask(&attributes, &signals);
  sigfillset(&signals);
  sigdelset(&signals, SIGKILL);
  sigdelset(&signals, SIGSTOP);
  posix_spawnattr_setsigdefault(&attributes, &signals);

  std::vector<std::string> env = merged_environment(environment);
  std::vector<char*> envp;
  envp.reserve(env.size() + 1);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string shell = "/bin/sh";
  std::string dash_c = "-c";
  std::string text = command;
  char* argv[] = {shell.data(), dash_c.data(), text.data(), nullptr};

  const auto start = Clock::now();
  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, shell.c_str(), &actions, &attributes, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (spawned != 0) {
    const std::string what = "cannot start /bin/sh -c '" + command + "'" +
                             (working_directory.empty() ? "" : " in " + working_directory) + ": " +
                             std::strerror(spawned);
    // Only a command line or environment too long is this command's own fault; a missing
    // working directory or shell, or a process limit, stops every command alike.
    if (spawned == E2BIG) throw BackendError(what);
    throw EvaluatorUnavailable(what);
  }
  out_write.reset();
  err_write.reset();
  std::optional<RunningGroup> running(std::in_place, pid);

  CommandResult result;
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(timeout_seconds));
  while (!has_exited(pid)) {
    if (Clock::now() >= deadline) {
      result.timed_out = true;
      ::kill(-pid, SIGTERM);
      const auto grace = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(kTerminateGraceSeconds));
      while (!has_exited(pid) && Clock::now() < grace) {
        pump(out_read, err_read, result.out, result.err, milliseconds_left(grace));
      }
      break;
    }
    pump(out_read, err_read, result.out, result.err, milliseconds_left(deadline));
  }
  // Whatever the shell left running in its group goes with it.
  ::kill(-pid, SIGKILL);
  running.reset();  // before the reap: a reaped pid may be reused by another group
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.seconds = seconds_since(start);
  const auto drain_until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(kDrainSeconds));
  while ((out_read.fd >= 0 || err_read.fd >= 0) && Clock::now() < drain_until) {
    pump(out_read, err_read, result.out, result.err, milliseconds_left(drain_until));
  }
  if (result.out.size() > kMaxCapturedBytes)
    result.out.erase(0, result.out.size() - kMaxCapturedBytes);
  if (result.err.size() > kMaxCapturedBytes)
    result.err.erase(0, result.err.size() - kMaxCapturedBytes);
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

namespace {

/// Length of the nan, inf or infinity (any case) that starts at `p` as a whole word, else 0.
std::size_t non_finite_word(const char* p, const char* end) {
  for (std::string_view word : {"infinity", "inf", "nan"}) {
    if (static_cast<std::size_t>(end - p) < word.size()) continue;
    const bool same = std::equal(word.begin(), word.end(), p, [](char w, char c) {
      return w == std::tolower(static_cast<unsigned char>(c));
    });
    const char* after = p + word.size();
    if (same && (after == end || !is_name_char(*after))) return word.size();
  }
  return 0;
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

/// Calls `take(name, value)` for each line of `out` that is a metric (output_metrics' rules),
/// whatever the length of its name.
template <typename Take>
void for_each_metric_line(std::string_view out, Take take) {
  while (!out.empty()) {
    const std::size_t end = std::min(out.find_first_of("\r\n"), out.size());
    const std::string_view line = out.substr(0, end);
    out.remove_prefix(std::min(end + 1, out.size()));
    const std::size_t separator = line.find_first_of(":=");
    if (separator == std::string_view::npos) continue;
    const std::string_view name = trimmed(line.substr(0, separator));
    std::string_view rest = line.substr(separator + 1);
    // "NAME: 1" as YAML writes it; a colon between digits is a clock ("10:30:00").
    if (line[separator] == ':' &&
        (rest.empty() || !std::isspace(static_cast<unsigned char>(rest.front())))) {
      continue;
    }
    if (name.empty() || !is_name_start(name.front()) ||
        std::any_of(name.begin(), name.end(),
                    [](unsigned char c) { return std::iscntrl(c) != 0; })) {
      continue;
    }
    rest = trimmed(rest);
    const std::size_t space = std::min(rest.find_first_of(" \t"), rest.size());
    const std::string_view unit = trimmed(rest.substr(space));
    // One word of unit after the number ("0.4 ms"), not a sentence ("3 of 5 passed").
    if (!unit.empty() && (unit.find_first_of(" \t") != std::string_view::npos ||
                          std::isdigit(static_cast<unsigned char>(unit.front())))) {
      continue;
    }
    if (const auto value = parse_whole_number(rest.substr(0, space))) take(name, *value);
  }
}

}  // namespace

OutputMetrics output_metrics(const std::string& out) {
  OutputMetrics metrics;
  std::map<std::string, std::size_t, std::less<>> position;
  for_each_metric_line(out, [&](std::string_view printed, double value) {
    // A name is a JSON key: bytes that are not UTF-8 become U+FFFD.
    const std::string name = printable_utf8(printed);
    if (auto it = position.find(name); it != position.end()) {
      metrics.values[it->second].second = value;
      return;
    }
    if (name.size() > kMaxMetricNameBytes || metrics.values.size() >= kMaxOutputMetrics) {
      metrics.dropped.insert(name);
      return;
    }
    position.emplace(name, metrics.values.size());
    metrics.values.emplace_back(name, value);
  });
  return metrics;
}

std::optional<double> last_number(const std::string& text, std::string* why) {
  auto fail = [&](std::string message) -> std::optional<double> {
    if (why) *why = std::move(message);
    return std::nullopt;
  };
  std::optional<double> last;
  // The last number-like token: a nan or inf printed after a good number must not let that
  // number stand in for a broken measurement.
  std::string_view last_token;
  bool out_of_range = false;
  const char* begin = text.data();
  const char* end = begin + text.size();
  const char* p = begin;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (p < end) {
    const char* start = p;
    if ((*p == '-' || *p == '+') && p + 1 < end) ++p;
    // A number glued to a word or another number ("x86", "v1.2", "1.2.3") does not start here.
    const bool glued = start > begin && (is_name_char(start[-1]) || start[-1] == '.');
    if (const std::size_t word = glued ? 0 : non_finite_word(p, end)) {
      last.reset();
      out_of_range = false;
      last_token = std::string_view(start, static_cast<std::size_t>(p + word - start));
      p += word;
      continue;
    }
    const bool starts_number = digit(*p) || (*p == '.' && p + 1 < end && digit(p[1]));
    if (!starts_number || glued) {
      p = start + 1;
      continue;
    }
    double value = 0.0;
    auto [ptr, ec] = std::from_chars(p, end, value);
    if (ec == std::errc() || ec == std::errc::result_out_of_range) {
      // from_chars saw the digits after the sign; an out-of-range number is no objective.
      out_of_range = ec != std::errc();
      last.reset();
      if (!out_of_range) last = (*start == '-') ? -value : value;
      last_token = std::string_view(start, static_cast<std::size_t>(ptr - start));
      p = ptr;
    } else {
      p = start + 1;
    }
  }
  if (last_token.empty()) return fail(kNoNumber);
  if (!last) {
    return fail("the program printed " + std::string(last_token) + " as its last number" +
                (out_of_range ? ", which is out of the range of a double" : ""));
  }
  // "1,234.5" or "2,5": a thousands separator or a decimal comma; the digits after the comma
  // alone are not what the program meant. A number with its own decimal point after the comma
  // ("1024,0.33" in CSV, "[1.2,1.3]") is one of a list.
  const char* token = last_token.data();
  const bool plain_digits = last_token.find_first_not_of("0123456789") == std::string_view::npos;
  const bool thousands =
      last_token.size() > 3 && last_token[3] == '.' &&
      last_token.substr(0, 3).find_first_not_of("0123456789") == std::string_view::npos;
  if (token - begin >= 2 && token[-1] == ',' && digit(token[-2]) && (plain_digits || thousands)) {
    const char* from = token - 1;
    while (from > begin && (digit(from[-1]) || from[-1] == ',' || from[-1] == '.')) --from;
    return fail("the last number is written '" +
                std::string(from, static_cast<std::size_t>(token + last_token.size() - from)) +
                "', with a comma that may separate thousands or be a decimal comma; write the "
                "number without a comma, or give --regex");
  }
  return last;
}

CommandEvaluator::CommandEvaluator(SearchSpace space, std::string command_template,
                                   CommandOptions options)
    : space_(std::move(space)),
      template_(std::move(command_template)),
      options_(std::move(options)) {
  if (template_.find_first_not_of(" \t\r\n") == std::string::npos) {
    throw InvalidInput("command: the command template is empty");
  }
  constexpr double kMaxTimeoutSeconds = CommandOptions::kMaxTimeoutSeconds;
  if (!(options_.timeout_seconds > 0.0 && options_.timeout_seconds <= kMaxTimeoutSeconds)) {
    throw InvalidInput("command: timeout must be a positive number of seconds up to " +
                       std::to_string(static_cast<long long>(kMaxTimeoutSeconds)) +
                       " (a year), got " + std::to_string(options_.timeout_seconds));
  }
  if (options_.repeats < 1) {
    throw InvalidInput("command: repeats must be at least 1, got " +
                       std::to_string(options_.repeats));
  }
  if (!options_.working_directory.empty() &&
      !std::filesystem::is_directory(options_.working_directory)) {
    throw InvalidInput("command: working directory '" + options_.working_directory +
                       "' does not exist");
  }
  if (options_.objective_regex && options_.objective_metric) {
    throw InvalidInput("command: an objective regex and an objective metric ('" +
                       *options_.objective_metric + "') exclude each other; give one");
  }
  if (options_.objective_metric && trimmed(*options_.objective_metric).empty()) {
    throw InvalidInput(
        "command: the objective metric's name is empty; give the NAME of the "
        "program's 'NAME: NUMBER' line");
  }
  if (options_.objective_regex) {
    try {
      regex_.emplace(*options_.objective_regex, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw InvalidInput("command: objective regex '" + *options_.objective_regex +
                         "' is invalid: " + e.what());
    }
  }

  auto allowed = [&] {
    std::string names;
    for (const auto& p : space_.parameters()) names += (names.empty() ? "" : ", ") + p.name;
    return names.empty() ? std::string("(none: the space has no parameters)") : names;
  };
  std::string literal;
  const std::size_t n = template_.size();
  for (std::size_t i = 0; i < n; ++i) {
    const char c = template_[i];
    if ((c == '{' || c == '}') && i + 1 < n && template_[i + 1] == c) {
      literal += c;
      ++i;
      continue;
    }
    const bool shell_expansion = i > 0 && template_[i - 1] == '$';
    if (c == '{' && !shell_expansion && i + 1 < n && is_name_start(template_[i + 1])) {
      std::size_t j = i + 1;
      while (j < n && is_name_char(template_[j])) ++j;
      if (j < n && template_[j] == '}') {
        const std::string name = template_.substr(i + 1, j - i - 1);
        const auto index = space_.index_of(name);
        if (!index) {
          throw InvalidInput("command: unknown placeholder {" + name + "} in '" + template_ +
                             "'; parameters: " + allowed() +
                             " (write {{ and }} for literal braces)");
        }
        if (!literal.empty()) pieces_.push_back({std::move(literal), std::nullopt});
        literal.clear();
        pieces_.push_back({"", index});
        i = j;
        continue;
      }
    }
    literal += c;
  }
  if (!literal.empty()) pieces_.push_back({std::move(literal), std::nullopt});
  // {a b} or {tile-x} stayed in the command as it is, and every trial failed on it.
  for (const auto& p : space_.parameters()) {
    const bool placeholder_name = !p.name.empty() && is_name_start(p.name.front()) &&
                                  std::all_of(p.name.begin(), p.name.end(), is_name_char);
    if (!placeholder_name && template_.find("{" + p.name + "}") != std::string::npos) {
      throw InvalidInput("command: {" + p.name + "} in '" + template_ +
                         "' cannot be replaced: a placeholder is a name of letters, digits and _ "
                         "(not starting with a digit); rename parameter '" +
                         p.name + "' in the space");
    }
  }
}

nlohmann::json CommandEvaluator::task() const {
  if (!options_.task.is_null()) return options_.task;
  return {{"command", template_}};
}

std::string CommandEvaluator::command_for(const Configuration& config) const {
  std::string out;
  for (const auto& piece : pieces_) {
    out += piece.parameter ? shell_word(to_string(config.at(*piece.parameter))) : piece.text;
  }
  return out;
}

std::vector<std::string> CommandEvaluator::environment_for(const Configuration& config) const {
  std::vector<std::string> env;
  for (std::size_t i = 0; i < space_.dimension() && i < config.size(); ++i) {
    const std::string value = to_string(config[i]);
    env.push_back(space_.parameter(i).name + "=" + value);
    env.push_back("TUNEBASE_" + space_.parameter(i).name + "=" + value);
  }
  return env;
}

CommandEvaluator::Objective CommandEvaluator::objective_of(const std::string& out) const {
  Objective objective;
  if (options_.objective_metric) {
    const std::string_view wanted = trimmed(*options_.objective_metric);
    for_each_metric_line(out, [&](std::string_view name, double value) {
      if (name == wanted) objective.value = value;
    });
    if (!objective.value) {
      objective.why = "the output has no line '" + std::string(wanted) +
                      ": NUMBER' (or '= NUMBER'), whose number is the objective";
      objective.found_nothing = true;
    }
    return objective;
  }
  if (!regex_) {
    objective.value = last_number(out, &objective.why);
    objective.found_nothing = !objective.value && objective.why == kNoNumber;
    return objective;
  }
  // The last match, as the default rule takes the last number. Line by line, a carriage return
  // ending a line too (a progress bar redraws itself with one), and never on a line longer than
  // kMaxRegexLineBytes: libstdc++'s regex recurses per character and overflows the stack (the
  // whole sweep ends) on a long line.
  std::optional<std::string> found;
  std::size_t skipped = 0;
  std::size_t begin = 0;
  while (begin < out.size()) {
    std::size_t end = out.find_first_of("\r\n", begin);
    if (end == std::string::npos) end = out.size();
    if (end - begin > kMaxRegexLineBytes) {
      ++skipped;
    } else {
      const char* first = out.data() + begin;
      const char* last = out.data() + end;
      for (auto it = std::cregex_iterator(first, last, *regex_); it != std::cregex_iterator();
           ++it) {
        const auto& match = *it;
        found = (regex_->mark_count() >= 1 && match[1].matched) ? match[1].str() : match[0].str();
      }
    }
    begin = end + 1;
  }
  if (!found) {
    objective.why =
        "the objective regex '" + *options_.objective_regex + "' matched nothing in the output";
    if (skipped > 0) {
      objective.why += " (" + std::to_string(skipped) + " line" + (skipped == 1 ? "" : "s") +
                       " longer than " + std::to_string(kMaxRegexLineBytes) +
                       " bytes not searched: print the objective on a line of its own)";
    }
    objective.found_nothing = true;
  } else if (!(objective.value = parse_whole_number(*found))) {
    objective.why = "the objective regex '" + *options_.objective_regex + "' matched '" + *found +
                    "' last, which is not a finite number";
  }
  return objective;
}

std::optional<std::string> CommandEvaluator::program_that_cannot_run(
    const CommandResult& run, const Configuration& config) const {
  // POSIX shells exit with 127 for a program not found and 126 for one found but not
  // executable, saying so on stderr after their name (run_command's /bin/sh): "/bin/sh: 1:
  // ./bench: not found" (dash), "/bin/sh: line 1: ./bench: No such file or directory" (bash),
  // "/bin/sh: 1: ./bench: Permission denied".
  constexpr int kNotExecutable = 126;
  constexpr int kNotFound = 127;
  if (run.exit_code != kNotExecutable && run.exit_code != kNotFound) return std::nullopt;
  std::string_view line(run.err);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) {
    line.remove_suffix(1);
  }
  if (const auto nl = line.rfind('\n'); nl != std::string_view::npos) line.remove_prefix(nl + 1);
  if (!line.starts_with("/bin/sh: ")) return std::nullopt;
  std::optional<std::string> program;
  for (const std::string_view said :
       {": not found", ": command not found", ": No such file or directory", ": Permission denied",
        ": Is a directory"}) {
    if (!line.ends_with(said)) continue;
    auto rest = line.substr(0, line.size() - said.size());
    if (const auto colon = rest.rfind(": "); colon != std::string_view::npos) {
      program = std::string(rest.substr(colon + 2));
    }
    break;
  }
  if (!program || program->empty()) return std::nullopt;
  // Written in the template itself, the program is every configuration's; else a value filled
  // in ({compiler}, $variant) may name a program that only this configuration lacks.
  std::string literal;
  for (const auto& piece : pieces_) {
    if (!piece.parameter) literal += piece.text;
  }
  if (literal.find(*program) != std::string::npos) return program;
  for (const auto& value : config) {
    if (program->find(to_string(value)) != std::string::npos) return std::nullopt;
  }
  return program;
}

Measurement CommandEvaluator::evaluate(const Configuration& config) {
  const auto start = Clock::now();
  if (!space_.is_valid(config)) {
    return Measurement::failure(TrialStatus::invalid,
                                "configuration is not in the command's search space",
                                seconds_since(start));
  }
  const std::string command = command_for(config);
  const auto env = environment_for(config);
  std::vector<double> raw;
  std::vector<double> wall;
  std::map<std::string, std::vector<double>> printed;  // metric -> its value in each run
  std::set<std::string> dropped;
  // Of several runs, which one failed (the earlier ones' numbers stay in raw), after the
  // Kernel Tuner name of the failure when the program gave one.
  auto fail = [&](TrialStatus status, std::string message, std::string_view kt_name = {}) {
    if (options_.repeats > 1) {
      message = "run " + std::to_string(raw.size() + 1) + " of " +
                std::to_string(options_.repeats) + ": " + message;
    }
    if (!kt_name.empty()) message = std::string(kt_name) + ": " + message;
    Measurement m = Measurement::failure(status, printable_utf8(message), seconds_since(start));
    m.raw = raw;
    return m;
  };
  for (int r = 0; r < options_.repeats; ++r) {
    const CommandResult run =
        run_command(command, env, options_.timeout_seconds, options_.working_directory);
    if (!ran_before_.exchange(true)) {
      if (const auto program = program_that_cannot_run(run, config)) {
        ran_before_ = false;
        throw EvaluatorUnavailable(
            "the command cannot be run: `" + command + "` exited with code " +
            std::to_string(run.exit_code) + " at its first run, the shell saying: " +
            tail(printable_utf8(run.err)) + "; check that --cmd names a program that exists (" +
            *program + ", from the working directory) and is executable; no trial was stored");
      }
    }
    wall.push_back(run.seconds);
    const std::string err_tail = run.err.empty() ? "" : "; stderr: " + tail(run.err);
    if (run.timed_out) {
      std::ostringstream message;
      message << "`" << command << "` timed out after " << options_.timeout_seconds << " s"
              << err_tail;
      return fail(TrialStatus::timeout, message.str());
    }
    if (options_.stopping && options_.stopping->load() && ended_by_stop_signal(run)) {
      throw EvaluationInterrupted("`" + command + "` was stopped with tunebase (" +
                                  (run.signal != 0
                                       ? "killed by signal " + std::to_string(run.signal)
                                       : "exit code " + std::to_string(run.exit_code)) +
                                  "): no result of its configuration");
    }
    if (run.signal != 0) {
      return fail(TrialStatus::failed, "`" + command + "` was killed by signal " +
                                           std::to_string(run.signal) + " (" +
                                           strsignal(run.signal) + ")" + err_tail);
    }
    const std::string exited =
        "`" + command + "` exited with code " + std::to_string(run.exit_code);
    if (run.exit_code == kExitCompilationFailed) {
      return fail(TrialStatus::failed, exited + " (a compile failure)" + err_tail,
                  "CompilationFailedConfig");
    }
    if (run.exit_code == kExitInvalidConfig) {
      return fail(TrialStatus::invalid, exited + " (an invalid configuration)" + err_tail,
                  "InvalidConfig");
    }
    if (run.exit_code != 0) return fail(TrialStatus::failed, exited + err_tail);
    const Objective objective = objective_of(run.out);
    if (!objective.value) {
      std::string message = "`" + command + "`: " + objective.why;
      message += run.out.empty() ? " (stdout was empty)" : "; stdout: " + tail(run.out);
      if (objective.found_nothing && !run.err.empty()) {
        message += "; stderr: " + tail(run.err) +
                   " (if the program prints its result on stderr, end the command with 2>&1)";
      }
      return fail(TrialStatus::failed, message);
    }
    // A plain number or a score may be negative; a time cannot be: a program that prints one
    // is broken (an overflowed counter, a clock read backwards), and it must not become the best.
    if (*objective.value < 0.0 && is_time_unit(options_.unit)) {
      std::ostringstream message;
      message << "`" << command << "`: the output was a negative time (" << *objective.value << " "
              << options_.unit << "), which no run takes; stdout: " << tail(run.out);
      return fail(TrialStatus::failed, message.str());
    }
    raw.push_back(*objective.value);
    auto metrics = output_metrics(run.out);
    for (auto& [name, value] : metrics.values) printed[name].push_back(value);
    dropped.merge(metrics.dropped);
  }
  Measurement m = Measurement::success(median(raw), raw, seconds_since(start));
  for (const auto& [name, values] : printed) m.metrics[name] = median(values);
  m.metrics["wall_seconds"] = median(wall);
  if (!dropped.empty()) {
    std::string names;
    std::size_t listed = 0;
    for (const auto& name : dropped) {
      if (listed++ == kMaxListedDroppedMetrics) break;
      names += (names.empty() ? "'" : ", '") + name + "'";
    }
    if (dropped.size() > kMaxListedDroppedMetrics) {
      names += " and " + std::to_string(dropped.size() - kMaxListedDroppedMetrics) + " more";
    }
    m.message = std::to_string(dropped.size()) +
                " metric(s) of the output not kept (past the first " +
                std::to_string(kMaxOutputMetrics) + " names, or a name longer than " +
                std::to_string(kMaxMetricNameBytes) + " bytes): " + names;
  }
  return m;
}

}  // namespace tunebase
