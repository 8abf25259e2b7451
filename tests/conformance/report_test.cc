#include "tests/conformance/report.h"

#include <gtest/gtest.h>

#include <sstream>

#include "tests/conformance/suite.h"

namespace orrery::conformance {
namespace {

CaseResult R(std::string name, std::string op, Outcome o, std::string reason = "") {
  CaseResult r;
  r.name = std::move(name);
  r.op = std::move(op);
  r.outcome = o;
  r.group = reason;
  r.reason = std::move(reason);
  return r;
}

const std::vector<std::string> kKnown = {"ReduceSum", "ReduceSumSquare",         "Max",
                                         "MaxPool",   "SoftmaxCrossEntropyLoss", "Softmax"};

TEST(CaseOpTest, SingleNodeCasesUseTheNodeOpType) {
  EXPECT_EQ(CaseOp("test_basic_conv_with_padding", {"Conv"}, "", kKnown), "Conv");
}

TEST(CaseOpTest, ExpandedCasesUseTheBaseCaseOp) {
  EXPECT_EQ(
      CaseOp("test_sce_mean_expanded", {"Exp", "ReduceMean"}, "SoftmaxCrossEntropyLoss", kKnown),
      "SoftmaxCrossEntropyLoss (expanded)");
}

TEST(CaseOpTest, LongestKnownOpPrefixOtherwise) {
  EXPECT_EQ(CaseOp("test_reduce_sum_square_default_expanded", {"Mul", "ReduceSum"}, "", kKnown),
            "ReduceSumSquare (expanded)");
  EXPECT_EQ(CaseOp("test_maxpool_2d_expanded", {}, "", kKnown), "MaxPool (expanded)");
  EXPECT_EQ(CaseOp("test_unknown_thing", {"A", "B"}, "", kKnown), "unknown");
}

TEST(GroupKeyTest, StripsNodeLabels) {
  EXPECT_EQ(GroupKey("node #3 (Add): unsupported dtype uint8"),
            "node (Add): unsupported dtype uint8");
  EXPECT_EQ(GroupKey("shape inference: node 'n1' (#0) (Add): unsupported dtype uint8"),
            "shape inference: node (Add): unsupported dtype uint8");
  EXPECT_EQ(GroupKey("node x: unsupported op 'Foo'"), "node x: unsupported op 'Foo'");
  EXPECT_EQ(GroupKey("node #: x"), "node #: x");
}

TEST(GatesTest, PassRateCountsOnlyRunnableCases) {
  std::vector<CaseResult> rs;
  for (int i = 0; i < 49; ++i)
    rs.push_back(R(std::string("p").append(std::to_string(i)), "Add", Outcome::kPassed));
  rs.push_back(R("f", "Add", Outcome::kFailed, "bad"));
  for (int i = 0; i < 500; ++i)
    rs.push_back(R(std::string("s").append(std::to_string(i)), "X", Outcome::kSkipped));
  EXPECT_TRUE(CheckGates(rs, {}, GateOptions{0.98, false}).ok);  // 49/50
  GateResult g = CheckGates(rs, {}, GateOptions{0.99, false});
  EXPECT_FALSE(g.ok);
  ASSERT_EQ(g.errors.size(), 1u);
  EXPECT_NE(g.errors[0].find("49 of 50"), std::string::npos) << g.errors[0];
}

TEST(GatesTest, NothingRunnablePassesTheRateGate) {
  std::vector<CaseResult> rs = {R("s", "X", Outcome::kSkipped, "unsupported op X")};
  EXPECT_TRUE(CheckGates(rs, {}, GateOptions{1.0, false}).ok);
}

TEST(GatesTest, RegisteredOpWithCasesButNoPassFails) {
  std::vector<CaseResult> rs = {R("a", "Add", Outcome::kPassed),
                                R("c1", "Conv", Outcome::kFailed, "x"),
                                R("c2", "Conv", Outcome::kSkipped, "unsupported y"),
                                R("l", "LayerNorm (expanded)", Outcome::kPassed)};
  GateResult g = CheckGates(rs, {"Add", "Constant", "Conv"}, GateOptions{0, true});
  EXPECT_FALSE(g.ok);
  ASSERT_EQ(g.errors.size(), 1u);
  EXPECT_NE(g.errors[0].find("Conv"), std::string::npos);
  ASSERT_EQ(g.warnings.size(), 1u);  // Constant: no case of its own
  EXPECT_NE(g.warnings[0].find("Constant"), std::string::npos);
  // Without the flag only the rate matters.
  EXPECT_TRUE(CheckGates(rs, {"Add", "Constant", "Conv"}, GateOptions{0, false}).ok);
}

TEST(ReportTest, TextListsOpsFailuresAndSkipGroups) {
  std::vector<CaseResult> rs = {R("test_add", "Add", Outcome::kPassed),
                                R("test_conv", "Conv", Outcome::kFailed, "output 0: got 1"),
                                R("test_a", "A", Outcome::kSkipped, "unsupported op A"),
                                R("test_a2", "A", Outcome::kSkipped, "unsupported op A")};
  std::ostringstream os;
  PrintText(os, rs);
  const std::string s = os.str();
  EXPECT_NE(s.find("op Conv: 0 passed, 1 failed, 0 skipped\n"), std::string::npos) << s;
  EXPECT_NE(s.find("test_conv [Conv]: output 0: got 1"), std::string::npos) << s;
  EXPECT_NE(s.find("unsupported op A (2): test_a, test_a2"), std::string::npos) << s;
  EXPECT_EQ(SummaryLine(Total(rs)), "1 passed, 1 failed, 2 skipped");
}

TEST(ReportTest, MarkdownTableHasRegisteredOpsWithoutCases) {
  std::vector<CaseResult> rs = {R("test_add", "Add", Outcome::kPassed)};
  std::ostringstream os;
  PrintMarkdown(os, rs, {"Add", "Constant"});
  EXPECT_NE(os.str().find("| Add | yes | 1 | 0 | 0 |"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("| Constant | yes | 0 | 0 | 0 |"), std::string::npos) << os.str();
}

TEST(ReportTest, JsonEscapes) { EXPECT_EQ(JsonEscape("a\"b\\c\nd\x01"), "a\\\"b\\\\c\\nd\\u0001"); }

}  // namespace
}  // namespace orrery::conformance
