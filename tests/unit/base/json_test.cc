#include "base/json.h"

#include <gtest/gtest.h>

namespace orrery {
namespace {

TEST(JsonQuoteTest, EscapesQuotesBackslashesAndControlChars) {
  EXPECT_EQ(JsonQuote("plain"), "\"plain\"");
  EXPECT_EQ(JsonQuote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonQuote(std::string("x\ny\x01", 4)), "\"x\\u000ay\\u0001\"");
  EXPECT_EQ(JsonQuote(""), "\"\"");
}

}  // namespace
}  // namespace orrery
