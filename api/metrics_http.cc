#include "api/metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace orrery {
namespace {

constexpr size_t kMaxRequestBytes = 8192;
constexpr int kReadTimeoutMs = 2000;

Status ParseListen(const std::string& listen, sockaddr_in* addr) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Status::InvalidArgument("metrics address '" + listen + "' is not HOST:PORT");
  }
  const std::string host = listen.substr(0, colon);
  const std::string port = listen.substr(colon + 1);
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 0 || p > 65535) {
    return Status::InvalidArgument("metrics address '" + listen + "' has a bad port");
  }
  std::memset(addr, 0, sizeof(*addr));
  addr->sin_family = AF_INET;
  addr->sin_port = htons(static_cast<uint16_t>(p));
  const std::string h = host == "localhost" ? "127.0.0.1" : host;
  if (inet_pton(AF_INET, h.c_str(), &addr->sin_addr) != 1) {
    return Status::InvalidArgument("metrics address '" + listen + "': host must be an IPv4 address");
  }
  return Status::Ok();
}

void WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the client went away
    off += static_cast<size_t>(n);
  }
}

std::string Response(int code, const char* reason, const std::string& content_type,
                     const std::string& body) {
  return "HTTP/1.1 " + std::to_string(code) + " " + reason + "\r\nContent-Type: " + content_type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
         body;
}

}  // namespace

Result<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(const std::string& listen,
                                                                     RenderFn render) {
  sockaddr_in addr;
  ORRERY_RETURN_IF_ERROR(ParseListen(listen, &addr));
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Unavailable(std::string("metrics socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 16) != 0) {
    const std::string err = std::strerror(errno);
    ::close(fd);
    return Status::Unavailable("cannot listen for metrics on " + listen + ": " + err);
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  char host[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &addr.sin_addr, host, sizeof(host));
  const int wake = ::eventfd(0, EFD_CLOEXEC);
  if (wake < 0) {
    ::close(fd);
    return Status::Unavailable(std::string("metrics eventfd: ") + std::strerror(errno));
  }
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(
      fd, wake, std::string(host) + ":" + std::to_string(ntohs(addr.sin_port)), std::move(render)));
}

MetricsHttpServer::MetricsHttpServer(int listen_fd, int wake_fd, std::string address,
                                     RenderFn render)
    : listen_fd_(listen_fd), wake_fd_(wake_fd), address_(std::move(address)),
      render_(std::move(render)) {
  thread_ = std::thread([this] { Serve(); });
}

MetricsHttpServer::~MetricsHttpServer() {
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(wake_fd_);
}

void MetricsHttpServer::Serve() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int conn = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    HandleConnection(conn);
    ::close(conn);
  }
}

void MetricsHttpServer::HandleConnection(int fd) {
  timeval tv{kReadTimeoutMs / 1000, (kReadTimeoutMs % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string req;
  char buf[1024];
  while (req.find("\r\n\r\n") == std::string::npos && req.size() < kMaxRequestBytes) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    req.append(buf, static_cast<size_t>(n));
  }
  const size_t line_end = req.find("\r\n");
  const std::string line = req.substr(0, line_end);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
  if (line_end == std::string::npos || sp2 == std::string::npos) {
    WriteAll(fd, Response(400, "Bad Request", "text/plain", "bad request\n"));
    return;
  }
  const std::string method = line.substr(0, sp1);
  std::string path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  path = path.substr(0, path.find('?'));
  if (method != "GET") {
    WriteAll(fd, Response(405, "Method Not Allowed", "text/plain", "only GET\n"));
  } else if (path == "/metrics") {
    WriteAll(fd, Response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", render_()));
  } else if (path == "/healthz") {
    WriteAll(fd, Response(200, "OK", "text/plain", "ok\n"));
  } else {
    WriteAll(fd, Response(404, "Not Found", "text/plain", "try /metrics\n"));
  }
}

}  // namespace orrery
