// Which GPUs a sweep's children get (docs/sweeps.md, "GPUs"). Slot k of --parallel K owns an
// equal share of the node's GPUs; its training run uses the first --gpus of them (all of them
// implicitly when K is 1, as before), and its evaluations run one per GPU of the share at once,
// so that a node's GPUs do not idle while a run's dozen evaluations go one after another.
#pragma once
#include <string>
#include <vector>

namespace tda {

// The node's GPUs as CUDA_VISIBLE_DEVICES entries: the sweep's own CUDA_VISIBLE_DEVICES list
// (so `CUDA_VISIBLE_DEVICES=4,5 tda sweep` keeps to those two), else one per GPU the NVIDIA
// driver lists (/proc/driver/nvidia/gpus), else none (a CPU-only machine). TDA_SWEEP_GPUS=N
// stands for N GPUs (0..N-1, or the first N of CUDA_VISIBLE_DEVICES): the scheduling is tested
// without GPUs through it.
std::vector<std::string> node_gpus();

// The GPUs of `slot` of `parallel` on a node with `node`: max(gpus_per_run, 1, |node|/parallel)
// of them from slot * that, wrapping around when the slots ask for more than the node has. Empty
// when the node has none.
std::vector<std::string> slot_gpus(const std::vector<std::string>& node, int slot, int parallel,
                                   int gpus_per_run);

// "a,b,c", as CUDA_VISIBLE_DEVICES takes it.
std::string join_gpus(const std::vector<std::string>& gpus);

}  // namespace tda
