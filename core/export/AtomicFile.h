// Writes a file so that readers see either the old file or the complete new one: the content goes
// to a temporary file beside the target, is flushed to disk, and is renamed over the target only
// when the writer commits. A writer that throws leaves the target untouched and no temporary file.
#pragma once
#include <string>
#include <string_view>

namespace ml {

class AtomicFile {
 public:
  explicit AtomicFile(std::string target);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // removes the temporary file unless committed

  const std::string& target() const { return target_; }
  // Writes bytes to the temporary file (replacing what it held).
  void write(std::string_view bytes);
  // Flushes the temporary file to disk and renames it over the target. Throws UserError naming
  // the target when the disk refuses (full, read-only).
  void commit();

 private:
  std::string target_, temp_;
  bool committed_ = false;
};

// Refuses, before any work, a path whose folder does not exist or cannot be written, or that
// names a folder. `what` names the file in the message ("ONNX model").
void checkWritableOutput(const std::string& path, const std::string& what);

}  // namespace ml
