// metrics.jsonl of a run directory: one JSON object per line, each with "type" (train, val,
// eval, checkpoint, sample, event, resume) and "step" (optimizer steps completed when it was
// written).
//
// A resumed run replays the steps after its checkpoint. So that the file holds each step once,
// in order, resuming from step N first moves the records that the checkpoint does not hold to
// metrics.superseded.jsonl (kept, never deleted): every record with step > N, the validation
// and the zero-shot evaluation at N (the resumed run evaluates them again, first thing), and lines
// that are not JSON objects (a line cut short by a kill). Then
// {"type":"resume","step":N,"checkpoint":DIR, "superseded":K} is appended and the new records
// follow it.
#pragma once
#include <cstdio>
#include <string>

namespace tda {

// Opens <out_dir>/metrics.jsonl for appending. resumed_step < 0: a fresh run (the file starts
// empty). Otherwise does the above and returns the file positioned after the resume record.
// Throws naming the file if it cannot be written.
FILE* open_metrics(const std::string& out_dir, int resumed_step, const std::string& checkpoint);

}  // namespace tda
