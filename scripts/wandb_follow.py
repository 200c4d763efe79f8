#!/usr/bin/env python3
"""Follows a tda run's metrics.jsonl and logs it to Weights & Biases (docs/tracking.md).

Every record as `tda train` writes it becomes one wandb.log call: each number as
"<type>/<key>" (train/loss, val/val_loss, ...; objects flattened as "<type>/<key>/<subkey>"),
against the custom x-axis "tda_step" (the record's step); a record's "text" (samples) as a
one-row table "<type>/text". The run's config.json is the W&B config.

Like `tail -f`: it reads what is there, then polls for more, and exits once the file has been
read to its end and no `tda train` holds the run directory (its lock, <run>/.train.lock).
--once reads what is there and exits. Resumable: <run>/wandb/tda_follow.json keeps the W&B
run id and the hashes of the lines already logged, so a second start continues the same W&B
run without logging a line twice. A resume of the training from an older checkpoint rewrites
metrics.jsonl (the superseded steps move to metrics.superseded.jsonl): the steps it trains again
are logged again, and W&B then shows both values at those steps.

usage: wandb_follow.py RUN_DIR [--project P] [--entity E] [--name N] [--once] [--poll S]
Needs `pip install wandb` (not installed by scripts/setup.sh); WANDB_MODE=offline logs to
<run>/wandb/ without an account (`wandb sync` uploads it later).
"""
import argparse
import fcntl
import hashlib
import json
import os
import struct
import sys
import time


def trainer_running(run_dir):
    """Whether a process holds <run>/.train.lock (train/run_dir.h): asked with F_GETLK, which
    takes no lock, so a trainer starting meanwhile is never refused because of us."""
    path = os.path.join(run_dir, ".train.lock")
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        # struct flock {short l_type, l_whence; off_t l_start, l_len; pid_t l_pid;} on Linux
        # x86_64 and aarch64 (32 bytes with padding).
        query = struct.pack("hhxxxxqqixxxx", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, query)
        return struct.unpack("hhxxxxqqixxxx", answer)[0] != fcntl.F_UNLCK
    except OSError:
        return False
    finally:
        os.close(fd)


def flatten(prefix, obj, out):
    for key, value in obj.items():
        tag = prefix + "/" + key
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            out[tag] = value
        elif isinstance(value, dict):
            flatten(tag, value, out)


class Follower:
    def __init__(self, run_dir, args, wandb):
        self.run_dir = run_dir
        self.metrics = os.path.join(run_dir, "metrics.jsonl")
        self.state_dir = os.path.join(run_dir, "wandb")
        self.state_path = os.path.join(self.state_dir, "tda_follow.json")
        self.wandb = wandb
        os.makedirs(self.state_dir, exist_ok=True)
        self.state = {"run_id": None, "seen": []}
        if os.path.exists(self.state_path):
            with open(self.state_path) as f:
                self.state = json.load(f)
        self.seen = set(self.state["seen"])
        config = {}
        config_path = os.path.join(run_dir, "config.json")
        if os.path.exists(config_path):
            with open(config_path) as f:
                config = json.load(f)
        self.run = wandb.init(project=args.project, entity=args.entity,
                              name=args.name or os.path.basename(os.path.abspath(run_dir)),
                              id=self.state["run_id"],
                              resume="allow", config=config, dir=run_dir)
        self.state["run_id"] = self.run.id
        self.run.define_metric("tda_step")
        self.types = set()
        self.inode = None
        self.offset = 0

    def save_state(self):
        self.state["seen"] = sorted(self.seen)
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.state, f)
        os.replace(tmp, self.state_path)

    def log(self, record):
        kind, step = record.get("type"), record.get("step")
        if not isinstance(kind, str) or not isinstance(step, int) or kind == "resume":
            return
        if kind not in self.types:
            self.types.add(kind)
            self.run.define_metric(kind + "/*", step_metric="tda_step")
        data = {}
        flatten(kind, {k: v for k, v in record.items() if k not in ("type", "step")}, data)
        if isinstance(record.get("text"), str):
            data[kind + "/text"] = self.wandb.Table(columns=["step", "text"],
                                                    data=[[step, record["text"]]])
        if data:
            data["tda_step"] = step
            self.run.log(data)

    def poll(self):
        """Logs the complete lines not logged yet; returns how many."""
        try:
            st = os.stat(self.metrics)
        except FileNotFoundError:
            return 0
        # A resume replaces the file (a new inode, possibly shorter): read it again from the
        # start; the lines already logged are skipped by their hashes.
        if st.st_ino != self.inode or st.st_size < self.offset:
            self.inode, self.offset = st.st_ino, 0
        with open(self.metrics, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a line still being written waits for the next poll
        n = 0
        for line in data[:end].splitlines():
            digest = hashlib.sha1(line).hexdigest()[:16]
            if not line.strip() or digest in self.seen:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line cut by a kill (metrics_log.h)
            if isinstance(record, dict):
                self.log(record)
            self.seen.add(digest)
            n += 1
        self.offset += end
        if n:
            self.save_state()
        return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--project", default="tda")
    ap.add_argument("--entity", default=None)
    ap.add_argument("--name", default=None, help="W&B run name (default: the run directory's)")
    ap.add_argument("--once", action="store_true", help="log what is there and exit")
    ap.add_argument("--poll", type=float, default=5.0, help="seconds between reads")
    args = ap.parse_args()
    if not os.path.isdir(args.run_dir):
        sys.exit(f"wandb_follow.py: {args.run_dir} is not a directory")
    try:
        import wandb
    except ImportError:
        sys.stderr.write("wandb_follow.py: wandb is not installed: pip install wandb\n")
        sys.exit(3)
    metrics = os.path.join(args.run_dir, "metrics.jsonl")
    # Started before the run: the W&B run begins with the first records (config.json is written
    # before them), so that its config is the run's.
    while not os.path.exists(metrics):
        if args.once:
            sys.exit(f"wandb_follow.py: {metrics} does not exist (no run there yet)")
        time.sleep(args.poll)
    follower = Follower(args.run_dir, args, wandb)
    try:
        while True:
            running = trainer_running(args.run_dir)  # before the read: no line is missed
            follower.poll()
            if args.once or not running:
                break
            time.sleep(args.poll)
    finally:
        follower.run.finish()


if __name__ == "__main__":
    main()
