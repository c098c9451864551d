// Temporary file + fsync + rename, so an export never leaves a half-written file behind.
#include "export/AtomicFile.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "Error.h"

namespace fs = std::filesystem;

namespace ml {

namespace {

std::string reason() { return std::strerror(errno); }

void syncFile(const std::string& path, const std::string& target) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw UserError("cannot write '" + target + "': " + reason());
  const bool ok = ::fsync(fd) == 0;
  const std::string why = reason();
  ::close(fd);
  if (!ok) throw UserError("cannot write '" + target + "': " + why + " (is the disk full?)");
}

}  // namespace

AtomicFile::AtomicFile(std::string target) : target_(std::move(target)) {
  const fs::path t(target_);
  std::random_device rd;
  std::string name = ".";  // appended piecewise: g++ 12 warns (-Wrestrict) on the chained form
  name += t.filename().string();
  name += ".tmp-";
  name += std::to_string(rd());
  temp_ = (t.parent_path() / name).string();
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  std::error_code ec;
  fs::remove(temp_, ec);
}

void AtomicFile::write(std::string_view bytes) {
  const int fd = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw UserError("cannot write '" + target_ + "': " + reason() + ": check the folder exists and is writable");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = reason();
      ::close(fd);
      throw UserError("cannot write '" + target_ + "': " + why + " (is the disk full?); nothing was replaced");
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) throw UserError("cannot write '" + target_ + "': " + reason() + "; nothing was replaced");
}

void AtomicFile::commit() {
  syncFile(temp_, target_);
  std::error_code ec;
  fs::rename(temp_, target_, ec);
  if (ec) throw UserError("cannot write '" + target_ + "': " + ec.message() + "; nothing was replaced");
  committed_ = true;
  // The rename itself reaches the disk with the folder's entry.
  const fs::path dir = fs::path(target_).parent_path();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void checkWritableOutput(const std::string& path, const std::string& what) {
  if (path.empty()) throw UserError("no output file given for the " + what + ": pass --output FILE");
  const fs::path p(path);
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw UserError("cannot write the " + what + " to '" + path + "': the folder '" + dir.string() +
                    "' does not exist; create it or choose another folder");
  if (fs::is_directory(p, ec))
    throw UserError("cannot write the " + what + " to '" + path + "': it is a folder; give a file name");
  // access() says yes to root on any folder; creating a file is the test that cannot lie.
  std::random_device rd;
  const fs::path probe = dir / (".mirrorlab-probe-" + std::to_string(rd()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw UserError("cannot write the " + what + " to '" + path + "': the folder '" + dir.string() +
                    "' is not writable (" + reason() + "); choose another folder");
  ::close(fd);
  fs::remove(probe, ec);
}

}  // namespace ml
