#include "api/metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>

namespace orrery {
namespace {

// One HTTP exchange over a fresh connection; returns the whole response.
std::string Fetch(const std::string& address, const std::string& request) {
  const size_t colon = address.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(::send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
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
