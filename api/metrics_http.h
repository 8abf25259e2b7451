// A minimal HTTP/1.1 endpoint for Prometheus scrapes (`--metrics-listen`,
// default 127.0.0.1:8502): GET /metrics returns the registry rendered in
// the text exposition format, GET /healthz returns "ok", anything else 404
// (405 for other methods). One connection is served at a time, each with a
// read timeout, so a slow client delays scrapes but never blocks the server.
// Not a general web server: no keep-alive, no TLS, bind it to loopback or a
// trusted network.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/status.h"

namespace orrery {

class MetricsHttpServer {
 public:
  using RenderFn = std::function<std::string()>;

  // Binds `listen` ("HOST:PORT", port 0 picks one) and starts the serving
  // thread. INVALID_ARGUMENT for a malformed address, UNAVAILABLE when it
  // cannot be bound.
  static Result<std::unique_ptr<MetricsHttpServer>> Start(const std::string& listen,
                                                          RenderFn render);
  ~MetricsHttpServer();  // stops the thread, closes the socket

  // "HOST:PORT" with the port actually bound.
  const std::string& address() const { return address_; }

  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

 private:
  MetricsHttpServer(int listen_fd, int wake_fd, std::string address, RenderFn render);
  void Serve();
  void HandleConnection(int fd);

  int listen_fd_;
  int wake_fd_;  // eventfd: written by the destructor to stop Serve()
  std::string address_;
  RenderFn render_;
  std::thread thread_;
};

}  // namespace orrery
