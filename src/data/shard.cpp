#include "data/shard.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/fs.h"

namespace tda {

namespace {

// Validates a shard header (the file's first 1024 bytes, or fewer if it is shorter) against the
// file size; returns the token count.
size_t check_header(const char* head, size_t head_bytes, size_t size, const std::string& path) {
  TDA_CHECK(size >= kShardHeaderBytes && head_bytes >= kShardHeaderBytes,
            path + ": truncated shard: " + std::to_string(size) + " bytes, header needs 1024");
  int32_t header[256];
  std::memcpy(header, head, kShardHeaderBytes);
  TDA_CHECK(header[0] == kShardMagic, path + ": bad magic " + std::to_string(header[0]) +
                                          " at offset 0 (expected 20240520, an llm.c .bin shard)");
  TDA_CHECK(
      header[1] == kShardVersion,
      path + ": unsupported version " + std::to_string(header[1]) + " at offset 4 (expected 1)");
  TDA_CHECK(header[2] >= 0, path + ": negative token count at offset 8");
  size_t n = size_t(header[2]);
  size_t want = kShardHeaderBytes + 2 * n;
  TDA_CHECK(size == want, path + ": header says " + std::to_string(n) + " tokens (" +
                              std::to_string(want) + " bytes) but the file has " +
                              std::to_string(size) + " bytes (truncated or corrupt)");
  return n;
}

// The first token id >= vocab_size among n tokens at byte offset `offset` of the file, as a
// one-line error; nothing when there is none. A branch-free pass finds whether there is one.
void check_tokens(const uint16_t* t, size_t n, int vocab_size, size_t offset,
                  const std::string& path) {
  uint16_t mx = 0;
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, t[i]);
  if (mx < vocab_size) return;
  for (size_t i = 0; i < n; ++i)
    TDA_CHECK(t[i] < vocab_size, path + ": token id " + std::to_string(t[i]) + " >= vocab " +
                                     std::to_string(vocab_size) + " at offset " +
                                     std::to_string(offset + 2 * i));
}

}  // namespace

std::vector<uint16_t> parse_shard(const char* data, size_t size, const std::string& path,
                                  int vocab_size) {
  const size_t n = check_header(data, size, size, path);
  std::vector<uint16_t> tokens(n);
  if (n) std::memcpy(tokens.data(), data + kShardHeaderBytes, 2 * n);
  check_tokens(tokens.data(), n, vocab_size, kShardHeaderBytes, path);
  return tokens;
}

std::vector<uint16_t> read_shard(const std::string& path, int vocab_size) {
  read_shard_header(path);  // a one-line error before reading a possibly huge wrong file
  std::vector<char> bytes = read_file_bytes(path);
  return parse_shard(bytes.data(), bytes.size(), path, vocab_size);
}

size_t read_shard_header(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  TDA_CHECK(f.good(), path + ": cannot open shard");
  const size_t size = size_t(f.tellg());
  char head[kShardHeaderBytes] = {};
  f.seekg(0);
  f.read(head, std::streamsize(std::min(size, kShardHeaderBytes)));
  return check_header(head, size_t(f.gcount()), size, path);
}

void check_shards(const std::vector<std::string>& files, int vocab_size,
                  const std::function<void(uint64_t, uint64_t)>& progress) {
  uint64_t total = 0, done = 0;
  std::vector<size_t> counts;
  for (const auto& path : files) {
    counts.push_back(read_shard_header(path));
    total += kShardHeaderBytes + 2 * uint64_t(counts.back());
  }
  std::vector<uint16_t> buf(size_t(1) << 21);  // 4 MiB of tokens at a time
  for (size_t k = 0; k < files.size(); ++k) {
    const std::string& path = files[k];
    std::ifstream f(path, std::ios::binary);
    TDA_CHECK(f.good(), path + ": cannot open shard");
    f.seekg(std::streamoff(kShardHeaderBytes));
    done += kShardHeaderBytes;
    for (size_t i = 0; i < counts[k];) {
      const size_t n = std::min(buf.size(), counts[k] - i);
      f.read(reinterpret_cast<char*>(buf.data()), std::streamsize(2 * n));
      TDA_CHECK(size_t(f.gcount()) == 2 * n, path + ": read failed at offset " +
                                                 std::to_string(kShardHeaderBytes + 2 * i) +
                                                 " (the file changed while it was checked?)");
      check_tokens(buf.data(), n, vocab_size, kShardHeaderBytes + 2 * i, path);
      i += n;
      done += 2 * n;
      if (progress) progress(done, total);
    }
  }
}

void write_shard(const std::string& path, const uint16_t* tokens, size_t n) {
  TDA_CHECK(n <= size_t(INT32_MAX), path + ": too many tokens for one shard");
  int32_t header[256] = {};
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = int32_t(n);
  std::string out(reinterpret_cast<const char*>(header), kShardHeaderBytes);
  out.append(reinterpret_cast<const char*>(tokens), 2 * n);
  write_file_durable(path, out);
}

}  // namespace tda
