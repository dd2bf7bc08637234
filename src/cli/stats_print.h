// Human and JSON forms of an engine's run statistics.
#pragma once
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "hybridgen/engine.h"

namespace hg::cli {

nlohmann::json run_stats_json(Engine& engine);
void print_run_stats(std::FILE* out, Engine& engine);
void write_stats_json(const std::string& path, Engine& engine);

}  // namespace hg::cli
