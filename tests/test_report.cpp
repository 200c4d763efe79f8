// `tda report` (scripts/report.py, docs/report.md): a sweep directory of two real tiny runs
// (trained, evaluated and diagnosed by the tda binary) gives tables equal to the runs' own
// metrics, best bold / second underlined, CSV equal to the markdown, and PNG figures; a
// hand-written sweep checks ranking ties, lower-is-better losses, the p table, and that missing
// or broken pieces print "—" and are listed instead of stopping the report.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_report_util.h"
#include "test_util.h"

using namespace tda;
using nlohmann::json;

TEST_CASE("tda report on a two-run micro sweep matches the runs' own metrics", "[report]") {
  TempDir dir;
  const std::string sw = dir.path + "/micro", src = source_dir();
  const std::string val = src + "/data/tinyshakespeare/tiny_shakespeare_val.bin";
  // Two questions in MosaicML's ICL format, the same file for two tasks.
  const std::string mcq = dir.path + "/mc.jsonl";
  write_text(mcq,
             "{\"query\": \"Question: What do plants need to grow?\\nAnswer:\", \"choices\": "
             "[\"water and light\", \"plastic\", \"iron bars\"], \"gold\": 0}\n"
             "{\"query\": \"Question: Which is the largest?\\nAnswer:\", \"choices\": [\"a "
             "mouse\", \"an elephant\"], \"gold\": 1}\n");
  std::string log;
  std::map<std::string, double> logged_params;  // the trainer's "model N params" line
  for (const std::string kind : {"softmax", "tda"}) {
    const std::string run = sw + "/" + kind, ev = " --out " + run + "/eval/";
    INFO(kind);
    REQUIRE(run_tda("train --config " + src + "/configs/tiny/" + kind + ".json --out " + run +
                        " --set model.seq_len=64 --set train.total_batch_tokens=128"
                        " --set train.micro_batch=2 --set train.max_steps=3"
                        " --set train.val_every=2 --set train.val_batches=1",
                    &log) == 0);
    const size_t at = log.find("] model ");
    REQUIRE(at != std::string::npos);
    logged_params[kind] = std::stod(log.substr(at + 8));
    const std::string ck = " --checkpoint " + run + "/checkpoints/step_00000003";
    std::filesystem::create_directories(run + "/eval");
    for (const std::string task : {"arc_easy", "openbookqa"})
      REQUIRE(run_tda("eval mc" + ck + " --task " + task + " --data " + mcq +
                          " --no-arc-fix --quiet" + ev + "mc_" + task + ".json",
                      &log) == 0);
    const std::string diag = "diag" + ck + " --tokens-file " + val + " --T 64 --sequences 2";
    REQUIRE(run_tda(diag + ev + "diag.json", &log) == 0);
    REQUIRE(run_tda(diag + " --untrained" + ev + "diag_init.json", &log) == 0);
    for (const std::string k : {"1", "2"})
      REQUIRE(run_tda("eval passkey" + ck + " --lengths 120 --trials 1 --quiet --needles " + k +
                          ev + "passkey_n" + k + ".json",
                      &log) == 0);
  }
  // only TDA has diagnostics past its trained length and a SCROLLS result
  const std::string tda_ck = " --checkpoint " + sw + "/tda/checkpoints/step_00000003";
  REQUIRE(run_tda("diag" + tda_ck + " --tokens-file " + val + " --T 128 --max-context 128 --out " +
                      sw + "/tda/eval/diag_long.json",
                  &log) == 0);
  REQUIRE(run_tda("eval longctx" + tda_ck + " --task qasper --data " + src +
                      "/tests/data/scrolls_qasper_tiny.jsonl --limit 1 --max-new-tokens 4 "
                      "--quiet --out " +
                      sw + "/tda/eval/scrolls_qasper.json",
                  &log) == 0);

  if (!run_report(sw, &log)) return;
  const std::string out = sw + "/report/", md = slurp(out + "report.md");
  const auto t1 = csv_by_run(out + "table1.csv");
  std::map<std::string, double> loss;
  for (const std::string kind : {"softmax", "tda"}) {
    INFO(kind);
    const std::string run = sw + "/" + kind;
    const auto& row = t1.at(kind);
    loss[kind] = last_val_loss(run + "/metrics.jsonl");
    CHECK(std::stod(row.at("val_loss")) == loss[kind]);  // repr round-trips exactly
    const json mc = json::parse(slurp(run + "/eval/mc_arc_easy.json"));
    CHECK(std::stod(row.at("arc_easy_acc")) == mc["acc"].get<double>());
    CHECK(std::stod(row.at("arc_easy_acc_norm")) == mc["acc_norm"].get<double>());
    const json dg = json::parse(slurp(run + "/eval/diag.json"));
    CHECK(std::stod(row.at("sparsity")) == dg["means"]["effective"]["sparsity"].get<double>());
    CHECK(row.at("hellaswag_acc").empty());  // never evaluated: empty in the CSV
    // parameters counted from the checkpoint equal what the trainer said it built
    CHECK(std::stod(row.at("params")) == logged_params[kind]);
    // the markdown shows the CSV's numbers, rounded as the paper prints them
    const auto cells = md_row(md, "Table 1", row.at("method"));
    REQUIRE(cells.size() == 15);
    CHECK(cells[14] == fmt(logged_params[kind], 2, 1e-6));
    const auto strip = [](std::string s) {
      for (const std::string m : {"**", "<u>", "</u>"})
        for (size_t p; (p = s.find(m)) != std::string::npos;) s.erase(p, m.size());
      return s;
    };
    CHECK(strip(cells[1]) == fmt(loss[kind], 4));
    CHECK(strip(cells[2]) == "—");  // HellaSwag acc
    CHECK(strip(cells[4]) == fmt(std::stod(row.at("arc_easy_acc")), 3));
    CHECK(strip(cells[5]) == fmt(std::stod(row.at("arc_easy_acc_norm")), 3));
    CHECK(strip(cells[8]) == fmt(std::stod(row.at("openbookqa_acc")), 3));
    CHECK(strip(cells[13]) == fmt(std::stod(row.at("sparsity")), 1, 100.0, "%"));
  }
  // the lower validation loss is bold, the other underlined
  REQUIRE(loss["softmax"] != loss["tda"]);
  const std::string best = loss["softmax"] < loss["tda"] ? "softmax" : "tda";
  const std::string second = best == "softmax" ? "tda" : "softmax";
  CHECK(md_row(md, "Table 1", t1.at(best).at("method"))[1] == "**" + fmt(loss[best], 4) + "**");
  CHECK(md_row(md, "Table 1", t1.at(second).at("method"))[1] ==
        "<u>" + fmt(loss[second], 4) + "</u>");
  // TDA's thresholded maps have exact zeros, softmax's none: TDA's sparsity is bold
  CHECK(md_row(md, "Table 1", t1.at("tda").at("method"))[13].rfind("**", 0) == 0);
  // TDA's default "full" heads carry a second query/key view: more parameters than softmax,
  // which the table states and does not rank
  CHECK(logged_params["tda"] > logged_params["softmax"]);
  CHECK(md.find("TDA heads: `full`") != std::string::npos);
  CHECK(md_row(md, "Table 1", t1.at("tda").at("method"))[14].find("**") == std::string::npos);

  // Table 2: TDA's Qasper F1, the rest "—" and listed
  const json qa = json::parse(slurp(sw + "/tda/eval/scrolls_qasper.json"));
  const auto t2 = md_row(md, "Table 2", t1.at("tda").at("method"));
  CHECK(t2[3] == "—");
  CHECK(t2[4].find(fmt(qa["score"].get<double>(), 2)) != std::string::npos);
  CHECK(md.find("- Table 2 QMSum (eval/scrolls_qmsum.json): no run has it") != std::string::npos);
  CHECK(md.find("- Table 2 (SCROLLS): no result for softmax") != std::string::npos);
  CHECK(md.find("- Table 1 HellaSwag (eval/mc_hellaswag.json): no run has it") !=
        std::string::npos);
  CHECK(md.find("one view, no correlation: softmax") != std::string::npos);
  // Table 3 holds the 2-needle accuracy in percent
  const json pk = json::parse(slurp(sw + "/softmax/eval/passkey_n2.json"));
  const auto t3 = md_row(md, "Table 3", t1.at("softmax").at("method"));
  CHECK(t3[1].find(fmt(pk["lengths"][0]["accuracy"].get<double>(), 1, 100.0)) != std::string::npos);
  // C.3: TDA's trained correlation is the mean over its layers of diag.json's
  const json dg = json::parse(slurp(sw + "/tda/eval/diag.json"));
  double sum = 0;
  int n = 0;
  for (const auto& L : dg["layers"])
    if (!L["cross_view"]["pearson"].is_null()) sum += L["cross_view"]["pearson"].get<double>(), ++n;
  if (n)
    CHECK(std::stod(csv_by_run(out + "appc_crossview.csv").at("tda").at("trained")) ==
          Approx(sum / n).epsilon(1e-12));

  if (md.find("matplotlib missing") != std::string::npos) {
    WARN("matplotlib missing: PNG checks skipped");
    return;
  }
  for (const std::string png : {"fig1_diagnostics.png", "fig_passkey.png", "figC_crossview.png",
                                "figC_kappa.png", "figC_survivors.png", "fig_curves.png"}) {
    INFO(png);
    CHECK(is_png(out + png));
    CHECK(md.find("](" + png + ")") != std::string::npos);
  }
}

