// The tokenizer.json table scanner (src/tokenizer/json_tables.cpp): JSON string escapes, both
// merge spellings, the rest of the document kept for the DOM, and malformed input as one error.
#include <gtest/gtest.h>

#include <string>

#include "test_expect.h"
#include "tokenizer/json_tables.h"

namespace hg::tok {
namespace {

using test::expect_error;

TEST(JsonTables, VocabEscapesAndOrder) {
  // \u0120 is Ġ (GPT-2's space), a surrogate pair is one 4-byte character, \" \\ \/ \n \t escapes.
  const std::string text = R"({"model": {"type": "BPE", "vocab": {"\u0120the": 0, "\ud83d\ude00": 1, "a\"b\\c\/d": 2,
      "\n\t": 3, "plain": 4}, "merges": []}, "added_tokens": [{"id": 5, "content": "<s>"}]})";
  BpeTables t;
  const Json rest = parse_tokenizer_json(text, "t.json", t);
  ASSERT_TRUE(t.has_vocab);
  ASSERT_TRUE(t.has_merges);
  ASSERT_EQ(t.vocab.size(), 5u);
  EXPECT_EQ(t.vocab[0].first, "\xC4\xA0the");
  EXPECT_EQ(t.vocab[1].first, "\xF0\x9F\x98\x80");
  EXPECT_EQ(t.vocab[2].first, "a\"b\\c/d");
  EXPECT_EQ(t.vocab[3].first, "\n\t");
  EXPECT_EQ(t.vocab[4], (std::pair<std::string, int64_t>{"plain", 4}));
  // The DOM keeps everything else, with the tables emptied.
  EXPECT_EQ(rest["model"]["type"], "BPE");
  EXPECT_TRUE(rest["model"]["vocab"].is_object() && rest["model"]["vocab"].empty());
  EXPECT_TRUE(rest["model"]["merges"].is_array() && rest["model"]["merges"].empty());
  EXPECT_EQ(rest["added_tokens"][0]["content"], "<s>");
}

TEST(JsonTables, BothMergeSpellings) {
  BpeTables a, b;
  parse_tokenizer_json(R"({"model": {"merges": ["a b", "\u0120 t"], "vocab": {}}})", "t", a);
  parse_tokenizer_json(R"({"model": {"merges": [["a", "b"], ["\u0120", "t"]], "vocab": {}}})", "t", b);
  ASSERT_EQ(a.merges.size(), 2u);
  EXPECT_EQ(a.merges, b.merges);
  EXPECT_EQ(a.merges[1], (std::pair<std::string, std::string>{"\xC4\xA0", "t"}));
  // A pair may hold spaces (HF's newer format exists for that).
  BpeTables c;
  parse_tokenizer_json(R"({"model": {"merges": [["a b", "c"]]}})", "t", c);
  EXPECT_EQ(c.merges[0].first, "a b");
}

TEST(JsonTables, OtherValuesAreSkippedAndKept) {
  // Nested objects, arrays, numbers and literals around and inside "model", and a "vocab" key
  // that is not model.vocab.
  const std::string text = R"({"version": "1.0", "truncation": null, "x": [1, -2.5e3, true, false, {"vocab": {"q": 1}}],
      "model": {"dropout": null, "fuse_unk": false, "vocab": {"a": 0}, "merges": [], "extra": {"k": [[]]}}})";
  BpeTables t;
  const Json rest = parse_tokenizer_json(text, "t", t);
  ASSERT_EQ(t.vocab.size(), 1u);
  EXPECT_EQ(rest["x"][1], -2500.0);
  EXPECT_EQ(rest["x"][4]["vocab"]["q"], 1);
  EXPECT_TRUE(rest["model"]["extra"]["k"][0].is_array());
  // A vocab that is not an object is left to the caller ("missing") rather than scanned.
  BpeTables u;
  const Json r2 = parse_tokenizer_json(R"({"model": {"vocab": 3}})", "t", u);
  EXPECT_FALSE(u.has_vocab);
  EXPECT_EQ(r2["model"]["vocab"], 3);
}

TEST(JsonTables, MalformedInputIsOneError) {
  auto parse = [](const std::string& text) {
    BpeTables t;
    parse_tokenizer_json(text, "t.json", t);
  };
  expect_error([&] { parse(R"({"model": {"vocab": {"a": 0, "b)"); }, {"t.json", "not valid JSON"});
  expect_error([&] { parse(R"({"model": {"vocab": {"a": 1.5}}})"); }, {"t.json", "model.vocab", "a float"});
  expect_error([&] { parse(R"({"model": {"vocab": {"a": "1"}}})"); }, {"model.vocab", "a string"});
  expect_error([&] { parse(R"({"model": {"vocab": {"a": 99999999999999999999}}})"); }, {"a huge number"});
  expect_error([&] { parse(R"({"model": {"vocab": {"\ud83d": 0}}})"); }, {"not valid JSON"});  // lone surrogate
  expect_error([&] { parse(R"({"model": {"vocab": {"\q": 0}}})"); }, {"not valid JSON"});
  expect_error([&] { parse("{\"model\": {\"vocab\": {\"a\nb\": 0}}}"); }, {"not valid JSON"});  // raw control char
  expect_error([&] { parse(R"({"model": {"merges": ["abc"]}})"); }, {"model.merges", "left right"});
  expect_error([&] { parse(R"({"model": {"merges": [["a", "b", "c"]]}})"); }, {"model.merges", "more than two"});
  expect_error([&] { parse(R"({"model": {"merges": [[1, 2]]}})"); }, {"model.merges", "a number"});
  expect_error([&] { parse(R"({"model": {}} trailing)"); }, {"not valid JSON"});
  expect_error([&] { parse(R"({"a": [1, 2,]})"); }, {"not valid JSON"});
  expect_error([&] { parse(R"({"a": tru})"); }, {"not valid JSON"});  // skipped loosely, rejected by the DOM
  expect_error([&] { parse(std::string(100000, '[')); }, {"not valid JSON"});  // not an object: the DOM says so
  expect_error([&] { parse("{\"a\": " + std::string(100000, '[')); }, {"nested more than"});
}

TEST(JsonTables, Gpt2VocabObject) {
  std::vector<std::pair<std::string, int64_t>> v;
  parse_vocab_object(R"({"\u0120a": 0, "b": 1})", "vocab.json", v);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].first, "\xC4\xA0" "a");
  expect_error([&] { parse_vocab_object(R"({"a": 0)", "vocab.json", v); }, {"vocab.json", "not valid JSON"});
  expect_error([&] { parse_vocab_object(R"(["a"])", "vocab.json", v); }, {"vocab.json", "not valid JSON"});
}

}  // namespace
}  // namespace hg::tok
