#include "api/metrics_http.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "tests/common/http_client.h"

namespace orrery {
namespace {

std::string Fetch(const std::string& address, const std::string& request) {
  const std::string out = testing::HttpExchange(address, request);
  EXPECT_FALSE(out.empty()) << "no response from " << address;
  return out;
}

TEST(MetricsHttpTest, ServesMetricsHealthAndErrors) {
  std::atomic<int> renders{0};
  auto server = MetricsHttpServer::Start("127.0.0.1:0", [&renders] {
    ++renders;
    return std::string("orrery_up 1\n");
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string addr = (*server)->address();
  EXPECT_EQ(addr.rfind("127.0.0.1:", 0), 0u) << addr;

  const std::string m = Fetch(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(m.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << m;
  EXPECT_NE(m.find("text/plain; version=0.0.4"), std::string::npos);
  EXPECT_NE(m.find("\r\n\r\norrery_up 1\n"), std::string::npos) << m;
  EXPECT_EQ(renders.load(), 1);

  EXPECT_EQ(Fetch(addr, "GET /healthz HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200 OK", 0), 0u);
  EXPECT_EQ(Fetch(addr, "GET /nope HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(Fetch(addr, "POST /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 405", 0), 0u);
  EXPECT_EQ(Fetch(addr, "garbage\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
  EXPECT_EQ(renders.load(), 1);  // only /metrics renders
}

TEST(MetricsHttpTest, BadAddressesAreInvalidArgument) {
  for (const char* bad : {"nocolon", "127.0.0.1:notaport", "127.0.0.1:70000", "not.an.ip:1"}) {
    auto s = MetricsHttpServer::Start(bad, [] { return std::string(); });
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(MetricsHttpTest, APortInUseIsUnavailable) {
  auto first = MetricsHttpServer::Start("127.0.0.1:0", [] { return std::string(); });
  ASSERT_TRUE(first.ok());
  auto second = MetricsHttpServer::Start((*first)->address(), [] { return std::string(); });
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace orrery
