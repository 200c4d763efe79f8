#include "cli/bench_profile.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace tda {

namespace {
// Each phase's ops (largest first), then its time outside every op.
struct Line {
  std::string phase, op;
  double calls, ms;
};

std::vector<Line> lines(const ProfileOps& p, int steps) {
  std::vector<Line> out;
  const auto ops = p.ops();
  for (const auto& [phase, wall] : p.phases()) {
    std::vector<Line> mine;
    double in_ops = 0;
    for (const auto& o : ops) {
      if (o.phase != phase) continue;
      mine.push_back({phase, o.op, double(o.calls) / steps, o.ms / steps});
      in_ops += o.ms;
    }
    std::stable_sort(mine.begin(), mine.end(),
                     [](const Line& a, const Line& b) { return a.ms > b.ms; });
    out.insert(out.end(), mine.begin(), mine.end());
    out.push_back({phase, "(outside ops)", 0, std::max(0.0, wall - in_ops) / steps});
  }
  return out;
}
}  // namespace

void name_matmuls(ProfileOps& p, const ModelConfig& m, int proj_width) {
  const int C = m.d_model;
  p.name_matmul(C, proj_width, "c_attn");
  p.name_matmul(C, C, "c_proj");
  p.name_matmul(C, 4 * C, "c_fc");
  p.name_matmul(4 * C, C, "mlp_proj");
}

json profile_json(const ProfileOps& p, int steps) {
  json out = json::array();
  for (const Line& l : lines(p, steps))
    out.push_back({{"phase", l.phase}, {"op", l.op}, {"calls", l.calls}, {"ms", l.ms}});
  return out;
}

void print_profile(std::ostream& os, const ProfileOps& p, int steps, double step_ms) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-11s %-52s %7s %10s %7s\n", "phase", "op", "calls", "ms/step",
                "share");
  os << buf;
  double phases_ms = 0;
  for (const auto& ph : p.phases()) phases_ms += ph.second / steps;
  std::string last;
  for (const Line& l : lines(p, steps)) {
    if (l.phase != last) {
      double wall = 0;
      for (const auto& ph : p.phases())
        if (ph.first == l.phase) wall = ph.second / steps;
      std::snprintf(buf, sizeof buf, "%-11s %-52s %7s %10.2f %6.1f%%\n", l.phase.c_str(),
                    "[phase total]", "", wall, 100.0 * wall / step_ms);
      os << buf;
      last = l.phase;
    }
    std::snprintf(buf, sizeof buf, "%-11s %-52s %7.0f %10.2f %6.1f%%\n", "", l.op.c_str(), l.calls,
                  l.ms, 100.0 * l.ms / step_ms);
    os << buf;
  }
  std::snprintf(buf, sizeof buf, "%-11s %-52s %7s %10.2f (median step %.2f ms; %d steps)\n",
                "total", "[all phases]", "", phases_ms, step_ms, steps);
  os << buf;
}

}  // namespace tda
