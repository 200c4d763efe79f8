// Diagnostics for the paper's Figure 1 and Appendix C (src/eval/diagnostics.h): averages over
// sequences, contexts past the trained length, curves over context length, survivors per row
// against the TRA/TDA theorems' bounds, raw-score tails and cross-view correlation, each against
// an independent computation.
#include <catch2/catch.hpp>
#include <cmath>

#include "core/error.h"
#include "data/shard.h"
#include "eval/diagnostics.h"
#include "model/rope.h"
#include "test_attention_util.h"
#include "test_eval_util.h"

using namespace tda;

namespace {

std::vector<int32_t> random_tokens(int T, uint64_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(T));
  Rng rng(seed);
  for (auto& x : t) x = int32_t(rng.below(300));
  return t;
}

// A perturbed random tiny model (2 layers, 2 heads of 64, vocabulary 300) on a probe.
struct DiagModel {
  CpuOps cpu;
  ProbeOps probe{cpu};
  Config cfg;
  std::unique_ptr<GPT2> model;
  DiagModel(const std::string& kind, int seq_len, const std::vector<std::string>& sets = {},
            int step = 300) {
    cfg = tiny_eval_config(kind, seq_len, sets);
    model = std::make_unique<GPT2>(cfg.model, cfg.attention, probe);
    model->init_weights(11);
    perturb_for_test(*model, 5);
    model->set_step(step);
  }
  json run(const std::vector<std::vector<int32_t>>& seqs, int max_context = 0) {
    DiagOptions o;
    o.max_context = max_context;
    return run_diagnostics(*model, probe, seqs, o);
  }
  // The maps through the model's own forward (probe.layers / probe.calls), not the KV-cache
  // prefill that run_diagnostics uses.
  void forward(const std::vector<int32_t>& tok) {
    probe.layers.clear();
    probe.calls.clear();
    probe.tiles.clear();
    std::vector<float> logits(size_t(cfg.model.vocab_size));
    model->forward_logits(tok.data(), int(tok.size()), logits.data());
  }
};

double num(const json& j) {
  return j.get<double>();
}

// Random N(0,1) vectors, H heads of T rows of D.
std::vector<float> gaussian(int H, int T, int D, uint64_t seed) {
  std::vector<float> v(size_t(H) * T * D);
  Rng rng(seed);
  for (auto& x : v) x = rng.normal();
  return v;
}

// sum_j A_ij != 0 (j <= i), from a materialised map.
int row_nz(const std::vector<float>& A, int T, int i) {
  int n = 0;
  for (int j = 0; j <= i; ++j) n += A[size_t(i) * T + j] != 0.f;
  return n;
}

}  // namespace

