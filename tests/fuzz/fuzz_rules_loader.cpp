// libFuzzer target: the rules loader (libyaml, with the bounds of rules_loader.hpp) on
// arbitrary text. It must never crash or hang; a RuleSet it accepts must survive
// dump_rules_yaml -> load_rules_text to an equal set (the two dumps are compared, since a
// dump writes every field but Rule::line), and must compile with Pipeline::create: the
// loader promises that whatever loads, the pipeline accepts (with flow tables capped at
// kFuzzMaxFlows slots: see below).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "pipeline.hpp"
#include "rules_loader.hpp"

using namespace sluice;

namespace {

constexpr uint64_t kFuzzMaxFlows = 64;

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_rules_loader: %s\n%s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;  // the bounds are tested in tests/unit; keep executions fast
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Result<RuleSet> loaded = load_rules_text(text, "fuzz");
  if (!loaded.ok()) {
    if (loaded.error().message.empty()) fail("an error without a message", std::string(text));
    return 0;
  }
  const std::string dumped = dump_rules_yaml(loaded.value());
  Result<RuleSet> reloaded = load_rules_text(dumped, "dump");
  if (!reloaded.ok()) fail("the dump of an accepted set does not load", reloaded.error().message + "\n" + dumped);
  const std::string redumped = dump_rules_yaml(reloaded.value());
  if (redumped != dumped) fail("the dump does not load to an equal set", dumped + "\n---\n" + redumped);

  // Flow tables of at most kFuzzMaxFlows slots: the size of a table is not what create()
  // decides on (the memory budget is checked before it and tested in tests/unit), and a
  // max-flows of 2^28 would commit 8 GB on every run of that input. A fixed hash seed keeps
  // runs reproducible (0 draws one from std::random_device).
  RuleSet set = std::move(loaded).value();
  for (Rule& r : set.rules) r.max_flows = std::min(r.max_flows, kFuzzMaxFlows);
  PipelineOptions opts;
  opts.default_max_flows = kFuzzMaxFlows;
  opts.hash_seed = 1;
  auto pipeline = Pipeline::create(std::move(set), opts);
  if (!pipeline.ok()) fail("Pipeline::create refuses a set that loaded", pipeline.error().message + "\n" + dumped);
  return 0;
}
