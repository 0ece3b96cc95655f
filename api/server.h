// The HTTP server: Boost.Beast on Boost.Asio, I/O threads for requests and a compute pool for
// handlers that fit models.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "api/service.h"

namespace tunebase::api {

/// Request headers larger than this are refused (413): no legitimate client needs more.
inline constexpr std::size_t kMaxHeaderBytes = 16 * 1024;

struct ServerOptions {
  std::string bind_address = "127.0.0.1";
  /// 0: an ephemeral port (Server::port() tells which).
  std::uint16_t port = 8080;
  std::size_t io_threads = 2;
  /// Threads that fit models and compute suggestions.
  std::size_t compute_threads = 2;
  /// Threads that answer questions to models (predictions, relevance, predicted best answers),
  /// apart from the compute threads: they need no token, and a flood of them held up every
  /// study's suggestions.
  std::size_t model_threads = 1;
  /// Questions to models waiting or being answered at most; one more is answered 503 with
  /// Retry-After at once (a client that asks again later does better than one whose question
  /// waits behind a hundred others).
  std::size_t max_model_questions = 16;
  /// Time allowed for the headers of a request once a connection waits for one; an idle
  /// keep-alive connection is closed after it, a client that sent part of a request gets 408.
  std::chrono::milliseconds header_timeout{10'000};
  /// Time allowed for the body after the headers (large uploads on slow links).
  std::chrono::milliseconds body_timeout{120'000};
  /// Time allowed to write a response to a client that reads slowly.
  std::chrono::milliseconds write_timeout{30'000};
  /// How often ended leases are expired (they are also checked when a study is asked for
  /// suggestions).
  std::chrono::milliseconds lease_check_interval{1'000};
  /// After a stop request, in-flight requests get this long before connections are cut.
  std::chrono::milliseconds shutdown_grace{10'000};
  /// Stop gracefully on SIGINT / SIGTERM (the `serve` command; tests leave it off).
  bool handle_signals = false;
};

/// Serves a Service over HTTP/1.1 with keep-alive.
class Server {
 public:
  /// Binds and listens at once: throws IoError naming the address when that fails, and
  /// InvalidInput for an address that cannot be parsed.
  Server(Service& service, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// The bound port (the ephemeral one when options.port was 0).
  std::uint16_t port() const;
  /// Starts the I/O and compute threads; returns at once.
  void start();
  /// Stops accepting, lets in-flight requests finish (up to shutdown_grace), closes idle
  /// connections. Safe to call from any thread, more than once.
  void stop();
  /// Blocks until the server has stopped and every thread has ended.
  void wait();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tunebase::api
