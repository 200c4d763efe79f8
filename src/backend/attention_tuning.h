// attention.tuning: the shape our CUDA attention kernels take per (GPU architecture, kind, head
// dims, sequence length, pass), chosen by measurement. `tda tune` (cli/tune.cpp) times every
// built shape on a GPU, or reads the GPU kit's timings, and writes a table; the CUDA backend reads
// it at start-up (backend/cuda/attention_impl.cu) and asks it per call. The shapes today:
//   forward   query rows per block x keys per streamed tile, "64x64", "128x64" or "64x128"
//             (attention.fwd_block_rows, fwd_block_keys; docs/cuda.md)
//   backward  "split" (dq; dk/dv: two kernels) or "atomic" (one kernel, dq by fp32 atomics, only
//             where attention.deterministic is false), each with one query tile in flight per
//             dk/dv block or, suffixed "-2stage", two (attention.bwd_stages 2)
// A shape the config names (fwd_block_rows or fwd_block_keys set; bwd_stages set) wins over the
// table; without an entry the kernels' fixed defaults run (64 x 64; atomic where not
// deterministic; one stage).
//
// The file (JSON):
//   {"format": "tda attention tuning 2", "arch": "sm_90", "device_name": "...", "timer": "...",
//    "entries": [{"kind": "tra", "head_dims": [64, 64], "T": 4096, "pass": "forward",
//                 "choice": "128x64", "ms": {"64x64": 0.91, "128x64": 0.74, "64x128": 0.80}},
//                ...]}
// (Format 1 named the forward shapes by their rows alone, "64" and "128".)
// ms: the median kernel milliseconds of every shape timed; choice: the fastest of them.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/ops.h"

namespace tda {

using json = nlohmann::json;

struct TuningEntry {
  std::string kind;
  int Dqk = 0, Dv = 0, T = 0;
  std::string pass;    // "forward" or "backward"
  std::string choice;  // forward: "64x64", "128x64", "64x128"; backward: tuning_shapes("backward")
  json ms;             // {shape: median ms}, every shape timed
};

class AttentionTuning {
 public:
  static constexpr const char* kFormat = "tda attention tuning 2";
  // Reads and checks a table; throws tda::Error naming the file and the entry or key at fault.
  static AttentionTuning load(const std::string& path);
  // The committed table of an architecture ("sm_90"): TDA_SOURCE_DIR/kernels/tuning/sm_90.json.
  static std::string default_path(const std::string& arch);
  json to_json() const;
  void save(const std::string& path) const;  // durable (core/fs.h): temp name, fsync, rename

  // The entry of (kind, head dims, pass) whose T is nearest to T on a log scale (a tie: the
  // larger T), or null.
  const TuningEntry* find(const std::string& kind, int Dqk, int Dv, int T,
                          const std::string& pass) const;
  // The forward block shape for such a call ({0, 0}: no entry), and its backward: the fastest
  // timed shape among those allowed (the atomic ones only with `atomic_ok`); without an entry, or
  // with none of the allowed shapes timed, atomic as atomic_ok says and 1 stage.
  AttnFwdShape fwd_shape(const std::string& kind, int Dqk, int Dv, int T) const;
  AttnBwdShape bwd_shape(const std::string& kind, int Dqk, int Dv, int T, bool atomic_ok) const;

  std::string arch, device_name, timer;
  std::string source;  // the file it was read from ("" for a table made in this process)
  std::vector<TuningEntry> entries;
};

// The shapes a pass can take, in the order they are tried and printed.
const std::vector<std::string>& tuning_shapes(const std::string& pass);
// A forward shape's name in the table ("128x64"), and back (throws on a name not of that form).
std::string fwd_shape_name(const AttnFwdShape& s);
AttnFwdShape parse_fwd_shape(const std::string& name);
// A backward shape's name ("split", "atomic-2stage"), and back (throws on another name).
std::string bwd_shape_name(const AttnBwdShape& s);
AttnBwdShape parse_bwd_shape(const std::string& name);

}  // namespace tda