TEST_CASE("diag curves over context length equal the diagnostics of the prefix", "[diag]") {
  // The map of the first n tokens is the top-left n x n block of the map of T tokens, so the
  // curve at n must equal a separate run on the first n tokens (another forward, another T).
  for (const std::string kind : {"softmax", "entmax", "tda", "diff_softmax"}) {
    INFO(kind);
    DiagModel m(kind, 128);
    const auto tok = random_tokens(100, 5);
    const json full = m.run({tok});
    const std::vector<int> lengths = full["grid"]["lengths"];
    REQUIRE(lengths == std::vector<int>{16, 32, 64, 100});
    for (size_t idx = 0; idx < lengths.size(); ++idx) {
      const int n = lengths[idx];
      const json pre = m.run({std::vector<int32_t>(tok.begin(), tok.begin() + n)});
      for (const std::string v : full["views"]) {
        INFO(v << " n = " << n);
        // matmuls over n vs 100 rows may round differently: 1e-5 relative
        CHECK(num(full["curves"][v]["gsink0"][idx]) ==
              Approx(num(pre["means"][v]["gsink0"])).epsilon(1e-5));
        CHECK(num(full["curves"][v]["survivors"][idx]) ==
              Approx(num(pre["means"][v]["mean_survivors"])).epsilon(1e-5));
        for (int l = 0; l < 2; ++l)
          CHECK(num(full["layers"][l]["curves"][v]["gsink0"][idx]) ==
                Approx(num(pre["layers"][l][v]["gsink0"])).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("diag survivors per row bin and consensus survivors match the maps", "[diag]") {
  DiagModel m("tda", 128);
  const auto tok = random_tokens(100, 7);
  const json rep = m.run({tok});
  m.forward(tok);
  const int T = 100;
  const auto bins = rep["grid"]["row_bins"];
  REQUIRE(bins.size() == 7);  // 1, 2-3, 4-7, ..., 64-100
  CHECK(bins[6][0] == 64);
  CHECK(bins[6][1] == 101);
  bool some_consensus = false;
  for (int l = 0; l < 2; ++l) {
    const LayerMaps& L = m.probe.layers[size_t(l)];
    for (size_t b = 0; b < bins.size(); ++b) {
      const int lo = bins[b][0], hi = bins[b][1];
      double s1 = 0, s2 = 0, both = 0;
      for (int h = 0; h < L.H; ++h)
        for (int i = lo - 1; i < hi - 1; ++i) {
          const auto& hv = L.head_views[size_t(h)];
          s1 += row_nz(hv[1], T, i);
          s2 += row_nz(hv[2], T, i);
          for (int j = 0; j <= i; ++j)
            both += hv[1][size_t(i) * T + j] != 0.f && hv[2][size_t(i) * T + j] != 0.f;
        }
      const double rows = double(L.H) * (hi - lo);
      const json& c = rep["layers"][l]["curves"];
      CHECK(num(c["view1"]["row_survivors"][b]) == Approx(s1 / rows));
      CHECK(num(c["view2"]["row_survivors"][b]) == Approx(s2 / rows));
      CHECK(num(c["consensus"]["row_survivors"][b]) == Approx(both / rows));
      some_consensus = some_consensus || both > 0;
    }
  }
  CHECK(some_consensus);
}

TEST_CASE("diag averages every number over sequences", "[diag]") {
  for (const std::string kind : {"softmax", "tda"}) {
    INFO(kind);
    DiagModel m(kind, 64);
    const auto a = random_tokens(48, 1), b = random_tokens(48, 2);
    const json ra = m.run({a}), rb = m.run({b}), r2 = m.run({a, b});
    CHECK(r2["sequences"] == 2);
    for (int l = 0; l < 2; ++l) {
      const json &la = ra["layers"][l], &lb = rb["layers"][l], &l2 = r2["layers"][l];
      for (const std::string v : r2["views"])
        for (int h = 0; h < 2; ++h)
          for (auto& [key, val] : l2["heads"][h][v].items()) {
            INFO(v << " head " << h << " " << key);
            // per head, max_abs too is the mean of the sequences' maxima
            CHECK(num(val) ==
                  Approx((num(la["heads"][h][v][key]) + num(lb["heads"][h][v][key])) / 2));
          }
      for (const std::string v : r2["score_views"])
        for (int k = 0; k < 3; ++k)
          CHECK(num(l2["tails"][v]["p"][k]) ==
                Approx((num(la["tails"][v]["p"][k]) + num(lb["tails"][v]["p"][k])) / 2));
      for (size_t i = 0; i < l2["curves"]["effective"]["gsink0"].size(); ++i)
        CHECK(num(l2["curves"]["effective"]["gsink0"][i]) ==
              Approx((num(la["curves"]["effective"]["gsink0"][i]) +
                      num(lb["curves"]["effective"]["gsink0"][i])) /
                     2));
      if (kind == "tda") {  // mean over the (sequence, head) pairs where it is defined
        const double da = la["cross_view"]["defined"], db = lb["cross_view"]["defined"];
        REQUIRE(da + db > 0);
        const double pa = da ? num(la["cross_view"]["pearson"]) : 0.0;
        const double pb = db ? num(lb["cross_view"]["pearson"]) : 0.0;
        CHECK(num(l2["cross_view"]["pearson"]) == Approx((pa * da + pb * db) / (da + db)));
      }
    }
    CHECK(r2["tiles"]["total"] == num(ra["tiles"]["total"]) + num(rb["tiles"]["total"]));
  }
}

TEST_CASE("diag --max-context goes past the trained length with the model's RoPE", "[diag]") {
  const auto tok = random_tokens(100, 3);
  for (const std::string ntk : {"1", "2"}) {
    INFO("rope_ntk_factor " << ntk);
    // Same weights (no tensor depends on seq_len): a 128-token model sees 100 tokens within its
    // trained length; the 48-token model only with tables extended to 100.
    DiagModel shortm("tda", 48, {"model.rope_ntk_factor=" + ntk});
    DiagModel longm("tda", 128, {"model.rope_ntk_factor=" + ntk});
    REQUIRE(shortm.model->params_to_host() == longm.model->params_to_host());
    if (ntk == "1") {
      try {
        shortm.run({tok});
        FAIL("a sequence past the trained context was accepted");
      } catch (const Error& e) {
        CHECK(std::string(e.what()).find("--max-context") != std::string::npos);
      }
    }
    const json s = shortm.run({tok}, 100), l = longm.run({tok});
    CHECK(s["max_context"] == 100);
    CHECK(s["trained_context"] == rope_trained_context(shortm.cfg.model));
    for (const std::string v : s["views"])
      for (auto& [key, val] : s["means"][v].items())
        CHECK(num(val) == Approx(num(l["means"][v][key])).epsilon(1e-6));
  }
  // The NTK factor is applied: the same 100 tokens give other maps under factor 2.
  DiagModel m1("tda", 128), m2("tda", 128, {"model.rope_ntk_factor=2"});
  const double e1 = m1.run({tok})["means"]["view1"]["mean_entropy"];
  const double e2 = m2.run({tok})["means"]["view1"]["mean_entropy"];
  CHECK(std::fabs(e1 - e2) > 1e-3);
}

TEST_CASE("diag raw-score tails equal the scores recomputed from q and k", "[diag]") {
  // ssmax and lssa: the scores of q' = f q, the query row scale the kernel applies
  for (const std::string kind : {"softmax", "tda", "ssmax", "lssa"}) {
    INFO(kind);
    DiagModel m(kind, 128);
    const auto tok = random_tokens(90, 9);
    const json rep = m.run({tok});
    m.forward(tok);
    const int T = 90;
    for (int l = 0; l < 2; ++l) {
      const AttnArgs& a = m.probe.calls[size_t(l)];
      const int D = a.Dqk;
      const size_t sqk = size_t(T) * D;
      const std::vector<std::string> views = rep["score_views"];
      for (size_t v = 0; v < views.size(); ++v) {
        const float* Q = v ? a.q2 : a.q;
        const float* K = v ? a.k2 : a.k;
        std::vector<float> s;  // every causal score of the layer, all heads
        for (int h = 0; h < a.H; ++h)
          for (int i = 0; i < T; ++i)
            for (int j = 0; j <= i; ++j) {
              const float f =
                  !v && a.q_scale ? a.q_scale[size_t(h) * a.q_scale_h_stride + size_t(i)] : 1.f;
              float d = 0.f;
              for (int c = 0; c < D; ++c)
                d += (f * Q[h * sqk + i * D + c]) * K[h * sqk + j * D + c];
              s.push_back(a.scale * d);
            }
        double mean = 0, var = 0;
        for (float x : s) mean += x;
        mean /= double(s.size());
        for (float x : s) var += (x - mean) * (x - mean);
        const double sigma = std::sqrt(var / double(s.size()));
        const json& t = rep["layers"][l]["tails"][views[v]];
        INFO("layer " << l << " " << views[v]);
        CHECK(num(t["sigma"]) == Approx(sigma).epsilon(1e-6));
        CHECK(num(t["mean"]) == Approx(mean).margin(1e-6 * sigma));
        for (int k = 0; k < 3; ++k) {
          double over = 0, centred = 0;
          for (float x : s) {
            over += std::fabs(x) > kTailK[size_t(k)] * sigma;
            centred += std::fabs(x - mean) > kTailK[size_t(k)] * sigma;
          }
          // sigma differs in the last digits (closed form vs this sum): one score may flip
          CHECK(std::fabs(num(t["p"][k]) - over / double(s.size())) <= 1.0 / double(s.size()));
          CHECK(std::fabs(num(t["p_centred"][k]) - centred / double(s.size())) <=
                1.0 / double(s.size()));
        }
      }
    }
  }
  // Closed form: scores of Gaussian q, k with scale 1/sqrt(D) are ~N(0, 1) (a sum of 64 products:
  // a little heavier-tailed); P(|s| > 2 sigma) = 0.0455, P(|s| > 3 sigma) = 0.0027.
  const int H = 4, T = 512, D = 64;
  const auto q = gaussian(H, T, D, 1), k = gaussian(H, T, D, 2);
  AttnArgs a = theorem_args(AttnMath::kSoftmax, H, T, D, q.data(), k.data());
  a.scale = 0.125f;
  const LayerDiag d = analyse_layer(a, make_grid(T));
  CHECK(d.tails[0].sigma == Approx(1.0).epsilon(0.05));
  CHECK(d.tails[0].over[0] / d.tails[0].n == Approx(0.0455).epsilon(0.15));
  CHECK(d.tails[0].over[1] / d.tails[0].n == Approx(0.0027).epsilon(0.5));
  CHECK(d.tails[0].centred[0] / d.tails[0].n == Approx(0.0455).epsilon(0.15));
  // Shifted by a constant 3 (q_i[63] = 1, k_j[63] = 24 with scale 1/8): the centred tails stay
  // Gaussian, the raw |s| > 2 sigma holds nearly everything (P(Z > -1) = 0.84).
  auto q3 = q, k3 = k;
  for (size_t r = 0; r < q3.size() / D; ++r) {
    q3[r * D + D - 1] = 1.f;
    k3[r * D + D - 1] = 24.f;
  }
  a.q = q3.data();
  a.k = k3.data();
  const LayerDiag s = analyse_layer(a, make_grid(T));
  CHECK(s.tails[0].mean == Approx(3.0).epsilon(0.02));
  CHECK(s.tails[0].centred[0] / s.tails[0].n == Approx(0.0455).epsilon(0.15));
  CHECK(s.tails[0].over[0] / s.tails[0].n == Approx(0.84).epsilon(0.05));
}

TEST_CASE("diag cross-view correlation", "[diag]") {
  const int H = 2, T = 64, D = 64;
  const auto q = gaussian(H, T, D, 3), k = gaussian(H, T, D, 4);
  const auto q2 = gaussian(H, T, D, 5), k2 = gaussian(H, T, D, 6);
  const std::vector<float> zeros(q.size(), 0.f);
  const DiagGrid g = make_grid(T);
  // identical views: 1; a view with no survivor: undefined (NaN), as the paper's footnote
  CHECK(analyse_layer(
            theorem_args(AttnMath::kDiffRelu, H, T, D, q.data(), k.data(), q.data(), k.data()), g)
            .pearson[0] == Approx(1.0).epsilon(1e-12));
  CHECK(std::isnan(
      analyse_layer(
          theorem_args(AttnMath::kDiffRelu, H, T, D, q.data(), k.data(), q.data(), zeros.data()), g)
          .pearson[1]));
  // independent views: the Pearson of the materialised maps, computed here in one pass
  const AttnArgs a =
      theorem_args(AttnMath::kDiffRelu, H, T, D, q.data(), k.data(), q2.data(), k2.data());
  const LayerDiag d = analyse_layer(a, g);
  for (int h = 0; h < H; ++h) {
    const auto maps = materialize_head(a, 0, h);
    double n = 0, sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
    for (int i = 0; i < T; ++i)
      for (int j = 0; j <= i; ++j) {
        const double x = maps[1][size_t(i) * T + j], y = maps[2][size_t(i) * T + j];
        n += 1;
        sa += x;
        sb += y;
        saa += x * x;
        sbb += y * y;
        sab += x * y;
      }
    const double r = (n * sab - sa * sb) / std::sqrt((n * saa - sa * sa) * (n * sbb - sb * sb));
    CHECK(d.pearson[size_t(h)] == Approx(r).epsilon(1e-9));
    CHECK(std::fabs(r) < 0.2);  // independent random views are nearly uncorrelated
  }
}

TEST_CASE("diag TRA survivors per row stay under kappa on random unit vectors", "[diag]") {
  // The paper's Theorems: with tau_i = sqrt(2 log((i+1)/kappa) / d) and noise scores of unit
  // vectors (P(s > t) <= exp(-d t^2 / 2) on the sphere), E[S_i] <= kappa per view and, with
  // independent views, E[C_i] <= kappa^2 / (i+1) in both. 8 heads x up to 256 rows per bin.
  const int H = 8, T = 512, D = 64;
  Rng rng(11);
  const size_t rows = size_t(H) * T;
  const auto q = unit_vectors(rows, D, rng), k = unit_vectors(rows, D, rng);
  const auto q2 = unit_vectors(rows, D, rng), k2 = unit_vectors(rows, D, rng);
  const DiagGrid g = make_grid(T);
  for (const double kappa : {1.0, 4.0}) {
    INFO("kappa " << kappa);
    std::vector<float> tau(static_cast<size_t>(T));
    for (int i = 0; i < T; ++i)
      tau[size_t(i)] = float(std::sqrt(2.0 * std::max(0.0, std::log((i + 1) / kappa)) / D));
    AttnArgs a =
        theorem_args(AttnMath::kDiffThreshold, H, T, D, q.data(), k.data(), q2.data(), k2.data());
    a.tau = tau.data();
    const LayerDiag d = analyse_layer(a, g);
    double total = 0;
    for (size_t b = 0; b < g.row_bins.size(); ++b) {
      double s1 = 0, s2 = 0, c = 0;
      for (int h = 0; h < H; ++h) {
        s1 += d.curves[size_t(h)][1].row_survivors[b] / H;
        s2 += d.curves[size_t(h)][2].row_survivors[b] / H;
        c += d.consensus[size_t(h)][b] / H;
      }
      INFO("rows n_i in [" << g.row_bins[b].first << ", " << g.row_bins[b].second << ")");
      CHECK(s1 <= kappa);
      CHECK(s2 <= kappa);
      CHECK(c <= kappa * kappa / g.row_bins[b].first);
      total += s1;
    }
    CHECK(total > 0.1);  // survivors exist: the bound is not met by an empty map
  }
  // Negative control: a fixed threshold (no log(i+1) growth) lets survivors grow with n.
  std::vector<float> fixed(static_cast<size_t>(T), 0.25f);
  AttnArgs a = theorem_args(AttnMath::kThreshold, H, T, D, q.data(), k.data());
  a.tau = fixed.data();
  const LayerDiag d = analyse_layer(a, g);
  CHECK(d.curves[0][0].row_survivors.back() > 4.0);
}

TEST_CASE("tda diag CLI: sequences, max-context, untrained, errors", "[diag]") {
  TempDir dir;
  const Config cfg = write_tiny_checkpoint(dir.path + "/ck", "tda", 64);
  std::vector<uint16_t> toks(400);
  Rng rng(3);
  for (auto& t : toks) t = uint16_t(rng.below(300));
  write_shard(dir.path + "/val.bin", toks.data(), toks.size());
  const std::string base = "diag --checkpoint " + dir.path + "/ck --tokens-file " + dir.path +
                           "/val.bin --out " + dir.path + "/d.json ";
  const auto read = [&] { return json::parse(std::ifstream(dir.path + "/d.json")); };
  std::string log;
  REQUIRE(run_tda(base + "--T 48 --sequences 3", &log) == 0);
  const json three = read();
  CHECK(three["sequences"] == 3);
  CHECK(three["T"] == 48);
  CHECK(three["step"] == 300);
  CHECK(three["attention"]["kind"] == "tda");
  // the same three windows in-process
  DiagModel m("tda", 64);
  std::vector<std::vector<int32_t>> seqs;
  for (int s = 0; s < 3; ++s) seqs.emplace_back(toks.begin() + s * 48, toks.begin() + (s + 1) * 48);
  CHECK(num(three["means"]["effective"]["gsink0"]) ==
        Approx(num(m.run(seqs)["means"]["effective"]["gsink0"])).epsilon(1e-6));

  CHECK(run_tda(base + "--T 100", &log) != 0);
  CHECK(log.find("--max-context") != std::string::npos);
  REQUIRE(run_tda(base + "--T 100 --max-context 100", &log) == 0);
  CHECK(read()["grid"]["lengths"].back() == 100);
  CHECK(run_tda(base + "--T 64 --sequences 7", &log) != 0);  // 448 > 400 tokens
  CHECK(log.find("val.bin holds 400 tokens") != std::string::npos);

  // --untrained: the config's init with train.seed, what `tda train` starts from
  REQUIRE(run_tda(base + "--T 48 --untrained", &log) == 0);
  const json init = read();
  CHECK(init["untrained"] == true);
  GPT2 fresh(cfg.model, cfg.attention, m.probe);
  fresh.init_weights(cfg.train.seed);
  const json ref = run_diagnostics(fresh, m.probe, {seqs[0]}, DiagOptions{});
  CHECK(num(init["means"]["view1"]["mean_entropy"]) ==
        Approx(num(ref["means"]["view1"]["mean_entropy"])).epsilon(1e-6));
  CHECK(num(init["means"]["view1"]["mean_entropy"]) !=
        Approx(num(three["means"]["view1"]["mean_entropy"])).epsilon(1e-3));
}

TEST_CASE("tda diag runs a dex checkpoint at its step", "[diag]") {
  // dex anneals its lambda over the first dex_anneal_steps (20 in the tiny config): layer 1's
  // maps depend on layer 0's output, hence on the step the checkpoint was saved at.
  TempDir dir;
  write_tiny_checkpoint(dir.path + "/ck", "dex", 64, {}, 10);
  std::vector<uint16_t> toks(64);
  Rng rng(4);
  for (auto& t : toks) t = uint16_t(rng.below(300));
  write_shard(dir.path + "/val.bin", toks.data(), toks.size());
  REQUIRE(run_tda("diag --checkpoint " + dir.path + "/ck --tokens-file " + dir.path +
                  "/val.bin --out " + dir.path + "/d.json") == 0);
  const json cli = json::parse(std::ifstream(dir.path + "/d.json"));
  const std::vector<int32_t> seq(toks.begin(), toks.end());
  const json at10 = DiagModel("dex", 64, {}, 10).run({seq});
  const json at0 = DiagModel("dex", 64, {}, 0).run({seq});
  const auto h1 = [](const json& r) { return num(r["layers"][1]["effective"]["mean_entropy"]); };
  CHECK(h1(cli) == Approx(h1(at10)).epsilon(1e-6));
  CHECK(std::fabs(h1(at10) - h1(at0)) > 1e-4);  // the step matters
}
