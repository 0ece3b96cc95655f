#include "core/expression.h"

#include <gtest/gtest.h>

#include <limits>

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

// An integer and a real are compared exactly, as Python does: past 2^53 a double cannot hold
// every integer, so converting one to compare gave other answers.
TEST(Expression, IntegersAndRealsCompareExactly) {
  const std::vector<Value> a{std::int64_t{3}};
  EXPECT_FALSE(holds("a + 2**53 == 2**53 + 0.0", a));
  EXPECT_TRUE(holds("a + 2**53 > 2**53 * 1.0", a));
  EXPECT_TRUE(holds("2**53 + a != float(2**53 + a)", a));
  EXPECT_TRUE(holds("2**53 + 1 > 2.0**53", a));
  EXPECT_TRUE(holds("9223372036854775807 < 2.0**63", a));
  EXPECT_TRUE(holds("-9223372036854775807 - 1 == -2.0**63", {}));
  EXPECT_TRUE(holds("2 == 2.0 and 2.5 > 2 and -3 < -2.5", {}));
  // Division as Python's: floor division of floats from the remainder, integers divided
  // exactly before one rounding.
  EXPECT_TRUE(
      holds("1 // 0.1 == 9 and -1 // 0.1 == -10 and 7.5 // 2 == 3 and -7.5 // 2 == -4", {}));
  EXPECT_TRUE(holds("5.0 // 0.5 == 10", {}));
  EXPECT_TRUE(holds("(2**53 + 1) / 3 == 3002399751580331", {}));
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

// As in Python, `and` / `or` give one of their operands, evaluating the right one only when the
// left one does not decide; `not` gives True or False.
TEST(Expression, AndOrReturnAnOperandAndShortCircuit) {
  const Value three(std::int64_t{3});
  const Value zero(std::int64_t{0});
  EXPECT_TRUE(same_value(eval("a and b", {three, Value(std::int64_t{5})}), Value(std::int64_t{5})));
  EXPECT_TRUE(same_value(eval("a and b", {zero, three}), zero));
  EXPECT_TRUE(same_value(eval("a or b", {zero, three}), three));
  EXPECT_TRUE(same_value(eval("a or b", {three, Value(std::int64_t{5})}), three));
  EXPECT_TRUE(same_value(eval("a || 2.5", {zero}), Value(2.5)));
  EXPECT_TRUE(same_value(eval("s or 'none'", {Value(std::string())}), Value(std::string("none"))));
  // The conditional idiom of old Python code: `c > 0 and a // c or 0`.
  const std::string idiom = "(c > 0 and a // c or 0) > 4";
  EXPECT_TRUE(holds(idiom, {Value(std::int64_t{1}), Value(std::int64_t{8})}));
  EXPECT_FALSE(holds(idiom, {Value(std::int64_t{2}), Value(std::int64_t{8})}));
  EXPECT_FALSE(holds(idiom, {zero, Value(std::int64_t{64})}));  // no division by zero
  EXPECT_TRUE(same_value(eval("a or 1 // 0", {three}), three));
  EXPECT_TRUE(same_value(eval("a and 1 // 0", {zero}), zero));
  EXPECT_THROW(eval("a and 1 // 0", {three}), InvalidInput);
  EXPECT_TRUE(same_value(eval("not a", {three}), zero));
  EXPECT_TRUE(same_value(eval("not a", {zero}), Value(std::int64_t{1})));
  EXPECT_TRUE(same_value(eval("(not a) + 1", {Value(std::string("x"))}), Value(std::int64_t{1})));
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
  try {
    Expression::parse("bloc_\u00fc != 'x'");  // a name beyond ASCII: the character whole
    FAIL() << "no error";
  } catch (const ParseError& e) {
    EXPECT_NE(std::string(e.what()).find("unexpected character '\u00fc' at position 5: names in "
                                         "constraints are ASCII letters, digits and _"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Expression::parse("a <"), ParseError);
  EXPECT_THROW(Expression::parse("foo(1)"), ParseError);
  EXPECT_THROW(Expression::parse("'abc"), ParseError);
  // A long expression is quoted around the error, not whole.
  try {
    Expression::parse("a == '" + std::string(10000, 'x') + "' +* b");
    FAIL() << "no error";
  } catch (const ParseError& e) {
    const std::string message = e.what();
    EXPECT_LT(message.size(), 250u) << message;
    EXPECT_EQ(message.rfind("syntax error in \"...xxx", 0), 0u) << message;
    EXPECT_NE(message.find("xxx' +* b\" at position 10009: unexpected '*'"), std::string::npos)
        << message;
  }
}

// What Python allows and tunebase does not is refused saying so and what to write instead.
TEST(Expression, UnsupportedSyntaxIsNamedWithWhatToUse) {
  const auto error = [](const std::string& text) {
    try {
      (void)Expression::parse(text);
    } catch (const ParseError& e) {
      return std::string(e.what());
    }
    return std::string("parsed");
  };
  for (const char* op : {"&", "|", "^", "<<", ">>"}) {
    const auto message = error(std::string("a ") + op + " 3 == 0");
    EXPECT_EQ(message.rfind(std::string("bitwise operator '") + op +
                                "' at position 2 is not supported; use and / or / not",
                            0),
              0u)
        << message;
    EXPECT_NE(message.find("x >> k is x // 2**k"), std::string::npos) << message;
  }
  EXPECT_NE(error("~a == 0").find("bitwise operator '~' at position 0"), std::string::npos);
  EXPECT_EQ(error("a && b || c"), "parsed");
  EXPECT_EQ(error("a <= b >= c"), "parsed");
  for (const char* text : {"(a if c else b) > 2", "a if c else b", "x in [a if c else b]"}) {
    EXPECT_NE(error(text).find("conditional expressions (x if c else y) are not supported; write "
                               "(c and x) or (not c and y)"),
              std::string::npos)
        << error(text);
  }
  EXPECT_NE(error("a < 99999999999999999999")
                .find("integer '99999999999999999999' at position 4: "
                      "too large; integers must fit in 64 bits"),
            std::string::npos)
      << error("a < 99999999999999999999");
  // Python refuses 07 rather than read it as octal or decimal; zeros alone are zero.
  EXPECT_NE(error("a <= 07").find("integer '07' at position 5: leading zeros are not allowed in a "
                                  "decimal integer (as in Python); write 7, or 0o7"),
            std::string::npos)
      << error("a <= 07");
  EXPECT_NE(error("a < 010").find("leading zeros"), std::string::npos) << error("a < 010");
  // 9 is no octal digit: no 0o9 is suggested.
  EXPECT_NE(error("a >= 09").find("(as in Python); write 9"), std::string::npos)
      << error("a >= 09");
  EXPECT_EQ(error("a >= 09").find("0o"), std::string::npos) << error("a >= 09");
  for (const char* text : {"a > 00", "a > 0_0", "a > 0", "a > 07.5", "a > 0e1", "a > 0o7"}) {
    EXPECT_EQ(error(text), "parsed") << text;
  }
  EXPECT_NE(error("a < 1e400").find("number '1e400' at position 4: out of range"),
            std::string::npos)
      << error("a < 1e400");
  for (const char* text : {"1__0", "1_", "1_.5", "0x_", "0b102", "0x"}) {
    EXPECT_NE(error(std::string("a == ") + text).find("malformed"), std::string::npos) << text;
  }
}

// Python's hexadecimal, octal and binary literals, and underscores between digits.
TEST(Expression, PythonIntegerLiterals) {
  EXPECT_TRUE(same_value(eval("0x10"), Value(std::int64_t{16})));
  EXPECT_TRUE(same_value(eval("0XfF"), Value(std::int64_t{255})));
  EXPECT_TRUE(same_value(eval("0o17"), Value(std::int64_t{15})));
  EXPECT_TRUE(same_value(eval("0b101"), Value(std::int64_t{5})));
  EXPECT_TRUE(same_value(eval("0x_ff_ff"), Value(std::int64_t{65535})));
  EXPECT_TRUE(same_value(eval("1_000_000"), Value(std::int64_t{1000000})));
  EXPECT_TRUE(same_value(eval("1_000.5e1_0"), Value(1000.5e10)));
  EXPECT_TRUE(same_value(eval("0"), Value(std::int64_t{0})));
  EXPECT_TRUE(holds("a % 0x20 == 0 and a <= 1_024", {Value(std::int64_t{64})}));
  EXPECT_TRUE(
      same_value(eval("0x7fffffffffffffff"), Value(std::numeric_limits<std::int64_t>::max())));
}

TEST(Expression, RuntimeErrorsAreInvalidInput) {
  EXPECT_THROW(eval("1 // 0"), InvalidInput);
  EXPECT_THROW(eval("'a' < 1"), InvalidInput);
  EXPECT_THROW(eval("pow(0, -1)"), InvalidInput);  // Python: ZeroDivisionError
  EXPECT_THROW(eval("0.0 ** -2"), InvalidInput);
  EXPECT_THROW(eval("int(float(10 ** 400))"), InvalidInput);  // int(inf)
}

// Python's integers do not overflow; ours are 64 bits. A result beyond them is an error that
// names the expression, not a wrapped or rounded number that answers differently from Python.
TEST(Expression, IntegerOverflowIsAnErrorNotADifferentAnswer) {
  const std::int64_t big = std::numeric_limits<std::int64_t>::max();
  const auto overflow = [](const std::string& text, std::vector<Value> values = {}) {
    try {
      (void)Expression::parse(text).evaluate(values);
    } catch (const InvalidInput& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string beyond = "(values beyond 64 bits, -2^63 .. 2^63-1, are not supported";
  // As doubles, a * 2**60 + 1 and a * 2**60 were equal for a >= 8.
  const auto message = overflow("a * 2**60 + 1 > a * 2**60", {Value(std::int64_t{8})});
  EXPECT_EQ(message.rfind("evaluating \"a * 2**60 + 1 > a * 2**60\": integer overflow in 8 * "
                          "1152921504606846976 ",
                          0),
            0u)
      << message;
  EXPECT_NE(message.find(beyond), std::string::npos) << message;
  EXPECT_TRUE(holds("a * 2**60 + 1 > a * 2**60", {Value(std::int64_t{7})}));
  for (const char* text :
       {"2 ** 64 > 0", "2 ** 63 > 0", "x * 9223372036854775807 > 0", "9223372036854775807 + x > 0",
        "-9223372036854775807 - 1 - x < 0", "x ** 1000000000000 > 1",
        "(-9223372036854775807 - 1) // -1 > 0", "abs(-9223372036854775807 - 1) > 0",
        "-(-9223372036854775807 - 1) > 0", "int(1e300) > 0", "round(-1e19) < 0"}) {
    EXPECT_NE(overflow(text, {Value(std::int64_t{2})}).find("integer overflow in "),
              std::string::npos)
        << text;
  }
  // Everything within 64 bits stays exact, and powers of 0, 1 and -1 stay small.
  EXPECT_TRUE(same_value(eval("2 ** 62"), Value(std::int64_t{1} << 62)));
  EXPECT_TRUE(same_value(eval("(-2) ** 63"), Value(std::numeric_limits<std::int64_t>::min())));
  EXPECT_TRUE(same_value(eval("x - 1", {big}), Value(big - 1)));
  EXPECT_TRUE(same_value(eval("(-1) ** 1000000000001"), Value(std::int64_t{-1})));
  EXPECT_TRUE(same_value(eval("0 ** 1000000000000 + 1 ** 1000000000000"), Value(std::int64_t{1})));
  // INT64_MIN % y and % -1 (a trap in C++): Python's answers.
  EXPECT_TRUE(holds("(-9223372036854775807 - 1) % x == 0", {Value(std::int64_t{-1})}));
  EXPECT_TRUE(same_value(eval("(-9223372036854775807 - 1) % 3"), Value(std::int64_t{1})));
  EXPECT_TRUE(same_value(eval("int(-2.5)"), Value(std::int64_t{-2})));
  EXPECT_TRUE(same_value(eval("round(2.5)"), Value(std::int64_t{2})));
  // Floats keep float semantics, as in Python: true division, float(), float literals.
  EXPECT_TRUE(holds("2.0 ** 64 > 0", {}));
  EXPECT_TRUE(holds("float(x) * 2**62 * 4 > 0", {Value(std::int64_t{3})}));
  EXPECT_TRUE(same_value(eval("2**62 / 2**-2"), Value(18446744073709551616.0)));
}

TEST(Expression, NestingIsBoundedNotAStackOverflow) {
  const auto deep_error = [](const std::string& text) {
    try {
      Expression::parse(text);
    } catch (const ParseError& e) {
      return std::string(e.what());
    }
    return std::string("parsed");
  };
  const auto nested = [](int n) {
    return std::string(n, '(') + "x" + std::string(n, ')') + " > 1";
  };
  EXPECT_EQ(deep_error(nested(100)), "parsed");
  EXPECT_NE(deep_error(nested(100000)).find("nests more than 200 levels"), std::string::npos);
  std::string chain = "x";
  for (int k = 0; k < 50000; ++k) chain += " + x";
  EXPECT_NE(deep_error(chain + " > 1").find("nests more than"), std::string::npos);
  std::string nots;
  for (int k = 0; k < 100000; ++k) nots += "not ";
  EXPECT_NE(deep_error(nots + "x").find("nests more than"), std::string::npos);
  EXPECT_NE(deep_error(std::string(30000, '-') + "x > 1").find("nests more than"),
            std::string::npos);
  std::string powers;
  for (int k = 0; k < 100000; ++k) powers += "2 ** ";
  EXPECT_NE(deep_error(powers + "1 > 0").find("nests more than"), std::string::npos);
  // A realistic constraint is nowhere near the bound.
  EXPECT_EQ(deep_error("32 <= bx * by <= 1024 and (tile_x * bx) % 32 == 0 or not use_smem"),
            "parsed");
}

}  // namespace
}  // namespace tunebase
