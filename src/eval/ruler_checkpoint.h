// The finished samples of a RULER run, kept in a file as they finish (`eval --task ruler
// --checkpoint FILE`; `sweep` gives each ruler point one), so that a run that stops (Ctrl-C, the
// end of a job's time, a crash) resumes where it stopped: a 32K sample is minutes of prefill, a
// point of a sweep an hour.
//
// JSON Lines. The first line names the run: {"ruler_checkpoint": 1, "run": {...}} with what the
// replies depend on beyond the prompt (the model's fingerprint, the device, the length, samples
// per task, seed, tasks, answer tokens, each policy's label and attention). Then one line per
// sample: {"task", "index", "prompt": FNV-1a of its token ids (util/hash.h), "prefill": {label:
// role}, "replies": {label: text}}. A run reuses a line whose task, index and prompt match the
// sample it would make (the prompt's hash covers the tokenizer, the chat template, the haystack
// and the seed); it scores the stored replies again, and runs a sample whose line's prompt differs
// again. A file of another run is an error naming what differs; the torn last line of a run killed
// while writing it is dropped. Lines are flushed and synced one by one.
#pragma once
#include <cstdint>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>

namespace hg::eval {

class RulerCheckpoint {
 public:
  // Opens `path` for the run described by `run` (a JSON object), creating it (and its directory)
  // when missing. hg::Error when the file belongs to another run or cannot be read or written.
  RulerCheckpoint(std::string path, const nlohmann::json& run);
  ~RulerCheckpoint();
  RulerCheckpoint(const RulerCheckpoint&) = delete;
  RulerCheckpoint& operator=(const RulerCheckpoint&) = delete;

  // The stored line of (task, index) when its prompt hash matches `ids`, else nullptr.
  const nlohmann::json* find(const std::string& task, int index, std::span<const int32_t> ids) const;
  // Appends a finished sample: prefill roles and replies, each {label: string}.
  void add(const std::string& task, int index, std::span<const int32_t> ids, const nlohmann::json& prefill,
           const nlohmann::json& replies);
  size_t size() const { return done_.size(); }

  static std::string prompt_hash(std::span<const int32_t> ids);  // 16 hex digits

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  std::map<std::pair<std::string, int>, nlohmann::json> done_;
};

}  // namespace hg::eval
