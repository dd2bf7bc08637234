// --ids / --ids-file / tokenize --decode text: a JSON array of ids in [0, 2^31 - 1], or one clear error.
#include <gtest/gtest.h>

#include "test_expect.h"
#include "util/token_ids.h"

namespace hg::test {
namespace {

TEST(TokenIds, ParsesArrays) {
  EXPECT_EQ(parse_ids("[1, 306, 4658]", "--ids"), (std::vector<int32_t>{1, 306, 4658}));
  EXPECT_EQ(parse_ids(" [ 0 ,\n 2147483647 ] ", "--ids"), (std::vector<int32_t>{0, 2147483647}));
  EXPECT_TRUE(parse_ids("[]", "--ids").empty());
}

TEST(TokenIds, RejectsWhatIsNotAnId) {
  expect_error([] { parse_ids("[1, 2", "--ids"); }, {"--ids", "not a JSON array of token ids"});
  expect_error([] { parse_ids("{\"a\": 1}", "f.json"); }, {"f.json", "expected a JSON array"});
  expect_error([] { parse_ids("[1.5]", "--ids"); }, {"--ids", "element 1.5", "not an integer"});
  expect_error([] { parse_ids("[[1]]", "--ids"); }, {"element [1]", "not an integer"});
  // Found while writing the fuzz target: these wrapped to valid-looking ids (4294967297 -> 1).
  expect_error([] { parse_ids("[4294967297]", "--ids"); }, {"element 4294967297", "not a token id", "0 .. 2147483647"});
  expect_error([] { parse_ids("[18446744073709551615]", "--ids"); }, {"element 18446744073709551615"});
  expect_error([] { parse_ids("[2147483648]", "--ids"); }, {"element 2147483648"});
  expect_error([] { parse_ids("[-1]", "--decode"); }, {"--decode", "element -1", "not a token id"});
}

}  // namespace
}  // namespace hg::test
