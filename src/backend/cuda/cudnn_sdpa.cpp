// cuDNN's fused attention (SDPA, the FlashAttention-style engines of cuDNN 9) as the vendor
// primitive of sdpa.h, through NVIDIA's header-only cudnn-frontend graph API. Host code only,
// built by the host compiler against the toolkit (TDA_CUDA_HOST: nvcc's front end took 85 s on
// the frontend's headers, g++ 35 s) in the GPU build (-DTDA_CUDA=ON) whose configure found
// cudnn.h and the frontend (CMakeLists.txt); the emulated build has no cuDNN. No test here can
// run it (no GPU): the self-check of attention_impl.cu holds it to our kernels
// at its first use on a real GPU, and the GPU kit measures it.
// libcudnn is opened at run time (the frontend's dynamic loading), not linked: a binary built
// with cuDNN runs on a node without it, where attention.impl auto takes our kernels and says why.
// One graph per shape and pass, built at the shape's first use and cached (building takes
// ~0.1-1 s; executing, microseconds of host time), as llm.c's cudnn_att.cpp does.
#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>  // before the frontend, whose shim uses std::strlen without it
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "backend/cuda/common.h"
#include "backend/cuda/sdpa.h"
#include "core/error.h"

namespace fe = cudnn_frontend;

// The frontend's handle on libcudnn, which dynamic loading leaves to the program to open.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}

namespace tda::cuda {

namespace {
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

// Rows of ld elements per (b, h): the operand copies' layout, and the outputs'.
std::vector<int64_t> dims(const SdpaShape& s, int ld) {
  return {s.B, s.H, s.T, ld};
}
std::vector<int64_t> strides(const SdpaShape& s, int ld) {
  return {int64_t(s.H) * s.T * ld, int64_t(s.T) * ld, ld, 1};
}

std::shared_ptr<fe::graph::Tensor_attributes> input(fe::graph::Graph& g, const char* name, Uid uid,
                                                    const SdpaShape& s, int ld) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim(dims(s, ld))
                      .set_stride(strides(s, ld)));
}

std::shared_ptr<fe::graph::Tensor_attributes> stats_input(fe::graph::Graph& g, const SdpaShape& s) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name("stats")
                      .set_uid(kStats)
                      .set_dim({s.B, s.H, s.T, 1})
                      .set_stride({int64_t(s.H) * s.T, s.T, 1, 1})
                      .set_data_type(fe::DataType_t::FLOAT));
}

std::shared_ptr<fe::graph::Graph> new_graph() {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

// The causal mask: key j <= query i (top-left diagonal, no band to the right).
template <class Attrs>
void causal(Attrs& o) {
  o.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
}

std::shared_ptr<fe::graph::Graph> forward_graph(const SdpaShape& s) {
  auto g = new_graph();
  auto q = input(*g, "q", kQ, s, s.ld_qk), k = input(*g, "k", kK, s, s.ld_qk),
       v = input(*g, "v", kV, s, s.ld_v);
  auto opt = fe::graph::SDPA_attributes()
                 .set_name("tda_sdpa")
                 .set_generate_stats(true)
                 .set_attn_scale(s.scale);
  causal(opt);
  auto [o, stats] = g->sdpa(q, k, v, opt);
  o->set_output(true).set_uid(kO).set_dim(dims(s, s.ld_v)).set_stride(strides(s, s.ld_v));
  stats->set_output(true)
      .set_uid(kStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({s.B, s.H, s.T, 1})
      .set_stride({int64_t(s.H) * s.T, s.T, 1, 1});
  return g;
}

std::shared_ptr<fe::graph::Graph> backward_graph(const SdpaShape& s) {
  auto g = new_graph();
  auto q = input(*g, "q", kQ, s, s.ld_qk), k = input(*g, "k", kK, s, s.ld_qk),
       v = input(*g, "v", kV, s, s.ld_v), o = input(*g, "o", kO, s, s.ld_v),
       dO = input(*g, "dO", kDO, s, s.ld_v);
  auto stats = stats_input(*g, s);
  // Deterministic: dq summed in a fixed order, so that a resumed run repeats its steps bit for
  // bit (docs/checkpoints.md), as our kernels do.
  auto opt = fe::graph::SDPA_backward_attributes()
                 .set_name("tda_sdpa_backward")
                 .set_attn_scale(s.scale)
                 .set_deterministic_algorithm(true);
  causal(opt);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dO, stats, opt);
  dq->set_output(true).set_uid(kDQ).set_dim(dims(s, s.ld_qk)).set_stride(strides(s, s.ld_qk));
  dk->set_output(true).set_uid(kDK).set_dim(dims(s, s.ld_qk)).set_stride(strides(s, s.ld_qk));
  dv->set_output(true).set_uid(kDV).set_dim(dims(s, s.ld_v)).set_stride(strides(s, s.ld_v));
  return g;
}

std::string version_text(size_t v) {  // 91900 -> 9.19.0
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

// Where libcudnn may be: TDA_CUDNN_LIBRARY (a file), the loader's search (LD_LIBRARY_PATH,
// ldconfig), then the directory the build found it in.
void* open_libcudnn(std::string* tried) {
  std::vector<std::string> names;
  if (const char* e = std::getenv("TDA_CUDNN_LIBRARY"); e && *e) names.push_back(e);
  names.push_back("libcudnn.so.9");
#ifdef TDA_CUDNN_LIB_DIR
  names.push_back(std::string(TDA_CUDNN_LIB_DIR) + "/libcudnn.so.9");
#endif
  for (const auto& n : names) {
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_GLOBAL)) return h;
    *tried += (tried->empty() ? "" : ", ") + n + " (" + dlerror() + ")";
  }
  return nullptr;
}

