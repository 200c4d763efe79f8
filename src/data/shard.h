// llm.c token shards: a 256 x int32 header (magic 20240520, version 1, token count, rest 0)
// followed by `token count` uint16 tokens. Shards written by llm.c's scripts load unchanged.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tda {

constexpr int32_t kShardMagic = 20240520;
constexpr int32_t kShardVersion = 1;
constexpr size_t kShardHeaderBytes = 256 * sizeof(int32_t);

// Reads and validates a shard: magic, version, token count vs file size, every token < vocab.
// Errors name the file and the byte offset of the problem.
std::vector<uint16_t> read_shard(const std::string& path, int vocab_size);
// The same checks on a shard's bytes in memory; `path` only names it in messages.
std::vector<uint16_t> parse_shard(const char* data, size_t size, const std::string& path,
                                  int vocab_size);
// Checks magic, version and size against the header without reading the tokens; returns the
// token count. Cheap enough to run over every shard at start-up.
size_t read_shard_header(const std::string& path);
// Streams every shard once in constant memory: its header, then every token id < vocab_size.
// The first problem is the one-line error of read_shard (file and byte offset). `progress`, when
// set, is called after each chunk read with the bytes read so far and the total of all files.
void check_shards(const std::vector<std::string>& files, int vocab_size,
                  const std::function<void(uint64_t done, uint64_t total)>& progress = {});
void write_shard(const std::string& path, const uint16_t* tokens, size_t n);

}  // namespace tda
