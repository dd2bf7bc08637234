// Each subcommand lives in its own file and registers itself on the CLI11 app.
// add_X_command adds the subcommand and its options; the callback runs the command and throws
// hg::Error on bad input (main prints it as one line and exits non-zero).
#pragma once

namespace CLI {
class App;
}

namespace hg::cli {

void add_generate_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_perplexity_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_sweep_command(CLI::App& app);
void add_serve_command(CLI::App& app);

}  // namespace hg::cli
