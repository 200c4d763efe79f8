// `tda tokenize`: text / jsonl documents -> llm.c token shards, as llm.c's dev/data/fineweb.py
// writes them: every document is [<|endoftext|>] + encode_ordinary(text), the documents' tokens
// are concatenated in input order and cut into shards of exactly --shard-tokens tokens (a
// document that does not fit continues in the next shard; the last shard holds the rest).
// Shard 0 is validation: <prefix>_val_000000.bin, then <prefix>_train_000001.bin, ...
//
// Pipeline: a reader thread cuts the inputs into batches of documents (raw jsonl lines); the
// main thread parses and encodes each batch on --threads threads (OpenMP) and appends the
// results in document order, so the output does not depend on the thread count.
//
// `tda tokenize --bench FILE` (not in --help) times single-thread encode_ordinary of FILE and
// prints JSON; scripts/bench/tokenizer.py compares it with tiktoken.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cxxopts.hpp>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/command.h"
#include "core/error.h"
#include "core/fs.h"
#include "data/pretokenize.h"
#include "data/shard.h"
#include "data/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A document as read: plain text, or a raw jsonl line that the encoding threads parse (JSON
// parsing is a good part of the work, so it should not be left to the single reader thread).
struct Doc {
  std::string data;
  const std::string* path = nullptr;  // set for jsonl lines
  size_t line = 0;
};

struct Batch {
  std::vector<Doc> docs;
  size_t input_bytes = 0;  // bytes of input consumed (for progress / ETA)
};

// Text of a jsonl line. Invalid UTF-8 becomes U+FFFD before parsing (nlohmann would reject
// it), as Python's open(errors="replace") + json.loads in the reference writer does.
std::string jsonl_text(const Doc& d, const std::string& field) {
  std::string fixed;
  std::string_view valid = tda::sanitize_utf8(d.data, &fixed);
  std::string where = *d.path + ":" + std::to_string(d.line) + ": ";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(valid.begin(), valid.end());
  } catch (const nlohmann::json::exception& e) {
    throw tda::Error(where + "invalid JSON: " + e.what());
  }
  auto it = j.is_object() ? j.find(field) : j.end();
  TDA_CHECK(j.is_object() && it != j.end() && it->is_string(),
            where + "no string field '" + field + "'");
  return it->get_ref<const std::string&>();
}

struct SourceOptions {
  std::vector<std::string> inputs;
  bool split_blank_lines = false;
  std::string text_field = "text";
  size_t batch_bytes = 4 << 20;
};

