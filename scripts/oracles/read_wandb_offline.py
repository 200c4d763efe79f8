#!/usr/bin/env python3
"""Oracle for tests/test_tensorboard.cpp's W&B test: reads the offline runs that
scripts/wandb_follow.py left in RUN_DIR/wandb (WANDB_MODE=offline) from W&B's own record files
(run-<id>.wandb: a LevelDB-style log of wandb_internal_pb2.Record) and prints one JSON object:
  {"history": [{key: value, ...}, ...], "config": {...}, "run_ids": [...]}
history rows in the order logged, without W&B's own keys (_step, _runtime, _timestamp).

usage: read_wandb_offline.py RUN_DIR
Exit code 3 when wandb is not importable (the test skips).
"""
import glob
import json
import os
import struct
import sys

try:
    from wandb.proto import wandb_internal_pb2
except ImportError:
    sys.exit(3)

BLOCK = 32768  # the log's block size; a record header is 7 bytes: crc32, length, type


def payloads(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b":W&B", path + ": not a W&B record file"
    pos, pending = 7, b""
    while pos + 7 <= len(data):
        room = BLOCK - pos % BLOCK
        if room < 7:  # a block's tail too short for a header is padding
            pos += room
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0:  # zeros: padding to the end of the block
            pos += room
            continue
        chunk = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == 1:  # full
            yield chunk
        elif kind == 2:  # first
            pending = chunk
        elif kind == 3:  # middle
            pending += chunk
        elif kind == 4:  # last
            yield pending + chunk


def main():
    out = {"history": [], "config": {}, "run_ids": []}
    files = glob.glob(os.path.join(sys.argv[1], "wandb", "offline-run-*", "run-*.wandb"))
    for path in sorted(files, key=os.path.getmtime):
        for payload in payloads(path):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(payload)
            kind = record.WhichOneof("record_type")
            if kind == "run":
                out["run_ids"].append(record.run.run_id)
                for item in record.run.config.update:
                    out["config"][item.key] = json.loads(item.value_json)
            elif kind == "history":
                row = {}
                for item in record.history.item:
                    key = item.key or "/".join(item.nested_key)
                    if not key.startswith("_"):
                        row[key] = json.loads(item.value_json)
                out["history"].append(row)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
