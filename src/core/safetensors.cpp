#include "core/safetensors.h"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"

namespace tda {

using json = nlohmann::json;

static std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

static uint64_t numel(const std::vector<int64_t>& s) {
  uint64_t n = 1;
  for (auto d : s) n *= uint64_t(d);
  return n;
}

void write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t off = 0;
  for (const auto& t : tensors) {
    uint64_t bytes = numel(t.shape) * 4;
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {off, off + bytes}}};
    off += bytes;
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8) h += ' ';  // align the data section to 8 bytes, as the spec allows
  std::string out;
  out.reserve(8 + h.size() + off);
  uint64_t hlen = h.size();
  for (int i = 0; i < 8; ++i) out.push_back(char((hlen >> (8 * i)) & 0xff));
  out += h;
  for (const auto& t : tensors) out.append(reinterpret_cast<const char*>(t.data), numel(t.shape) * 4);
  write_file_durable(path, out);
}

SafetensorsFile::SafetensorsFile(const std::string& path)
    : SafetensorsFile(read_file_bytes(path), path) {}

SafetensorsFile::SafetensorsFile(std::vector<char> bytes, const std::string& path)
    : path_(path), bytes_(std::move(bytes)) {
  TDA_CHECK(bytes_.size() >= 8, path + ": not a safetensors file (shorter than 8 bytes)");
  uint64_t hlen = 0;
  for (int i = 0; i < 8; ++i) hlen |= uint64_t(uint8_t(bytes_[i])) << (8 * i);
  TDA_CHECK(hlen <= bytes_.size() - 8, path + ": header length " + std::to_string(hlen) +
                                           " exceeds file size " + std::to_string(bytes_.size()));
  json header;
  try {
    header = json::parse(std::string(bytes_.data() + 8, hlen));
  } catch (const json::parse_error& e) {
    throw Error(path + ": bad safetensors header: " + e.what());
  }
  data_start_ = 8 + hlen;
  uint64_t data_size = bytes_.size() - data_start_;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      for (auto m = it.value().begin(); m != it.value().end(); ++m)
        metadata_[m.key()] = m.value().get<std::string>();
      continue;
    }
    const json& e = it.value();
    TDA_CHECK(e.value("dtype", "") == "F32",
              path + ": tensor '" + it.key() + "' has dtype " + e.value("dtype", "?") + ", expected F32");
    Entry en;
    en.shape = e.at("shape").get<std::vector<int64_t>>();
    en.begin = e.at("data_offsets").at(0).get<uint64_t>();
    en.end = e.at("data_offsets").at(1).get<uint64_t>();
    TDA_CHECK(en.end >= en.begin && en.end <= data_size && en.end - en.begin == numel(en.shape) * 4,
              path + ": tensor '" + it.key() + "' has inconsistent data_offsets");
    index_[it.key()] = en;
  }
}

std::vector<int64_t> SafetensorsFile::shape(const std::string& name) const {
  auto it = index_.find(name);
  TDA_CHECK(it != index_.end(), path_ + ": missing tensor '" + name + "'");
  return it->second.shape;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> r;
  for (const auto& kv : index_) r.push_back(kv.first);
  return r;
}

void SafetensorsFile::read_into(const std::string& name, const std::vector<int64_t>& shape,
                                float* dst) const {
  auto it = index_.find(name);
  TDA_CHECK(it != index_.end(), path_ + ": missing tensor '" + name + "'");
  TDA_CHECK(it->second.shape == shape, path_ + ": tensor '" + name + "' has shape " +
                                           shape_str(it->second.shape) + ", expected " + shape_str(shape));
  std::memcpy(dst, bytes_.data() + data_start_ + it->second.begin, it->second.end - it->second.begin);
}

}  // namespace tda
