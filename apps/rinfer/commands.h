#pragma once
// Each subcommand registers its options on the app and returns the function
// that runs it once parsing succeeded.
#include <functional>

#include <CLI/CLI.hpp>

namespace rinfer::cli {

using Runner = std::function<int()>;

Runner add_run(CLI::App& app);
Runner add_convert(CLI::App& app);
Runner add_synth(CLI::App& app);
Runner add_export_gguf(CLI::App& app);
Runner add_validate(CLI::App& app);
Runner add_bench(CLI::App& app);
Runner add_tokenize(CLI::App& app);
Runner add_detokenize(CLI::App& app);
Runner add_chat_template(CLI::App& app);
Runner add_serve(CLI::App& app);
Runner add_bench_serve(CLI::App& app);
Runner add_plan_experts(CLI::App& app);

}  // namespace rinfer::cli
