// hybridgen: the command-line front end. Errors from the library arrive as hg::Error and are
// printed here, once, as one line on stderr.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "hybridgen/error.h"

int main(int argc, char** argv) {
  CLI::App app{"hybridgen: long-context LLM inference with hybrid device/host attention"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "hybridgen 0.1.0");
  hg::cli::add_generate_command(app);
  hg::cli::add_info_command(app);
  hg::cli::add_bench_command(app);
  hg::cli::add_perplexity_command(app);
  hg::cli::add_tokenize_command(app);
  hg::cli::add_eval_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const hg::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
