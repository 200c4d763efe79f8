#!/usr/bin/env python3
"""Oracle for tests/test_tensorboard.cpp: reads a run's TensorBoard directory (<run>/tb) with
the loader TensorBoard's Python backend uses (plugin_event_accumulator.EventAccumulator, every
event kept, restarts purged as TensorBoard purges them) and prints one JSON object:
  {"scalars": {tag: [[step, value], ...]}, "text": {tag: [[step, text], ...]}, "files": N}
scalars as TensorBoard holds them (float32), text as the text plugin's string tensor holds it.

usage: read_tensorboard.py TB_DIR
Exit code 3 when tensorboard is not importable (the test skips).
"""
import json
import logging
import os
import sys

try:
    from tensorboard.backend.event_processing import plugin_event_accumulator as pea
    from tensorboard.util import tb_logging, tensor_util
except ImportError:
    sys.exit(3)


def main():
    tb_dir = sys.argv[1]
    # The loader says when it purges a restart's superseded events, on stdout: not into the JSON.
    tb_logging.get_logger().setLevel(logging.ERROR)
    acc = pea.EventAccumulator(tb_dir, size_guidance={pea.TENSORS: 0})
    acc.Reload()
    out = {"scalars": {}, "text": {}, "files": 0}
    for tag in acc.Tags()["tensors"]:
        plugin = acc.SummaryMetadata(tag).plugin_data.plugin_name
        values = [[e.step, tensor_util.make_ndarray(e.tensor_proto).item()]
                  for e in acc.Tensors(tag)]
        if plugin == "scalars":
            out["scalars"][tag] = [[s, float(v)] for s, v in values]
        elif plugin == "text":
            out["text"][tag] = [[s, v.decode()] for s, v in values]
    out["files"] = sum("tfevents" in name for name in os.listdir(tb_dir))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
