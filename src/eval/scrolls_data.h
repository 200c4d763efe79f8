// SCROLLS-format data (Shaham et al. 2022) for `tda eval longctx`, and the prompts of
// lm-evaluation-harness's SCROLLS tasks (lm_eval/tasks/scrolls/task.py), which the paper used.
//
// File: JSON lines with "id", "input" and "output" (one row per reference, as SCROLLS ships
// them; "pid" optional) or "outputs" (a list, as after lm-eval's _drop_duplicates_in_input).
// Rows sharing an id are one example with several references, in first-appearance order.
//
// Prompts (doc_to_text):
//   gov_report, summ_screen_fd:  input + "\n\nQuestion: What is a summary of the preceding
//   text?\nAnswer:" qmsum, qasper:  the query is prepended to the text: question = input up to the
//   first "\n\n",
//                   text = the rest;  prompt = text + "\n\nQuestion: " + question + "\nAnswer:"
// Qasper questions whose references all normalise (SQuAD) to "yes" or "no" are answered by
// comparing the log-likelihoods of " yes" and " no" after the prompt; all others by greedy
// generation until "\n" (an empty answer becomes "Unanswerable").
#pragma once
#include <string>
#include <vector>

namespace tda {

struct ScrollsExample {
  std::string id, pid, input;
  std::vector<std::string> outputs;  // references
  size_t line = 0;                   // 1-based line of the first row (for messages)
};

struct ScrollsDataset {
  std::string task, path;
  size_t rows = 0;  // JSON lines read
  std::vector<ScrollsExample> examples;
};

// The four tasks of the paper; throws naming the task otherwise.
bool scrolls_is_summary(const std::string& task);  // true: ROUGE; false (qasper): F1
void check_scrolls_task(const std::string& task);

// Reads a SCROLLS jsonl; errors name the file and line.
ScrollsDataset load_scrolls(const std::string& path, const std::string& task);
// The same on a file's contents already in memory (`path` only names it in messages).
ScrollsDataset parse_scrolls(const std::string& text, const std::string& path,
                             const std::string& task);

struct ScrollsPrompt {
  std::string text;     // the prompt (doc_to_text)
  bool yes_no = false;  // qasper yes/no question: answer by log-likelihood
};
ScrollsPrompt scrolls_prompt(const std::string& task, const ScrollsExample& ex);

}  // namespace tda
