#include "api/server.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <iterator>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "api/errors.h"

namespace tunebase::api {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using error_code = beast::error_code;

namespace {

// The Date header's form (RFC 9110 IMF-fixdate): "Tue, 24 Nov 2026 07:49:00 GMT".
std::string http_date(std::chrono::system_clock::time_point when) {
  static constexpr std::array<const char*, 7> kDays{"Sun", "Mon", "Tue", "Wed",
                                                    "Thu", "Fri", "Sat"};
  static constexpr std::array<const char*, 12> kMonths{"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::time_t t = std::chrono::system_clock::to_time_t(when);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[40];
  std::snprintf(text, sizeof text, "%s, %02d %s %04d %02d:%02d:%02d GMT", kDays[tm.tm_wday],
                tm.tm_mday, kMonths[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                tm.tm_sec);
  return text;
}

constexpr const char* kServerName = "tunebase/0.1";
// Niceness of compute threads relative to the I/O threads (0): 10 gives them about a tenth of
// the CPU share of an I/O thread when both want it.
constexpr int kComputeNiceness = 10;
// Writes committed together at most (one transaction; bounded so that one round stays short).
constexpr std::size_t kMaxWriteBatch = 512;
// After an error reply the rest of the request is read and dropped for at most this long before
// the connection closes, so that the client sees the reply rather than a reset.
constexpr auto kLingerTimeout = std::chrono::milliseconds(1000);
constexpr std::size_t kLingerBufferBytes = 64 * 1024;
// What a question to a model refused for a full queue is told to wait: most take under a second
// once the study's observations are read.
constexpr int kRetryAfterOverloadedSeconds = 1;

// Why a request's framing cannot be trusted, or nullopt when it can. A body is delimited by
// Content-Length or by chunked alone (RFC 9112 6.1): Beast ignores any other transfer coding
// (gzip, identity, "chunked, gzip") and would read the body as the next request, which a proxy
// in front that framed it otherwise would not see: request smuggling. HTTP/1.0 has no transfer
// codings at all.
std::optional<FieldError> framing_error(const http::request_header<>& header) {
  const auto fields = header.equal_range(http::field::transfer_encoding);
  if (fields.first == fields.second) return std::nullopt;
  std::vector<std::string> codings;
  for (auto field = fields.first; field != fields.second; ++field) {
    const std::string value(field->value());
    for (std::size_t start = 0; start <= value.size();) {
      auto end = value.find(',', start);
      if (end == std::string::npos) end = value.size();
      auto coding = value.substr(start, end - start);
      coding.erase(0, coding.find_first_not_of(" \t"));
      coding.erase(coding.find_last_not_of(" \t") + 1);
      if (!coding.empty()) codings.push_back(std::move(coding));  // "a, , b" lists two
      start = end + 1;
    }
  }
  std::string sent;
  for (const auto& c : codings) sent += (sent.empty() ? "" : ", ") + c;
  if (header.version() < 11) {
    return FieldError("Transfer-Encoding", "an HTTP/1.0 request has no Transfer-Encoding (got \"" +
                                               sent + "\"); send the body with Content-Length");
  }
  if (codings.size() != 1 || !beast::iequals(codings.front(), "chunked")) {
    return FieldError("Transfer-Encoding",
                      "Transfer-Encoding \"" + sent +
                          "\" is not supported: a request body is sent with Content-Length or "
                          "with Transfer-Encoding: chunked alone (an import's file may be "
                          "gzipped itself: a .json.gz body is read as such)");
  }
  return std::nullopt;
}

// Why a request's Host header is wrong (RFC 9112 3.2), or nullopt. HTTP/1.1 requires one; two
// leave a proxy and this server free to disagree on the target. HTTP/1.0 may go without.
std::optional<FieldError> host_error(const http::request_header<>& header) {
  const auto lines = header.equal_range(http::field::host);
  const auto hosts = std::distance(lines.first, lines.second);
  if (hosts > 1) {
    return FieldError("Host", "the request has " + std::to_string(hosts) +
                                  " Host header lines; send one (RFC 9112 3.2)");
  }
  if (hosts == 0 && header.version() >= 11) {
    return FieldError("Host",
                      "an HTTP/1.1 request needs a Host header (RFC 9112 3.2), such as "
                      "\"Host: localhost:8080\"; HTTP/1.0 requests may go without");
  }
  return std::nullopt;
}

}  // namespace

class Connection;

constexpr std::chrono::milliseconds kAcceptPause{100};
constexpr std::chrono::seconds kAcceptWarningInterval{10};

struct Server::Impl {
  Impl(Service& s, ServerOptions o)
      : service(s),
        options(std::move(o)),
        control(net::make_strand(ioc)),
        acceptor(control),
        accept_timer(control),
        compute_work(net::make_work_guard(compute)),
        models_work(net::make_work_guard(models)),
        lease_timer(control),
        signals(control) {}

  void listen();
  void accept();
  void schedule_lease_check();
  void begin_stop();
  void track(const std::shared_ptr<Connection>& c);

  /// A request waiting for the writer thread.
  struct PendingWrite {
    std::shared_ptr<Connection> connection;
    std::shared_ptr<Request> request;
    /// Keeps the I/O threads running until the reply is handed back (work guards cannot be
    /// move-assigned, so it lives on the heap).
    std::unique_ptr<net::executor_work_guard<beast::tcp_stream::executor_type>> guard;
  };
  void enqueue_write(PendingWrite write);
  void run_writer();
  void untrack(Connection* c);

  Service& service;
  ServerOptions options;
  // Declared before the io_context: connections destroyed with its pending handlers untrack
  // themselves here.
  std::mutex connections_mutex;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections;
  net::io_context ioc;
  // The acceptor, its timer, the lease timer and the signals are used from this strand only
  // (their handlers, and begin_stop's closing of them): Asio objects are not thread-safe.
  net::strand<net::io_context::executor_type> control;
  tcp::acceptor acceptor;
  // Accepting pauses after an error (out of file descriptors: accepting again at once would
  // spin), and its warnings are rate-limited.
  net::steady_timer accept_timer;
  std::chrono::steady_clock::time_point last_accept_warning;
  std::size_t accept_errors_unreported = 0;
  // The compute pool: its threads run below the I/O threads' priority, so that a model fit
  // on every core still leaves the I/O threads the CPU they need for quick requests.
  net::io_context compute;
  net::executor_work_guard<net::io_context::executor_type> compute_work;
  std::vector<std::thread> compute_threads;
  // The model pool (Runs::model), at the compute threads' priority, and how many questions it
  // has waiting or running (at most options.max_model_questions).
  net::io_context models;
  net::executor_work_guard<net::io_context::executor_type> models_work;
  std::vector<std::thread> model_threads;
  std::atomic<std::size_t> model_questions{0};

  // The writer thread commits queued writes together (see Runs::writer).
  std::mutex write_mutex;
  std::condition_variable write_cv;
  std::vector<PendingWrite> write_queue;
  bool writer_stop = false;
  std::thread writer;
  net::steady_timer lease_timer;
  net::signal_set signals;
  std::vector<std::thread> threads;
  std::atomic<bool> stopping{false};
  std::atomic<bool> started{false};
  std::uint16_t port = 0;

  // Ends the grace period early when every thread has returned.
  std::mutex done_mutex;
  std::condition_variable done_cv;
  bool done = false;
  std::thread watchdog;
  std::once_flag stop_once;
  std::once_flag join_once;
};

/// One client connection: reads requests one after another (keep-alive), hands each to the
/// Service (on the compute pool when the route needs it), writes the reply. Every handler runs
/// on the connection's strand.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using WorkGuard = net::executor_work_guard<beast::tcp_stream::executor_type>;

  Connection(tcp::socket socket, Server::Impl& server)
      : stream_(std::move(socket)), timer_(stream_.get_executor()), server_(server) {}

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_header(); });
  }

  /// Closes the connection if it is waiting for a request that has not begun (shutdown).
  void close_if_idle() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      if (self->waiting_for_request_ && self->buffer_.size() == 0 &&
          !(self->header_parser_ && self->header_parser_->got_some())) {
        self->close();
      }
    });
  }

  ~Connection() { server_.untrack(this); }

 private:
  // A deadline for the read in progress. A deadline that fires after its read completed (both
  // handlers queued at once) finds a newer deadline_ and does nothing.
  void arm_timer(std::chrono::milliseconds timeout) {
    timed_out_ = false;
    const auto id = ++deadline_;
    timer_.expires_after(timeout);
    timer_.async_wait([self = shared_from_this(), id](error_code ec) {
      if (ec || id != self->deadline_) return;  // cancelled, or the read finished in time
      self->timed_out_ = true;
      error_code ignored;
      self->stream_.socket().cancel(ignored);
    });
  }

  void read_header() {
    if (server_.stopping) return close();
    header_parser_.emplace();
    failed_route_ = std::nullopt;
    header_parser_->header_limit(kMaxHeaderBytes);
    // The route's own limit is applied once the target is known (see on_header).
    header_parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    waiting_for_request_ = true;
    stream_.expires_never();
    arm_timer(server_.options.header_timeout);
    http::async_read_header(
        stream_, buffer_, *header_parser_,
        [self = shared_from_this()](error_code ec, std::size_t) { self->on_header(ec); });
  }

  void on_header(error_code ec) {
    timer_.cancel();
    ++deadline_;
    waiting_for_request_ = false;
    const bool got_some = header_parser_->got_some() || buffer_.size() > 0;
    if (timed_out_) {
      if (!got_some) return close();  // an idle keep-alive connection
      return fail(std::make_exception_ptr(
          RequestTimeout("the request headers did not arrive within " +
                         std::to_string(server_.options.header_timeout.count()) + " ms")));
    }
    if (ec == http::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::connection_reset || ec == net::error::operation_aborted) {
      return close();
    }
    if (ec == http::error::body_limit) {
      return fail(std::make_exception_ptr(PayloadTooLarge("the request body is over the limit")));
    }
    if (ec == http::error::header_limit) {
      return fail(std::make_exception_ptr(PayloadTooLarge(
          "the request headers are over " + std::to_string(kMaxHeaderBytes) + " bytes",
          "headers")));
    }
    if (ec) {
      if (!got_some) return close();
      return fail(std::make_exception_ptr(
          FieldError("request", "malformed HTTP request: " + ec.message())));
    }
    const auto& header = header_parser_->get();
    target_ = std::string(header.target());
    const std::string method(header.method_string());
    const auto path = target_.substr(0, target_.find('?'));
    version_ = header.version();
    head_ = header.method() == http::verb::head;  // an early refusal has no body either
    // Before anything else: the end of a request whose framing is in doubt is not known, so the
    // connection closes after the refusal (its remaining bytes are drained, never read as a
    // request).
    if (auto error = framing_error(header)) return fail(std::make_exception_ptr(*error));
    if (auto error = host_error(header)) return fail(std::make_exception_ptr(*error));
    try {
      // Before the body: a client without a valid token does not get to send one.
      token_name_ = server_.service.authorize_headers(
          method, target_, std::string(header[http::field::authorization]));
    } catch (...) {
      return fail(std::current_exception());
    }
    // From here a refusal (a body over the route's limit, or too slow) counts under its route.
    failed_route_ = server_.service.router().find(method, path);
    const std::size_t limit = server_.service.router().body_limit(method, path);
    if (header_parser_->content_length() && *header_parser_->content_length() > limit) {
      return fail(std::make_exception_ptr(
          PayloadTooLarge("the request body (" + std::to_string(*header_parser_->content_length()) +
                          " bytes) is over the limit of " + method + " " + path + ": " +
                          std::to_string(limit) + " bytes")));
    }
    parser_.emplace(std::move(*header_parser_));
    header_parser_.reset();
    parser_->body_limit(limit);
    body_limit_ = limit;
    if (beast::iequals(parser_->get()[http::field::expect], "100-continue")) {
      auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_,
                                                                     parser_->get().version());
      stream_.expires_after(server_.options.write_timeout);
      http::async_write(stream_, *cont,
                        [self = shared_from_this(), cont](error_code ec2, std::size_t) {
                          if (ec2) return self->close();
                          self->read_body();
                        });
      return;
    }
    read_body();
  }

  void read_body() {
    stream_.expires_never();
    arm_timer(server_.options.body_timeout);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](error_code ec, std::size_t) { self->on_body(ec); });
  }

  void on_body(error_code ec) {
    timer_.cancel();
    ++deadline_;
    if (timed_out_) {
      return fail(std::make_exception_ptr(
          RequestTimeout("the request body did not arrive within " +
                         std::to_string(server_.options.body_timeout.count()) + " ms")));
    }
    if (ec == http::error::body_limit) {
      return fail(std::make_exception_ptr(PayloadTooLarge(
          "the request body is over the limit of this route: " + std::to_string(body_limit_) +
          " bytes")));
    }
    if (ec == http::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::connection_reset || ec == net::error::operation_aborted) {
      return close();
    }
    if (ec) {
      return fail(std::make_exception_ptr(
          FieldError("request", "malformed HTTP request: " + ec.message())));
    }
    auto message = parser_->release();
    parser_.reset();
    keep_alive_ = message.keep_alive();
    version_ = message.version();
    auto request = std::make_shared<Request>();
    // HEAD is GET without the body (RFC 9110): the router gives it the GET routes, and the
    // reply is sent with its headers only.
    head_ = message.method() == http::verb::head;
    request->method = std::string(message.method_string());
    request->authorization = std::string(message[http::field::authorization]);
    request->token_name = std::move(token_name_);
    request->content_type = std::string(message[http::field::content_type]);
    request->body = std::move(message.body());
    started_ = std::chrono::steady_clock::now();

    auto outcome = server_.service.handle(*request, target_, Runs::io);
    if (!outcome.defer_to) return respond(std::move(outcome));
    // The work guard keeps the I/O threads alive until the reply has been handed back.
    auto guard = std::make_unique<WorkGuard>(stream_.get_executor());
    if (*outcome.defer_to == Runs::writer) {
      server_.enqueue_write({shared_from_this(), request, std::move(guard)});
      return;
    }
    if (*outcome.defer_to == Runs::model) return ask_model(std::move(outcome), request);
    net::post(server_.compute,
              [self = shared_from_this(), request, guard = std::move(guard)]() mutable {
                auto result = self->server_.service.handle(*request, self->target_, Runs::compute);
                self->deliver(std::move(result), std::move(guard));
              });
  }

 public:
  /// Hands a reply made on another thread back to the connection's strand.
  void deliver(Outcome outcome, std::unique_ptr<WorkGuard> guard) {
    net::post(stream_.get_executor(),
              [self = shared_from_this(), outcome = std::move(outcome),
               guard = std::move(guard)]() mutable { self->respond(std::move(outcome)); });
  }

 private:
  void respond(Outcome outcome) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    server_.service.metrics().record_request(outcome.route, outcome.response.status, seconds);
    write(std::move(outcome.response), keep_alive_ && !server_.stopping);
  }

  /// Replies to a request that could not be read, then closes the connection (the rest of the
  /// request, if any, is not read).
  void fail(std::exception_ptr error) {
    Response response = Service::error_response(error);
    server_.service.metrics().record_request(
        failed_route_.value_or(server_.service.router().routes().size()), response.status, 0.0);
    linger_ = true;
    write(std::move(response), false);
  }

  template <class Body>
  std::shared_ptr<http::response<Body>> reply_header(const Response& response) const {
    auto res = std::make_shared<http::response<Body>>(static_cast<http::status>(response.status),
                                                      version_ ? version_ : 11);
    res->set(http::field::server, kServerName);
    res->set(http::field::date, http_date(std::chrono::system_clock::now()));
    res->set(http::field::content_type, response.content_type);
    for (const auto& [name, value] : response.headers) res->set(name, value);
    return res;
  }

  void write(Response response, bool keep_alive) {
    if (head_) return write_head(std::move(response), keep_alive);
    if (response.more) return write_stream(std::move(response), keep_alive);
    auto res = reply_header<http::string_body>(response);
    res->keep_alive(keep_alive);
    res->body() = std::move(response.body);
    res->prepare_payload();
    stream_.expires_after(server_.options.write_timeout);
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res, keep_alive](error_code ec, std::size_t) {
                        if (!ec && self->linger_) return self->linger();
                        if (ec || !keep_alive) return self->close();
                        self->read_header();
                      });
  }

  // Queues a question to a model on the model pool, or refuses it at once when the pool has
  // max_model_questions already.
  void ask_model(Outcome outcome, const std::shared_ptr<Request>& request) {
    auto& server = server_;
    if (server.model_questions.fetch_add(1) >= server.options.max_model_questions) {
      server.model_questions.fetch_sub(1);
      server.service.metrics().record_model_question_refused();
      outcome.response = Service::error_response(std::make_exception_ptr(Overloaded(
          std::to_string(server.options.max_model_questions) +
              " questions to models (predictions, relevance, predicted best answers) are "
              "waiting or being answered already; ask again after Retry-After",
          kRetryAfterOverloadedSeconds)));
      outcome.defer_to.reset();
      return respond(std::move(outcome));
    }
    server.service.metrics().record_model_questions(1);
    auto guard = std::make_unique<WorkGuard>(stream_.get_executor());
    net::post(server.models,
              [self = shared_from_this(), request, guard = std::move(guard)]() mutable {
                auto& s = self->server_;
                if (self->client_gone()) {
                  // Nobody would read the answer (a client that gave up, curl -m): the model
                  // is not asked, and the connection closes.
                  s.model_questions.fetch_sub(1);
                  s.service.metrics().record_model_questions(-1);
                  s.service.metrics().record_model_question_skipped();
                  net::post(self->stream_.get_executor(),
                            [self, guard = std::move(guard)] { self->close(); });
                  return;
                }
                auto result = s.service.handle(*request, self->target_, Runs::model);
                s.model_questions.fetch_sub(1);
                s.service.metrics().record_model_questions(-1);
                self->deliver(std::move(result), std::move(guard));
              });
  }

  // Whether the client closed the connection while its request waited: it sent its end of the
  // stream (or a reset) and nothing after it. Peeked without reading, from the pool thread
  // about to answer: the connection does nothing with its socket while a request is away. A
  // client that shut down only its sending side and still reads looks the same and is not
  // answered either; HTTP clients (curl, browsers, tunebase's own) keep theirs open until the
  // answer has come.
  bool client_gone() {
    char byte = 0;
    const auto n = ::recv(stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return false;  // a pipelined request: still there
    if (n == 0) return true;
    return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
  }

  // The headers GET would send, without its body: the length of a whole reply, or chunked for
  // a streamed one (whose pieces are not made).
  void write_head(Response response, bool keep_alive) {
    head_ = false;
    auto res = reply_header<http::string_body>(response);
    res->keep_alive(keep_alive);
    if (response.more) {
      res->chunked(true);
    } else {
      res->content_length(response.body.size());
    }
    auto serializer = std::make_shared<http::response_serializer<http::string_body>>(*res);
    stream_.expires_after(server_.options.write_timeout);
    http::async_write_header(
        stream_, *serializer,
        [self = shared_from_this(), res, serializer, keep_alive](error_code ec, std::size_t) {
          if (!ec && self->linger_) return self->linger();
          if (ec || !keep_alive) return self->close();
          self->read_header();
        });
  }

  // A reply made piece by piece (Response::more). HTTP/1.1 gets chunked transfer encoding;
  // HTTP/1.0 has none, so there the body ends when the connection closes. Each piece is made on
  // the compute pool (it reads the database) once the client has taken the one before, so at
  // most one piece per connection is in memory. A piece that cannot be made ends the reply
  // without its last chunk (or, in HTTP/1.0, early): clients see a truncated reply, not a
  // complete one.
  struct Streaming {
    std::function<bool(std::string&)> more;
    std::string piece;
    bool chunked = true;
    bool keep_alive = false;
  };

  void write_stream(Response response, bool keep_alive) {
    auto state = std::make_shared<Streaming>();
    state->more = std::move(response.more);
    state->piece = std::move(response.body);
    state->chunked = version_ >= 11;
    state->keep_alive = keep_alive && state->chunked;
    auto res = reply_header<http::empty_body>(response);
    res->keep_alive(state->keep_alive);
    if (state->chunked) res->chunked(true);
    auto serializer = std::make_shared<http::response_serializer<http::empty_body>>(*res);
    stream_.expires_after(server_.options.write_timeout);
    http::async_write_header(
        stream_, *serializer,
        [self = shared_from_this(), res, serializer, state](error_code ec, std::size_t) {
          if (ec) return self->close();
          self->write_piece(state);
        });
  }

  void write_piece(std::shared_ptr<Streaming> state) {
    if (state->piece.empty()) return make_piece(std::move(state));
    auto done = [self = shared_from_this(), state](error_code ec, std::size_t) {
      if (ec) return self->close();
      state->piece.clear();
      self->make_piece(state);
    };
    stream_.expires_after(server_.options.write_timeout);
    if (state->chunked) {
      net::async_write(stream_, http::make_chunk(net::buffer(state->piece)), std::move(done));
    } else {
      net::async_write(stream_, net::buffer(state->piece), std::move(done));
    }
  }

  void make_piece(std::shared_ptr<Streaming> state) {
    auto guard = std::make_unique<WorkGuard>(stream_.get_executor());
    net::post(server_.compute,
              [self = shared_from_this(), state, guard = std::move(guard)]() mutable {
                bool more = false;
                bool failed = false;
                try {
                  more = state->more(state->piece);
                } catch (const std::exception& e) {
                  spdlog::error("a streamed reply ended early: {}", e.what());
                  failed = true;
                }
                net::post(self->stream_.get_executor(),
                          [self, state, more, failed, guard = std::move(guard)] {
                            if (failed || self->server_.stopping) return self->close();
                            if (more) return self->write_piece(state);
                            self->end_stream(state);
                          });
              });
  }

  void end_stream(const std::shared_ptr<Streaming>& state) {
    if (!state->chunked) return close();
    stream_.expires_after(server_.options.write_timeout);
    net::async_write(stream_, http::make_chunk_last(),
                     [self = shared_from_this(), state](error_code ec, std::size_t) {
                       if (ec || !state->keep_alive) return self->close();
                       self->read_header();
                     });
  }

  // Half-closes, then reads and drops what the client still sends until it closes too.
  void linger() {
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(kLingerTimeout);
    drain_.resize(kLingerBufferBytes);
    stream_.async_read_some(net::buffer(drain_),
                            [self = shared_from_this()](error_code ec, std::size_t) {
                              if (ec) return self->close();
                              self->drain_more();
                            });
  }
  void drain_more() {
    stream_.async_read_some(net::buffer(drain_),
                            [self = shared_from_this()](error_code ec, std::size_t) {
                              if (ec) return self->close();
                              self->drain_more();
                            });
  }

  void close() {
    timer_.cancel();
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.close();
  }

  beast::tcp_stream stream_;
  net::steady_timer timer_;
  beast::flat_buffer buffer_;
  Server::Impl& server_;
  std::optional<http::request_parser<http::empty_body>> header_parser_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string target_;
  std::string token_name_;  ///< the token authorize_headers accepted for this request
  std::size_t body_limit_ = 0;
  /// The route of the request being read, once its target is known (for /metrics).
  std::optional<std::size_t> failed_route_;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool timed_out_ = false;
  std::uint64_t deadline_ = 0;
  bool waiting_for_request_ = false;
  bool linger_ = false;
  bool head_ = false;  ///< the request being answered is a HEAD
  std::vector<char> drain_;
  std::chrono::steady_clock::time_point started_;
};

