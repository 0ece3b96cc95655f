#include "tests/support/process_limits.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tunebase::testing {

NoFreeDescriptors::NoFreeDescriptors() {
  if (::getrlimit(RLIMIT_NOFILE, &saved_) != 0) {
    throw std::runtime_error(std::string("getrlimit: ") + std::strerror(errno));
  }
  rlimit lowered = saved_;
  lowered.rlim_cur = std::min(saved_.rlim_cur, kMaxDescriptors);
  if (::setrlimit(RLIMIT_NOFILE, &lowered) != 0) {
    throw std::runtime_error(std::string("setrlimit: ") + std::strerror(errno));
  }
  for (;;) {
    const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) break;
    held_.push_back(fd);
  }
}

NoFreeDescriptors::~NoFreeDescriptors() {
  for (const int fd : held_) ::close(fd);
  ::setrlimit(RLIMIT_NOFILE, &saved_);
}

}  // namespace tunebase::testing
