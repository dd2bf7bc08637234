// gtest helpers shared by the tests.
#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "hybridgen/error.h"

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

}  // namespace hg::test
