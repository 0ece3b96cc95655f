#include "apps/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace tunebase::cli {

namespace fs = std::filesystem;

namespace {

IoError cannot_write(const std::string& path) {
  return IoError("cannot write " + path + ": " + std::strerror(errno));
}

}  // namespace

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  std::error_code ec;
  const auto kind = fs::status(path_, ec).type();
  if (kind == fs::file_type::directory)
    throw IoError("cannot write " + path_ + ": it is a directory");
  if (kind != fs::file_type::not_found && kind != fs::file_type::regular) {
    out_.open(path_, std::ios::binary);  // a device or a pipe: written as it is, never replaced
    if (!out_) throw cannot_write(path_);
    return;
  }
  // Next to the real file (a symlink is followed, not replaced), so the rename stays on one
  // file system.
  fs::path target = fs::weakly_canonical(path_, ec);
  if (ec) target = path_;
  target_ = target.string();
  temporary_ = target_ + ".tmp-" + std::to_string(::getpid());
  out_.open(temporary_, std::ios::binary);
  if (!out_) throw cannot_write(path_);
}

OutputFile::~OutputFile() {
  if (committed_ || temporary_.empty()) return;
  out_.close();
  std::error_code ignored;
  fs::remove(temporary_, ignored);
}

void OutputFile::commit() {
  out_.flush();
  if (!out_) throw cannot_write(path_);
  out_.close();
  if (!out_) throw cannot_write(path_);
  if (!temporary_.empty()) {
    // On disk before it replaces the old file: a crash after the rename must not leave an
    // empty or partial file where a complete one was.
    const int fd = ::open(temporary_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw cannot_write(path_);
    const bool synced = ::fsync(fd) == 0;
    const int error = errno;
    ::close(fd);
    if (!synced) {
      errno = error;
      throw cannot_write(path_);
    }
    std::error_code ec;
    fs::rename(temporary_, target_, ec);
    if (ec) throw IoError("cannot write " + path_ + ": " + ec.message());
  }
  committed_ = true;
}

}  // namespace tunebase::cli
