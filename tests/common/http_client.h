// One plain HTTP exchange over a fresh loopback connection, for tests of
// the metrics endpoint: sends `request` verbatim and returns everything the
// server wrote until it closed the connection ("" if it cannot connect).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace orrery::testing {

inline std::string HttpExchange(const std::string& address, const std::string& request) {
  const size_t colon = address.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return "";
  }
  (void)!::send(fd, request.data(), request.size(), 0);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

// The value of a Prometheus sample (`name` or `name{labels}`, written exactly
// as the endpoint prints it) scraped from http://address/metrics; -1 if absent.
inline double MetricSample(const std::string& address, const std::string& sample) {
  const std::string out = HttpExchange(address, "GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n");
  const std::string key = std::string("\n").append(sample).append(" ");
  const size_t at = out.find(key);
  return at == std::string::npos ? -1 : std::stod(out.substr(at + key.size()));
}

}  // namespace orrery::testing
