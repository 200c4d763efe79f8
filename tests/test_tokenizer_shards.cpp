// `tda tokenize`: shards equal to llm.c's fineweb.py (the Python reference writer in
// scripts/prepare_fineweb_edu.py) byte for byte, and loadable by the DataLoader.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/fs.h"
#include "data/loader.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "test_util.h"

using namespace tda;

namespace {

const Gpt2Tokenizer& tok() {
  static const Gpt2Tokenizer t = Gpt2Tokenizer::load(Gpt2Tokenizer::default_dir());
  return t;
}

const std::string kPython = TDA_SOURCE_DIR "/.venv/bin/python";

bool python_available() {
  return path_exists(kPython) &&
         std::system((kPython + " -c 'import tiktoken, numpy' >/dev/null 2>&1").c_str()) == 0;
}

std::string file_text(const std::string& path) {
  std::vector<char> b = read_file_bytes(path);
  return std::string(b.begin(), b.end());
}

// A few dozen documents of very different sizes (an empty one, one with a literal
// <|endoftext|>, raw invalid UTF-8, a long one) as jsonl; returns the texts.
std::vector<std::string> write_docs(const std::string& path, bool with_huge_doc) {
  std::string shakespeare = file_text(source_dir() + "/data/tinyshakespeare/input.txt");
  std::string adversarial = file_text(source_dir() + "/tests/data/tokenizer_adversarial.txt");
  std::vector<std::string> docs;
  size_t pos = 0;
  for (int i = 0; i < 30; ++i) {
    size_t len = size_t(37 * i * i + 5) % 3000;
    docs.push_back(shakespeare.substr(pos, len));
    pos += len;
    if (i % 7 == 3) {  // a few whole lines (a cut could split a UTF-8 character)
      size_t a = adversarial.find('\n', size_t(i) * 60) + 1;
      docs.push_back(adversarial.substr(a, adversarial.find('\n', a + 300) - a));
    }
  }
  docs.push_back("");
  docs.push_back("literal <|endoftext|> stays text");
  if (with_huge_doc) docs.push_back(shakespeare.substr(0, 20000));  // several shards long
  docs.push_back("last");
  std::string out;
  for (const auto& d : docs) out += nlohmann::json({{"text", d}, {"id", 1}}).dump() + "\n";
  out += "\n";  // blank lines are skipped
  // Raw invalid UTF-8 inside a JSON string: replaced by U+FFFD on both sides.
  out += std::string("{\"text\": \"bad \xFF\xC0 bytes \xE2\x82\"}\n");
  docs.push_back("bad \xEF\xBF\xBD\xEF\xBF\xBD bytes \xEF\xBF\xBD");
  write_text(path, out);
  return docs;
}

std::vector<std::string> shard_files(const std::string& dir) {
  std::vector<std::string> v = glob_paths(dir + "/*.bin", "shards");
  // val_000000 sorts after train_*; order by shard index.
  std::sort(v.begin(), v.end(), [](const std::string& a, const std::string& b) {
    return a.substr(a.size() - 10) < b.substr(b.size() - 10);
  });
  return v;
}

}  // namespace

TEST_CASE("tokenize: shards are the document stream cut into equal shards", "[tokenizer]") {
  TempDir d;
  std::vector<std::string> docs = write_docs(d.path + "/docs.jsonl", true);
  std::vector<uint16_t> stream;
  for (const auto& doc : docs) {
    stream.push_back(50256);
    for (int32_t id : tok().encode(doc, false)) stream.push_back(uint16_t(id));
  }
  const size_t shard = 1000;
  std::string out;
  REQUIRE(run_tda("tokenize --input " + d.path + "/docs.jsonl --out " + d.path +
                      "/out --shard-tokens 1000 --prefix tst --threads 2",
                  &out) == 0);
  INFO(out);
  std::vector<std::string> files = shard_files(d.path + "/out");
  REQUIRE(files.size() == (stream.size() + shard - 1) / shard);
  CHECK(files[0] == d.path + "/out/tst_val_000000.bin");
  CHECK(files[1] == d.path + "/out/tst_train_000001.bin");
  for (size_t i = 0; i < files.size(); ++i) {
    std::vector<uint16_t> got = read_shard(files[i], 50257);
    std::vector<uint16_t> want(stream.begin() + long(i * shard),
                               stream.begin() + long(std::min(stream.size(), (i + 1) * shard)));
    CHECK(got == want);
  }
  // The DataLoader reads them: the first validation batch is the start of the stream.
  DataLoader val(d.path + "/out/tst_val_*.bin", 2, 64, 50257, false, 0);
  std::vector<int32_t> x(128), y(128);
  val.next(x.data(), y.data());
  for (size_t i = 0; i < 64; ++i) {
    CHECK(x[i] == stream[i]);
    CHECK(y[i] == stream[i + 1]);
  }
  DataLoader train(d.path + "/out/tst_train_*.bin", 4, 128, 50257, true, 1);
  x.resize(4 * 128);
  y.resize(4 * 128);
  train.next(x.data(), y.data());
  CHECK(train.files().size() == files.size() - 1);
}

