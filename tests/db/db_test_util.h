// Helpers shared by the db tests: a small space, a database snapshot, and a way to run a
// check without root's power to ignore file permissions.
#pragma once

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>

#include "core/space.h"
#include "db/store.h"
#include "db/study_export.h"

namespace tunebase::db::testing {

inline SearchSpace small_space() {
  return SearchSpace(
      {ordinal("block",
               {Value{std::int64_t{16}}, Value{std::int64_t{32}}, Value{std::int64_t{64}}}),
       categorical("layout", {Value{std::string("row")}, Value{std::string("col")}})},
      {});
}

inline nlohmann::json config_json(std::int64_t block, const std::string& layout) {
  return {{"block", block}, {"layout", layout}};
}

inline std::string config_key(std::int64_t block, const std::string& layout) {
  return std::to_string(block) + "," + layout;
}

/// A study of kernel "demo" on machine `machine_name`, task {"n": task_n}.
inline StudyRecord make_study(Store& store, const std::string& study_name,
                              const std::string& machine_name = "m1", int task_n = 100,
                              Direction direction = Direction::minimize,
                              const std::string& objective = "time") {
  MachineInfo info;
  info.name = machine_name;
  info.fingerprint = {{"cpu_model", "test cpu " + machine_name}};
  refresh_fingerprint_hash(info);
  const auto machine = store.upsert_machine(info);
  const auto kernel = store.upsert_kernel("demo", small_space());
  const auto task = store.upsert_task("demo", {{"n", task_n}});
  NewStudy s;
  s.name = study_name;
  s.kernel = kernel.id;
  s.machine = machine.id;
  s.task = task.id;
  s.direction = direction;
  s.objective = objective;
  return store.create_study(s);
}

/// Everything a database holds, as text, read through a separate read-only connection:
/// equal snapshots mean nothing stored changed.
inline std::string snapshot(const std::string& path) {
  Store store(path, StoreOptions{.read_only = true});
  nlohmann::json j;
  for (const auto& m : store.list_machines()) {
    j["machines"].push_back({m.id.value, m.name, m.fingerprint, m.fingerprint_hash, m.created_at});
  }
  for (const auto& k : store.list_kernels()) {
    j["kernels"].push_back({k.id.value, k.name, k.version, k.space});
  }
  for (const auto& t : store.list_tasks()) {
    j["tasks"].push_back({t.id.value, t.kernel_name, t.description, t.features});
  }
  for (const auto& s : store.list_studies()) {
    j["studies"].push_back(study_to_json(store, s.id));
  }
  for (const auto& t : store.list_tokens()) {
    j["tokens"].push_back({t.id.value, t.name, t.created_at, t.revoked_at.value_or("")});
  }
  return j.dump();
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

/// Runs `check` with file permissions in force and returns what it returns. Root ignores
/// permissions, so as root the check runs in a child process that has dropped to the user
/// "nobody" (uid/gid 65534); the result comes back through a pipe. nullopt when that drop is
/// impossible (the caller skips).
inline std::optional<std::string> run_with_permissions(const std::function<std::string()>& check) {
  constexpr uid_t kNobody = 65534;
  if (geteuid() != 0) return check();
  int fds[2];
  if (pipe(fds) != 0) return std::nullopt;
  const pid_t pid = fork();
  if (pid < 0) return std::nullopt;
  if (pid == 0) {
    close(fds[0]);
    std::string out;
    if (setgroups(0, nullptr) != 0 || setgid(kNobody) != 0 || setuid(kNobody) != 0) {
      out =
          "\x01"
          "cannot drop privileges";
    } else {
      try {
        out = check();
      } catch (const std::exception& e) {
        out = std::string("unexpected exception: ") + e.what();
      }
    }
    const char* p = out.data();
    std::size_t left = out.size();
    while (left > 0) {
      const ssize_t n = write(fds[1], p, left);
      if (n <= 0) break;
      p += n;
      left -= static_cast<std::size_t>(n);
    }
    close(fds[1]);
    _exit(0);  // no destructors: the parent owns the temporary folder
  }
  close(fds[1]);
  std::string result;
  char buf[4096];
  ssize_t n = 0;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) result.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!result.empty() && result[0] == '\x01') return std::nullopt;
  return result;
}

}  // namespace tunebase::db::testing