TEST_CASE("tda report ranks ties, lower losses, studies, and lists what is missing", "[report]") {
  TempDir dir;
  const std::string sw = dir.path + "/hand";
  // runs: a (softmax), b (rela), c (tda p=2), p1 (tda p=1, group p), ext (tda extension);
  // "gone" has no directory, "failed" failed in status.json.
  const auto run = [&](const std::string& name, const std::string& kind, int power,
                       const std::string& init_from, const std::vector<double>& vals,
                       std::map<std::string, std::string> evals) {
    const std::string d = sw + "/" + name;
    std::filesystem::create_directories(d + "/eval");
    json cfg = {{"attention", {{"kind", kind}, {"power", power}, {"beta", 1.0}, {"kappa", 1.0}}},
                {"model", {{"seq_len", 64}}},
                {"train", {{"init_from", init_from}}}};
    write_text(d + "/config.json", cfg.dump());
    std::string m;
    for (size_t i = 0; i < vals.size(); ++i)
      m += json({{"type", "val"}, {"step", i}, {"val_loss", vals[i]}}).dump() + "\n";
    m += "{\"type\": \"val\", \"step\": 9, \"val_l";  // a line cut by a crash
    write_text(d + "/metrics.jsonl", m);
    for (const auto& [file, text] : evals) write_text(d + "/eval/" + file, text);
  };
  const auto mc = [](double acc) {
    return json({{"acc", acc}, {"acc_norm", acc / 2}, {"n", 100}}).dump();
  };
  run("a", "softmax", 2, "", {4.0, 3.5}, {{"mc_piqa.json", mc(0.5004)}});
  run("b", "rela", 2, "", {4.0, 3.25}, {{"mc_piqa.json", mc(0.4996)}});  // ties with a at 0.500
  run("c", "tda", 2, "", {4.0, 3.3},
      {{"mc_piqa.json", mc(0.42)},
       {"val.json", "{\"val_loss\": 3.2}"},  // preferred
       {"mc_arc_easy.json", "{not json"}});
  run("d", "entmax", 2, "", {3.9}, {{"mc_piqa.json", mc(0.30)}});
  run("p1", "tda", 1, "", {3.4}, {});
  run("ext", "tda", 2, "runs/c", {3.1}, {{"scrolls_qasper.json", "{\"score\": 12.345}"}});
  json runs = json::array();
  for (const auto& [name, group] :
       std::vector<std::pair<std::string, std::string>>{{"a", "main"},
                                                        {"b", "main"},
                                                        {"c", "main"},
                                                        {"d", "main"},
                                                        {"gone", "main"},
                                                        {"p1", "p"},
                                                        {"ext", "extension"}})
    runs.push_back({{"name", name}, {"group", group}});
  write_text(sw + "/sweep.json", json({{"runs", runs}}).dump());
  write_text(sw + "/status.json",
             json({{"runs", {{"d", {{"state", "failed"}, {"error", "error: NaN loss"}}}}}}).dump());

  std::string log;
  if (!run_report(sw, &log)) return;
  const std::string md = slurp(sw + "/report/report.md");
  // lower loss is better: c (val.json 3.2) bold, b (3.25) underlined, a plain
  CHECK(md_row(md, "Table 1", "TDA (p=2, β=1)")[1] == "**3.2000**");
  CHECK(md_row(md, "Table 1", "ReLA")[1] == "<u>3.2500</u>");
  CHECK(md_row(md, "Table 1", "Softmax")[1] == "3.5000");
  // 0.5004 and 0.4996 both print 0.500: both bold; the next value (0.420) underlined
  CHECK(md_row(md, "Table 1", "Softmax")[10] == "**0.500**");
  CHECK(md_row(md, "Table 1", "ReLA")[10] == "**0.500**");
  CHECK(md_row(md, "Table 1", "TDA (p=2, β=1)")[10] == "<u>0.420</u>");
  CHECK(md_row(md, "Table 1", "Entmax")[10] == "0.300");
  CHECK(md_row(md, "Table 1", "TDA (p=2, β=1)")[4] == "—");  // the unreadable ARC-Easy file
  CHECK(md.find("mc_arc_easy.json: unreadable") != std::string::npos);
  CHECK(md.find("run d: failed (error: NaN loss)") != std::string::npos);
  CHECK(md.find("run gone: no config.json") != std::string::npos);
  CHECK(md.find("Table 1 sparsity (eval/diag.json): no run has it") != std::string::npos);
  // no checkpoint: no parameter count, listed, not guessed from the config
  CHECK(md_row(md, "Table 1", "Softmax")[14] == "—");
  CHECK(md.find("Table 1 params (checkpoints/*/model.safetensors): no run has it") !=
        std::string::npos);
  // the p table: p = 1 (group p) and p = 2 (Table 1's TDA), sorted by p; the extension run
  // (init_from) is in neither, but in Table 2
  CHECK(md_row(md, "TDA hyperparameters: Different power p", "1")[1] == "<u>3.4000</u>");
  CHECK(md_row(md, "TDA hyperparameters: Different power p", "2")[1] == "**3.2000**");
  CHECK(md_row(md, "Table 2", "TDA (p=2, β=1)")[4] == "**12.35**");
  CHECK(csv_by_run(sw + "/report/table2_scrolls.csv").at("ext").at("qasper") == "12.345");
}
