// The data scripts a user runs before a sweep, offline: scripts/prepare_evals.py --local copies
// and checks the six tasks' files (against ../shared/data/evals when present), and tda reads
// them through TDA_EVAL_DATA; a file with another hash is refused by name; prepare_scrolls.py
// --local takes a SCROLLS zip or jsonl and names a bad row; prepare_enwiki_sample.py turns
// WikiExtractor files into shards; prepare_fineweb_edu.py, stopped after some shards (with a
// half-written one left behind) and run again, writes the same bytes as an uninterrupted run,
// tiktoken's tokens, from jsonl or parquet stand-ins of FineWeb-Edu.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/fs.h"
#include "data/shard.h"
#include "eval/mc_data.h"
#include "test_util.h"

using namespace tda;
namespace fs = std::filesystem;

namespace {

std::string script(const std::string& name) {
  return "python3 " + source_dir() + "/scripts/" + name;
}

std::string bytes(const std::string& p) {
  const auto b = read_file_bytes(p);
  return std::string(b.begin(), b.end());
}

const std::string kVenvPython = TDA_SOURCE_DIR "/.venv/bin/python";

bool venv_has(const std::string& modules) {
  return fs::exists(kVenvPython) && run_command(kVenvPython + " -c 'import " + modules + "'") == 0;
}

std::string fineweb(const std::string& args) {
  return kVenvPython + " " + source_dir() + "/scripts/prepare_fineweb_edu.py " + args;
}

// A stand-in for FineWeb-Edu: jsonl rows with its columns (`text`, `id`, `score`), documents
// of 0 to ~9,000 characters (some longer than a shard) cut from Tiny Shakespeare, a few with
// non-ASCII text. Returns the texts.
std::vector<std::string> write_fineweb_standin(const std::string& path) {
  const std::string src = bytes(source_dir() + "/data/tinyshakespeare/input.txt");
  std::vector<std::string> docs;
  std::string out;
  size_t at = 0;
  for (int i = 0; i < 48; ++i) {
    const size_t len = size_t((i * 7919) % 9000) * (i % 5 == 0 ? 1 : 0) + size_t(i % 7) * 300;
    std::string text = src.substr(at, len) + (i % 6 == 1 ? " caf\u00e9 \u6570\u5b66" : "");
    at += len;
    docs.push_back(text);
    out +=
        nlohmann::json({{"text", text}, {"id", "doc" + std::to_string(i)}, {"score", 3.5}}).dump() +
        "\n";
  }
  write_text(path, out);
  return docs;
}

std::vector<std::string> shard_paths(const std::string& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".bin") v.push_back(e.path().string());
  std::sort(v.begin(), v.end());  // val_000000 sorts before train_000001 ... as llm.c names them
  std::rotate(v.begin(), v.end() - 1, v.end());
  return v;
}

}  // namespace

