// The service subcommands: serve (the HTTP API), worker, and token (API credentials).
#include <spdlog/spdlog.h>

#include <iomanip>
#include <iostream>
#include <thread>

#include "api/server.h"
#include "api/service.h"
#include "apps/cli.h"
#include "apps/sweep.h"
#include "apps/worker.h"
#include "core/error.h"
#include "db/store.h"

namespace tunebase::cli {

namespace {

void add_serve_command(CLI::App& app) {
  struct Args {
    std::string db = kDefaultDb;
    api::ServerOptions server;
    api::ServiceOptions service;
    std::int64_t header_timeout_ms = 10'000;
    std::int64_t body_timeout_ms = 120'000;
    int port = 8080;  // checked as a number first: a uint16_t would say "Could not convert"
  };
  auto args = std::make_shared<Args>();
  args->server.io_threads = std::max(1u, std::thread::hardware_concurrency());
  args->server.compute_threads = std::max(1u, std::thread::hardware_concurrency());
  args->server.model_threads = std::max(1u, std::thread::hardware_concurrency() / 2);
  auto* cmd = app.add_subcommand("serve", "Serve the tunebase HTTP API on a database");
  cmd->add_option("--db", args->db, "SQLite database file (created if absent)")
      ->capture_default_str();
  cmd->add_option("--port,-p", args->port, "TCP port; 0 picks a free one")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--bind", args->server.bind_address, "Address to listen on")
      ->capture_default_str();
  cmd->add_option("--threads", args->server.io_threads, "I/O threads")->capture_default_str();
  cmd->add_option("--compute-threads", args->server.compute_threads,
                  "Threads that fit models and compute suggestions")
      ->capture_default_str();
  cmd->add_option("--model-threads", args->server.model_threads,
                  "Threads that answer predictions, relevance and predicted best answers, "
                  "apart from suggestions")
      ->capture_default_str();
  cmd->add_option("--max-model-questions", args->server.max_model_questions,
                  "Predictions, relevance and predicted best answers waiting or being "
                  "answered at most; more are answered 503 with Retry-After")
      ->capture_default_str();
  cmd->add_flag("--auth-reads", args->service.auth_reads, "Reads need a token too");
  cmd->add_option("--header-timeout-ms", args->header_timeout_ms,
                  "Milliseconds a client may take to send request headers (then 408)")
      ->capture_default_str();
  cmd->add_option("--body-timeout-ms", args->body_timeout_ms,
                  "Milliseconds a client may take to send a request body after its headers "
                  "(then 408; large imports on slow links need long)")
      ->capture_default_str();
  cmd->callback([args] {
    if (args->server.io_threads == 0 || args->server.compute_threads == 0 ||
        args->server.model_threads == 0 || args->server.max_model_questions == 0) {
      throw InvalidInput(
          "--threads, --compute-threads, --model-threads and --max-model-questions must be at "
          "least 1");
    }
    // A day at most: past that the deadline arithmetic overflows (every body timed out at once).
    constexpr std::int64_t kMaxTimeoutMs = 86'400'000;
    for (const auto& [flag, ms] : {std::pair{"--header-timeout-ms", args->header_timeout_ms},
                                   std::pair{"--body-timeout-ms", args->body_timeout_ms}}) {
      if (ms <= 0 || ms > kMaxTimeoutMs) {
        throw InvalidInput(std::string(flag) + " must be 1 to " + std::to_string(kMaxTimeoutMs) +
                           " (a day), got " + std::to_string(ms));
      }
    }
    args->server.header_timeout = std::chrono::milliseconds(args->header_timeout_ms);
    args->server.body_timeout = std::chrono::milliseconds(args->body_timeout_ms);
    args->server.handle_signals = true;
    args->server.port = static_cast<std::uint16_t>(args->port);
    std::optional<db::Store> store;
    try {
      store.emplace(args->db);
      // A corrupt file would answer some requests and fail others (an export cut off midway):
      // found now, it is refused before anyone relies on it. Reads every page once.
      if (const auto found = store->quick_check(); !found.empty()) {
        throw StorageError("it is corrupt (PRAGMA quick_check: " + found +
                           "); restore it from a backup (tunebase backup writes one)");
      }
    } catch (const StorageError& e) {
      throw StorageError("cannot serve database " + args->db + ": " + e.what());
    }
    // Leases of sweeps of this host that died would block their configurations for an hour.
    std::size_t taken_back = 0;
    for (const auto& s : store->list_studies()) {
      if (s.status == db::StudyStatus::active) {
        taken_back += release_leases_of_ended_sweeps(*store, s.id);
      }
    }
    note_leases_taken_back(taken_back);
    api::Service service(*store, args->service);
    api::Server server(service, args->server);
    server.start();
    // Scripts and tests read the port from this line (it matters with --port 0).
    std::cout << "listening on http://" << args->server.bind_address << ":" << server.port()
              << " (database " << args->db << ", " << args->server.io_threads << " I/O threads, "
              << args->server.compute_threads << " compute threads, " << args->server.model_threads
              << " model threads)" << std::endl;
    server.wait();
    std::cout << "stopped; database " << args->db << " closed" << std::endl;
  });
}

void add_token_commands(CLI::App& app) {
  auto* token = app.add_subcommand("token", "Create, list and revoke API tokens");
  token->require_subcommand(1);
  auto db_path = std::make_shared<std::string>(kDefaultDb);
  {
    auto name = std::make_shared<std::string>();
    auto* cmd = token->add_subcommand(
        "create", "Create a token; it is printed once (only its hash is stored)");
    cmd->add_option("name", *name, "Who or what the token is for")->required();
    cmd->add_option("--db", *db_path, "SQLite database file")->capture_default_str();
    cmd->callback([name, db_path] {
      db::Store store(*db_path);
      const auto secret = store.create_token(*name);
      // The secret alone on standard output (TOKEN=$(tunebase token create ...)); the word
      // about it after, so that it reads whole when both go to a terminal or a pipe.
      std::cout << secret << std::endl;
      std::cerr << "token \"" << *name
                << "\" created; the line above is its secret, shown only "
                   "now (the database keeps a hash)\n";
    });
  }
  {
    auto* cmd = token->add_subcommand("list", "List tokens (names and dates, never secrets)");
    cmd->add_option("--db", *db_path, "SQLite database file")->capture_default_str();
    cmd->callback([db_path] {
      db::Store store(*db_path, {.read_only = true});
      for (const auto& t : store.list_tokens()) {
        std::cout << std::setw(4) << t.id.value << "  " << std::left << std::setw(24) << t.name
                  << std::right << "  created " << t.created_at
                  << (t.revoked_at ? "  revoked " + *t.revoked_at : std::string("  active"))
                  << "\n";
      }
    });
  }
  {
    auto name = std::make_shared<std::string>();
    auto* cmd = token->add_subcommand("revoke", "Revoke the active token with this name");
    cmd->add_option("name", *name, "Token name")->required();
    cmd->add_option("--db", *db_path, "SQLite database file")->capture_default_str();
    cmd->callback([name, db_path] {
      db::Store store(*db_path);
      store.revoke_token(*name);
      std::cout << "token \"" << *name << "\" revoked\n";
    });
  }
}

}  // namespace

void add_service_commands(CLI::App& app) {
  add_serve_command(app);
  add_worker_command(app);
  add_token_commands(app);
}

}  // namespace tunebase::cli