TEST_CASE("tokenize: byte-identical to the llm.c-style Python writer", "[tokenizer]") {
  if (!python_available()) {
    TDA_SKIP(kPython << " with tiktoken and numpy not found");
  }
  TempDir d;
  // Documents no longer than a shard: the case llm.c's fineweb.py itself handles.
  write_docs(d.path + "/docs.jsonl", false);
  std::string py = kPython + " " + source_dir() + "/scripts/prepare_fineweb_edu.py --local " +
                   d.path + "/docs.jsonl --shard-tokens 3000 --threads 2 --out ";
  REQUIRE(std::system((py + d.path + "/py --python 2>/dev/null").c_str()) == 0);
  // The script's C++ path (tda tokenize via --tda), at 1 and 2 threads.
  REQUIRE(std::system(
              (py + d.path + "/cc1 --threads 1 --tda " TDA_BINARY " 2>/dev/null").c_str()) == 0);
  REQUIRE(run_tda("tokenize --input " + d.path + "/docs.jsonl --out " + d.path +
                  "/cc2 --shard-tokens 3000 --threads 2 --quiet") == 0);
  std::vector<std::string> ref = shard_files(d.path + "/py");
  REQUIRE(ref.size() >= 4);
  for (const char* sub : {"/cc1", "/cc2"}) {
    std::vector<std::string> got = shard_files(d.path + sub);
    REQUIRE(got.size() == ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      INFO(got[i] << " vs " << ref[i]);
      CHECK(got[i].substr(got[i].rfind('/')) == ref[i].substr(ref[i].rfind('/')));
      CHECK(file_text(got[i]) == file_text(ref[i]));
    }
  }
}

TEST_CASE("tokenize: .txt inputs and --split blank-lines", "[tokenizer]") {
  TempDir d;
  write_text(d.path + "/a.txt", "first para\n\nsecond para\n\n\nthird");
  write_text(d.path + "/b.txt", "whole file is one doc\n\nstill one");
  REQUIRE(run_tda("tokenize --input " + d.path + "/a.txt --out " + d.path +
                  "/s --split blank-lines --quiet") == 0);
  std::vector<uint16_t> got = read_shard(d.path + "/s/fineweb_edu_val_000000.bin", 50257);
  std::vector<uint16_t> want;
  for (const char* doc : {"first para\n\n", "second para\n\n", "\nthird"}) {
    want.push_back(50256);
    for (int32_t id : tok().encode(doc, false)) want.push_back(uint16_t(id));
  }
  CHECK(got == want);
  REQUIRE(run_tda("tokenize --input " + d.path + "/b.txt " + d.path + "/a.txt --out " + d.path +
                  "/w --quiet") == 0);
  got = read_shard(d.path + "/w/fineweb_edu_val_000000.bin", 50257);
  CHECK(std::count(got.begin(), got.end(), 50256) == 2);
}

TEST_CASE("tokenize: bad inputs name the file and line", "[tokenizer][badinput]") {
  TempDir d;
  write_text(d.path + "/bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": 5}\n");
  std::string out;
  CHECK(run_tda("tokenize --input " + d.path + "/bad.jsonl --out " + d.path + "/o", &out) == 1);
  CHECK_THAT(out, Catch::Contains("bad.jsonl:2: no string field 'text'"));
  write_text(d.path + "/bad2.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"unterminated}\n");
  CHECK(run_tda("tokenize --input " + d.path + "/bad2.jsonl --out " + d.path + "/o", &out) == 1);
  CHECK_THAT(out, Catch::Contains("bad2.jsonl:2: invalid JSON"));
  CHECK(run_tda("tokenize --input " + d.path + "/missing.jsonl --out " + d.path + "/o", &out) == 1);
  CHECK_THAT(out, Catch::Contains("missing.jsonl: cannot read input file"));
  CHECK(run_tda("tokenize --input " + d.path + "/bad.jsonl --out " + d.path + "/o --shard-tokens 0",
                &out) == 1);
  CHECK_THAT(out, Catch::Contains("--shard-tokens must be"));
  // Shards of an earlier run are not silently mixed with new ones.
  write_text(d.path + "/ok.jsonl", "{\"text\": \"ok\"}\n");
  REQUIRE(run_tda("tokenize --input " + d.path + "/ok.jsonl --out " + d.path + "/r --quiet") == 0);
  CHECK(run_tda("tokenize --input " + d.path + "/ok.jsonl --out " + d.path + "/r", &out) == 1);
  CHECK_THAT(out, Catch::Contains("fineweb_edu_val_000000.bin: shard from an earlier run"));
  CHECK(run_tda("tokenize --input " + d.path + "/ok.jsonl --out " + d.path + "/r --overwrite") ==
        0);
}
