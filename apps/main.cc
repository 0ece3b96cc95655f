// tunebase: autotuning for sparse solvers and GPU kernels.
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <iostream>
#include <string_view>

#include "apps/cli.h"
#include "core/error.h"
#include "kernels/command.h"

namespace tunebase::cli {

std::atomic<bool> g_interrupted{false};
std::atomic<int> g_interrupt_signal{SIGINT};

namespace {
// The signal of a second interrupt that killed the commands under way (0: none): the process
// ends by it once the main thread has given their configurations back.
std::atomic<int> g_stopped_at_once_by{0};

extern "C" void on_signal(int sig) {
  if (!g_interrupted.exchange(true)) {
    g_interrupt_signal = sig;
    // write(2) is safe in a signal handler; the evaluation under way may take a while.
    constexpr char kNote[] =
        "\ninterrupted: stopping after the evaluation under way, if any (a sweep stores its "
        "result); interrupt again to stop at once\n";
    [[maybe_unused]] const auto written = write(STDERR_FILENO, kNote, sizeof kNote - 1);
    return;
  }
  // Again: the commands under way are killed (they run in their own process groups: none may
  // outlive us). Their evaluations end at once, and the main thread gives their configurations
  // back (a sweep's lease in its database, a worker's on the server) rather than leave them
  // leased for the lease's length. A third signal, or a second while no command runs, ends
  // the process at once.
  if (kill_running_commands() > 0 && g_stopped_at_once_by.exchange(sig) == 0) {
    constexpr char kNote[] =
        "\ninterrupted again: the command under way is killed and its configuration given "
        "back; interrupt once more to end at once\n";
    [[maybe_unused]] const auto written = write(STDERR_FILENO, kNote, sizeof kNote - 1);
    return;
  }
  // A result waiting for the database's lock would be lost without a word: the sweep stops
  // waiting and names it, then the process ends by this signal.
  if (g_waiting_for_database && !g_stop_waiting.exchange(true)) {
    int none = 0;
    g_stopped_at_once_by.compare_exchange_strong(none, sig);
    constexpr char kNote[] =
        "\ninterrupted again: the wait for the database ends, and what could not be stored is "
        "printed; interrupt once more to end at once\n";
    [[maybe_unused]] const auto written = write(STDERR_FILENO, kNote, sizeof kNote - 1);
    return;
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Ends the process by the signal of a second interrupt that killed the commands under way, as
// it would have ended at once without them: a shell sees the signal, not an exit status.
void end_by_second_interrupt() {
  if (const int sig = g_stopped_at_once_by.load(); sig != 0) {
    std::cout.flush();
    std::cerr.flush();
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}
}  // namespace

void install_interrupt_handler() {
  // `tunebase sweep | tee log` and Ctrl-C: the terminal's SIGINT ends tee too, and the summary
  // is written to a pipe nobody reads. Ended by SIGPIPE there, tunebase would exit 141 with no
  // word; ignored, the write fails as an error does (main says so), and an interrupt still
  // ends with 128 + its signal. Commands are spawned with every signal at its default.
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  // A closed terminal or a dropped ssh connection (SIGHUP) stops tunebase as SIGTERM does:
  // ended by it, tunebase would leave the command's process group running with no time limit,
  // and its lease held. Under nohup (SIGHUP ignored) it stays ignored.
  struct sigaction hangup {};
  if (sigaction(SIGHUP, nullptr, &hangup) == 0 && hangup.sa_handler != SIG_IGN) {
    std::signal(SIGHUP, on_signal);
  }
}

}  // namespace tunebase::cli

namespace {

int run_command_line(int argc, char** argv) {
  using namespace tunebase;
  CLI::App app{"tunebase: autotuning of sparse solvers and GPU kernels with Gaussian processes"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tunebase 0.1.0");
  cli::add_sweep_command(app);
  cli::add_query_commands(app);
  cli::add_benchmark_command(app);
  cli::add_convergence_command(app);
  cli::add_compare_command(app);
  cli::add_service_commands(app);
  // Logs go to stderr: stdout is the command's answer (--json output a program parses).
  spdlog::set_default_logger(spdlog::stderr_color_mt("tunebase"));
  spdlog::set_pattern("%^%l%$: %v");

  // CLI11 answers a mistyped command ("tunebase show", "tunebase token creat") with "A subcommand
  // is required", as if none had been given: name it, and the commands there are.
  std::string command = "tunebase";
  const CLI::App* level = &app;
  for (int i = 1; i < argc && argv[i][0] != '-'; ++i) {
    const auto subs = level->get_subcommands([](const CLI::App*) { return true; });
    if (subs.empty()) break;  // a positional argument of a command
    const auto it = std::find_if(subs.begin(), subs.end(),
                                 [&](const CLI::App* sub) { return sub->check_name(argv[i]); });
    if (it == subs.end()) {
      std::string known;
      for (const auto* sub : subs) known += (known.empty() ? "" : ", ") + sub->get_name();
      std::cerr << "error: unknown command '" << command << " " << argv[i] << "'; the commands of "
                << command << " are " << known << " (" << command << " --help describes them)\n";
      return cli::kInvalidInput;
    }
    level = *it;
    command += " " + level->get_name();
  }

  // An option given an empty value ("--machine $UNSET") would read as left out and take its
  // default (another machine, a new database): no option takes one.
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool empty_after = arg.starts_with('-') && arg.find('=') == std::string_view::npos &&
                             i + 1 < argc && argv[i + 1][0] == '\0';
    const bool empty_joined = arg.starts_with("--") && arg.ends_with('=');
    if (empty_after || empty_joined) {
      const auto name = empty_joined ? arg.substr(0, arg.size() - 1) : arg;
      std::cerr << "error: " << command << ": option " << name
                << " was given an empty value (an unset shell variable?); give it a value, or "
                   "leave it out for its default\n";
      return cli::kInvalidInput;
    }
  }

  // Every error ends here and becomes one exit code; messages say what was wrong.
  try {
    app.parse(argc, argv);
    // Stopped, a command says so by its exit status whatever became of its output (a summary
    // written to a pipe whose reader Ctrl-C ended too).
    if (cli::g_interrupted) return 128 + cli::g_interrupt_signal;
    // The answer on stdout was lost (a closed pipe, a full disk): a script must not take it for
    // the whole of it.
    if (!std::cout.flush()) {
      std::cerr << "error: " << command
                << ": stdout could not be written to (a pipe whose reader ended, or a full "
                   "disk): its output is incomplete\n";
      return cli::kIo;
    }
    return cli::kOk;
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message; its own exit codes (105-109) become the documented one for a
    // bad flag. --help and --version are CLI11 "errors" too, with code 0.
    return app.exit(e) == 0 ? cli::kOk : cli::kInvalidInput;
  } catch (const ParseError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return cli::kInvalidInput;
  } catch (const InvalidInput& e) {
    std::cerr << "error: " << e.what() << "\n";
    return cli::kInvalidInput;
  } catch (const NotFound& e) {
    std::cerr << "error: " << e.what() << "\n";
    return cli::kNotFound;
  } catch (const StorageError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return cli::kStorage;
  } catch (const Conflict& e) {
    std::cerr << "error: " << e.what() << "\n";
    return cli::kConflict;
  } catch (const IoError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return cli::kIo;
  } catch (const EvaluationInterrupted& e) {
    // Stopped with its command: an interruption, not an error.
    std::cerr << "note: " << e.what() << "\n";
    return 128 + cli::g_interrupt_signal;
  } catch (const Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return cli::kError;
  } catch (const std::exception& e) {
    // A bug rather than bad input; still a message and an exit code, never an abort.
    std::cerr << "error: internal: " << e.what() << "\n";
    return cli::kError;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int code = run_command_line(argc, argv);
  tunebase::cli::end_by_second_interrupt();
  return code;
}
