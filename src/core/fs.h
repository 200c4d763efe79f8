// File helpers with the durability rules checkpoints need: write to a temp name, fsync,
// rename, fsync the directory. A crash or a full disk leaves the previous file intact.
#pragma once
#include <string>
#include <vector>

namespace tda {

std::vector<char> read_file_bytes(const std::string& path);
void write_file_durable(const std::string& path, const std::string& contents);
void fsync_dir(const std::string& dir);
// Sorted list of paths matching a shell glob; throws naming the pattern if none match.
std::vector<std::string> glob_paths(const std::string& pattern, const std::string& what);
bool path_exists(const std::string& path);
void make_dirs(const std::string& path);
void remove_tree(const std::string& path);

}  // namespace tda
