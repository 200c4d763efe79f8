// TensorBoard event files written natively: no TensorFlow, no protobuf library. A file is a
// sequence of TFRecords (little-endian uint64 length, masked CRC32C of those 8 bytes, the
// payload, masked CRC32C of the payload), each payload one `tensorboard.Event` protobuf encoded
// here by hand: wall_time (1), step (2), file_version (3, the first event: "brain.Event:2"),
// summary (5) or session_log (7). Scalars are Summary.Value{tag, simple_value}; text is a
// Summary.Value whose metadata names the "text" plugin and whose tensor is a DT_STRING scalar
// (markdown), as TensorBoard's text plugin reads it. docs/tracking.md says what the trainer writes.
#pragma once
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace tda {

// CRC32C rotated right by 15 bits plus 0xa282ead8: TFRecord's checksum of its length and data.
uint32_t masked_crc32c(const void* data, size_t n);
// The TFRecord framing of one payload.
std::string tfrecord(const std::string& payload);

class TensorBoardWriter {
 public:
  // Creates `dir` and a new events file in it, events.out.tfevents.<unix seconds>.<host>.<pid>
  // (".1", ".2" appended when a file of that name exists), and writes the file_version event.
  // Throws naming the file when it cannot be created.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // Every event is flushed to the file as it is written (TensorBoard reads a growing file).
  void scalar(const std::string& tag, int64_t step, double value);  // stored as float32
  // Text shown as written: a markdown code block (every line indented by four spaces).
  void text(const std::string& tag, int64_t step, const std::string& plain);
  // SessionLog START at `step`: this start of the run begins there. TensorBoard's Python loader
  // takes the first START it reads as the run's beginning and every later one as a restart: it
  // then drops what earlier events hold at steps >= `step`.
  void session_start(int64_t step);
  // A metrics.jsonl record ({"type", "step", ...}) mirrored: every number as the scalar
  // "<type>/<key>" ("<type>/<key>/<subkey>" inside objects), a string "text" field as text
  // "<type>/text", at the record's step. Booleans and other strings are left out; a record
  // without an integer step or a type is skipped.
  void record(const nlohmann::json& r);

  const std::string& path() const { return path_; }

 private:
  // One Event with the given encoded fields after wall_time and step.
  void write_event(int64_t step, const std::string& fields);

  std::string path_;
  FILE* f_ = nullptr;
  bool failed_ = false;  // a write failed (disk full): said once, and the run goes on
};

}  // namespace tda