class CudnnSdpa final : public SdpaPrimitive {
 public:
  CudnnSdpa(cudnnHandle_t h, size_t version) : handle_(h), version_(version) {}
  ~CudnnSdpa() override {
    if (workspace_) (void)cudaFree(workspace_);
    (void)fe::detail::destroy_handle(handle_);
  }
  std::string name() const override {
    return "cuDNN " + version_text(version_) + " (frontend " +
           std::to_string(CUDNN_FRONTEND_MAJOR_VERSION) + "." +
           std::to_string(CUDNN_FRONTEND_MINOR_VERSION) + ")";
  }

  std::string prepare(const SdpaShape& s, bool backward) override {
    auto it = refused_.find({s, backward});
    if (it != refused_.end()) return it->second;
    std::string why = build(fwd_, s, forward_graph, "forward");
    if (why.empty() && backward) why = build(bwd_, s, backward_graph, "backward");
    if (!why.empty()) refused_[{s, backward}] = why;
    return why;
  }

  void forward(const SdpaShape& s, const uint16_t* q, const uint16_t* k, const uint16_t* v,
               uint16_t* o, float* lse) override {
    std::unordered_map<int64_t, void*> pack = {{kQ, const_cast<uint16_t*>(q)},
                                               {kK, const_cast<uint16_t*>(k)},
                                               {kV, const_cast<uint16_t*>(v)},
                                               {kO, o},
                                               {kStats, lse}};
    run(fwd_, s, pack, "forward");
  }

  void backward(const SdpaShape& s, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                const uint16_t* o, const uint16_t* dO, const float* lse, uint16_t* dq, uint16_t* dk,
                uint16_t* dv) override {
    std::unordered_map<int64_t, void*> pack = {{kQ, const_cast<uint16_t*>(q)},
                                               {kK, const_cast<uint16_t*>(k)},
                                               {kV, const_cast<uint16_t*>(v)},
                                               {kO, const_cast<uint16_t*>(o)},
                                               {kDO, const_cast<uint16_t*>(dO)},
                                               {kStats, const_cast<float*>(lse)},
                                               {kDQ, dq},
                                               {kDK, dk},
                                               {kDV, dv}};
    run(bwd_, s, pack, "backward");
  }

 private:
  using Cache = std::map<SdpaShape, std::shared_ptr<fe::graph::Graph>>;

