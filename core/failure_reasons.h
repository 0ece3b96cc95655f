// Why trials failed: the stored messages of failed, timed-out and invalid evaluations grouped
// into a few readable reasons (numbers, paths, commands and long tails left out), most
// frequent first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/trial.h"

namespace tunebase {

/// Reasons a breakdown lists at most; the rest are counted together as others.
inline constexpr std::size_t kMaxFailureReasons = 10;
/// The longest reason, in bytes (then "...").
inline constexpr std::size_t kMaxReasonBytes = 100;
/// The longest example message kept, in bytes (then "...").
inline constexpr std::size_t kMaxExampleBytes = 300;

/// How many finished trials of one status share one message (Store::failure_messages).
struct FailureMessages {
  TrialStatus status = TrialStatus::failed;
  std::string message;
  std::int64_t count = 0;
};

struct FailureReason {
  TrialStatus status = TrialStatus::failed;
  /// The messages' common form: "`<command>` exited with code 1", "CompilationFailedConfig",
  /// "timed out after N s", "configuration {...} violates constraint \"bx*by <= 1024\"".
  std::string reason;
  std::int64_t count = 0;
  /// The most frequent message of the group (its first kMaxExampleBytes).
  std::string example;
};

struct FailureBreakdown {
  /// Most frequent first (then by status and reason), at most kMaxFailureReasons; each status
  /// present keeps its most frequent reason here.
  std::vector<FailureReason> reasons;
  /// Trials of the reasons beyond those listed, and how many reasons they are.
  std::int64_t other_trials = 0;
  std::size_t other_reasons = 0;
  /// other_trials by status.
  std::map<TrialStatus, std::int64_t> other_trials_by_status;
  std::int64_t total() const;
};

/// The reason a failure message belongs to: its first line up to "; " (where details such as
/// a program's stderr follow), a leading "run N of M: " dropped, text in backquotes (a command)
/// as `<command>`, {...} (a configuration) as {...}, paths as <path> and numbers as N, except
/// an exit code, signal or error number and a violated constraint's text; then, after ": ",
/// the last line of a program's stderr ("; stderr: ...") or of a Python traceback (the
/// exception), normalised alike. An empty message is "(no message)".
std::string failure_reason(std::string_view message);

/// Groups `messages` by status and failure_reason, keeping at most `max_reasons`.
FailureBreakdown failure_breakdown(const std::vector<FailureMessages>& messages,
                                   std::size_t max_reasons = kMaxFailureReasons);

}  // namespace tunebase
