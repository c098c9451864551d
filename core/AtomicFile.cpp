// Temporary file, fsync, check, rename; see AtomicFile.h.
#include "AtomicFile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "Error.h"
#include "Limits.h"

namespace ml {
namespace fs = std::filesystem;

namespace {

std::string reasonFor(int err) {
  if (err == ENOSPC || err == EDQUOT) return std::string(std::strerror(err)) + ": free some space or choose another disk";
  if (err == EFBIG) return std::string(std::strerror(err)) + ": the file size limit of this process was reached";
  if (err == EACCES || err == EPERM || err == EROFS) return std::string(std::strerror(err)) + ": choose a writable folder";
  return std::strerror(err);
}

// A name in the target's folder, so that the rename stays on one file system.
std::string temporaryName(const fs::path& target) {
  static std::atomic<unsigned> counter{0};
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  return (dir / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++)))
      .string();
}

}  // namespace

AtomicFile::AtomicFile(std::string path, std::string what) : path_(std::move(path)), what_(std::move(what)) {
  if (path_.empty()) throw UserError(what_ + ": no file name given");
  std::error_code ec;
  // Write through a symbolic link to the file it names, as a plain open would.
  if (fs::is_symlink(path_, ec)) {
    const fs::path real = fs::weakly_canonical(path_, ec);
    if (!ec) path_ = real.string();
  }
  const fs::path target(path_);
  if (fs::is_directory(target, ec))
    throw UserError("cannot write " + what_ + " '" + clipText(path_, 200) + "': it is a folder; give a file name");
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec))
    throw UserError("cannot write " + what_ + " '" + clipText(path_, 200) + "': the folder " + clipText(dir.string(), 200) +
                    " does not exist; create it or choose another path");
  tmp_ = temporaryName(target);
  // 0666 and the umask, like any new file; an existing target keeps its permissions below.
  const int fd = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) fail("cannot create a temporary file in " + dir.string(), errno);
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && S_ISREG(st.st_mode)) (void)::fchmod(fd, st.st_mode & 07777);
  file_ = ::fdopen(fd, "wb");
  if (!file_) {
    const int err = errno;
    ::close(fd);
    fail("cannot open a temporary file in " + dir.string(), err);
  }
}

AtomicFile::~AtomicFile() {
  if (!committed_) discard();
}

void AtomicFile::discard() {
  if (file_) std::fclose(file_);
  file_ = nullptr;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
}

void AtomicFile::fail(const std::string& step, int err) {
  discard();
  std::error_code ec;
  const bool existed = fs::exists(path_, ec);
  throw UserError("writing " + what_ + " '" + clipText(path_, 200) + "' failed (" + step + ": " + reasonFor(err) + "); " +
                  (existed ? "the existing file was left unchanged" : "no file was created"));
}

void AtomicFile::write(const void* data, size_t bytes) {
  if (!file_ || writeErrno_ || bytes == 0) return;
  if (std::fwrite(data, 1, bytes, file_) != bytes) writeErrno_ = errno ? errno : EIO;
}

void AtomicFile::commit() {
  if (!file_) throw UserError("writing " + what_ + " '" + clipText(path_, 200) + "' failed: the file was already closed");
  if (writeErrno_) fail("write", writeErrno_);
  if (std::ferror(file_)) fail("write", errno ? errno : EIO);
  if (std::fflush(file_) != 0) fail("write", errno);
  if (::fsync(::fileno(file_)) != 0) fail("fsync", errno);
  const int rc = std::fclose(file_);
  file_ = nullptr;
  if (rc != 0) fail("close", errno);
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail("rename", errno);
  tmp_.clear();
  committed_ = true;
  // The rename itself is durable once the folder is synced; a failure here loses nothing.
  const fs::path target(path_);
  const std::string dir = target.has_parent_path() ? target.parent_path().string() : ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

void checkCanWrite(const std::string& path, const std::string& what) {
  if (path.empty()) throw UserError("no output file given for the " + what + ": give a file name");
  std::error_code ec;
  const fs::path target(path);
  if (fs::is_directory(target, ec))
    throw UserError("cannot write " + what + " '" + clipText(path, 200) + "': it is a folder; give a file name");
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec))
    throw UserError("cannot write " + what + " '" + clipText(path, 200) + "': the folder '" + clipText(dir.string(), 200) +
                    "' does not exist; create it or choose another path");
  // access() says yes to root on any folder; creating a file is the test that cannot lie.
  const fs::path probe = dir / (".mirrorlab-probe-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw UserError("cannot write " + what + " '" + clipText(path, 200) + "': the folder '" + clipText(dir.string(), 200) +
                    "' is not writable (" + std::strerror(errno) + "); choose another path");
  ::close(fd);
  fs::remove(probe, ec);
}

void writeFileAtomically(const std::string& path, std::string_view content, const std::string& what) {
  AtomicFile f(path, what);
  f.write(content);
  f.commit();
}

}  // namespace ml
