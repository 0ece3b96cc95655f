#include "db/machine_comparison.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "core/machine.h"
#include "core/measurements.h"

namespace tunebase::db {

namespace {

std::string task_text(const TaskRecord& task) {
  return "task " + std::to_string(task.id.value) + " " + task.description.dump();
}

std::string joined(const std::set<std::string>& names) {
  std::string text;
  for (const auto& n : names) text += (text.empty() ? "" : ", ") + n;
  return text;
}

// The one task to compare: the one asked for, measured on every machine, or the one input
// every machine measured.
TaskRecord chosen_task(const Store& store, const ComparisonQuery& q,
                       const std::map<std::string, std::set<std::int64_t>>& tasks_of) {
  const auto tasks_text = [&](const std::set<std::int64_t>& ids) {
    std::string text;
    for (const auto id : ids) text += (text.empty() ? "" : ", ") + task_text(store.get_task({id}));
    return text;
  };
  if (q.task) {
    const auto task = store.get_task(*q.task);
    if (task.kernel_name != q.kernel) {
      throw InvalidInput("task " + std::to_string(q.task->value) + " is an input of kernel " +
                         task.kernel_name + ", not of " + q.kernel);
    }
    for (const auto& machine : q.machines) {
      const auto& measured = tasks_of.at(machine);
      if (!measured.count(q.task->value)) {
        throw NotFound("machine " + machine + " measured nothing of kernel " + q.kernel +
                       " on task " + std::to_string(q.task->value) + "; it measured " +
                       tasks_text(measured));
      }
    }
    return task;
  }
  std::set<std::int64_t> common = tasks_of.at(q.machines.front());
  for (const auto& machine : q.machines) {
    std::set<std::int64_t> both;
    std::ranges::set_intersection(common, tasks_of.at(machine), std::inserter(both, both.end()));
    common = std::move(both);
  }
  if (common.size() == 1) return store.get_task({*common.begin()});
  if (common.empty()) {
    std::string measured;
    for (const auto& machine : q.machines) {
      measured +=
          (measured.empty() ? "" : "; ") + machine + ": " + tasks_text(tasks_of.at(machine));
    }
    throw InvalidInput("the machines measured different inputs (tasks) of kernel " + q.kernel +
                       ", and values of different inputs are not comparable (" + measured +
                       "); no input was measured on all of them");
  }
  throw InvalidInput("the machines measured several inputs (tasks) of kernel " + q.kernel +
                     " in common: " + tasks_text(common) +
                     "; name the one to compare (--task, or task= over HTTP)");
}

}  // namespace

StoredComparison compare_stored_machines(const Store& store, const ComparisonQuery& q) {
  if (q.machines.size() < 2) {
    throw InvalidInput("a comparison needs at least two machines, got " +
                       std::to_string(q.machines.size()));
  }
  if (!store.find_kernel(q.kernel)) {
    std::set<std::string> kernels;
    for (const auto& k : store.list_kernels()) kernels.insert(k.name);
    throw NotFound(
        "unknown kernel \"" + q.kernel + "\"; " +
        (kernels.empty() ? "nothing is stored yet" : "the kernels stored are " + joined(kernels)));
  }
  const auto studies = store.list_studies(q.kernel);
  std::map<std::string, std::set<std::int64_t>> tasks_of;
  for (const auto& s : studies) tasks_of[s.machine_name].insert(s.task_id.value);
  std::set<std::string> measured_by;
  for (const auto& [machine, tasks] : tasks_of) measured_by.insert(machine);
  std::set<std::string> named;
  for (const auto& machine : q.machines) {
    if (!named.insert(machine).second) {
      throw InvalidInput("machine \"" + machine +
                         "\" is named twice; name each machine to compare once");
    }
    if (tasks_of.count(machine)) continue;
    const std::string which =
        "the machines that measured kernel " + q.kernel + " are " + joined(measured_by);
    if (!store.find_machine(machine)) {
      const auto similar = similar_machine_name(
          machine, std::vector<std::string>(measured_by.begin(), measured_by.end()));
      throw NotFound("unknown machine \"" + machine + "\"; " +
                     (similar.empty() ? which : "did you mean \"" + similar + "\"? " + which));
    }
    throw NotFound("machine " + machine + " measured nothing of kernel " + q.kernel + "; " + which);
  }

  StoredComparison out;
  out.kernel = q.kernel;
  out.task = chosen_task(store, q, tasks_of);
  // The studies compared: the machines', of that input (and objective).
  std::set<std::pair<std::string, Direction>> objectives;
  std::set<std::string> units;
  std::string first_unit;
  for (const auto& machine : q.machines) {
    std::set<std::string> own;
    for (const auto& s : studies) {
      if (s.machine_name != machine || s.task_id != out.task.id) continue;
      own.insert(s.objective);
      if (!q.objective.empty() && s.objective != q.objective) continue;
      // Kernels of one name may have other spaces (versions): show the compared one's order.
      if (out.space.is_null()) out.space = store.get_kernel(s.kernel_id).space;
      objectives.insert({s.objective, s.direction});
      units.insert(objective_unit(s));
      if (first_unit.empty()) first_unit = objective_unit(s);
    }
    if (!q.objective.empty() && !own.count(q.objective)) {
      throw NotFound("machine " + machine + " measured no objective named \"" + q.objective +
                     "\" of kernel " + q.kernel + " on " + task_text(out.task) + "; it measured " +
                     joined(own));
    }
  }
  if (objectives.size() > 1) {
    std::string text;
    for (const auto& [name, direction] : objectives)
      text += (text.empty() ? "" : ", ") + name + " (" + std::string(to_string(direction)) + ")";
    throw InvalidInput("the machines' studies of kernel " + q.kernel + " on " +
                       task_text(out.task) + " measure several objectives: " + text +
                       "; name the one to compare (--objective, or objective= over HTTP)");
  }
  out.objective = objectives.begin()->first;
  out.direction = objectives.begin()->second;
  // Times in any unit are compared as times (in the first machine's unit); other units must
  // be one.
  const bool all_times =
      std::all_of(units.begin(), units.end(), [](const auto& u) { return is_time_unit(u); });
  if (!all_times && units.size() > 1) {
    throw InvalidInput("the machines' values of kernel " + q.kernel + " are in different units (" +
                       joined(units) + "), which cannot be compared");
  }
  out.unit = all_times ? first_unit : *units.begin();

  std::vector<MachineTrials> machines;
  for (const auto& machine : q.machines) {
    PriorQuery pq;
    pq.kernel_name = q.kernel;
    pq.machines = {machine};
    pq.task = out.task.id;
    pq.objective = out.objective;
    pq.unit = all_times ? out.unit : std::string();
    pq.direction = out.direction;
    MachineTrials m{machine, {}};
    for (auto& t : store.prior_trials(pq)) {
      m.trials.push_back(
          {std::move(t.config_key), std::move(t.config), t.status, t.objective, t.trial.value});
    }
    machines.push_back(std::move(m));
  }
  out.comparison = compare_machines(machines, out.direction == Direction::minimize);

  for (const auto& p : out.comparison.pairs) {
    auto& examples = out.failures.emplace_back();
    for (const auto& fails_on : {p.b, p.a}) {
      std::vector<const FailsOnOne*> failures;
      std::vector<std::string> messages;
      std::vector<FailureMessages> counted;
      for (const auto& f : p.fails_on_one) {
        if (f.fails_on != fails_on) continue;
        failures.push_back(&f);
        messages.push_back(store.get_trial(TrialId{f.trial_id}).result.message);
        counted.push_back({f.status, messages.back(), 1});
      }
      // One example of each reason: the first configuration whose message is its example.
      for (auto& r : failure_breakdown(counted, kListedFailures).reasons) {
        for (std::size_t k = 0; k < failures.size(); ++k) {
          if (failures[k]->status == r.status &&
              shortened(messages[k], kMaxExampleBytes) == r.example) {
            examples.push_back({*failures[k], messages[k], std::move(r.reason),
                                static_cast<std::size_t>(r.count)});
            break;
          }
        }
      }
    }
  }
  return out;
}

}  // namespace tunebase::db
