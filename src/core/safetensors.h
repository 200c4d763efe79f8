// safetensors (https://huggingface.co/docs/safetensors): 8-byte little-endian header length,
// a JSON header {name: {dtype, shape, data_offsets}}, then the raw tensor bytes.
// We write F32 only; the reader checks names, dtypes and shapes and names the file on error.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tda {

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
  // Copies tensor `name` into dst after checking it exists with exactly `shape`.
  void read_into(const std::string& name, const std::vector<int64_t>& shape, float* dst) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::vector<std::string> names() const;

 private:
  struct Entry {
    std::vector<int64_t> shape;
    uint64_t begin, end;
  };
  std::string path_;
  std::vector<char> bytes_;
  uint64_t data_start_ = 0;
  std::map<std::string, Entry> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace tda
