#include "api/client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>
#include <regex>

#include "core/error.h"
#include "db/json_text.h"

namespace tunebase::api {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

// Replies can be whole study exports.
constexpr std::uint64_t kMaxReplyBytes = 1ull << 30;

// A server from before listings had pages refuses `limit` as an unknown query parameter.
bool refuses_limit(const HttpReply& reply) {
  if (reply.status != 400) return false;
  try {
    return nlohmann::json::parse(reply.body).at("error").value("field", "") == "query.limit";
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

nlohmann::json HttpReply::json() const {
  try {
    return nlohmann::json::parse(body);
  } catch (const nlohmann::json::parse_error& e) {
    throw InvalidInput("the server's reply (HTTP " + std::to_string(status) +
                       ") is not JSON: " + body.substr(0, 200));
  }
}

std::string HttpReply::error_message() const {
  try {
    const auto j = nlohmann::json::parse(body);
    if (j.contains("error") && j["error"].contains("message")) {
      return j["error"]["message"].get<std::string>();
    }
  } catch (const std::exception&) {
  }
  return body;
}

struct HttpClient::Impl {
  std::string host;
  std::uint16_t port = 0;
  std::chrono::milliseconds timeout;
  net::io_context ioc;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;

  void connect() {
    stream.emplace(ioc);
    tcp::resolver resolver(ioc);
    beast::error_code ec;
    const auto endpoints = resolver.resolve(host, std::to_string(port), ec);
    if (ec) throw IoError("cannot resolve " + host + ": " + ec.message());
    stream->expires_after(timeout);
    stream->connect(endpoints, ec);
    if (ec) {
      stream.reset();
      throw IoError("cannot connect to http://" + host + ":" + std::to_string(port) + ": " +
                    ec.message());
    }
    stream->socket().set_option(tcp::no_delay(true), ec);
    buffer.clear();
  }

  // One attempt; false when a kept-alive connection turned out to be closed.
  bool exchange(const http::request<http::string_body>& req, HttpReply& reply, bool fresh) {
    beast::error_code ec;
    stream->expires_after(timeout);
    http::write(*stream, req, ec);
    if (ec) {
      if (!fresh) return false;
      throw IoError("sending a request to " + host + ":" + std::to_string(port) +
                    " failed: " + ec.message());
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxReplyBytes);
    http::read(*stream, buffer, parser, ec);
    if (ec) {
      if (!fresh && (ec == http::error::end_of_stream || ec == net::error::connection_reset ||
                     ec == net::error::eof)) {
        return false;
      }
      stream.reset();
      throw IoError("reading the reply from " + host + ":" + std::to_string(port) +
                    " failed: " + ec.message());
    }
    auto res = parser.release();
    reply.status = static_cast<int>(res.result_int());
    reply.content_type = std::string(res[http::field::content_type]);
    reply.body = std::move(res.body());
    if (!res.keep_alive()) stream.reset();
    return true;
  }
};

HttpClient::HttpClient(const std::string& base_url, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  static const std::regex kUrl(
      R"(^http://(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.\-_]+)(?::(\d{1,5}))?/?$)");
  std::smatch m;
  if (!std::regex_match(base_url, m, kUrl)) {
    throw InvalidInput("server URL \"" + base_url +
                       "\" must look like http://HOST:PORT (plain HTTP, no path)");
  }
  impl_->host = m[1].str();
  if (impl_->host.front() == '[') impl_->host = impl_->host.substr(1, impl_->host.size() - 2);
  const int port = m[2].matched ? std::stoi(m[2].str()) : 80;
  if (port <= 0 || port > 65535) throw InvalidInput("port out of range in \"" + base_url + "\"");
  impl_->port = static_cast<std::uint16_t>(port);
  impl_->timeout = timeout;
}

HttpClient::~HttpClient() = default;
HttpClient::HttpClient(HttpClient&&) noexcept = default;
HttpClient& HttpClient::operator=(HttpClient&&) noexcept = default;

const std::string& HttpClient::host() const { return impl_->host; }
std::uint16_t HttpClient::port() const { return impl_->port; }

HttpReply HttpClient::request(const std::string& method, const std::string& target,
                              const std::string& body, const std::string& token,
                              const std::string& content_type) {
  http::request<http::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  req.set(http::field::host, impl_->host + ":" + std::to_string(impl_->port));
  req.set(http::field::user_agent, "tunebase-client");
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  if (!body.empty() || method == "POST") {
    req.set(http::field::content_type, content_type);
    req.body() = body;
  }
  req.keep_alive(true);
  req.prepare_payload();
  HttpReply reply;
  const bool reused = impl_->stream.has_value();
  if (!reused) impl_->connect();
  if (impl_->exchange(req, reply, !reused)) return reply;
  impl_->connect();
  impl_->exchange(req, reply, true);
  return reply;
}

HttpReply HttpClient::get(const std::string& target, const std::string& token) {
  return request("GET", target, {}, token);
}

HttpReply HttpClient::post(const std::string& target, const nlohmann::json& body,
                           const std::string& token) {
  // A measurement's message may hold a program's bytes that are not UTF-8: replaced.
  return request("POST", target, db::json_text(body), token);
}

HttpReply get_all_pages(HttpClient& client, const std::string& target, const std::string& key,
                        const std::string& token,
                        const std::function<bool(const nlohmann::json&)>& each) {
  const std::string paged = target + (target.find('?') == std::string::npos ? "?" : "&") +
                            "limit=" + std::to_string(kListPageItems);
  std::optional<std::int64_t> after;
  for (;;) {
    auto reply = client.get(after ? paged + "&after=" + std::to_string(*after) : paged, token);
    if (!after && refuses_limit(reply)) reply = client.get(target, token);
    if (reply.status != 200) return reply;
    const auto page = reply.json();
    for (const auto& item : page.value(key, nlohmann::json::array())) {
      if (!each(item)) return reply;
    }
    const auto next = page.find("next_after");
    if (next == page.end() || !next->is_number_integer()) return reply;
    after = next->get<std::int64_t>();
  }
}

}  // namespace tunebase::api
