// rinfer: convert, run, validate and benchmark Hugging Face LLMs on CPU.
#include <cstdio>
#include <exception>
#include <map>

#include "commands.h"
#include "core/cpu_features.h"
#include "core/error.h"

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
  add(rinfer::cli::add_validate);
  add(rinfer::cli::add_bench);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto* sub : app.get_subcommands()) return runners.at(sub)();
  } catch (const rinfer::Error& e) {
    std::fprintf(stderr, "rinfer: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "rinfer: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rinfer: error: %s\n", e.what());
    return 1;
  }
  return 1;
}
