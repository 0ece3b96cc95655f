#include "core/failure_reasons.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <utility>

namespace tunebase {

namespace {

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// The first `max_bytes` of `text`, cut before a UTF-8 sequence, with "..." when cut.
std::string cut(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  std::size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return std::string(text.substr(0, end)) + "...";
}

bool ends_with_word(const std::string& out, std::string_view word) {
  std::string_view o(out);
  while (!o.empty() && o.back() == ' ') o.remove_suffix(1);
  return o.size() >= word.size() && o.substr(o.size() - word.size()) == word;
}

// A number a reader tells failures apart by: an exit code, a signal, an error number
// (`errno=2`, `returned -22`, `cudaError 700`, `error code -12`).
bool number_names_the_reason(const std::string& out) {
  std::string o = out;
  if (!o.empty() && o.back() == '-') o.pop_back();  // a negative code: its sign is written
  while (!o.empty() && (o.back() == '=' || o.back() == ':' || o.back() == ' ')) o.pop_back();
  std::string lower;
  for (const char c : o) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const std::string_view word :
       {"code", "signal", "status", "errno", "returned", "error", "cudaerror", "err"}) {
    if (ends_with_word(lower, word)) return true;
  }
  return false;
}

// Past a number at text[i]: digits, one decimal point, an exponent; hex after 0x.
std::size_t number_end(std::string_view text, std::size_t i) {
  if (text.substr(i, 2) == "0x" || text.substr(i, 2) == "0X") {
    i += 2;
    while (i < text.size() && std::isxdigit(static_cast<unsigned char>(text[i])) != 0) ++i;
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

std::string normalised(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    const bool word_start = i == 0 || !is_word_char(text[i - 1]);
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
    if (word_start && (c == '/' || text.substr(i, 2) == "./" || text.substr(i, 2) == "~/")) {
      std::size_t end = i;
      while (end < text.size() && !is_space(text[end]) && text[end] != ':' && text[end] != ',' &&
             text[end] != '\'' && text[end] != '"' && text[end] != ')')
        ++end;
      if (text.substr(i, end - i).find('/', 1) != std::string_view::npos || c == '/') {
        out += "<path>";
        i = end;
        continue;
      }
    }
    if (is_digit(c) && word_start) {
      const auto end = number_end(text, i);
      out += number_names_the_reason(out) ? std::string(text.substr(i, end - i)) : "N";
      i = end;
      continue;
    }
    if (is_space(c)) {
      if (!out.empty() && out.back() != ' ') out += ' ';
      ++i;
      continue;
    }
    out += c;
    ++i;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

std::int64_t FailureBreakdown::total() const {
  std::int64_t n = other_trials;
  for (const auto& r : reasons) n += r.count;
  return n;
}

// The last line of `text` with more than blanks on it.
std::string_view last_line(std::string_view text) {
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  const auto start = text.find_last_of('\n');
  text = start == std::string_view::npos ? text : text.substr(start + 1);
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  return text;
}

std::string failure_reason(std::string_view message) {
  // A Python traceback says why in its last line (the exception), whatever ran it.
  static constexpr std::string_view kTraceback = "Traceback (most recent call last):";
  if (const auto at = message.find(kTraceback); at != std::string_view::npos) {
    auto head = failure_reason(message.substr(0, at));
    const auto exception = normalised(last_line(message.substr(at)));
    if (message.substr(0, at).find_first_not_of(" \t\n;:") == std::string_view::npos) {
      head.clear();
    }
    return cut(head.empty() ? exception : head + ": " + exception, kMaxReasonBytes);
  }
  // A program's stderr: its last line says why (`cannot open ...`), and tells failures with
  // one exit code apart.
  static constexpr std::string_view kStderr = "; stderr: ";
  if (const auto at = message.find(kStderr); at != std::string_view::npos) {
    const auto head = failure_reason(message.substr(0, at));
    const auto why = normalised(last_line(message.substr(at + kStderr.size())));
    return cut(why.empty() ? head : head + ": " + why, kMaxReasonBytes);
  }
  std::string_view text = message;
  const auto line_end = text.find('\n');
  if (line_end != std::string_view::npos) text = text.substr(0, line_end);
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  // "run 2 of 3: " (which of a command's repeats failed) says nothing of why.
  if (text.substr(0, 4) == "run ") {
    const auto colon = text.find(": ");
    if (colon != std::string_view::npos && colon < 20) text.remove_prefix(colon + 2);
  }
  // A violated constraint is named as written: its numbers are what it says.
  static constexpr std::string_view kConstraint = "violates constraint";
  if (const auto at = text.find(kConstraint); at != std::string_view::npos) {
    auto head = normalised(text.substr(0, at));
    if (!head.empty()) head += ' ';
    return cut(head + std::string(text.substr(at)), kMaxReasonBytes);
  }
  // Details (a program's output) follow "; ", outside a command in backquotes.
  bool quoted = false;
  for (std::size_t i = 0; i + 1 < text.size(); ++i) {
    if (text[i] == '`') quoted = !quoted;
    if (!quoted && text[i] == ';' && text[i + 1] == ' ') {
      text = text.substr(0, i);
      break;
    }
  }
  const auto reason = normalised(text);
  return reason.empty() ? std::string("(no message)") : cut(reason, kMaxReasonBytes);
}

FailureBreakdown failure_breakdown(const std::vector<FailureMessages>& messages,
                                   std::size_t max_reasons) {
  struct Group {
    std::int64_t count = 0;
    std::int64_t example_count = 0;
    std::string example;
  };
  std::map<std::pair<TrialStatus, std::string>, Group> groups;
  for (const auto& m : messages) {
    auto& g = groups[{m.status, failure_reason(m.message)}];
    g.count += m.count;
    if (m.count > g.example_count) {
      g.example_count = m.count;
      g.example = cut(m.message, kMaxExampleBytes);
    }
  }
  std::vector<FailureReason> all;
  all.reserve(groups.size());
  for (auto& [key, g] : groups) {
    all.push_back({key.first, key.second, g.count, std::move(g.example)});
  }
  std::stable_sort(all.begin(), all.end(), [](const FailureReason& x, const FailureReason& y) {
    return x.count > y.count;  // map order (status, reason) breaks ties
  });
  // Each status's most frequent reason is listed first, so that timeouts, say, are never all
  // in others; then the most frequent of the rest.
  std::vector<bool> listed(all.size(), false);
  std::size_t n_listed = 0;
  std::map<TrialStatus, bool> status_seen;
  for (std::size_t i = 0; i < all.size() && n_listed < max_reasons; ++i) {
    if (!status_seen[all[i].status]) {
      status_seen[all[i].status] = true;
      listed[i] = true;
      ++n_listed;
    }
  }
  for (std::size_t i = 0; i < all.size() && n_listed < max_reasons; ++i) {
    if (!listed[i]) {
      listed[i] = true;
      ++n_listed;
    }
  }
  FailureBreakdown out;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (listed[i]) {
      out.reasons.push_back(std::move(all[i]));
    } else {
      out.other_trials += all[i].count;
      ++out.other_reasons;
      out.other_trials_by_status[all[i].status] += all[i].count;
    }
  }
  return out;
}

}  // namespace tunebase
