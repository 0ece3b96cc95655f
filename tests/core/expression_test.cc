#include "core/expression.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace tunebase {
namespace {

Value eval(const std::string& text, std::vector<Value> values = {}) {
  return Expression::parse(text).evaluate(values);
}

bool holds(const std::string& text, std::vector<Value> values) {
  return Expression::parse(text).holds(values);
}

TEST(Expression, PythonArithmetic) {
  EXPECT_TRUE(same_value(eval("7 // 2"), Value(std::int64_t{3})));
  EXPECT_TRUE(same_value(eval("-7 // 2"), Value(std::int64_t{-4})));
  EXPECT_TRUE(same_value(eval("-7 % 3"), Value(std::int64_t{2})));
  EXPECT_TRUE(same_value(eval("7 % -3"), Value(std::int64_t{-2})));
  EXPECT_TRUE(same_value(eval("7 / 2"), Value(3.5)));
  EXPECT_TRUE(same_value(eval("2 ** 10"), Value(std::int64_t{1024})));
  EXPECT_TRUE(same_value(eval("-2 ** 2"), Value(std::int64_t{-4})));
  EXPECT_TRUE(same_value(eval("1 + 2 * 3 - 4"), Value(std::int64_t{3})));
  EXPECT_TRUE(same_value(eval("(1 + 2) * 3"), Value(std::int64_t{9})));
  EXPECT_TRUE(same_value(eval("max(3, 8, 5) + min(4, 2)"), Value(std::int64_t{10})));
  EXPECT_TRUE(same_value(eval("5.5 % 2"), Value(1.5)));
}

TEST(Expression, ChainedComparisonAndLogic) {
  const std::string text = "32 <= bx * by <= 1024";
  EXPECT_TRUE(holds(text, {std::int64_t{32}, std::int64_t{8}}));
  EXPECT_FALSE(holds(text, {std::int64_t{4}, std::int64_t{4}}));
  EXPECT_FALSE(holds(text, {std::int64_t{64}, std::int64_t{32}}));
  EXPECT_TRUE(holds("a == 0 or b % 32 != 0", {std::int64_t{1}, std::int64_t{48}}));
  EXPECT_FALSE(holds("a == 0 or b % 32 != 0", {std::int64_t{1}, std::int64_t{64}}));
  EXPECT_TRUE(holds("not (a == 1 and b == 2)", {std::int64_t{1}, std::int64_t{3}}));
  EXPECT_TRUE(holds("a == 1 && !(b == 2) || False", {std::int64_t{1}, std::int64_t{3}}));
  EXPECT_TRUE(holds("fmt == 'csr' or fmt == \"sell\"", {std::string("sell")}));
  EXPECT_TRUE(holds("x in [1, 2, 4]", {std::int64_t{4}}));
  EXPECT_TRUE(holds("x not in (1, 2)", {std::int64_t{4}}));
}

TEST(Expression, NamesInOrderOfAppearance) {
  auto e = Expression::parse("MWG % (MDIMC * VWM) == 0 and MDIMC > 1");
  EXPECT_EQ(e.names(), (std::vector<std::string>{"MWG", "MDIMC", "VWM"}));
}

TEST(Expression, SyntaxErrorsCarryPosition) {
  try {
    Expression::parse("a * (b + 2");
    FAIL() << "no error";
  } catch (const ParseError& e) {
    EXPECT_EQ(e.position(), 10u);
    EXPECT_NE(std::string(e.what()).find("expected ')'"), std::string::npos);
  }
  try {
    Expression::parse("a $ b");
    FAIL() << "no error";
  } catch (const ParseError& e) {
    EXPECT_EQ(e.position(), 2u);
  }
  EXPECT_THROW(Expression::parse("a <"), ParseError);
  EXPECT_THROW(Expression::parse("foo(1)"), ParseError);
  EXPECT_THROW(Expression::parse("'abc"), ParseError);
}

TEST(Expression, RuntimeErrorsAreInvalidInput) {
  EXPECT_THROW(eval("1 // 0"), InvalidInput);
  EXPECT_THROW(eval("'a' < 1"), InvalidInput);
}

}  // namespace
}  // namespace tunebase
