// hybridgen: the command-line front end. Errors from the library arrive as hg::Error and are
// printed here, once, as one line on stderr.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>
#include <string>

#include "cli/build_info.h"
#include "cli/commands.h"
#include "cli/interrupt.h"
#include "hybridgen/error.h"

namespace {

// CLI11's "Could not convert: --ctx = 99999999999" in the project's words: the option, the value,
// and what it must be; other parse errors keep CLI11's text.
std::string parse_error_text(const CLI::ParseError& e) {
  const std::string what = e.what();
  const std::string prefix = "Could not convert: ";
  const size_t eq = what.find(" = ");
  if (what.rfind(prefix, 0) == 0 && eq != std::string::npos)
    return what.substr(prefix.size(), eq - prefix.size()) + ": '" + what.substr(eq + 3) +
           "' is not a number of the option's type, or is out of its range";
  return what;
}

}  // namespace

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
  hg::cli::add_serve_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // Parse errors (an unknown option, a value that is not a number or out of its type's range) as
    // one line and exit status 1, like every other bad value.
    std::fprintf(stderr, "error: %s (see --help)\n", parse_error_text(e).c_str());
    return 1;
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
