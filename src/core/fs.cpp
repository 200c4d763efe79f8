#include "core/fs.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace tda {

std::vector<char> read_file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  TDA_CHECK(f.good(), path + ": cannot open for reading");
  std::streamsize n = f.tellg();
  f.seekg(0);
  std::vector<char> buf(static_cast<size_t>(n));
  TDA_CHECK(n == 0 || f.read(buf.data(), n), path + ": read failed");
  return buf;
}

void write_file_durable(const std::string& path, const std::string& contents) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  TDA_CHECK(fd >= 0, tmp + ": cannot create: " + std::strerror(errno));
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t w = ::write(fd, contents.data() + done, contents.size() - done);
    if (w < 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(tmp + ": write failed: " + std::strerror(e));
    }
    done += size_t(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw Error(tmp + ": fsync/close failed: " + std::strerror(errno));
  }
  TDA_CHECK(::rename(tmp.c_str(), path.c_str()) == 0,
            path + ": rename failed: " + std::strerror(errno));
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

std::vector<std::string> glob_paths(const std::string& pattern, const std::string& what) {
  glob_t g{};
  int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  TDA_CHECK(!out.empty(), what + ": no file matches '" + pattern + "'");
  return out;  // glob(3) returns sorted paths
}

bool path_exists(const std::string& path) {
  return std::filesystem::exists(path);
}

void make_dirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  TDA_CHECK(!ec, path + ": cannot create directory: " + ec.message());
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

}  // namespace tda
