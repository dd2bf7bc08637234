// hg::Error: every bad input becomes one of these, with a message that names the file and field.
// It is caught once, in main, and printed as one line on stderr.
#pragma once
#include <stdexcept>
#include <string>

namespace hg {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace hg
