// Checkpoint integrity: a CRC32C per tensor in the safetensors metadata (standard files, still
// loadable by the safetensors library), verified on every load; flipped bytes are an error naming
// the tensor, and `--resume auto` falls back past a corrupt newest checkpoint without deleting it.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/crc32c.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "test_run_util.h"
#include "train/checkpoint.h"

using namespace tda;
namespace fs = std::filesystem;

namespace {
void write_bytes(const std::string& p, const std::vector<char>& b) {
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(b.data(), long(b.size()));
}

// Flips one bit of the last byte: inside the last tensor's data.
void flip_last_byte(const std::string& path) {
  auto b = read_file_bytes(path);
  b.back() = char(b.back() ^ 0x10);
  write_bytes(path, b);
}

// The same file as an older tda wrote it: no checksums in the metadata.
void strip_checksums(const std::string& path) {
  auto b = read_file_bytes(path);
  uint64_t hlen = 0;
  for (int i = 0; i < 8; ++i) hlen |= uint64_t(uint8_t(b[size_t(i)])) << (8 * i);
  auto h = nlohmann::json::parse(std::string(b.data() + 8, hlen));
  nlohmann::json meta = nlohmann::json::object();
  for (auto it = h["__metadata__"].begin(); it != h["__metadata__"].end(); ++it)
    if (it.key().rfind("crc32c.", 0) != 0) meta[it.key()] = it.value();
  h["__metadata__"] = meta;
  std::string hs = h.dump();
  while (hs.size() % 8) hs += ' ';
  std::vector<char> out(8);
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((uint64_t(hs.size()) >> (8 * i)) & 0xff);
  out.insert(out.end(), hs.begin(), hs.end());
  out.insert(out.end(), b.begin() + long(8 + hlen), b.end());
  write_bytes(path, out);
}
}  // namespace

TEST_CASE("crc32c: standard check values and the instruction path equals the table",
          "[checkpoint]") {
  // RFC 3720 (iSCSI) B.4 test vectors and the CRC catalogue's check value.
  const std::string digits = "123456789";
  CHECK(crc32c(digits.data(), digits.size()) == 0xE3069283u);
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xff), inc(32);
  for (int i = 0; i < 32; ++i) inc[size_t(i)] = uint8_t(i);
  CHECK(crc32c(zeros.data(), 32) == 0x8A9136AAu);
  CHECK(crc32c(ones.data(), 32) == 0x62A8AB43u);
  CHECK(crc32c(inc.data(), 32) == 0x46DD794Eu);
  Rng rng(5);
  std::vector<uint8_t> buf(4099);
  for (auto& x : buf) x = uint8_t(rng.next_u64());
  for (size_t off : {0, 1, 3, 7}) {
    for (size_t n : {0, 1, 7, 8, 9, 63, 4000}) {
      INFO(off << " " << n);
      CHECK(crc32c(buf.data() + off, n) == crc32c_portable(buf.data() + off, n));
      // Continuing a CRC over a split buffer equals one pass.
      CHECK(crc32c(buf.data() + off + n / 2, n - n / 2, crc32c(buf.data() + off, n / 2)) ==
            crc32c(buf.data() + off, n));
    }
  }
}

TEST_CASE("safetensors: per-tensor checksums in __metadata__ verified on read", "[checkpoint]") {
  TempDir d;
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {7, 8};
  const std::string f = d.path + "/t.safetensors";
  write_safetensors(f, {{"a", {2, 3}, a.data()}, {"b", {2}, b.data()}}, {{"format", "pt"}});
  {
    SafetensorsFile sf(f);
    CHECK(sf.checksummed());
    CHECK(sf.metadata().at("format") == "pt");
    CHECK(sf.metadata().at("crc32c.a").size() == 8);
    std::vector<float> out(6);
    sf.read_into("a", {2, 3}, out.data());
    CHECK(out == a);
  }
  flip_last_byte(f);  // inside tensor b
  SafetensorsFile bad(f);
  std::vector<float> out(6);
  CHECK_NOTHROW(bad.read_into("a", {2, 3}, out.data()));  // a is intact
  CHECK_THROWS_AS(bad.read_into("b", {2}, out.data()), CorruptFile);
  CHECK_THROWS_WITH(bad.read_into("b", {2}, out.data()),
                    Catch::Contains(f + ": tensor 'b' fails its CRC32C check"));
  CHECK_THROWS_AS(bad.verify_all(), CorruptFile);
  // Without checksums (an older writer) the same bytes load: nothing to verify against.
  strip_checksums(f);
  SafetensorsFile old(f);
  CHECK_FALSE(old.checksummed());
  CHECK_NOTHROW(old.read_into("b", {2}, out.data()));
  // A truncated file is corrupt too.
  auto bytes = read_file_bytes(f);
  bytes.resize(bytes.size() - 4);
  write_bytes(f, bytes);
  CHECK_THROWS_AS(SafetensorsFile(f), CorruptFile);
}

