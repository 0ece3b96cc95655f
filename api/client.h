// A small blocking HTTP/1.1 client for the tunebase API (workers, tests, tools). Plain HTTP
// only; it keeps one connection open and reconnects when the server closed it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace tunebase::api {

struct HttpReply {
  int status = 0;
  std::string content_type;
  std::string body;
  /// The body parsed as JSON; InvalidInput when it is not JSON.
  nlohmann::json json() const;
  /// error.message of an error body, else the body itself (for messages to people).
  std::string error_message() const;
};

class HttpClient {
 public:
  /// `base_url`: "http://host:port" (a trailing slash or path is not allowed). Throws
  /// InvalidInput for anything else.
  explicit HttpClient(const std::string& base_url,
                      std::chrono::milliseconds timeout = std::chrono::seconds(60));
  ~HttpClient();
  HttpClient(HttpClient&&) noexcept;
  HttpClient& operator=(HttpClient&&) noexcept;

  /// Sends one request; throws IoError when the server cannot be reached or the connection
  /// fails (after one reconnect attempt for a kept-alive connection the server had closed).
  HttpReply request(const std::string& method, const std::string& target,
                    const std::string& body = {}, const std::string& token = {},
                    const std::string& content_type = "application/json");
  HttpReply get(const std::string& target, const std::string& token = {});
  HttpReply post(const std::string& target, const nlohmann::json& body,
                 const std::string& token = {});

  const std::string& host() const;
  std::uint16_t port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Items a page of a listing holds when read with get_all_pages.
inline constexpr std::int64_t kListPageItems = 1000;

/// Reads a listing (`target`: "/v1/studies/3/trials?status=pending", "/v1/machines") a page of
/// kListPageItems at a time (`limit`, then `after` from each reply's `next_after`), calling
/// `each` with every item of its `key` array, in order, until `each` returns false or the last
/// page. Returns the last reply read: status 200 when every page came, else the one that
/// failed (a server that knows no `limit` is read whole, as before).
HttpReply get_all_pages(HttpClient& client, const std::string& target, const std::string& key,
                        const std::string& token,
                        const std::function<bool(const nlohmann::json&)>& each);

}  // namespace tunebase::api
