// Multiple-choice evaluation sets, turned into (context, continuation) pairs exactly as
// lm-evaluation-harness (v0.4) builds them per task (docs/evaluation.md lists each rule):
//   hellaswag      ctx  preprocess(activity_label + ": " + ctx_a + " " + capitalize(ctx_b))
//                  cont " " + preprocess(ending)
//   arc_easy/arc_challenge  ctx "Question: " + question + "\nAnswer:",  cont " " + choice
//   openbookqa     ctx question_stem,                                cont " " + choice
//   piqa           ctx "Question: " + goal + "\nAnswer:",            cont " " + sol
//   winogrande     ctx sentence[:blank] + option (one per choice),   cont " " + strip(rest)
// Readers: the offline files under ../shared/data/evals (MosaicML ICL jsonl, PIQA original,
// HellaSwag 6-line text, optionally .bz2 via `bzip2 -dc`) and the original dataset jsonl formats
// (detected per record by its keys).
#pragma once
#include <string>
#include <vector>

namespace tda {

struct McChoice {
  std::string context, continuation;
};

struct McItem {
  std::vector<McChoice> choices;
  int gold = -1;
  bool excluded = false;  // kept for row numbering, not scored (see the ARC fix)
  int line = 0;           // 1-based line of the item in its data file (for messages)
};

struct McLoadOptions {
  std::string task;      // hellaswag | arc_easy | arc_challenge | openbookqa | piqa | winogrande
  std::string data;      // "" = the default offline file for the task
  std::string labels;    // PIQA original format: labels file ("" = <data dir>/valid-labels.lst)
  std::string arc_keys;  // official ARC answer key ("" = default; used for MosaicML ARC files)
  bool arc_fix = true;
};

struct McDataset {
  std::string task, path, format;
  std::vector<McItem> items;
  std::vector<int> fixed_rows;  // rows the ARC fix changed (gold, choices or excluded), 0-based
};

// A data file's lines (decompressed; "\r\n" ends accepted) and its path, named in messages.
struct McSource {
  std::string path;
  std::vector<std::string> lines;
};

// A file's text as an McSource (split at '\n', a trailing '\r' dropped).
McSource mc_source(const std::string& path, const std::string& text);

const std::vector<std::string>& mc_tasks();
std::string mc_default_path(const std::string& task);
// Where a task's data comes from, in a few words (for the "no data" message).
std::string mc_data_hint(const std::string& task);
// Reads the files (the task's default under ../shared when o.data is empty) and parses them.
McDataset load_mc(const McLoadOptions& o);
// The same on contents already in memory (fuzzing). `labels`: PIQA original format's labels;
// `arc_keys`: the official ARC key (null: no ARC fix). Every error is one line naming
// file:line; a file without items is an error.
McDataset parse_mc(const std::string& task, const McSource& data, const McSource* labels = nullptr,
                   const McSource* arc_keys = nullptr);

// lm-eval's HellaSwag preprocess: strip, " [title]" -> ". ", drop "[...]", "  " -> " ".
std::string hellaswag_preprocess(const std::string& s);
// Python str.capitalize() on ASCII: first character upper, the rest lower.
std::string py_capitalize(const std::string& s);

}  // namespace tda
