// One writer per directory: an exclusive advisory lock on a file in it, held for as long as the
// lock's descriptor is open (so it dies with the process, however it dies: a SIGKILL or a crash
// releases it, and a stale lock file is never a reason to refuse).
//
// The lock is an open-file-description lock (fcntl F_OFD_SETLK, Linux >= 3.15) on the whole
// file. Unlike a classic fcntl lock it belongs to the open file, not to the process, so a
// thread or a second open in the same process cannot release it by closing another descriptor,
// and a child that inherits the descriptor (`inherit`) shares the lock: it is released when the
// last process holding it exits (the sweep's children keep their sweep's lock while they
// checkpoint after it was killed). Unlike flock, it is forwarded to the server by the Linux NFS
// client (NFSv3 through lockd/NLM, NFSv4 in the protocol), so two nodes sharing a run directory
// over NFS exclude each other. Where the file system has no locks at all (Lustre mounted without
// `-o flock`, some FUSE file systems) locking fails with ENOLCK/ENOSYS/EOPNOTSUPP: the caller
// is told (unsupported()) and decides; docs/checkpoints.md says what that means for a run.
//
// The holder writes "pid <pid> host <hostname>" into the file, so a refusal can name it.
#pragma once
#include <string>

namespace tda {

class FileLock {
 public:
  FileLock() = default;
  ~FileLock() { release(); }
  FileLock(FileLock&& o) noexcept { *this = std::move(o); }
  FileLock& operator=(FileLock&& o) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  // Opens (creating) `path` and takes the lock. wait = false: returns false at once when another
  // open file holds it (holder() then names it); wait = true: blocks until it is free. `inherit`:
  // the descriptor survives exec, so children started afterwards share the lock. Throws naming
  // the file when it cannot be opened or locked for another reason than a holder; returns true
  // without a lock (unsupported()) on a file system that has no locks.
  bool acquire(const std::string& path, bool wait, bool inherit = false);
  void release();

  bool held() const { return fd_ >= 0 && !unsupported_; }
  bool unsupported() const { return unsupported_; }
  const std::string& path() const { return path_; }
  // Who holds the lock, as its holder recorded it: "pid 1234 on host node07" ("an unknown
  // process" when the file says nothing yet, e.g. read while its holder was writing it).
  std::string holder() const;
  // Whether some open file holds the lock on `path` now (false when the file is missing or the
  // file system has no locks): a look that takes nothing and writes nothing.
  static bool held_elsewhere(const std::string& path);

 private:
  int fd_ = -1;
  bool unsupported_ = false;
  std::string path_;
};

}  // namespace tda
