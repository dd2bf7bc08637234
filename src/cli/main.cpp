// hybridgen: the command-line front end. Errors from the library arrive as hg::Error and are
// printed here, once, as one line on stderr.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>

#include "cli/build_info.h"
#include "cli/commands.h"
#include "cli/interrupt.h"
#include "hybridgen/error.h"

int main(int argc, char** argv) {
  // Named, not taken from argv[0]: help text (and docs/cli.md, made from it) reads the same from any path.
  CLI::App app{"hybridgen: long-context LLM inference with hybrid device/host attention", "hybridgen"};
  app.require_subcommand(1);
  app.set_version_flag("--version", hg::cli::version_line());
  hg::cli::add_generate_command(app);
  hg::cli::add_info_command(app);
  hg::cli::add_bench_command(app);
  hg::cli::add_perplexity_command(app);
  hg::cli::add_tokenize_command(app);
  hg::cli::add_eval_command(app);
  hg::cli::add_sweep_command(app);
  // Parse errors (unknown option, a value that is not a number) as one line, like every other error.
  app.failure_message(
      [](const CLI::App*, const CLI::Error& e) { return "error: " + std::string(e.what()) + " (see --help)\n"; });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const hg::cli::Interrupted&) {
    return hg::cli::kInterruptedExitStatus;  // the command has already said so and printed what it had
  } catch (const hg::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
