// Tokenizer stages in isolation: UTF-8 helpers, split behaviours, normalizers, decoders, added
// tokens, the streaming decoder and chat formatting.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hybridgen/error.h"
#include "hybridgen/tokenizer.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/decoder.h"
#include "tokenizer/loaders.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/utf8.h"

using namespace hg::tok;
using Words = std::vector<std::string>;

namespace {

Words split(const PreTokenizer& p, std::string text) {
  Words w{std::move(text)};
  p.split(w, true);
  return w;
}

TEST(Utf8, CompletePrefixWaitsOnlyForPossibleSequences) {
  EXPECT_EQ(utf8_complete_prefix("ab"), 2u);
  EXPECT_EQ(utf8_complete_prefix("a\xE6\x9D"), 1u);      // 2 of 3 bytes of 東
  EXPECT_EQ(utf8_complete_prefix("a\xF0\x9F\x98"), 1u);  // 3 of 4 bytes of an emoji
  EXPECT_EQ(utf8_complete_prefix("a\xFF"), 2u);          // never valid: emit it
  EXPECT_EQ(utf8_complete_prefix("a\xE0\x80"), 3u);      // overlong: never valid
  EXPECT_EQ(utf8_lossy("a\xE6\x9D" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(utf8_lossy("\xFF\xFE"), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(Utf8, ByteMapRoundTripsEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += char(b);
  auto text = byte_map().encode_text(all);
  EXPECT_TRUE(utf8_is_valid(text));
  EXPECT_EQ(byte_map().decode_text(text).value(), all);
  EXPECT_EQ(byte_map().encode_text(" "), "\xC4\xA0");  // Ġ
}

TEST(Normalizer, UnicodeFormsAndInvalidBytes) {
  auto nfc = make_unicode_normalizer(NormalForm::NFC);
  EXPECT_EQ(nfc->normalize("e\xCC\x81"), "\xC3\xA9");  // e + combining acute -> é
  auto nfkc = make_unicode_normalizer(NormalForm::NFKC);
  EXPECT_EQ(nfkc->normalize("\xEF\xBC\xA6"), "F");  // fullwidth F
  EXPECT_EQ(nfc->normalize("e\xCC\x81\xFF" "e\xCC\x81"), "\xC3\xA9\xFF\xC3\xA9");
}

TEST(Normalizer, PrependReplaceSequence) {
  std::vector<NormalizerPtr> parts;
  parts.push_back(make_prepend_normalizer("\xE2\x96\x81"));
  parts.push_back(make_replace_normalizer(" ", true, "\xE2\x96\x81", "test"));
  auto seq = make_sequence_normalizer(std::move(parts));
  EXPECT_EQ(seq->normalize("a b"), "\xE2\x96\x81" "a\xE2\x96\x81" "b");
  EXPECT_EQ(seq->normalize(""), "");
  auto re = make_replace_normalizer("[0-9]+", false, "#", "test");
  EXPECT_EQ(re->normalize("a12b3"), "a#b#");
}

TEST(PreTokenizer, SplitBehaviours) {
  auto make = [](SplitBehavior b, bool invert = false) {
    return make_split_pre_tokenizer("-", true, b, invert, "test");
  };
  EXPECT_EQ(split(*make(SplitBehavior::Removed), "a-b--c"), (Words{"a", "b", "c"}));
  EXPECT_EQ(split(*make(SplitBehavior::Isolated), "a-b--c"), (Words{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(split(*make(SplitBehavior::MergedWithPrevious), "a-b--c"), (Words{"a-", "b-", "-", "c"}));
  EXPECT_EQ(split(*make(SplitBehavior::MergedWithNext), "a-b--c"), (Words{"a", "-b", "-", "-c"}));
  EXPECT_EQ(split(*make(SplitBehavior::Contiguous), "a-b--c"), (Words{"a", "-", "b", "--", "c"}));
  // invert: the pattern describes the words, the rest is removed
  auto words = make_split_pre_tokenizer("[a-z]+", false, SplitBehavior::Removed, true, "test");
  EXPECT_EQ(split(*words, "ab, cd"), (Words{"ab", "cd"}));
}

TEST(PreTokenizer, ByteLevelMetaspaceDigits) {
  auto bl = make_byte_level_pre_tokenizer(true, true);
  EXPECT_TRUE(bl->byte_level());
  EXPECT_EQ(split(*bl, "Hello world!"), (Words{" Hello", " world", "!"}));
  auto ms = make_metaspace_pre_tokenizer("\xE2\x96\x81", PrependScheme::Always, true);
  EXPECT_EQ(split(*ms, "Hey  you"), (Words{"\xE2\x96\x81Hey", "\xE2\x96\x81", "\xE2\x96\x81you"}));
  auto digits = make_digits_pre_tokenizer(true);
  EXPECT_EQ(split(*digits, "a123"), (Words{"a", "1", "2", "3"}));
  auto groups = make_digits_pre_tokenizer(false);
  EXPECT_EQ(split(*groups, "a123b"), (Words{"a", "123", "b"}));
}

TEST(PreTokenizer, ByteLevelMustBeLastInSequence) {
  std::vector<PreTokenizerPtr> parts;
  parts.push_back(make_byte_level_pre_tokenizer(false, true));
  parts.push_back(make_digits_pre_tokenizer(true));
  EXPECT_THROW(make_sequence_pre_tokenizer(std::move(parts), "test"), hg::Error);
}

TEST(Decoder, SentencePieceChain) {
  std::vector<DecoderPtr> parts;
  parts.push_back(make_replace_decoder("\xE2\x96\x81", " "));
  parts.push_back(make_byte_fallback_decoder());
  parts.push_back(make_fuse_decoder());
  parts.push_back(make_strip_decoder(" ", 1, 0));
  auto dec = make_sequence_decoder(std::move(parts));
  Words w{"\xE2\x96\x81Hi", "<0xE6>", "<0x9D>", "<0xB1>", "\xE2\x96\x81there"};
  dec->decode_chain(w, false);
  EXPECT_EQ(w, (Words{"Hi\xE6\x9D\xB1 there"}));
  Words partial{"<0xE6>", "<0x9D>"};
  Words raw = partial;
  dec->decode_chain(partial, false);
  EXPECT_EQ(partial, (Words{"\xEF\xBF\xBD\xEF\xBF\xBD"}));  // HF: one U+FFFD per byte
  dec->decode_chain(raw, true);
  EXPECT_EQ(raw, (Words{"\xE6\x9D"}));
}

TEST(Decoder, MetaspaceAndByteLevel) {
  auto ms = make_metaspace_decoder("\xE2\x96\x81", true);
  Words w{"\xE2\x96\x81Hey", "\xE2\x96\x81you"};
  ms->decode_chain(w, false);
  EXPECT_EQ(w, (Words{"Hey", " you"}));
  auto bl = make_byte_level_decoder();
  Words b{"Hello", "\xC4\xA0world"};
  bl->decode_chain(b, false);
  EXPECT_EQ(b, (Words{"Hello world"}));
}

TEST(AddedTokens, LeftmostLongestAndStripping) {
  std::vector<AddedToken> tokens = {
      {"<a>", 1, true, false, false, false, false},
      {"<a><b>", 2, true, false, false, false, false},
      {"[L]", 3, true, true, false, false, false},   // lstrip
      {"[R]", 4, true, false, true, false, false},   // rstrip
      {"w", 5, false, false, false, true, false},    // single_word
  };
  AddedTokenMatcher m(tokens);
  std::vector<AddedTokenMatcher::Segment> s;
  std::string text = "x<a><b>y<a>";
  m.split(text, s);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[1].id, 2);
  EXPECT_EQ(s[3].id, 1);
  text = "a  [L]  b [R]  c";
  m.split(text, s);
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(text.substr(s[0].begin, s[0].end - s[0].begin), "a");
  EXPECT_EQ(text.substr(s[1].begin, s[1].end - s[1].begin), "  [L]");
  EXPECT_EQ(text.substr(s[2].begin, s[2].end - s[2].begin), "  b ");
  EXPECT_EQ(text.substr(s[3].begin, s[3].end - s[3].begin), "[R]  ");
  text = "w wow w";
  m.split(text, s);
  int singles = 0;
  for (const auto& seg : s) singles += seg.id == 5;
  EXPECT_EQ(singles, 2);  // not the w inside "wow"
}

}  // namespace
