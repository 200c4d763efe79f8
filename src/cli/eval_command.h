// `tda eval <name>` subcommands register themselves here (one file each, like top-level
// commands): eval.cpp dispatches `tda eval NAME ...` to the entry registered as NAME.
#pragma once
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command.h"
#include "eval/loaded_model.h"

namespace tda {

std::map<std::string, Command>& eval_commands();  // defined in eval.cpp

// An evaluation's result with what it evaluated (checkpoint, step, seq_len, attention kind,
// device, dtype) added: printed on stdout and, when `out` is not empty, written to that file
// (`who` names the command in the error when it cannot be written). Defined in eval.cpp.
void emit_eval_result(nlohmann::json result, const std::string& checkpoint, const LoadedModel& lm,
                      const EvalDevice& dev, const std::string& out, const std::string& who);

struct RegisterEvalCommand {
  RegisterEvalCommand(const std::string& name, const std::string& help,
                      std::function<int(int, char**)> fn) {
    eval_commands()[name] = Command{help, std::move(fn)};
  }
};

}  // namespace tda
