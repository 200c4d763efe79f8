// Reading what `tda report` writes, for the tests of the report and of sweeps: CSV tables
// keyed by run, markdown table rows by label, the paper's number formats, PNG files.
#pragma once
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace tda {

inline std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// RFC 4180 CSV (quoted fields may hold commas): rows of fields.
inline std::vector<std::vector<std::string>> read_csv(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  const std::string s = slurp(path);
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quoted) {
      if (c == '"' && i + 1 < s.size() && s[i + 1] == '"')
        field += s[++i];
      else if (c == '"')
        quoted = false;
      else
        field += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      row.push_back(field);
      field.clear();
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      row.push_back(field);
      field.clear();
      rows.push_back(row);
      row.clear();
    } else {
      field += c;
    }
  }
  return rows;
}

// A CSV as {run: {column: value}}.
inline std::map<std::string, std::map<std::string, std::string>> csv_by_run(
    const std::string& path) {
  const auto rows = read_csv(path);
  REQUIRE(rows.size() >= 2);
  std::map<std::string, std::map<std::string, std::string>> out;
  for (size_t r = 1; r < rows.size(); ++r)
    for (size_t c = 0; c < rows[0].size(); ++c) out[rows[r][1]][rows[0][c]] = rows[r][c];
  return out;
}

// The cells of the markdown table row whose first cell is `label`, in the section `title`.
inline std::vector<std::string> md_row(const std::string& md, const std::string& title,
                                       const std::string& label) {
  const size_t sec = md.find("### " + title);
  REQUIRE(sec != std::string::npos);
  std::istringstream in(md.substr(sec));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| " + label + " |", 0) != 0) continue;
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream ls(line.substr(2));
    while (std::getline(ls, cell, '|')) cells.push_back(cell.substr(1, cell.size() - 2));
    return cells;
  }
  FAIL("no row '" << label << "' in " << title);
  return {};
}

inline std::string fmt(double v, int decimals, double scale = 1.0, const char* suffix = "") {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f%s", decimals, v * scale, suffix);
  return b;
}

inline bool is_png(const std::string& path) {
  const std::string s = slurp(path);
  return s.size() > 10000 && s.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0;
}

// The last validation loss in a run's metrics.jsonl.
inline double last_val_loss(const std::string& metrics) {
  std::ifstream f(metrics);
  double v = NAN;
  for (std::string line; std::getline(f, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["type"] == "val") v = j["val_loss"];
  }
  return v;
}

// Runs `tda report`; false (the test then skips) when this machine has no Python for it.
inline bool run_report(const std::string& sweep, std::string* log) {
  const int rc = run_tda("report " + sweep, log);
  if (rc != 0 && log->find("no Python found") != std::string::npos) {
    WARN("no Python for tda report: " << *log);
    return false;
  }
  INFO(*log);
  REQUIRE(rc == 0);
  return true;
}

}  // namespace tda
