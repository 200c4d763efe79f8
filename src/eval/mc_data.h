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

const std::vector<std::string>& mc_tasks();
std::string mc_default_path(const std::string& task);
McDataset load_mc(const McLoadOptions& o);

// lm-eval's HellaSwag preprocess: strip, " [title]" -> ". ", drop "[...]", "  " -> " ".
std::string hellaswag_preprocess(const std::string& s);
// Python str.capitalize() on ASCII: first character upper, the rest lower.
std::string py_capitalize(const std::string& s);

}  // namespace tda
