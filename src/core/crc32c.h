// CRC32C (Castagnoli, the iSCSI/ext4/RocksDB checksum): the integrity check of every tensor in
// a checkpoint (core/safetensors.h). Uses the SSE4.2 crc32 instruction where the CPU has it, a
// portable slicing-by-8 table otherwise; both give the same value.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tda {

// crc32c(data, n) of a whole buffer; `crc` continues a previous call's result over more bytes.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
// The table version alone (tests compare the two paths).
uint32_t crc32c_portable(const void* data, size_t n, uint32_t crc = 0);

}  // namespace tda
