// gtest helpers shared by the tests.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <concepts>
#include <initializer_list>
#include <string>
#include <vector>

#include "hybridgen/error.h"
#include "test_util.h"

namespace hg::test {

// Expects `fn` to throw hg::Error with a one-line message that contains every one of `parts`.
template <typename Fn>
void expect_error(Fn fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected hg::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

// Expects a CLI run to have failed with one line on stderr, "error: ..." holding every one of
// `words`, and nothing on stdout.
inline void expect_one_error_line(const RunResult& r, const std::vector<std::string>& words) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  for (const auto& w : words) EXPECT_NE(r.err.find(w), std::string::npos) << "'" << w << "' not in: " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}
// One piece of text (a template, so that a braced list of words takes the overload above).
template <typename S>
  requires std::convertible_to<const S&, std::string>
void expect_one_error_line(const RunResult& r, const S& words) {
  expect_one_error_line(r, std::vector<std::string>{std::string(words)});
}

}  // namespace hg::test
