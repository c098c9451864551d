// Every file Mirrorlab writes for a user (weights, predictions, reports, exported code, traces,
// CSV exports, projects) goes through AtomicFile: the bytes go to a temporary file beside the
// target, which is flushed, fsync'ed and checked, then renamed over the target. A full disk, a
// missing folder or a crash therefore leaves the old file (or none), never a truncated one, and
// the error names the file, the reason and the fix.
#pragma once
#include <cstdio>
#include <string>
#include <string_view>

namespace ml {

class AtomicFile {
 public:
  // what names the file in messages ("weights file"). Throws UserError when the folder does not
  // exist, is not writable, or path is a folder.
  AtomicFile(std::string path, std::string what);
  ~AtomicFile();  // removes the temporary file unless commit() succeeded
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // For fprintf-style writers; errors are caught by commit() through ferror().
  std::FILE* stream() { return file_; }
  // Flushes, fsyncs, closes and checks the temporary file, then renames it over the target and
  // syncs the folder. Throws UserError naming the file and the reason; the target is unchanged.
  void commit();

  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(const std::string& step, int err);
  void discard();

  std::string path_, what_, tmp_;
  std::FILE* file_ = nullptr;
  int writeErrno_ = 0;
  bool committed_ = false;
};

// Checks now, before a long computation, that path could be written: its folder exists and is
// writable and path is not a folder. Throws UserError naming the file and the fix.
void checkCanWrite(const std::string& path, const std::string& what);

// The whole content at once: AtomicFile, write, commit.
void writeFileAtomically(const std::string& path, std::string_view content, const std::string& what);

}  // namespace ml
