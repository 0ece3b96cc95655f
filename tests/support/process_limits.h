// Process limits a test can run out of on purpose, to check how code behaves without them.
#pragma once

#include <sys/resource.h>

#include <vector>

namespace tunebase::testing {

/// While it lives, this process has no free file descriptor: its soft limit is lowered (to at
/// most kMaxDescriptors, so that filling it stays quick) and every free descriptor below it is
/// held open, as in a process that leaked them. Restored at destruction.
class NoFreeDescriptors {
 public:
  static constexpr rlim_t kMaxDescriptors = 1024;

  NoFreeDescriptors();
  ~NoFreeDescriptors();
  NoFreeDescriptors(const NoFreeDescriptors&) = delete;
  NoFreeDescriptors& operator=(const NoFreeDescriptors&) = delete;

 private:
  rlimit saved_{};
  std::vector<int> held_;
};

}  // namespace tunebase::testing
