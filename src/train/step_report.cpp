#include "train/step_report.h"

#include <algorithm>
#include <cstdio>

#include "backend/device.h"
#include "backend/peak_flops.h"
#include "core/host_memory.h"

namespace tda {

namespace {

std::string fmt_duration(double s) {
  long t = long(s);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ldh%02ldm%02lds", t / 3600, (t / 60) % 60, t % 60);
  return buf;
}

// 524288 -> "524.3K", 1.5e9 -> "1.50B".
std::string fmt_count(double n) {
  char buf[32];
  const char* units[] = {"", "K", "M", "B", "T"};
  int u = 0;
  while (n >= 1000.0 && u < 4) {
    n /= 1000.0;
    ++u;
  }
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f%s" : n < 100 ? "%.2f%s" : "%.1f%s", n, units[u]);
  return buf;
}

// "1.21/1.25 GiB" (now/peak), in the unit of the larger.
std::string fmt_memory(double now_mb, double peak_mb) {
  char buf[48];
  if (peak_mb >= 1024.0)
    std::snprintf(buf, sizeof buf, "%.2f/%.2f GiB", now_mb / 1024.0, peak_mb / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%.0f/%.0f MiB", now_mb, peak_mb);
  return buf;
}

}  // namespace

StepReport::StepReport(const Config& cfg, double flops_per_token, Ops& ops, int ranks)
    : ops_(ops),
      batch_tokens_(cfg.train.total_batch_tokens),
      ranks_(ranks),
      flops_per_token_(flops_per_token),
      peak_from_config_(cfg.log.peak_tflops > 0),
      device_name_(ops.device().name()),
      dtype_(cfg.train.dtype) {
  peak_flops_ =
      1e12 * (peak_from_config_ ? cfg.log.peak_tflops : peak_tflops(device_name_, dtype_));
}

std::string StepReport::mfu_basis() const {
  char peak[32];
  std::snprintf(peak, sizeof peak, "%g", peak_flops_ / 1e12);
  if (peak_flops_ > 0)
    return std::string("MFU against ") + peak + " TFLOP/s per device (" + device_name_ + " " +
           dtype_ + (peak_from_config_ ? ", log.peak_tflops)" : ")");
  return "no MFU: no peak FLOP/s known for \"" + device_name_ + "\" (set log.peak_tflops)";
}

nlohmann::json StepReport::record(const StepMetrics& sm, double eta_s) {
  nlohmann::json r = {{"type", "train"},
                      {"step", sm.step},
                      {"loss", sm.loss},
                      {"lr", sm.lr},
                      {"grad_norm", sm.grad_norm},
                      {"ms", sm.ms},
                      {"tokens_per_s", sm.tokens_per_s},
                      {"tokens", int64_t(sm.step) * batch_tokens_}};
  // tokens_per_s is the whole job's: the peak is one device's, times the ranks.
  if (peak_flops_ > 0) r["mfu"] = flops_per_token_ * sm.tokens_per_s / (peak_flops_ * ranks_);
  const double mb = double(1 << 20);
  const ProcessMemory host = process_memory();
  r["host_rss_mb"] = double(host.rss) / mb;
  r["host_peak_mb"] = double(host.peak_rss) / mb;
  if (!ops_.host_memory()) {
    const size_t used = ops_.device().memory_used();
    device_peak_ = std::max(device_peak_, used);
    r["device_mb"] = double(used) / mb;
    r["device_peak_mb"] = double(device_peak_) / mb;
  }
  r["eta_s"] = eta_s;
  return r;
}

std::string StepReport::line(const nlohmann::json& r, int last_step) {
  char head[160];
  std::snprintf(
      head, sizeof head, "step %6d/%d | loss %.4f | lr %.2e | norm %.3f | %.0f ms | %.0f tok/s",
      r["step"].get<int>(), last_step, r["loss"].get<double>(), r["lr"].get<double>(),
      r["grad_norm"].get<double>(), r["ms"].get<double>(), r["tokens_per_s"].get<double>());
  std::string line = head;
  if (r.contains("mfu")) {
    char mfu[32];
    std::snprintf(mfu, sizeof mfu, " | mfu %.1f%%", 100.0 * r["mfu"].get<double>());
    line += mfu;
  }
  line += " | " + fmt_count(r["tokens"].get<double>()) + " tok";
  if (r.contains("device_mb"))
    line += " | gpu " + fmt_memory(r["device_mb"].get<double>(), r["device_peak_mb"].get<double>());
  line += " | host " + fmt_memory(r["host_rss_mb"].get<double>(), r["host_peak_mb"].get<double>());
  return line + " | eta " + fmt_duration(r["eta_s"].get<double>());
}

}  // namespace tda
