#include "train/tensorboard.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "core/crc32c.h"
#include "core/error.h"
#include "core/fs.h"

namespace tda {

namespace {

// Protobuf wire format: varints, and fields keyed by (number << 3 | wire type).
enum Wire { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += char(uint8_t(v) | 0x80);
    v >>= 7;
  }
  out += char(uint8_t(v));
}

void put_key(std::string& out, int field, Wire wire) {
  put_varint(out, uint64_t(field) << 3 | wire);
}

void put_le(std::string& out, uint64_t bits, int bytes) {
  for (int i = 0; i < bytes; ++i) out += char(uint8_t(bits >> (8 * i)));
}

void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, kBytes);
  put_varint(out, bytes.size());
  out += bytes;
}

void put_uint(std::string& out, int field, uint64_t v) {
  put_key(out, field, kVarint);
  put_varint(out, v);
}

void put_double(std::string& out, int field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kFixed64);
  put_le(out, bits, 8);
}

void put_float(std::string& out, int field, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kFixed32);
  put_le(out, bits, 4);
}

// Event fields (tensorboard/compat/proto/event.proto) and the messages inside them.
constexpr int kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5,
              kEventSessionLog = 7;
constexpr int kSummaryValue = 1;
constexpr int kValueTag = 1, kValueSimpleValue = 2, kValueTensor = 8, kValueMetadata = 9;
constexpr int kMetadataPluginData = 1, kMetadataDataClass = 4, kPluginName = 1;
constexpr int kTensorDtype = 1, kTensorShape = 2, kTensorStringVal = 8;
constexpr int kDtString = 7, kDataClassTensor = 2, kSessionStatus = 1, kSessionStart = 1;

std::string summary_of(const std::string& value) {
  std::string summary;
  put_bytes(summary, kSummaryValue, value);
  std::string field;
  put_bytes(field, kEventSummary, summary);
  return field;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

void mirror_numbers(TensorBoardWriter& w, const std::string& prefix, int64_t step,
                    const nlohmann::json& obj) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string tag = prefix + "/" + it.key();
    const auto& v = it.value();
    if (v.is_number())
      w.scalar(tag, step, v.get<double>());
    else if (v.is_object())
      mirror_numbers(w, tag, step, v);
  }
}

}  // namespace

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tfrecord(const std::string& payload) {
  std::string out, len;
  put_le(len, payload.size(), 8);
  out += len;
  put_le(out, masked_crc32c(len.data(), len.size()), 4);
  out += payload;
  put_le(out, masked_crc32c(payload.data(), payload.size()), 4);
  return out;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  make_dirs(dir);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const std::string base =
      dir + "/events.out.tfevents." +
      std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now).count()) + "." +
      host_name() + "." + std::to_string(::getpid());
  path_ = base;
  for (int i = 1; path_exists(path_); ++i) path_ = base + "." + std::to_string(i);
  f_ = std::fopen(path_.c_str(), "wb");
  TDA_CHECK(f_, path_ +
                    ": cannot create the TensorBoard events file (log.tensorboard=false "
                    "turns it off)");
  std::string version;
  put_bytes(version, kEventFileVersion, "brain.Event:2");
  write_event(0, version);
}

TensorBoardWriter::~TensorBoardWriter() {
  if (f_) std::fclose(f_);
}

void TensorBoardWriter::write_event(int64_t step, const std::string& fields) {
  std::string event;
  const double wall =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  put_double(event, kEventWallTime, wall);
  put_uint(event, kEventStep, uint64_t(step));
  event += fields;
  const std::string rec = tfrecord(event);
  const bool ok = std::fwrite(rec.data(), 1, rec.size(), f_) == rec.size() && std::fflush(f_) == 0;
  if (!ok && !failed_)
    spdlog::warn(
        "{}: cannot write TensorBoard events ({}); training goes on, metrics.jsonl "
        "holds every record",
        path_, std::strerror(errno));
  failed_ = failed_ || !ok;
}

void TensorBoardWriter::scalar(const std::string& tag, int64_t step, double value) {
  std::string v;
  put_bytes(v, kValueTag, tag);
  put_float(v, kValueSimpleValue, float(value));
  write_event(step, summary_of(v));
}

void TensorBoardWriter::text(const std::string& tag, int64_t step, const std::string& plain) {
  // The text plugin renders markdown, which would join the lines of a sample or a JSON config:
  // an indented code block shows them as written.
  std::string markdown = "    ";
  for (char c : plain) markdown += c == '\n' ? std::string("\n    ") : std::string(1, c);
  std::string plugin, metadata, tensor, v;
  put_bytes(plugin, kPluginName, "text");
  put_bytes(metadata, kMetadataPluginData, plugin);
  put_uint(metadata, kMetadataDataClass, kDataClassTensor);
  put_uint(tensor, kTensorDtype, kDtString);
  put_bytes(tensor, kTensorShape, "");  // no dimensions: a scalar string
  put_bytes(tensor, kTensorStringVal, markdown);
  put_bytes(v, kValueTag, tag);
  put_bytes(v, kValueMetadata, metadata);
  put_bytes(v, kValueTensor, tensor);
  write_event(step, summary_of(v));
}

void TensorBoardWriter::session_start(int64_t step) {
  std::string session;
  put_uint(session, kSessionStatus, kSessionStart);
  std::string field;
  put_bytes(field, kEventSessionLog, session);
  write_event(step, field);
}

void TensorBoardWriter::record(const nlohmann::json& r) {
  if (!r.is_object() || !r.contains("step") || !r["step"].is_number_integer() ||
      !r.contains("type") || !r["type"].is_string())
    return;
  const std::string type = r["type"].get<std::string>();
  const int64_t step = r["step"].get<int64_t>();
  nlohmann::json fields = r;
  fields.erase("step");
  fields.erase("type");
  mirror_numbers(*this, type, step, fields);
  if (r.contains("text") && r["text"].is_string())
    text(type + "/text", step, r["text"].get<std::string>());
}

}  // namespace tda