// Reads every input in order and hands out batches of documents (bounded queue, so reading runs
// ahead of encoding by at most a few batches).
class DocReader {
 public:
  explicit DocReader(SourceOptions opt) : opt_(std::move(opt)) {
    thread_ = std::thread([this] { run(); });
  }
  ~DocReader() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // False when every input has been read; rethrows a reader error.
  bool next(Batch* out) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return !queue_.empty() || done_; });
    if (queue_.empty()) {
      if (error_) std::rethrow_exception(error_);
      return false;
    }
    *out = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
    return true;
  }

 private:
  void run() {
    try {
      for (const auto& path : opt_.inputs) {
        if (ends_with(path, ".jsonl"))
          read_jsonl(path);
        else
          read_txt(path);
      }
      flush();
    } catch (...) {
      std::lock_guard<std::mutex> l(mu_);
      error_ = std::current_exception();
    }
    std::lock_guard<std::mutex> l(mu_);
    done_ = true;
    cv_.notify_all();
  }
  static bool ends_with(const std::string& s, const std::string& suf) {
    return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
  }
  void add(std::string doc, size_t input_bytes, const std::string* path = nullptr,
           size_t line = 0) {
    cur_.input_bytes += input_bytes;
    batch_text_ += doc.size();
    cur_.docs.push_back(Doc{std::move(doc), path, line});
    if (batch_text_ >= opt_.batch_bytes) flush();
  }
  void flush() {
    if (cur_.docs.empty() && cur_.input_bytes == 0) return;
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return queue_.size() < 4 || stop_; });
    if (stop_) throw Stopped();
    queue_.push_back(std::move(cur_));
    cur_ = Batch();
    batch_text_ = 0;
    cv_.notify_all();
  }
  struct Stopped {};
  void read_txt(const std::string& path) {
    std::vector<char> raw = tda::read_file_bytes(path);
    std::string text(raw.begin(), raw.end());
    if (!opt_.split_blank_lines) {
      add(std::move(text), raw.size());
      return;
    }
    // As llm.c's tinyshakespeare.py: split on "\n\n" and give every section but the last its
    // "\n\n" back, so the documents concatenate to the file.
    size_t pos = 0;
    while (true) {
      size_t at = text.find("\n\n", pos);
      if (at == std::string::npos) {
        add(text.substr(pos), text.size() - pos);
        break;
      }
      add(text.substr(pos, at + 2 - pos), at + 2 - pos);
      pos = at + 2;
    }
  }
  void read_jsonl(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    TDA_CHECK(f.good(), path + ": cannot open for reading");
    std::string line;
    for (size_t lineno = 1; std::getline(f, line); ++lineno) {
      size_t bytes = line.size() + 1;
      if (line.find_first_not_of(" \t\r") == std::string::npos) {
        add_bytes(bytes);
        continue;
      }
      add(std::move(line), bytes, &path, lineno);
      line = std::string();
    }
    TDA_CHECK(!f.bad(), path + ": read failed");
  }
  void add_bytes(size_t n) { cur_.input_bytes += n; }

  SourceOptions opt_;
  Batch cur_;
  size_t batch_text_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  bool done_ = false, stop_ = false;
  std::exception_ptr error_;
};

// Fills shards in order, exactly like fineweb.py's loop (which amounts to cutting the token
// stream into consecutive chunks of shard_tokens and writing a final partial chunk).
class ShardWriter {
 public:
  ShardWriter(std::string dir, std::string prefix, size_t shard_tokens)
      : dir_(std::move(dir)), prefix_(std::move(prefix)), cap_(shard_tokens) {
    buf_.reserve(cap_);
  }
  void append(const int32_t* t, size_t n) {
    while (n > 0) {
      size_t take = std::min(n, cap_ - buf_.size());
      for (size_t i = 0; i < take; ++i) buf_.push_back(uint16_t(t[i]));
      t += take;
      n -= take;
      total_ += take;
      if (buf_.size() == cap_) write();
    }
  }
  void finish() {
    if (!buf_.empty()) write();
  }
  int shards() const { return index_; }
  size_t total_tokens() const { return total_; }

 private:
  void write() {
    char name[64];
    std::snprintf(name, sizeof name, "_%s_%06d.bin", index_ == 0 ? "val" : "train", index_);
    tda::write_shard(dir_ + "/" + prefix_ + name, buf_.data(), buf_.size());
    buf_.clear();
    ++index_;
  }
  std::string dir_, prefix_;
  size_t cap_;
  std::vector<uint16_t> buf_;
  int index_ = 0;
  size_t total_ = 0;
};

// <prefix>_val_NNNNNN.bin or <prefix>_train_NNNNNN.bin
bool is_shard_name(const std::string& name, const std::string& prefix) {
  if (name.compare(0, prefix.size() + 1, prefix + "_") != 0) return false;
  std::string rest = name.substr(prefix.size() + 1);
  for (const char* split : {"val_", "train_"}) {
    std::string sp = split;
    if (rest.size() == sp.size() + 10 && rest.compare(0, sp.size(), sp) == 0 &&
        rest.compare(rest.size() - 4, 4, ".bin") == 0 &&
        rest.find_first_not_of("0123456789", sp.size()) == rest.size() - 4)
      return true;
  }
  return false;
}