  std::string build(Cache& cache, const SdpaShape& s,
                    std::shared_ptr<fe::graph::Graph> (*make)(const SdpaShape&), const char* pass) {
    if (cache.count(s)) return "";
    const std::string refused = std::string("cuDNN refuses the ") + pass + " graph: ";
    try {
      auto g = make(s);
      // One declaration per step: nvcc takes an assignment of the frontend's [[nodiscard]] error
      // for a discarded value.
      if (const fe::error_t e = g->validate(); !e.is_good()) return refused + e.err_msg;
      if (const fe::error_t e = g->build_operation_graph(handle_); !e.is_good())
        return refused + e.err_msg;
      if (const fe::error_t e = g->create_execution_plans({fe::HeurMode_t::A}); !e.is_good())
        return refused + e.err_msg;
      if (const fe::error_t e = g->check_support(handle_); !e.is_good()) return refused + e.err_msg;
      if (const fe::error_t e = g->build_plans(handle_); !e.is_good()) return refused + e.err_msg;
      int64_t ws = 0;
      if (const fe::error_t e = g->get_workspace_size(ws); !e.is_good())
        return std::string("cuDNN ") + pass + " workspace: " + e.err_msg;
      if (size_t(ws) > workspace_n_) {
        if (workspace_) check(cudaFree(workspace_), "cudaFree");
        workspace_ = nullptr;
        workspace_n_ = 0;
        workspace_ = device_alloc(size_t(ws), "cuDNN attention workspace");
        workspace_n_ = size_t(ws);
      }
      cache.emplace(s, std::move(g));
      return "";
    } catch (const std::exception& x) {  // the frontend throws for a symbol libcudnn lacks
      return std::string("cuDNN ") + pass + " graph: " + x.what();
    }
  }

  void run(Cache& cache, const SdpaShape& s, std::unordered_map<int64_t, void*>& pack,
           const char* pass) {
    auto it = cache.find(s);
    if (it == cache.end()) {
      const std::string why = prepare(s, &cache == &bwd_);
      TDA_CHECK(why.empty(), "cuda: cuDNN attention " + std::string(pass) + ": " + why);
      it = cache.find(s);
    }
    TDA_CHECK(fe::detail::set_stream(handle_, stream()) == CUDNN_STATUS_SUCCESS,
              "cuda: cuDNN attention: cudnnSetStream failed");
    const fe::error_t e = it->second->execute(handle_, pack, workspace_);
    TDA_CHECK(e.is_good(), "cuda: cuDNN attention " + std::string(pass) + ": " + e.err_msg);
    check(cudaGetLastError(), "cuDNN attention");
  }

  cudnnHandle_t handle_;
  size_t version_;
  Cache fwd_, bwd_;
  std::map<std::pair<SdpaShape, bool>, std::string> refused_;
  void* workspace_ = nullptr;
  size_t workspace_n_ = 0;
};

std::unique_ptr<SdpaPrimitive> make_cudnn_sdpa(std::string* why) {
  if (!fe::cudnn_dlhandle) {
    std::string tried;
    fe::cudnn_dlhandle = open_libcudnn(&tried);
    if (!fe::cudnn_dlhandle) {
      *why = "libcudnn.so.9 not found (tried " + tried +
             "; set TDA_CUDNN_LIBRARY or LD_LIBRARY_PATH: docs/cuda.md)";
      return nullptr;
    }
  }
  // The frontend opens libcudart by name too: the one this binary runs on, not another major
  // that LD_LIBRARY_PATH may hold first (a CUDA 12 torch beside a CUDA 13 build).
  const std::string cudart = "libcudart.so." + std::to_string(CUDART_VERSION / 1000);
  setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", cudart.c_str(), /*overwrite=*/0);
  try {
    const size_t v = fe::detail::get_backend_version();
    if (v < 90000) {
      *why = "cuDNN " + version_text(v) + " is older than 9.0, the first with these graphs";
      return nullptr;
    }
    cudnnHandle_t h = nullptr;
    if (fe::detail::create_handle(&h) != CUDNN_STATUS_SUCCESS) {
      *why = "cudnnCreate failed (cuDNN " + version_text(v) + ")";
      return nullptr;
    }
    return std::make_unique<CudnnSdpa>(h, v);
  } catch (const std::exception& x) {
    *why = std::string("cuDNN does not load: ") + x.what();
    return nullptr;
  }
}

const bool registered = register_vendor_sdpa(make_cudnn_sdpa);
}  // namespace

}  // namespace tda::cuda
