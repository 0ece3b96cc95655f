#include "core/failure_reasons.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <utility>

namespace tunebase {

namespace {

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool is_alpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool is_hex_digit(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }
bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

std::string lowercase(std::string_view text) {
  std::string out(text);
  for (auto& c : out) c = lower(c);
  return out;
}

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// `out` ends with `word` (ignoring case) as a whole word, before spaces or a sign, "=", ":" or
// "#" ("code -2", "errno=12", "cudaError: 2").
bool ends_with_word(const std::string& out, std::string_view word) {
  std::string_view o(out);
  while (!o.empty() && (o.back() == ' ' || o.back() == '-' || o.back() == '=' || o.back() == ':' ||
                        o.back() == '#'))
    o.remove_suffix(1);
  if (o.size() < word.size()) return false;
  if (o.size() > word.size() && is_word_char(o[o.size() - word.size() - 1])) return false;
  return lowercase(o.substr(o.size() - word.size())) == word;
}

// A number a reader tells failures apart by: an exit code, a signal, an error code.
bool number_names_the_reason(const std::string& out) {
  static constexpr std::array<std::string_view, 7> kNamers = {
      "code", "signal", "status", "errno", "cudaerror", "returned", "exit"};
  return std::any_of(kNamers.begin(), kNamers.end(),
                     [&](std::string_view w) { return ends_with_word(out, w); });
}

// Past a number at text[i]: digits, one decimal point, an exponent; hex after 0x.
std::size_t number_end(std::string_view text, std::size_t i) {
  if (text.substr(i, 2) == "0x" || text.substr(i, 2) == "0X") {
    i += 2;
    while (i < text.size() && is_hex_digit(text[i])) ++i;
    return i;
  }
  while (i < text.size() && (is_digit(text[i]) || text[i] == '.')) ++i;
  if (i + 1 < text.size() && (text[i] == 'e' || text[i] == 'E') &&
      (is_digit(text[i + 1]) || ((text[i + 1] == '-' || text[i + 1] == '+') &&
                                 i + 2 < text.size() && is_digit(text[i + 2])))) {
    i += 2;
    while (i < text.size() && is_digit(text[i])) ++i;
  }
  return i;
}

// `text` at i begins with the digits pattern `shape` ('9' a digit, anything else itself).
bool matches_digits(std::string_view text, std::size_t i, std::string_view shape) {
  if (text.size() - i < shape.size()) return false;
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == '9' ? !is_digit(text[i + k]) : text[i + k] != shape[k]) return false;
  }
  return true;
}

// Past an ISO 8601 time at text[i] ("2026-11-24", "2026-11-24T15:26:03.5Z",
// "2026-11-24 15:26:03+01:00"), or i when there is none.
std::size_t time_end(std::string_view text, std::size_t i) {
  if (!matches_digits(text, i, "9999-99-99")) return i;
  std::size_t end = i + 10;
  if (end + 1 < text.size() && (text[end] == 'T' || text[end] == ' ') &&
      matches_digits(text, end + 1, "99:99")) {
    end += 1;
    while (end < text.size() && (is_digit(text[end]) || text[end] == ':' || text[end] == '.' ||
                                 text[end] == 'Z' || text[end] == '+' || text[end] == '-'))
      ++end;
  }
  return end;
}

bool is_id_char(char c) { return is_word_char(c) || c == '-' || c == '.'; }

// A token that names one thing among many (a UUID, a hash, a generated file or worker name:
// w-3f2a1c, kernel_bx128_by4.cu, kern_128_4) rather than a kind of thing (sm_80, float4, 42ms).
bool is_id(std::string_view token) {
  static constexpr std::size_t kUuidBytes = 36;
  if (token.size() == kUuidBytes) {
    bool uuid = true;
    for (std::size_t k = 0; k < token.size() && uuid; ++k) {
      uuid = (k == 8 || k == 13 || k == 18 || k == 23) ? token[k] == '-' : is_hex_digit(token[k]);
    }
    if (uuid) return true;
  }
  bool letter = false;
  bool digit = false;
  bool all_hex = true;
  std::size_t digit_runs = 0;
  for (std::size_t k = 0; k < token.size(); ++k) {
    if (is_digit(token[k])) {
      digit = true;
      if (k == 0 || !is_digit(token[k - 1])) ++digit_runs;
    } else {
      letter = letter || is_alpha(token[k]);
      all_hex = all_hex && is_hex_digit(token[k]);
    }
  }
  static constexpr std::size_t kMinHashBytes = 6;
  if (!letter || !digit) return false;
  if (all_hex && token.size() >= kMinHashBytes && !starts_with(lowercase(token), "0x")) {
    return true;
  }
  if (is_digit(token[0])) {
    // A number with a unit (42ms, 1e-3s) is a number.
    const auto end = number_end(token, 0);
    if (std::all_of(token.begin() + static_cast<std::ptrdiff_t>(end), token.end(), is_alpha)) {
      return false;
    }
  }
  return digit_runs >= 2;
}

