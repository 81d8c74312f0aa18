// rinfer: convert, run, validate and benchmark Hugging Face LLMs on CPU.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>

#include "commands.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "kernels/cpu/ops.h"
#include "parallel/mpi.h"
#include "perf/decode_tuning.h"
#include "rinfer_git_commit.h"  // generated at build time (cmake/git_commit.cmake)

namespace {
// A rank that fails under mpirun ends the whole job: the other ranks may be
// waiting for it in a collective and would never learn otherwise.
int end_job(int code) {
  std::fflush(stderr);
  if (rinfer::mpi::active()) rinfer::mpi::abort_job(code);
  return code;
}

// Every error is one line, whatever bytes a path or message carries.
void print_error(std::string msg) {
  std::replace_if(msg.begin(), msg.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  std::fprintf(stderr, "rinfer: error: %s\n", msg.c_str());
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rinfer: convert, run, validate and benchmark Hugging Face LLMs on CPU"};
  app.set_version_flag("--version", std::string("rinfer ") + RINFER_VERSION + " (" + RINFER_GIT_COMMIT + ")");
  app.require_subcommand(1);
  std::map<CLI::App*, rinfer::cli::Runner> runners;
  auto add = [&](auto adder) {
    auto runner = adder(app);
    runners[app.get_subcommands({}).back()] = runner;
  };
  add(rinfer::cli::add_run);
  add(rinfer::cli::add_convert);
  add(rinfer::cli::add_synth);
  add(rinfer::cli::add_export_gguf);
  add(rinfer::cli::add_validate);
  add(rinfer::cli::add_bench);
  add(rinfer::cli::add_tokenize);
  add(rinfer::cli::add_detokenize);
  add(rinfer::cli::add_chat_template);
  add(rinfer::cli::add_serve);
  add(rinfer::cli::add_bench_serve);
  add(rinfer::cli::add_plan_experts);
  // Usage errors print one line like every other error and exit 2; --help
  // and --version still go through CLI11 and exit 0.
  const std::string first = argc > 1 ? argv[1] : "";
  std::string command;  // the subcommand named on the command line, if any
  std::string names;
  for (const auto* sub : app.get_subcommands({})) {
    if (sub->get_name() == first) command = first;
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  auto usage_error = [&](const std::string& msg) {
    print_error(msg + " (see 'rinfer" + (command.empty() ? "" : " " + command) + " --help')");
    return 2;
  };
  if (!first.empty() && first[0] != '-' && command.empty())
    return usage_error("unknown command \"" + first + "\"; commands: " + names);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    return usage_error(e.what());
  }
  try {
    rinfer::kernels::cpu::active_isa();  // a bad RINFER_ISA is an error here, before any work
    rinfer::perf::apply_decode_tuning();  // and so is a bad RINFER_DECODE_PREFETCH
    for (auto* sub : app.get_subcommands()) return runners.at(sub)();
  } catch (const CLI::ParseError& e) {  // option combinations a runner checks itself
    return end_job(usage_error(e.what()));
  } catch (const rinfer::Error& e) {
    print_error(e.what());
    return end_job(1);
  } catch (const std::bad_alloc&) {
    print_error("out of memory");
    return end_job(1);
  } catch (const std::exception& e) {
    print_error(e.what());
    return end_job(1);
  }
  return 1;
}
