// An output file that is whole or untouched: written to a temporary file next to it and renamed
// over it when complete, so a failed or interrupted command leaves an existing file as it was
// and no partial one. Devices and pipes (/dev/stdout, a FIFO) are written directly.
#pragma once

#include <fstream>
#include <string>

namespace tunebase::cli {

class OutputFile {
 public:
  /// Opens the temporary file now (IoError when the path cannot be written: a directory, a
  /// missing folder, no permission), so a long computation does not end in that error.
  explicit OutputFile(std::string path);
  /// Removes the temporary file unless committed.
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::ofstream& stream() { return out_; }
  /// Flushes and renames the temporary file over the path; IoError when writing failed.
  void commit();

 private:
  std::string path_;       // as given, for messages
  std::string target_;     // the file replaced (a symlink's target)
  std::string temporary_;  // empty when writing to a device or pipe directly
  std::ofstream out_;
  bool committed_ = false;
};

}  // namespace tunebase::cli
