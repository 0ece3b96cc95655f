// Why trials failed: the stored messages of failed, timed-out and invalid evaluations grouped
// into a few readable reasons (numbers, paths, ids, commands and long tails left out), most
// frequent first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/trial.h"

namespace tunebase {

/// Reasons a breakdown lists at most; the rest are counted together as others.
inline constexpr std::size_t kMaxFailureReasons = 10;
/// The longest reason shown as text, in bytes (then "..."); FailureReason::reason is whole.
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
  /// The messages' common form: "`<command>` exited with code 1; stderr: out of memory",
  /// "CompilationFailedConfig", "timed out after N s",
  /// "configuration {...} violates constraint \"bx*by <= 1024\"" (that of the most frequent
  /// message, as groups ignore case).
  std::string reason;
  std::int64_t count = 0;
  /// The most frequent message of the group (its first kMaxExampleBytes).
  std::string example;
};

/// The reasons of one status beyond those a breakdown lists.
struct OtherFailures {
  TrialStatus status = TrialStatus::failed;
  std::int64_t trials = 0;
  std::size_t reasons = 0;
};

struct FailureBreakdown {
  /// Most frequent first (then by status and reason), at most kMaxFailureReasons; every status
  /// present keeps its most frequent reason (while there is room for one of each status).
  std::vector<FailureReason> reasons;
  /// Trials of the reasons beyond those listed, and how many reasons they are: in all, and by
  /// status (failed, timeout, invalid order; statuses with none left out).
  std::int64_t other_trials = 0;
  std::size_t other_reasons = 0;
  std::vector<OtherFailures> others;
  std::int64_t total() const;
};

/// The reason a failure message belongs to: its first non-empty line (of a Python traceback,
/// its last: the exception) up to "; " outside brackets (where details such as a program's
/// stderr follow; of a command that exited or was killed, the first line of its stderr is
/// kept), a leading "run N of M: " dropped, text in backquotes (a command) as `<command>`,
/// {...} (a configuration) as {...}, a token with a / or \ as <path>, ISO times as <time>,
/// UUIDs and tokens whose digits vary among letters (w-3f2a1c, kern_128_4) as <id> and numbers
/// as N, except an exit code, signal number or error code (code -2, errno=12, cudaError 2,
/// returned -1) and a violated constraint's text. An exit code 128+N of a command names
/// signal N. An empty message is "(no message)". Not cut: see shortened().
std::string failure_reason(std::string_view message);

/// The first `max_bytes` of `text`, cut before a UTF-8 sequence, with "..." when cut.
std::string shortened(std::string_view text, std::size_t max_bytes);

/// Groups `messages` by status and failure_reason (ignoring case), keeping at most
/// `max_reasons`.
FailureBreakdown failure_breakdown(const std::vector<FailureMessages>& messages,
                                   std::size_t max_reasons = kMaxFailureReasons);

}  // namespace tunebase