void Server::Impl::enqueue_write(PendingWrite write) {
  {
    std::lock_guard lock(write_mutex);
    write_queue.push_back(std::move(write));
  }
  write_cv.notify_one();
}

// Group commit: while one batch is being committed (a disk flush), the next requests queue up
// and are committed together in the next round.
void Server::Impl::run_writer() {
  for (;;) {
    std::vector<PendingWrite> batch;
    {
      std::unique_lock lock(write_mutex);
      write_cv.wait(lock, [this] { return writer_stop || !write_queue.empty(); });
      if (write_queue.empty()) return;  // stopping, and nothing left
      const std::size_t n = std::min(write_queue.size(), kMaxWriteBatch);
      batch.assign(std::make_move_iterator(write_queue.begin()),
                   std::make_move_iterator(write_queue.begin() + static_cast<long>(n)));
      write_queue.erase(write_queue.begin(), write_queue.begin() + static_cast<long>(n));
    }
    std::vector<Request*> requests;
    for (auto& w : batch) requests.push_back(w.request.get());
    std::vector<Outcome> outcomes;
    try {
      outcomes = service.handle_batch(requests);
    } catch (const std::exception& e) {
      spdlog::error("a batch of writes failed: {}", e.what());
      const auto response = Service::error_response(std::current_exception());
      outcomes.resize(batch.size());
      for (auto& o : outcomes) {
        o.route = service.router().routes().size();
        o.response = response;
      }
    }
    for (std::size_t i = 0; i < batch.size(); ++i) {
      batch[i].connection->deliver(std::move(outcomes[i]), std::move(batch[i].guard));
    }
  }
}

