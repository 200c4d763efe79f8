// The evaluation data readers: the six multiple-choice tasks (src/eval/mc_data.h; the first
// byte picks the task, the rest is the data file, and PIQA's labels file / ARC's official key
// follow a line "--second--") and the SCROLLS jsonl reader (src/eval/scrolls_data.h).
#include <cstddef>
#include <cstdint>
#include <string>

#include "eval/mc_data.h"
#include "eval/scrolls_data.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string in(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string first, second;
  tda_fuzz::split2(in, "\n--second--\n", &first, &second);
  const unsigned pick = data[0] % 11;
  tda_fuzz::expect_clean([&] {
    if (pick < 7) {
      // 6: HellaSwag's 6-line text form (chosen by the file name)
      const std::string task = pick == 6 ? "hellaswag" : tda::mc_tasks()[pick];
      const tda::McSource d = tda::mc_source(pick == 6 ? "fuzz.txt" : "fuzz.jsonl", first);
      const tda::McSource extra = tda::mc_source("fuzz-2.jsonl", second);
      const bool with_extra = !second.empty();
      const tda::McDataset ds =
          tda::parse_mc(task, d, with_extra ? &extra : nullptr, with_extra ? &extra : nullptr);
      for (const auto& it : ds.items)  // parse_mc promised a gold index inside the choices
        if (!it.excluded && (it.gold < 0 || it.gold >= int(it.choices.size()))) __builtin_trap();
    } else {
      static const char* kTasks[] = {"qmsum", "summ_screen_fd", "gov_report", "qasper"};
      const std::string task = kTasks[pick - 7];
      const tda::ScrollsDataset ds = tda::parse_scrolls(first, "fuzz.jsonl", task);
      for (const auto& ex : ds.examples) (void)tda::scrolls_prompt(task, ex);
    }
  });
  return 0;
}