TEST_CASE("checkpoint files stay standard: the safetensors library loads them", "[checkpoint]") {
  const std::string py = source_dir() + "/.venv/bin/python";
  if (std::system((py + " -c 'import safetensors.numpy' >/dev/null 2>&1").c_str()) != 0) {
    WARN("skipped: the venv's python has no safetensors");
    return;
  }
  TempDir d;
  std::vector<float> a = {1.5f, -2.f, 3.25f};
  const std::string f = d.path + "/t.safetensors";
  write_safetensors(f, {{"w", {3}, a.data()}}, {{"format", "pt"}});
  const std::string script =
      "import sys\nfrom safetensors import safe_open\nfrom safetensors.numpy import load_file\n"
      "w = load_file(sys.argv[1])['w']\n"
      "m = safe_open(sys.argv[1], 'np').metadata()\n"
      "assert list(w) == [1.5, -2.0, 3.25], w\n"
      "assert m['format'] == 'pt' and len(m['crc32c.w']) == 8, m\n";
  write_text(d.path + "/check.py", script);
  std::string out;
  FILE* p = ::popen((py + " " + d.path + "/check.py " + f + " 2>&1").c_str(), "r");
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  INFO(out);
  CHECK(::pclose(p) == 0);
}

TEST_CASE("corrupt checkpoints: load fails naming the tensor and --resume auto falls back",
          "[checkpoint][badinput]") {
  TempDir d;
  const auto data = byte_corpus(d.path);
  const std::string run = d.path + "/run";
  auto train = [&](const std::vector<std::string>& extra, std::string* out) {
    std::vector<std::string> args = {"train",
                                     "--config",
                                     source_dir() + "/configs/tiny/softmax.json",
                                     "--out",
                                     run,
                                     "--set",
                                     "train.val_every=0",
                                     "--set",
                                     "train.checkpoint_every=1",
                                     "--set",
                                     "train.keep_checkpoints=3"};
    args.insert(args.end(), data.begin(), data.end());
    args.insert(args.end(), extra.begin(), extra.end());
    TdaProcess p(args, d.path + "/log.txt");
    REQUIRE(p.wait_for(120));
    *out = p.output();
    return p.done && WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
  };
  std::string out;
  REQUIRE(train({"--steps", "3"}, &out) == 0);
  const std::string ck = run + "/checkpoints/";
  flip_last_byte(ck + "step_00000003/model.safetensors");
  const auto corrupt_bytes = read_file_bytes(ck + "step_00000003/model.safetensors");

  // Sampling from it fails with one line naming file and tensor (it printed garbage, exit 0).
  int rc = run_tda("sample --checkpoint " + ck + "step_00000003 --tokens 2", &out);
  INFO(out);
  CHECK(rc != 0);
  CHECK(
      out.find("step_00000003/model.safetensors: tensor 'lm_head.weight' fails its CRC32C check") !=
      std::string::npos);
  // So does an explicit --resume of it.
  CHECK(train({"--steps", "4", "--resume", ck + "step_00000003"}, &out) != 0);
  CHECK(out.find("fails its CRC32C check") != std::string::npos);

  // --resume auto: a loud warning naming it, resume from step 2, the corrupt one kept aside.
  REQUIRE(train({"--steps", "4", "--resume", "auto"}, &out) == 0);
  CHECK(out.find("CORRUPT CHECKPOINT " + ck + "step_00000003") != std::string::npos);
  CHECK(out.find("resumed from " + ck + "step_00000002 at step 2") != std::string::npos);
  REQUIRE(fs::exists(ck + "step_00000003.corrupt/model.safetensors"));
  CHECK(read_file_bytes(ck + "step_00000003.corrupt/model.safetensors") == corrupt_bytes);
  CHECK(read_checkpoint_state(latest_checkpoint(run)).step == 4);  // the rerun wrote 3 and 4 anew
  CHECK(fs::exists(ck + "step_00000003/state.json"));

  // A checkpoint written before checksums existed still resumes, with a note.
  strip_checksums(ck + "step_00000004/model.safetensors");
  strip_checksums(ck + "step_00000004/optimizer.safetensors");
  REQUIRE(train({"--steps", "5", "--resume", "auto"}, &out) == 0);
  CHECK(out.find("step_00000004/model.safetensors: no checksums") != std::string::npos);
  CHECK(out.find("resumed from " + ck + "step_00000004") != std::string::npos);
}