TEST_CASE("prepare_evals.py --local copies and checks the zero-shot files, tda reads them",
          "[data][eval]") {
  const std::string shared = source_dir() + "/../shared/data/evals";
  if (!fs::exists(shared)) TDA_SKIP("../shared/data/evals absent");
  TempDir d;
  std::string log;
  REQUIRE(run_command(script("prepare_evals.py") + " --local " + shared + " --out " + d.path,
                      &log) == 0);
  INFO(log);
  for (const std::string rel :
       {"hellaswag/hellaswag_val_full.txt.bz2", "piqa/valid.jsonl", "piqa/valid-labels.lst",
        "mosaicml_icl/arc_easy.jsonl", "mosaicml_icl/arc_challenge.jsonl",
        "mosaicml_icl/openbook_qa.jsonl", "mosaicml_icl/winogrande.jsonl",
        "aristo_answer_keys/arc_easy_test_answers.jsonl",
        "aristo_answer_keys/arc_challenge_test_answers.jsonl"}) {
    INFO(rel);
    REQUIRE(fs::exists(d.path + "/" + rel));
    CHECK(bytes(d.path + "/" + rel) == bytes(shared + "/" + rel));
  }
  {  // tda's default paths under TDA_EVAL_DATA find them (with the ARC fix's key)
    ScopedEnv env("TDA_EVAL_DATA", d.path.c_str());
    for (const auto& [task, n] : std::vector<std::pair<std::string, size_t>>{
             {"piqa", 1838}, {"arc_challenge", 1172}, {"winogrande", 1267}, {"openbookqa", 500}}) {
      INFO(task);
      McLoadOptions o;
      o.task = task;
      const McDataset ds = load_mc(o);
      CHECK(ds.path.rfind(d.path, 0) == 0);
      CHECK(ds.items.size() == n);
    }
  }
  // a second run keeps what is there; a copy with another hash is refused by name, exit 1,
  // and the other files are still written
  REQUIRE(run_command(script("prepare_evals.py") + " --local " + shared + " --out " + d.path,
                      &log) == 0);
  CHECK(log.find("piqa/valid.jsonl: present") != std::string::npos);
  TempDir bad, out;
  fs::copy(shared, bad.path, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  std::ofstream(bad.path + "/piqa/valid-labels.lst", std::ios::app) << "1\n";
  fs::remove(bad.path + "/mosaicml_icl/winogrande.jsonl");
  CHECK(run_command(script("prepare_evals.py") + " --local " + bad.path + " --out " + out.path,
                    &log) == 1);
  CHECK(log.find("error: prepare_evals: piqa/valid-labels.lst: sha256") != std::string::npos);
  CHECK(log.find("error: prepare_evals: mosaicml_icl/winogrande.jsonl:") != std::string::npos);
  CHECK(!fs::exists(out.path + "/piqa/valid-labels.lst"));
  CHECK(fs::exists(out.path + "/mosaicml_icl/openbook_qa.jsonl"));
  CHECK(run_command(script("prepare_evals.py") + " --tasks lambada --out " + out.path, &log) != 0);
  CHECK(log.find("unknown task(s) lambada") != std::string::npos);
}

TEST_CASE("prepare_scrolls.py --local takes a SCROLLS zip or jsonl and checks every row",
          "[data][longctx]") {
  TempDir src, out;
  const std::string tiny = source_dir() + "/tests/data/scrolls_qasper_tiny.jsonl";
  // qasper as the release ships it (a zip with <task>/validation.jsonl), qmsum as a plain file
  fs::create_directories(src.path + "/qmsum");
  fs::copy_file(source_dir() + "/tests/data/scrolls_qmsum_tiny.jsonl",
                src.path + "/qmsum/validation.jsonl");
  std::string log;
  REQUIRE(
      run_command("cd " + src.path + " && mkdir -p z/qasper && cp " + tiny +
                      " z/qasper/validation.jsonl && python3 -c \"import zipfile; "
                      "z=zipfile.ZipFile('qasper.zip','w'); z.write('z/qasper/validation.jsonl',"
                      "'qasper/validation.jsonl'); z.close()\"",
                  &log) == 0);
  CHECK(run_command(script("prepare_scrolls.py") + " --local " + src.path + " --out " + out.path +
                        " --tasks qasper,qmsum",
                    &log) == 0);
  INFO(log);
  CHECK(bytes(out.path + "/qasper/validation.jsonl") == bytes(tiny));
  CHECK(bytes(out.path + "/qmsum/validation.jsonl") ==
        bytes(source_dir() + "/tests/data/scrolls_qmsum_tiny.jsonl"));
  CHECK(log.find("sha256") != std::string::npos);
  // a task that is not there, and a row without "output": named, exit 1
  std::ofstream(src.path + "/qmsum/validation.jsonl", std::ios::app)
      << "{\"id\": \"x\", \"input\": \"y\"}\n";
  CHECK(run_command(script("prepare_scrolls.py") + " --local " + src.path + " --out " + out.path,
                    &log) == 1);
  CHECK(log.find("error: prepare_scrolls: gov_report: neither") != std::string::npos);
  CHECK(log.find("qmsum/validation.jsonl:") != std::string::npos);
  CHECK(log.find("key 'output' missing") != std::string::npos);
}

TEST_CASE("prepare_enwiki_sample.py turns WikiExtractor files into validation and train shards",
          "[data]") {
  TempDir src, out;
  // two articles with a body and a title-only page (a redirect), as WikiExtractor writes them
  std::string text;
  for (int i = 0; i < 40; ++i)
    text += "<doc id=\"" + std::to_string(i) + "\" url=\"?curid=" + std::to_string(i) +
            "\" title=\"Page " + std::to_string(i) + "\">\nPage " + std::to_string(i) + "\n\n" +
            (i % 2 ? ""
                   : "Page " + std::to_string(i) + " is an article about the number " +
                         std::to_string(i) + ". It has a body.\n") +
            "</doc>\n";
  write_text(src.path + "/wiki_00", text);
  std::string log;
  REQUIRE(run_command(script("prepare_enwiki_sample.py") + " --src " + src.path + " --out " +
                          out.path + " --shard-tokens 200 --tda " + TDA_BINARY,
                      &log) == 0);
  INFO(log);
  CHECK(log.find("20 articles from 1 files") != std::string::npos);
  CHECK(read_shard_header(out.path + "/enwiki_val_000000.bin") == 200);
  CHECK(fs::exists(out.path + "/enwiki_train_000001.bin"));
  CHECK(bytes(out.path + "/enwiki_docs.jsonl").find("Page 1\\n") == std::string::npos);  // dropped
  TempDir empty;
  CHECK(run_command(
            script("prepare_enwiki_sample.py") + " --src " + empty.path + " --out " + out.path,
            &log) != 0);
  CHECK(log.find("no wiki_* files") != std::string::npos);
}

TEST_CASE("prepare_fineweb_edu.py resumes where it stopped: the same shards, tiktoken's tokens",
          "[data][tokenizer]") {
  if (!venv_has("tiktoken, numpy")) TDA_SKIP(kVenvPython << " with tiktoken and numpy not found");
  TempDir d;
  const std::vector<std::string> docs = write_fineweb_standin(d.path + "/docs.jsonl");
  const std::string common = "--local " + d.path + "/docs.jsonl --shard-tokens 1500 --out ";
  std::string log;
  REQUIRE(run_command(fineweb(common + d.path + "/full --threads 2"), &log) == 0);
  INFO(log);
  const std::vector<std::string> full = shard_paths(d.path + "/full");
  REQUIRE(full.size() >= 8);
  CHECK(full[0].find("fineweb_edu_val_000000.bin") != std::string::npos);

  // Interrupted after 3 shards, with shard 4 half-written (a kill during the write), then the
  // same command again: only the missing shards are written, with the same bytes.
  REQUIRE(run_command(fineweb(common + d.path + "/part --threads 1 --stop-after-shards 3"), &log) ==
          3);
  CHECK(shard_paths(d.path + "/part").size() == 3);
  const auto state = nlohmann::json::parse(bytes(d.path + "/part/fineweb_edu_state.json"));
  CHECK(state["shards"] == 3);
  CHECK(state["done"] == false);
  write_text(d.path + "/part/fineweb_edu_train_000003.bin.tmp", "partial");
  const auto first_mtime = fs::last_write_time(d.path + "/part/fineweb_edu_val_000000.bin");
  REQUIRE(run_command(fineweb(common + d.path + "/part --threads 2"), &log) == 0);
  CHECK(log.find("resuming after shard 2: document " + std::to_string(state["docs"].get<int>())) !=
        std::string::npos);
  CHECK(fs::last_write_time(d.path + "/part/fineweb_edu_val_000000.bin") == first_mtime);
  CHECK(!fs::exists(d.path + "/part/fineweb_edu_train_000003.bin.tmp"));
  const std::vector<std::string> part = shard_paths(d.path + "/part");
  REQUIRE(part.size() == full.size());
  for (size_t i = 0; i < full.size(); ++i) {
    INFO(part[i]);
    CHECK(fs::path(part[i]).filename() == fs::path(full[i]).filename());
    CHECK(bytes(part[i]) == bytes(full[i]));
  }
  // A finished run is left as it is; another shard size is refused by name.
  REQUIRE(run_command(fineweb(common + d.path + "/part"), &log) == 0);
  CHECK(log.find("complete (" + std::to_string(full.size()) + " shards") != std::string::npos);
  CHECK(run_command(fineweb("--local " + d.path + "/docs.jsonl --shard-tokens 4000 --out " +
                            d.path + "/part"),
                    &log) == 1);
  CHECK(log.find("this run has shard_tokens 1500, the command 4000") != std::string::npos);

  // The shards hold, in order, <|endoftext|> then tiktoken's gpt2 encoding of each document
  // (scripts/tiktoken_encode.py), every shard but the last exactly 1500 tokens.
  std::string pairs;
  for (size_t i = 0; i < docs.size(); ++i) {
    write_text(d.path + "/doc" + std::to_string(i) + ".txt", docs[i]);
    pairs += " " + d.path + "/doc" + std::to_string(i) + ".txt " + d.path + "/doc" +
             std::to_string(i) + ".ids";
  }
  REQUIRE(run_command(kVenvPython + " " + source_dir() + "/scripts/tiktoken_encode.py" + pairs,
                      &log) == 0);
  std::vector<uint16_t> want;
  for (size_t i = 0; i < docs.size(); ++i) {
    const std::string ids = bytes(d.path + "/doc" + std::to_string(i) + ".ids");
    want.push_back(50256);
    for (size_t k = 0; k + 4 <= ids.size(); k += 4) {
      int32_t id;
      std::memcpy(&id, ids.data() + k, 4);
      want.push_back(uint16_t(id));
    }
  }
  std::vector<uint16_t> got;
  for (size_t i = 0; i < part.size(); ++i) {
    const std::vector<uint16_t> t = read_shard(part[i], 50257);
    if (i + 1 < part.size()) CHECK(t.size() == 1500);
    got.insert(got.end(), t.begin(), t.end());
  }
  CHECK(got == want);
}

TEST_CASE("prepare_fineweb_edu.py reads parquet files by row group and resumes inside them",
          "[data][tokenizer]") {
  if (!venv_has("tiktoken, numpy, pyarrow"))
    TDA_SKIP(kVenvPython << " without pyarrow (scripts/setup.sh --data installs it)");
  TempDir d;
  write_fineweb_standin(d.path + "/docs.jsonl");
  // Two parquet files of row groups of 5 rows (the Hub's files have larger groups).
  std::string log;
  REQUIRE(run_command(kVenvPython +
                          " -c \"import json, pyarrow as pa, pyarrow.parquet as pq; "
                          "rows = [json.loads(l) for l in open('" +
                          d.path +
                          "/docs.jsonl')]; "
                          "[pq.write_table(pa.Table.from_pylist(rows[a:b]), '" +
                          d.path +
                          "/' + n, row_group_size=5) for n, a, b in "
                          "(('a.parquet', 0, 21), ('b.parquet', 21, 48))]\"",
                      &log) == 0);
  INFO(log);
  REQUIRE(run_command(fineweb("--local " + d.path + "/docs.jsonl --shard-tokens 1500 --out " +
                              d.path + "/jsonl --threads 1"),
                      &log) == 0);
  const std::string common =
      "--local " + d.path + "/a.parquet " + d.path + "/b.parquet --shard-tokens 1500 --out ";
  REQUIRE(run_command(fineweb(common + d.path + "/pq --threads 1 --stop-after-shards 5"), &log) ==
          3);
  REQUIRE(run_command(fineweb(common + d.path + "/pq --threads 1"), &log) == 0);
  const std::vector<std::string> want = shard_paths(d.path + "/jsonl"),
                                 got = shard_paths(d.path + "/pq");
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK(bytes(got[i]) == bytes(want[i]));
  CHECK(run_command(fineweb("--local " + d.path + "/a.parquet --text-field body --out " + d.path +
                            "/x --threads 1"),
                    &log) == 1);
  CHECK(log.find("a.parquet: no column 'body' (--text-field)") != std::string::npos);
}