void Server::Impl::track(const std::shared_ptr<Connection>& c) {
  std::lock_guard lock(connections_mutex);
  connections[c.get()] = c;
}

void Server::Impl::untrack(Connection* c) {
  std::lock_guard lock(connections_mutex);
  connections.erase(c);
}

void Server::Impl::listen() {
  error_code ec;
  const auto address = net::ip::make_address(options.bind_address, ec);
  if (ec) {
    throw InvalidInput("--bind \"" + options.bind_address +
                       "\" is not an IP address (e.g. 127.0.0.1, 0.0.0.0, ::1)");
  }
  const tcp::endpoint endpoint(address, options.port);
  const std::string where = options.bind_address + ":" + std::to_string(options.port);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw IoError("cannot listen on " + where + ": " + ec.message());
  port = acceptor.local_endpoint().port();
}

void Server::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
    if (!ec) {
      error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      auto connection = std::make_shared<Connection>(std::move(socket), *this);
      track(connection);
      connection->start();
      accept();
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last_accept_warning >= kAcceptWarningInterval) {
      spdlog::warn("accepting a connection failed: {}{}; pausing {} ms before accepting again",
                   ec.message(),
                   accept_errors_unreported ? " (and " + std::to_string(accept_errors_unreported) +
                                                  " times since the last warning)"
                                            : std::string(),
                   kAcceptPause.count());
      last_accept_warning = now;
      accept_errors_unreported = 0;
    } else {
      ++accept_errors_unreported;
    }
    accept_timer.expires_after(kAcceptPause);
    accept_timer.async_wait([this](error_code timer_ec) {
      if (!timer_ec && !stopping) accept();
    });
  });
}

