#include "core/file_lock.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "core/error.h"

namespace tda {

namespace {

bool no_lock_support(int e) {
  return e == ENOLCK || e == ENOSYS || e == EOPNOTSUPP || e == EINVAL;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = o.fd_;
    unsupported_ = o.unsupported_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
    o.unsupported_ = false;
  }
  return *this;
}

bool FileLock::acquire(const std::string& path, bool wait, bool inherit) {
  release();
  path_ = path;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | (inherit ? 0 : O_CLOEXEC), 0644);
  TDA_CHECK(fd >= 0, path + ": cannot open the lock file: " + std::strerror(errno));
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;  // l_start = l_len = 0: the whole file, however long it grows
  for (;;) {
    if (::fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) == 0) break;
    const int e = errno;
    if (e == EINTR && wait) continue;
    ::close(fd);
    if (e == EAGAIN || e == EACCES) return false;
    if (no_lock_support(e)) {
      unsupported_ = true;
      return true;
    }
    throw Error(path + ": cannot lock: " + std::strerror(e));
  }
  fd_ = fd;
  // Who holds it, for the one line a refused process prints. Best effort: the lock is what
  // counts, this text only names the holder.
  const std::string me = "pid " + std::to_string(::getpid()) + " host " + host_name() + "\n";
  if (::ftruncate(fd_, 0) == 0) {
    ssize_t w = ::pwrite(fd_, me.data(), me.size(), 0);
    (void)w;
  }
  return true;
}

void FileLock::release() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  unsupported_ = false;
}

bool FileLock::held_elsewhere(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  const bool held = ::fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
  ::close(fd);
  return held;
}

std::string FileLock::holder() const {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  char buf[512] = {};
  ssize_t n = fd >= 0 ? ::read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0) ::close(fd);
  std::istringstream in(std::string(buf, size_t(n > 0 ? n : 0)));
  std::string k1, pid, k2, host;
  if (in >> k1 >> pid >> k2 >> host && k1 == "pid" && k2 == "host")
    return "pid " + pid + " on host " + host;
  return "an unknown process";
}

}  // namespace tda
