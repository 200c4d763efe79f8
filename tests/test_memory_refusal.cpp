// Memory refused before it is taken: an impossible size typed by a user (a context, a length, a
// batch) or read from a hand-edited state.json is one line naming the option and the bytes, not
// an allocation that the OOM killer ends (rc 137, the whole node under memory pressure) nor a
// std::bad_alloc naming nothing. Run under `ulimit -v`, so that a regression here fails with
// bad_alloc instead of taking the machine's memory.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "core/fs.h"
#include "data/shard.h"
#include "test_eval_util.h"
#include "test_util.h"

using namespace tda;

TEST_CASE("memory: impossible sizes are refused naming the option and the bytes, under ulimit -v",
          "[eval][badinput][memory]") {
#if defined(__SANITIZE_ADDRESS__)
  TDA_SKIP(
      "ulimit -v cannot hold an AddressSanitizer build (its shadow memory is terabytes of "
      "address space)");
#else
  TempDir dir;
  const std::string ck = dir.path + "/ck";
  write_tiny_checkpoint(ck, "softmax", 32, {}, 300, /*small_vocab=*/false);
  std::vector<uint16_t> toks(200000);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = uint16_t(i % 200);
  write_shard(dir.path + "/toks.bin", toks.data(), toks.size());
  write_text(dir.path + "/qasper.jsonl",
             R"({"id": "a", "pid": "a", "input": "Q?\n\nContext.", "output": "yes"})"
             "\n");
  // A checkpoint whose state.json says the vocabulary is a billion tokens (512 GiB of weights).
  const std::string big = dir.path + "/big";
  std::filesystem::copy(ck, big);
  {
    const auto b = read_file_bytes(big + "/state.json");
    json st = json::parse(std::string(b.begin(), b.end()));
    st["config"]["model"]["vocab_size"] = 999999872;
    write_text(big + "/state.json", st.dump());
  }
  const std::vector<std::pair<std::string, std::string> > cases = {
      {"sample --checkpoint " + ck + " --max-context 100000000 --tokens 1",
       "sample: --max-context 100000000 needs "},
      {"eval passkey --checkpoint " + ck + " --lengths 100000000 --trials 1 --quiet",
       "eval passkey: --lengths 100000000 (a context of 100000016 tokens) needs "},
      {"eval passkey --checkpoint " + ck + " --lengths 500 --max-context 100000000 --quiet",
       "eval passkey: --max-context 100000000 needs "},
      {"eval longctx --checkpoint " + ck + " --task qasper --data " + dir.path +
           "/qasper.jsonl --max-context 100000000 --quiet",
       "eval longctx: --max-context 100000000 needs "},
      {"diag --checkpoint " + ck + " --tokens-file " + dir.path +
           "/toks.bin --T 200000 --max-context 200000",
       "diag: --T 200000 --max-context 200000 needs "},
      {"eval val --checkpoint " + ck + " --data " + dir.path + "/toks.bin --batch 100000000",
       "eval val: --batch 100000000 needs "},
      {"bench attention --kind softmax --lengths 400000000",
       "bench attention: --lengths "
       "400000000 (softmax) needs "},
      {"export --checkpoint " + big + " --out " + dir.path + "/hf",
       "checkpoint " + big +
           ": its model (model.n_layer 2, model.d_model 128, model.vocab_size 999999872 in "
           "state.json) needs "},
      {"sample --checkpoint " + big, "model.vocab_size 999999872 in state.json) needs "}};
  for (const auto& [args, what] : cases) {
    std::string out;
    // 4 GiB of address space: what a real run of these commands needs fits easily.
    const int rc = run_command("ulimit -v 4194304; " + std::string(TDA_BINARY) + " " + args, &out);
    INFO(args << "\n" << out);
    CHECK(rc == 1);
    const size_t named = out.find(what);
    REQUIRE(named != std::string::npos);
    const size_t at = out.rfind("error: ", named);
    REQUIRE(at != std::string::npos);
    const std::string line = out.substr(at, out.find('\n', at) - at);
    CHECK_THAT(line, Catch::Matches("error: .* needs [0-9.]+ GiB \\([0-9]+ bytes\\) of host "
                                    "memory; [0-9.]+ [GM]iB available \\((ulimit -v|MemAvailable|"
                                    "cgroup memory limit)\\)"));
    CHECK(out.find("bad_alloc") == std::string::npos);
  }
  CHECK(!std::filesystem::exists(dir.path + "/hf/model.safetensors"));
  // The control: sizes that fit run under the same limit.
  std::string out;
  CHECK(run_command("ulimit -v 4194304; " + std::string(TDA_BINARY) + " sample --checkpoint " + ck +
                        " --max-context 4096 --tokens 2 --prompt hi",
                    &out) == 0);
  INFO(out);
#endif
}
