// tda kinds [--json] [--names]: the registered attention kinds (src/attention/registry.h), built
// with the default config: label, the kernel math their forward runs, the parameters they add to
// a layer, the attention.<key> options they read (with what each does), their row in the paper's
// tables, what may be assumed of their weights (normalised rows, dense, heads paired) and a
// one-line summary. The scripts that list kinds
// (scripts/report.py, scripts/bench/dryrun_table.py, scripts/gpu/check.sh) read this, so a kind
// registered in C++ is known to all of them.
#include <algorithm>
#include <cxxopts.hpp>
#include <iomanip>
#include <iostream>

#include "attention/registry.h"
#include "cli/command.h"
#include "core/config.h"

namespace tda {
namespace {

struct KindRow {
  std::string name;
  AttentionKindInfo info;
  std::string math;
  std::vector<std::string> params;
  AttentionTraits traits;
};

// The paper's kinds first, in its tables' order, then the others by name.
std::vector<KindRow> kind_rows() {
  std::vector<KindRow> rows;
  for (const auto& [name, kind] : attention_registry()) {
    const Config c = parse_config("{}", {"attention.kind=" + name}, "tda kinds");
    const auto v = kind.make(c.model, c.attention);
    KindRow r{name, kind.info, attn_math_name(v->math()), {}, v->traits()};
    for (const auto& p : v->extra_params(0)) r.params.push_back(p.name);
    rows.push_back(std::move(r));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const KindRow& a, const KindRow& b) {
    const int ra = a.info.paper_row < 0 ? 1 << 30 : a.info.paper_row;
    const int rb = b.info.paper_row < 0 ? 1 << 30 : b.info.paper_row;
    return ra < rb;
  });
  return rows;
}

int cmd_kinds(int argc, char** argv) {
  cxxopts::Options opts(argv[0], "The registered attention kinds");
  opts.add_options()("json", "one JSON array")("names", "the names alone, one per line")(
      "h,help", "this help");
  const auto r = opts.parse(argc, argv);
  if (r.count("help")) {
    std::cout << opts.help() << "\n";
    return 0;
  }
  const std::vector<KindRow> rows = kind_rows();
  if (r.count("json")) {
    json out = json::array();
    for (const auto& k : rows) {
      json options = json::array();
      for (const auto& o : k.info.options)
        options.push_back({{"key", o.key}, {"default", o.def}, {"doc", o.doc}});
      out.push_back({{"name", k.name},
                     {"label", k.info.label},
                     {"math", k.math},
                     {"params", k.params},
                     {"paper_row", k.info.paper_row},
                     {"normalised", k.traits.normalised},
                     {"dense", k.traits.dense},
                     {"head_multiple", k.traits.head_multiple},
                     {"options", options},
                     {"summary", k.info.summary}});
    }
    std::cout << out.dump(1) << "\n";
  } else if (r.count("names")) {
    for (const auto& k : rows) std::cout << k.name << "\n";
  } else {
    for (const auto& k : rows) {
      std::string params;
      for (const auto& p : k.params) params += (params.empty() ? "" : ",") + p;
      std::cout << std::left << std::setw(14) << k.name << std::setw(14) << k.info.label
                << std::setw(16) << k.math << k.info.summary
                << (params.empty() ? "" : " [params: " + params + "]") << "\n";
      for (const auto& o : k.info.options)
        std::cout << std::setw(30) << ""
                  << "attention." << o.key << " = " << o.def.dump() << ": " << o.doc << "\n";
    }
  }
  return 0;
}

RegisterCommand reg("kinds", "the registered attention kinds (label, math, parameters)", cmd_kinds);

}  // namespace
}  // namespace tda