void Server::Impl::schedule_lease_check() {
  lease_timer.expires_after(options.lease_check_interval);
  lease_timer.async_wait([this](error_code ec) {
    if (ec || stopping) return;
    auto guard = net::make_work_guard(ioc);
    net::post(compute, [this, guard = std::move(guard)] {
      try {
        const auto expired = service.studies().expire_leases();
        if (expired) service.metrics().record_lease_expired(expired);
      } catch (const std::exception& e) {
        spdlog::warn("expiring leases failed (retried later): {}", e.what());
      }
      net::post(control, [this] {
        if (!stopping) schedule_lease_check();
      });
    });
  });
}

void Server::Impl::begin_stop() {
  std::call_once(stop_once, [this] {
    stopping = true;
    net::post(control, [this] {
      error_code ignored;
      acceptor.close(ignored);
      accept_timer.cancel();
      lease_timer.cancel();
      signals.cancel(ignored);
      std::vector<std::shared_ptr<Connection>> live;
      {
        std::lock_guard lock(connections_mutex);
        for (auto& [ptr, weak] : connections) {
          if (auto c = weak.lock()) live.push_back(std::move(c));
        }
      }
      for (auto& c : live) c->close_if_idle();
    });
    watchdog = std::thread([this] {
      std::unique_lock lock(done_mutex);
      if (!done_cv.wait_for(lock, options.shutdown_grace, [this] { return done; })) {
        spdlog::warn("requests still running after the shutdown grace period; closing them");
        ioc.stop();
        compute.stop();  // queued model fits are dropped, not run after the grace period
        models.stop();
      }
    });
  });
}

