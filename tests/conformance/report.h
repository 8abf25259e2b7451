// Aggregation, gates and output formats (text, markdown, JSON) of the
// conformance runner.
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "tests/conformance/suite.h"

namespace orrery::conformance {

struct Counts {
  int passed = 0;
  int failed = 0;
  int skipped = 0;
  void Add(Outcome o);
};

Counts Total(const std::vector<CaseResult>& results);
std::map<std::string, Counts> ByOp(const std::vector<CaseResult>& results);

struct GateOptions {
  double min_pass_rate = 1.0;  // of passed / (passed + failed)
  bool require_op_pass = false;
};

struct GateResult {
  bool ok = true;
  std::vector<std::string> errors;    // why the run fails its gates
  std::vector<std::string> warnings;  // reported, not fatal
};

// --min-pass-rate: passed / (passed + failed) >= min_pass_rate (vacuously
// true when nothing ran). --require-op-pass: every registered op that has
// cases (counted under its own name, not expansions) passes at least one;
// a registered op with no case at all is only a warning.
GateResult CheckGates(const std::vector<CaseResult>& results,
                      const std::vector<std::string>& registered_ops, const GateOptions& opt);

// Per-op lines, failed cases and skips grouped by reason. The caller ends
// with SummaryLine.
void PrintText(std::ostream& os, const std::vector<CaseResult>& results);
// The per-op table, failed cases and summary line as markdown (docs/conformance.md).
void PrintMarkdown(std::ostream& os, const std::vector<CaseResult>& results,
                   const std::vector<std::string>& registered_ops);
void PrintJson(std::ostream& os, const std::vector<CaseResult>& results, const GateResult& gates);

// "N passed, N failed, N skipped".
std::string SummaryLine(const Counts& c);
std::string JsonEscape(std::string_view s);

}  // namespace orrery::conformance
