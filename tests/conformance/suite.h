// The ONNX backend node-test suite as the conformance runner sees it: case
// discovery, the op a case is counted under, pre-checks that turn what Orrery
// cannot represent into skips, and running one case.
//
// Layout (onnx backend-test-tools / gen_suite.py):
//   DIR/<case>/model.onnx
//   DIR/<case>/test_data_set_<i>/input_<k>.pb, output_<k>.pb
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "base/status.h"
#include "tests/conformance/compare.h"

namespace orrery::conformance {

enum class Outcome { kPassed, kFailed, kSkipped };
std::string_view OutcomeName(Outcome outcome);

struct CaseInfo {
  std::string name;  // "test_conv_with_strides_padding"
  std::filesystem::path dir;
  std::vector<std::string> op_types;  // distinct node op types, in graph order
  std::string op;                     // the op the case is counted under
  bool expanded = false;              // a function-body expansion (*_expanded)
};

struct CaseResult {
  std::string name;
  std::string op;
  Outcome outcome = Outcome::kFailed;
  // Failure detail, or skip reason. `group` is the reason with node labels
  // removed so that equal causes group together in the report.
  std::string reason;
  std::string group;
  double seconds = 0;
  // The model imported an opset below Orrery's minimum and was run at the
  // minimum because every op's schema is the same there (see RunCase).
  bool opset_upgraded = false;
};

// Every case directory under `dir` (sorted by name), with op types read from
// the models. A model that cannot be read still yields a case (its run fails).
Result<std::vector<CaseInfo>> DiscoverCases(const std::filesystem::path& dir);

// The op a case is counted under: the node's op type for single-op cases;
// for "<base>_expanded" cases (a function body written out as primitive ops)
// the op of <base> (from `base_op`, empty if unknown) plus " (expanded)";
// otherwise the longest op type in `known_ops` whose name, lower-cased without
// '_', prefixes the case name the same way; else the case name stem.
std::string CaseOp(const std::string& name, const std::vector<std::string>& op_types,
                   const std::string& base_op, const std::vector<std::string>& known_ops);

// Strips node labels ("node 'x' (#0)", "node #3") from a message.
std::string GroupKey(const std::string& message);

// Runs one case in this thread: pre-checks (unregistered ops, non-tensor or
// unrepresentable dtypes, opset), compile, then every data set compared with
// CompareTensors. Errors whose message contains "unsupported" skip the case.
CaseResult RunCase(const CaseInfo& info, const Tolerance& tol);

}  // namespace orrery::conformance
