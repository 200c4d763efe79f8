#include "eval/passkey_answerer.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace tda {

namespace {
// True once the text holds a digit followed by a non-digit: the number is complete.
bool number_complete(const std::string& s) {
  const size_t i = s.find_first_of("0123456789");
  if (i == std::string::npos) return false;
  return s.find_first_not_of("0123456789", i) != std::string::npos;
}
}  // namespace

std::vector<std::string> GreedyPasskeyAnswerer::answer(const PasskeyTrial& t) {
  std::vector<std::string> out;
  for (const std::string& prompt : t.prompts) {
    const std::vector<int32_t> ids = tok_.encode(prompt, false);
    TDA_CHECK(int(ids.size()) + max_new_ <= gen_.max_context(),
              "passkey: prompt of " + std::to_string(ids.size()) + " tokens + " +
                  std::to_string(max_new_) + " new exceeds --max-context " +
                  std::to_string(gen_.max_context()));
    // Keep the cached prefix shared with this prompt (at least one token is re-run for logits).
    const std::vector<int32_t>& cached = gen_.tokens();
    size_t common = 0;
    while (common < cached.size() && common < ids.size() && cached[common] == ids[common]) ++common;
    common = std::min(common, ids.size() - 1);
    gen_.truncate(int(common));
    reused_ += long(common);
    gen_.append(ids.data() + common, int(ids.size() - common));
    GenerateOptions o;  // greedy
    o.max_new_tokens = max_new_;
    o.stop_when = [&](const std::vector<int32_t>& g) { return number_complete(tok_.decode(g)); };
    out.push_back(tok_.decode(decode(gen_, o)));
  }
  return out;
}

}  // namespace tda
