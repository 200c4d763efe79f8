// safetensors (https://huggingface.co/docs/safetensors): 8-byte little-endian header length,
// a JSON header {name: {dtype, shape, data_offsets}}, then the raw tensor bytes.
// We write F32 only; the reader checks names, dtypes and shapes and names the file on error.
//
// Integrity: the writer stores each tensor's CRC32C in the standard `__metadata__` map (string
// values, as the format requires) under "crc32c.<tensor name>" = 8 hex digits, so the files stay
// loadable by the safetensors library. The reader verifies a tensor's bytes whenever it reads it.
// Files without checksums (older tda, other writers) still load: checksummed() says which.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"

namespace tda {

// Stored data that fails an integrity check (checksum, truncation, unparsable header): the file
// is damaged, not the request wrong. `--resume auto` falls back past such a checkpoint.
struct CorruptFile : Error {
  explicit CorruptFile(const std::string& msg) : Error(msg) {}
};

struct TensorRef {
  std::string name;
  std::vector<int64_t> shape;
  const float* data;
};

void write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  // A file's bytes already in memory; `path` only names it in messages.
  SafetensorsFile(std::vector<char> bytes, const std::string& path);
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  std::vector<int64_t> shape(const std::string& name) const;
  // Copies tensor `name` into dst after checking it exists with exactly `shape` and, in a
  // checksummed file, that its bytes match the stored CRC32C (CorruptFile otherwise).
  void read_into(const std::string& name, const std::vector<int64_t>& shape, float* dst) const;
  // Checks the CRC32C of every tensor (a no-op for a file without checksums).
  void verify_all() const;
  bool checksummed() const { return checksummed_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::vector<std::string> names() const;

 private:
  struct Entry {
    std::vector<int64_t> shape;
    uint64_t begin, end;
    bool has_crc = false;
    uint32_t crc = 0;
  };
  void verify(const std::string& name, const Entry& e) const;
  std::string path_;
  std::vector<char> bytes_;
  uint64_t data_start_ = 0;
  std::map<std::string, Entry> index_;
  std::map<std::string, std::string> metadata_;
  bool checksummed_ = false;
};

}  // namespace tda