// Past a path starting at text[i]: up to a space, or the punctuation that follows a path in a
// message (":12:3", "(12)", a closing quote); a drive's colon (C:\) is the path's.
std::size_t path_end(std::string_view text, std::size_t i) {
  std::size_t end = i;
  while (end < text.size() && !is_space(text[end])) {
    const char c = text[end];
    const bool drive = c == ':' && end == i + 1 && end + 1 < text.size() &&
                       (text[end + 1] == '\\' || text[end + 1] == '/');
    if ((c == ':' && !drive) || c == '(' || c == ')' || c == ',' || c == '\'' || c == '"' ||
        c == ']' || c == '>' || c == ';' || c == '`')
      break;
    ++end;
  }
  return end;
}

std::string normalised(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '`' || c == '{') {
      // A command or a configuration: its values differ from trial to trial.
      const char close = c == '`' ? '`' : '}';
      const auto end = text.find(close, i + 1);
      if (end != std::string_view::npos) {
        out += c == '`' ? "`<command>`" : "{...}";
        i = end + 1;
        continue;
      }
    }
    if (is_space(c)) {
      if (!out.empty() && out.back() != ' ') out += ' ';
      ++i;
      continue;
    }
    if (i == 0 || is_space(text[i - 1])) {
      // A whole token with a / or \ is a path (after its opening quote or bracket, or "name="),
      // unless it holds a | : a formula such as ||b-Ax||/||b||, which no path spells.
      std::size_t token_end = i;
      while (token_end < text.size() && !is_space(text[token_end])) ++token_end;
      const auto token = text.substr(i, token_end - i);
      if (token.find_first_of("/\\") != std::string_view::npos &&
          token.find_first_of("`{|") == std::string_view::npos) {
        std::size_t start = i;
        if (const auto eq = token.find('=');
            eq != std::string_view::npos && eq < token.find_first_of("/\\")) {
          start = i + eq + 1;
        }
        while (start < token_end &&
               (text[start] == '(' || text[start] == '[' || text[start] == '\'' ||
                text[start] == '"' || text[start] == '<'))
          ++start;
        out += text.substr(i, start - i);
        out += "<path>";
        i = std::max(path_end(text, start), start + 1);
        continue;
      }
    }
    if (const auto end = time_end(text, i); end != i && (i == 0 || !is_id_char(text[i - 1]))) {
      out += "<time>";
      i = end;
      continue;
    }
    if (is_id_char(c) && (i == 0 || !is_id_char(text[i - 1]))) {
      std::size_t end = i;
      while (end < text.size() && is_id_char(text[end])) ++end;
      while (end > i && (text[end - 1] == '.' || text[end - 1] == '-')) --end;
      if (is_id(text.substr(i, end - i)) && !number_names_the_reason(out)) {
        out += "<id>";
        i = end;
        continue;
      }
    }
    if (is_digit(c) && (i == 0 || !is_word_char(text[i - 1]))) {
      const auto end = number_end(text, i);
      out += number_names_the_reason(out) ? std::string(text.substr(i, end - i)) : "N";
      i = end;
      continue;
    }
    out += c;
    ++i;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// Where "; " (before details) is in `text`, outside backquotes and brackets, or npos.
std::size_t details_at(std::string_view text) {
  bool quoted = false;
  int depth = 0;
  for (std::size_t i = 0; i + 1 < text.size(); ++i) {
    const char c = text[i];
    if (c == '`') quoted = !quoted;
    if (quoted) continue;
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    if (depth == 0 && c == ';' && text[i + 1] == ' ') return i;
  }
  return std::string_view::npos;
}

constexpr std::string_view kTraceback = "Traceback (most recent call last):";

// The line that says why: the first non-empty one, of a Python traceback the last (the
// exception raised).
std::string_view telling_line(std::string_view text) {
  const bool traceback = text.find(kTraceback) != std::string_view::npos;
  std::string_view chosen;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const auto line = trimmed(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (line.empty()) continue;
    if (!traceback) return line;
    chosen = line;
  }
  return chosen;
}

// "exited with code 137" as "exited with code 137 = signal 9 (SIGKILL)": a shell reports a
// command killed by signal N as exit code 128+N.
std::string with_signal_of_exit_code(std::string reason) {
  static constexpr int kShellSignalBase = 128;
  static constexpr int kMaxSignal = 64;
  static constexpr std::array<std::string_view, 16> kSignalNames = {
      "",       "SIGHUP",  "SIGINT",  "SIGQUIT", "SIGILL",  "SIGTRAP", "SIGABRT", "SIGBUS",
      "SIGFPE", "SIGKILL", "SIGUSR1", "SIGSEGV", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM"};
  for (const std::string_view says : {"exited with code ", "exit code ", "exit status "}) {
    const auto at = reason.find(says);
    if (at == std::string::npos) continue;
    const auto begin = at + says.size();
    auto end = begin;
    while (end < reason.size() && is_digit(reason[end])) ++end;
    if (end == begin || end - begin > 3) return reason;
    const int code = std::stoi(reason.substr(begin, end - begin));
    const int signal = code - kShellSignalBase;
    if (signal < 1 || signal > kMaxSignal) return reason;
    std::string named = " = signal " + std::to_string(signal);
    if (static_cast<std::size_t>(signal) < kSignalNames.size()) {
      named += " (" + std::string(kSignalNames[static_cast<std::size_t>(signal)]) + ")";
    }
    return reason.insert(end, named);
  }
  return reason;
}

bool is_command_failure(std::string_view head) {
  return head.find("` exited with code ") != std::string_view::npos ||
         head.find("` was killed by signal ") != std::string_view::npos;
}

}  // namespace