Server::Server(Service& service, ServerOptions options)
    : impl_(std::make_unique<Impl>(service, std::move(options))) {
  impl_->listen();
}

Server::~Server() {
  stop();
  wait();
}

std::uint16_t Server::port() const { return impl_->port; }

namespace {

// `n` (at least one) threads that run `pool` below the I/O threads' priority: per-thread
// niceness (Linux: a thread id is a process id for setpriority).
void start_low_priority_pool(std::vector<std::thread>& threads, std::size_t n,
                             net::io_context& pool, const char* what) {
  for (std::size_t i = 0; i < std::max<std::size_t>(n, 1); ++i) {
    threads.emplace_back([&pool, what] {
      if (setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kComputeNiceness) !=
          0) {
        spdlog::debug("could not lower the priority of a {} thread", what);
      }
      pool.run();
    });
  }
}

}  // namespace

void Server::start() {
  if (impl_->started.exchange(true)) return;
  if (impl_->options.handle_signals) {
    impl_->signals.add(SIGINT);
    impl_->signals.add(SIGTERM);
    impl_->signals.async_wait([this](error_code ec, int signal) {
      if (ec) return;
      spdlog::info("signal {}: finishing requests in flight, then stopping", signal);
      stop();
    });
  }
  impl_->accept();
  impl_->schedule_lease_check();
  start_low_priority_pool(impl_->compute_threads, impl_->options.compute_threads, impl_->compute,
                          "compute");
  start_low_priority_pool(impl_->model_threads, impl_->options.model_threads, impl_->models,
                          "model");
  impl_->writer = std::thread([this] { impl_->run_writer(); });
  const auto n = std::max<std::size_t>(impl_->options.io_threads, 1);
  for (std::size_t i = 0; i < n; ++i) {
    impl_->threads.emplace_back([this] { impl_->ioc.run(); });
  }
}

void Server::stop() { impl_->begin_stop(); }

void Server::wait() {
  std::call_once(impl_->join_once, [this] {
    if (!impl_->started) {
      impl_->begin_stop();
      impl_->ioc.run();  // runs the stop handler (closes the acceptor)
    }
    for (auto& t : impl_->threads) t.join();
    {
      std::lock_guard lock(impl_->write_mutex);
      impl_->writer_stop = true;
    }
    impl_->write_cv.notify_all();
    if (impl_->writer.joinable()) impl_->writer.join();
    impl_->compute_work.reset();
    for (auto& t : impl_->compute_threads) t.join();
    impl_->models_work.reset();
    for (auto& t : impl_->model_threads) t.join();
    {
      std::lock_guard lock(impl_->done_mutex);
      impl_->done = true;
    }
    impl_->done_cv.notify_all();
    if (impl_->watchdog.joinable()) impl_->watchdog.join();
  });
}

}  // namespace tunebase::api
