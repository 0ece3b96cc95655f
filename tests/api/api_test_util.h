// A tunebase server on an ephemeral port with a fresh database and a token, for tests that make
// real HTTP round trips; plus a small search space with a constraint and a known optimum.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "api/client.h"
#include "api/server.h"
#include "api/service.h"
#include "db/store.h"
#include "tests/support/shared_data.h"

namespace tunebase::api::testing {

/// Short timeouts so that lease and slow-client tests take a fraction of a second.
inline ServerOptions fast_options() {
  ServerOptions o;
  o.port = 0;
  o.io_threads = 2;
  o.compute_threads = 2;
  o.header_timeout = std::chrono::milliseconds(500);
  o.body_timeout = std::chrono::milliseconds(1000);
  o.write_timeout = std::chrono::milliseconds(2000);
  o.lease_check_interval = std::chrono::milliseconds(50);
  o.shutdown_grace = std::chrono::milliseconds(3000);
  return o;
}

class TestServer {
 public:
  /// `db_path`: the database file; default a fresh one in a temporary folder.
  explicit TestServer(ServerOptions options = fast_options(), ServiceOptions service = {},
                      const std::string& db_path = {})
      : db_path_(db_path.empty() ? dir_.file("api.db") : db_path),
        store_(db_path_),
        service_(store_, service),
        server_(service_, options) {
    token = store_.create_token("tester");
    server_.start();
  }
  ~TestServer() {
    server_.stop();
    server_.wait();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }
  HttpClient client() const { return HttpClient(url(), std::chrono::seconds(30)); }
  std::uint16_t port() const { return server_.port(); }
  db::Store& store() { return store_; }
  Service& service() { return service_; }
  Server& server() { return server_; }
  const std::string& db_path() const { return db_path_; }

  std::string token;

 private:
  tunebase::testing::TempDir dir_;
  std::string db_path_;
  db::Store store_;
  Service service_;
  Server server_;
};

/// bx in {1,2,4,8,16}, by in {1,2,4,8}, unroll in {0,1}; bx*by <= 32: 34 valid of 40.
inline nlohmann::json demo_space() {
  return {{"parameters",
           {{{"name", "bx"}, {"type", "ordinal"}, {"values", {1, 2, 4, 8, 16}}},
            {{"name", "by"}, {"type", "ordinal"}, {"values", {1, 2, 4, 8}}},
            {{"name", "unroll"}, {"type", "categorical"}, {"values", {0, 1}}}}},
          {"constraints", {"bx*by <= 32"}}};
}
inline constexpr std::size_t kDemoValid = 34;

/// A smooth objective with its minimum 1.0 at bx=4, by=2, unroll=1.
inline double demo_objective(const nlohmann::json& config) {
  const double bx = std::log2(config["bx"].get<double>());
  const double by = std::log2(config["by"].get<double>());
  return 1.0 + (bx - 2) * (bx - 2) + 0.5 * (by - 1) * (by - 1) +
         (config["unroll"].get<int>() == 1 ? 0.0 : 0.25);
}

/// The body of POST /v1/studies for kernel "demo" (demo_space) on `machine`, with the fields
/// of `extra` added or replacing them.
inline nlohmann::json demo_study_body(const std::string& machine,
                                      const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json body{{"kernel", "demo"}, {"space", demo_space()}, {"machine", machine}};
  body.update(extra);
  return body;
}

/// Creates a study of kernel "demo" on `machine` of the input {"n": n} (its feature n too, unit
/// ms) and stores n * demo_objective(config) for each of `configs`; returns the created study.
inline nlohmann::json measure_demo_input(HttpClient& client, const std::string& token,
                                         const std::string& machine, int n,
                                         const std::vector<nlohmann::json>& configs) {
  const auto created = client.post(
      "/v1/studies",
      demo_study_body(machine,
                      {{"unit", "ms"}, {"task", {{"n", n}}}, {"task_features", {{"n", n}}}}),
      token);
  EXPECT_EQ(created.status, 201) << created.body;
  nlohmann::json measurements = nlohmann::json::array();
  for (const auto& config : configs) {
    measurements.push_back({{"config", config}, {"value", n * demo_objective(config)}});
  }
  const auto added = client.post("/v1/studies/" + created.json()["id"].dump() + "/measurements",
                                 {{"measurements", measurements}}, token);
  EXPECT_EQ(added.status, 201) << added.body;
  return created.json();
}

/// Registers machine `machine` and creates a study of kernel "demo"; returns its id.
inline std::int64_t create_demo_study(HttpClient& client, const std::string& token,
                                      const std::string& strategy, std::int64_t budget,
                                      const std::string& machine = "test-machine",
                                      const std::string& name = "") {
  auto m =
      client.post("/v1/machines", {{"name", machine}, {"fingerprint", {{"cpu", "test"}}}}, token);
  EXPECT_TRUE(m.status == 201 || m.status == 200) << m.body;  // 200: registered before
  auto body = demo_study_body(machine, {{"strategy", strategy}, {"budget", budget}, {"seed", 7}});
  if (!name.empty()) body["name"] = name;
  auto s = client.post("/v1/studies", body, token);
  EXPECT_EQ(s.status, 201) << s.body;
  return s.json()["id"].get<std::int64_t>();
}

/// Sends raw bytes on a fresh connection and returns everything the server answers until it
/// closes (or `read_limit` bytes).
inline std::string raw_exchange(std::uint16_t port, const std::string& bytes) {
  namespace net = boost::asio;
  net::io_context ioc;
  net::ip::tcp::socket socket(ioc);
  socket.connect({net::ip::make_address("127.0.0.1"), port});
  net::write(socket, net::buffer(bytes));
  std::string reply;
  boost::system::error_code ec;
  net::read(socket, net::dynamic_buffer(reply), ec);
  return reply;
}

}  // namespace tunebase::api::testing