std::string shortened(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  return std::string(utf8_prefix(text, max_bytes)) + "...";
}

std::int64_t FailureBreakdown::total() const {
  std::int64_t n = other_trials;
  for (const auto& r : reasons) n += r.count;
  return n;
}

std::string failure_reason(std::string_view message) {
  std::string_view text = trimmed(message);
  // "run 2 of 3: " (which of a command's repeats failed) says nothing of why.
  if (starts_with(text, "run ")) {
    const auto colon = text.find(": ");
    if (colon != std::string_view::npos && colon < 20) text.remove_prefix(colon + 2);
  }
  const bool traceback = starts_with(text, kTraceback);
  const auto line = traceback ? telling_line(text) : text.substr(0, text.find('\n'));
  // A violated constraint is named as written: its numbers are what it says.
  static constexpr std::string_view kConstraint = "violates constraint";
  if (const auto at = line.find(kConstraint); at != std::string_view::npos) {
    auto start = normalised(line.substr(0, at));
    if (!start.empty()) start += ' ';
    return start + std::string(line.substr(at));
  }
  std::string_view head = line;
  std::string_view details;
  if (const auto at = details_at(line); at != std::string_view::npos) {
    head = line.substr(0, at);
    // What follows may be many lines (a program's stderr).
    if (!traceback) details = text.substr(at + 2);
  }
  auto reason = with_signal_of_exit_code(normalised(head));
  // Of a command that failed, what it said is why (a silent exit 1 is another reason).
  if (is_command_failure(head) && !details.empty()) {
    static constexpr std::string_view kStderr = "stderr: ";
    if (starts_with(details, kStderr)) details.remove_prefix(kStderr.size());
    if (const auto said = normalised(telling_line(details)); !said.empty()) {
      reason += "; stderr: " + said;
    }
  }
  return reason.empty() ? std::string("(no message)") : reason;
}

FailureBreakdown failure_breakdown(const std::vector<FailureMessages>& messages,
                                   std::size_t max_reasons) {
  struct Group {
    std::int64_t count = 0;
    std::int64_t example_count = 0;
    std::string reason;
    std::string example;
  };
  // Keyed by the reason ignoring case: "Out of memory" is "out of memory".
  std::map<std::pair<TrialStatus, std::string>, Group> groups;
  for (const auto& m : messages) {
    auto reason = failure_reason(m.message);
    auto& g = groups[{m.status, lowercase(reason)}];
    g.count += m.count;
    if (m.count > g.example_count) {
      g.example_count = m.count;
      g.reason = std::move(reason);
      g.example = shortened(m.message, kMaxExampleBytes);
    }
  }
  std::vector<FailureReason> all;
  all.reserve(groups.size());
  for (auto& [key, g] : groups) {
    all.push_back({key.first, std::move(g.reason), g.count, std::move(g.example)});
  }
  std::stable_sort(all.begin(), all.end(), [](const FailureReason& x, const FailureReason& y) {
    return x.count > y.count;  // map order (status, reason) breaks ties
  });
  // Each status's most frequent reason first, so that a few timeouts among many failures of
  // many kinds are not hidden among the others; then the most frequent of the rest.
  std::vector<bool> listed(all.size(), false);
  std::size_t n_listed = 0;
  std::vector<TrialStatus> seen;
  for (std::size_t k = 0; k < all.size() && n_listed < max_reasons; ++k) {
    if (std::find(seen.begin(), seen.end(), all[k].status) != seen.end()) continue;
    seen.push_back(all[k].status);
    listed[k] = true;
    ++n_listed;
  }
  for (std::size_t k = 0; k < all.size() && n_listed < max_reasons; ++k) {
    if (!listed[k]) {
      listed[k] = true;
      ++n_listed;
    }
  }
  FailureBreakdown out;
  std::map<TrialStatus, OtherFailures> others;
  for (std::size_t k = 0; k < all.size(); ++k) {
    if (listed[k]) {
      out.reasons.push_back(std::move(all[k]));
      continue;
    }
    auto& o = others[all[k].status];
    o.status = all[k].status;
    o.trials += all[k].count;
    ++o.reasons;
    out.other_trials += all[k].count;
    ++out.other_reasons;
  }
  for (const auto& [status, o] : others) out.others.push_back(o);
  return out;
}

}  // namespace tunebase
