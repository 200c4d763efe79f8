#!/usr/bin/env python3
"""Oracle for tests/test_tensorboard.cpp: reads a run's TensorBoard directory (<run>/tb) with
TensorBoard's own loader (EventAccumulator, every event kept) and prints one JSON object:
  {"scalars": {tag: [[step, value], ...]}, "text": {tag: [[step, text], ...]}, "files": N}
scalars as TensorBoard holds them (float32), text as the text plugin's string tensor holds it.

usage: read_tensorboard.py TB_DIR
Exit code 3 when tensorboard is not importable (the test skips).
"""
import json
import os
import sys

try:
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.util import tensor_util
except ImportError:
    sys.exit(3)


def main():
    tb_dir = sys.argv[1]
    acc = event_accumulator.EventAccumulator(
        tb_dir, size_guidance={event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0})
    acc.Reload()
    tags = acc.Tags()
    out = {"scalars": {}, "text": {}, "files": 0}
    for tag in tags["scalars"]:
        out["scalars"][tag] = [[e.step, e.value] for e in acc.Scalars(tag)]
    for tag in tags["tensors"]:
        if acc.SummaryMetadata(tag).plugin_data.plugin_name != "text":
            continue
        out["text"][tag] = [[e.step, tensor_util.make_ndarray(e.tensor_proto).item().decode()]
                            for e in acc.Tensors(tag)]
    out["files"] = sum("tfevents" in name for name in os.listdir(tb_dir))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