std::string fmt_eta(double s) {
  if (!(s >= 0) || s > 1e7) return "--:--";
  char b[32];
  int t = int(s + 0.5);
  std::snprintf(b, sizeof b, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
  return b;
}

int run_bench(const tda::Gpt2Tokenizer& tok, const std::string& path, int repeat) {
  std::vector<char> raw = tda::read_file_bytes(path);
  std::string text(raw.begin(), raw.end());
  double first = 0, best = 1e30;
  size_t ntok = 0;
  for (int r = 0; r < repeat; ++r) {
    auto t0 = Clock::now();
    std::vector<int32_t> ids = tok.encode(text, /*allow_special=*/false);
    double dt = seconds_since(t0);
    if (r == 0) first = dt;
    best = std::min(best, dt);
    ntok = ids.size();
  }
  // "first" starts with an empty piece cache (like a fresh process); "best" has it warm.
  nlohmann::json j = {{"bytes", text.size()},
                      {"tokens", ntok},
                      {"first_s", first},
                      {"best_s", best},
                      {"mb_per_s_first", text.size() / first / 1e6},
                      {"mb_per_s_best", text.size() / best / 1e6}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

int run_tokenize(int argc, char** argv) {
  cxxopts::Options o(argv[0], "Tokenize text / jsonl documents into llm.c GPT-2 token shards");
  o.add_options()("input", "input files: .txt (one document, see --split) or .jsonl",
                  cxxopts::value<std::vector<std::string>>())("out", "output directory",
                                                              cxxopts::value<std::string>())(
      "prefix", "shard name prefix", cxxopts::value<std::string>()->default_value("fineweb_edu"))(
      "shard-tokens", "tokens per shard", cxxopts::value<int64_t>()->default_value("100000000"))(
      "split", "how a .txt file splits into documents: doc | blank-lines",
      cxxopts::value<std::string>()->default_value("doc"))(
      "text-field", "jsonl field holding the text",
      cxxopts::value<std::string>()->default_value("text"))(
      "threads", "encoding threads (0 = all cores)", cxxopts::value<int>()->default_value("0"))(
      "tokenizer", "directory with encoder.json + vocab.bpe",
      cxxopts::value<std::string>()->default_value(tda::Gpt2Tokenizer::default_dir()))(
      "overwrite", "delete existing <prefix>_*.bin shards in --out first")(
      "quiet", "no progress bar")("h,help", "show help");
  o.add_options("bench")("bench", "time single-thread encode of FILE, print JSON",
                         cxxopts::value<std::string>())("repeat", "bench repetitions",
                                                        cxxopts::value<int>()->default_value("3"));
  o.parse_positional({"input"});
  o.positional_help("--input PATH... --out DIR").show_positional_help();
  cxxopts::ParseResult a;
  try {
    a = o.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw tda::Error(std::string("tokenize: ") + e.what());
  }
  if (a.count("help")) {
    std::printf("%s", o.help({""}).c_str());
    return 0;
  }
  tda::Gpt2Tokenizer tok = tda::Gpt2Tokenizer::load(a["tokenizer"].as<std::string>());
  if (a.count("bench"))
    return run_bench(tok, a["bench"].as<std::string>(), std::max(1, a["repeat"].as<int>()));

  TDA_CHECK(a.count("input"), "tokenize: no --input files");
  TDA_CHECK(a.count("out"), "tokenize: --out DIR is required");
  int64_t shard_tokens = a["shard-tokens"].as<int64_t>();
  TDA_CHECK(shard_tokens >= 1 && shard_tokens <= INT32_MAX,
            "tokenize: --shard-tokens must be in [1, 2^31-1], got " + std::to_string(shard_tokens));
  std::string split = a["split"].as<std::string>();
  TDA_CHECK(split == "doc" || split == "blank-lines",
            "tokenize: --split must be 'doc' or 'blank-lines', got '" + split + "'");
  int threads = a["threads"].as<int>();
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));

  SourceOptions so;
  so.inputs = a["input"].as<std::vector<std::string>>();
  so.split_blank_lines = split == "blank-lines";
  so.text_field = a["text-field"].as<std::string>();
  const std::string text_field = so.text_field;
  size_t total_bytes = 0;
  for (const auto& p : so.inputs) {
    std::error_code ec;
    auto sz = std::filesystem::file_size(p, ec);
    TDA_CHECK(!ec && std::filesystem::is_regular_file(p), p + ": cannot read input file");
    total_bytes += size_t(sz);
  }
  std::string out_dir = a["out"].as<std::string>();
  tda::make_dirs(out_dir);
  // Shards left from an earlier, longer run would silently join this data set.
  std::string prefix = a["prefix"].as<std::string>();
  std::vector<std::filesystem::path> stale;
  for (const auto& e : std::filesystem::directory_iterator(out_dir))
    if (is_shard_name(e.path().filename().string(), prefix)) stale.push_back(e.path());
  std::sort(stale.begin(), stale.end());
  for (const auto& p : stale) {
    TDA_CHECK(a.count("overwrite"), p.string() +
                                        ": shard from an earlier run; pass --overwrite or use "
                                        "another --out / --prefix");
    std::filesystem::remove(p);
  }

  bool progress = !a.count("quiet");
  bool tty = progress && ::isatty(2);
  ShardWriter writer(out_dir, prefix, size_t(shard_tokens));
  DocReader reader(so);
  auto t0 = Clock::now();
  double last_print = -1e9;
  size_t docs = 0, bytes_done = 0;
  Batch batch;
  std::vector<std::vector<int32_t>> toks;
  while (reader.next(&batch)) {
    size_t n = batch.docs.size();
    toks.resize(std::max(toks.size(), n));
    // An exception must not escape an OpenMP region; report the first failing document's.
    std::exception_ptr err;
    size_t err_doc = n;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (size_t i = 0; i < n; ++i) {
      try {
        const Doc& d = batch.docs[i];
        toks[i].clear();
        toks[i].push_back(tok.eot());
        tok.encode_into(d.path ? jsonl_text(d, text_field) : d.data, /*allow_special=*/false,
                        &toks[i]);
      } catch (...) {
#pragma omp critical
        if (i < err_doc) {
          err_doc = i;
          err = std::current_exception();
        }
      }
    }
    if (err) std::rethrow_exception(err);
    for (size_t i = 0; i < n; ++i) writer.append(toks[i].data(), toks[i].size());
    docs += n;
    bytes_done += batch.input_bytes;
    double el = seconds_since(t0);
    if (progress && (el - last_print >= (tty ? 0.25 : 30.0))) {
      last_print = el;
      double frac = total_bytes ? double(bytes_done) / double(total_bytes) : 1.0;
      std::fprintf(stderr,
                   "%s[tokenize] %5.1f%% %.1f/%.1f MB  %zu docs  %.0f docs/s  %.1f MB/s  %.1fM "
                   "tokens  ETA %s%s",
                   tty ? "\r" : "", 100 * frac, bytes_done / 1e6, total_bytes / 1e6, docs,
                   docs / el, bytes_done / el / 1e6, writer.total_tokens() / 1e6,
                   fmt_eta(el / std::max(frac, 1e-9) - el).c_str(), tty ? "\033[K" : "\n");
    }
  }
  writer.finish();
  TDA_CHECK(docs > 0, "tokenize: no documents in the inputs");
  double el = seconds_since(t0);
  std::fprintf(stderr,
               "%s[tokenize] %zu docs, %zu tokens, %d shards (1 val + %d train) in %s: %.1f MB "
               "at %.1f MB/s, %d threads\n",
               tty ? "\r\033[K" : "", docs, writer.total_tokens(), writer.shards(),
               writer.shards() - 1, out_dir.c_str(), bytes_done / 1e6, bytes_done / el / 1e6,
               threads);
  return 0;
}

}  // namespace

static tda::RegisterCommand reg("tokenize",
                                "text/jsonl -> GPT-2 token shards (llm.c fineweb.py format)",
                                run_tokenize);
