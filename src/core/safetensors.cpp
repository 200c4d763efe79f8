#include "core/safetensors.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/crc32c.h"
#include "core/error.h"
#include "core/fs.h"

namespace tda {

using json = nlohmann::json;

static std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

static const std::string kCrcPrefix = "crc32c.";

static std::string hex8(uint32_t x) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", x);
  return buf;
}

static uint64_t numel(const std::vector<int64_t>& s) {
  uint64_t n = 1;
  for (auto d : s) n *= uint64_t(d);
  return n;
}

void write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  std::map<std::string, std::string> meta = metadata;
  for (const auto& t : tensors)
    meta[kCrcPrefix + t.name] = hex8(crc32c(t.data, numel(t.shape) * 4));
  header["__metadata__"] = meta;
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
  for (const auto& t : tensors)
    out.append(reinterpret_cast<const char*>(t.data), numel(t.shape) * 4);
  write_file_durable(path, out);
}

SafetensorsFile::SafetensorsFile(const std::string& path)
    : SafetensorsFile(read_file_bytes(path), path) {}

SafetensorsFile::SafetensorsFile(std::vector<char> bytes, const std::string& path)
    : path_(path), bytes_(std::move(bytes)) {
  if (bytes_.size() < 8)
    throw CorruptFile(path + ": not a safetensors file (shorter than 8 bytes)");
  uint64_t hlen = 0;
  for (int i = 0; i < 8; ++i) hlen |= uint64_t(uint8_t(bytes_[i])) << (8 * i);
  // A damaged header is a damaged file: every failure to make sense of it is CorruptFile.
  if (hlen > bytes_.size() - 8)
    throw CorruptFile(path + ": header length " + std::to_string(hlen) + " exceeds file size " +
                      std::to_string(bytes_.size()) + " (truncated or corrupt)");
  json header;
  try {
    header = json::parse(std::string(bytes_.data() + 8, hlen));
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
    throw CorruptFile(path + ": bad safetensors header: " + e.what());
  }
  if (!header.is_object()) throw CorruptFile(path + ": bad safetensors header: not a JSON object");
  data_start_ = 8 + hlen;
  const uint64_t data_size = bytes_.size() - data_start_;
  // Every failure to make sense of the header means a damaged file.
  try {
    for (auto it = header.begin(); it != header.end(); ++it) {
      const std::string where = path + ": tensor '" + it.key() + "'";
      if (it.key() == "__metadata__") {
        TDA_CHECK(it.value().is_object(), path + ": __metadata__ is not an object");
        for (auto m = it.value().begin(); m != it.value().end(); ++m) {
          TDA_CHECK(m.value().is_string(),
                    path + ": __metadata__ '" + m.key() + "' is not a string");
          metadata_[m.key()] = m.value().get<std::string>();
        }
        continue;
      }
      // Every field checked for its type before it is read: a wrong header is an error naming
      // the file and tensor, never a JSON-library exception or an out-of-range conversion.
      const json& e = it.value();
      TDA_CHECK(e.is_object(), where + ": entry is not an object");
      const json dtype = e.value("dtype", json());
      TDA_CHECK(
          dtype == "F32",
          where + " has dtype " +
              (dtype.is_string() ? dtype.get<std::string>()
                                 : dtype.dump(-1, ' ', false, json::error_handler_t::replace)) +
              ", expected F32");
      const json shape = e.value("shape", json());
      const json off = e.value("data_offsets", json());
      TDA_CHECK(shape.is_array(), where + ": 'shape' is not a list");
      TDA_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
                    off[1].is_number_unsigned(),
                where + ": 'data_offsets' is not a list of two non-negative integers");
      Entry en;
      uint64_t n = 1;
      for (const auto& d : shape) {
        TDA_CHECK(d.is_number_unsigned(),
                  where + ": 'shape' holds " +
                      d.dump(-1, ' ', false, json::error_handler_t::replace) + ", not a size");
        const uint64_t x = d.get<uint64_t>();
        TDA_CHECK(x <= uint64_t(INT64_MAX) && !__builtin_mul_overflow(n, x, &n),
                  where + ": 'shape' is too large");
        en.shape.push_back(int64_t(x));
      }
      en.begin = off[0].get<uint64_t>();
      en.end = off[1].get<uint64_t>();
      TDA_CHECK(en.end >= en.begin && en.end <= data_size && (en.end - en.begin) / 4 == n &&
                    (en.end - en.begin) % 4 == 0,
                where + " has inconsistent data_offsets");
      index_[it.key()] = en;
    }
  } catch (const CorruptFile&) {
    throw;
  } catch (const Error& e) {
    throw CorruptFile(e.what());
  }
  for (const auto& kv : metadata_) {
    if (kv.first.compare(0, kCrcPrefix.size(), kCrcPrefix) != 0) continue;
    const std::string name = kv.first.substr(kCrcPrefix.size());
    auto it = index_.find(name);
    char* end = nullptr;
    const unsigned long crc = std::strtoul(kv.second.c_str(), &end, 16);
    if (it == index_.end() || kv.second.size() != 8 || *end != '\0')
      throw CorruptFile(path + ": metadata '" + kv.first + "' = '" + kv.second +
                        "' is not the checksum of a tensor in the file (corrupt header)");
    it->second.has_crc = true;
    it->second.crc = uint32_t(crc);
    checksummed_ = true;
  }
  if (checksummed_)
    for (const auto& kv : index_)
      if (!kv.second.has_crc)
        throw CorruptFile(path + ": tensor '" + kv.first +
                          "' has no checksum while the others do (corrupt header)");
}

void SafetensorsFile::verify(const std::string& name, const Entry& e) const {
  if (!e.has_crc) return;
  const uint32_t got = crc32c(bytes_.data() + data_start_ + e.begin, e.end - e.begin);
  if (got != e.crc)
    throw CorruptFile(path_ + ": tensor '" + name + "' fails its CRC32C check (stored " +
                      hex8(e.crc) + ", computed " + hex8(got) + "): the file is corrupt");
}

void SafetensorsFile::verify_all() const {
  for (const auto& kv : index_) verify(kv.first, kv.second);
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
                                           shape_str(it->second.shape) + ", expected " +
                                           shape_str(shape));
  verify(name, it->second);
  std::memcpy(dst, bytes_.data() + data_start_ + it->second.begin,
              it->second.end - it->second.begin);
}

}  // namespace tda
