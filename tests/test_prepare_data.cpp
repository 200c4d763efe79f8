// The data scripts a user runs before a sweep, offline: scripts/prepare_evals.py --local copies
// and checks the six tasks' files (against ../shared/data/evals when present), and tda reads
// them through TDA_EVAL_DATA; a file with another hash is refused by name; prepare_scrolls.py
// --local takes a SCROLLS zip or jsonl and names a bad row; prepare_enwiki_sample.py turns
// WikiExtractor files into shards.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

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
