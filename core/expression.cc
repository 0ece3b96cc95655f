#include "core/expression.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>

#include "core/error.h"

namespace tunebase {

namespace {

enum class Op {
  add,
  sub,
  mul,
  truediv,
  floordiv,
  mod,
  pow,
  neg,
  pos,
  lt,
  le,
  gt,
  ge,
  eq,
  ne,
  in,
  not_in
};

enum class TokenKind { number, string, name, op, end };

struct Token {
  TokenKind kind;
  std::string text;
  Value value;
  std::size_t pos;
};

[[noreturn]] void number_error(const std::string& what, std::string_view text, std::size_t start,
                               const std::string& why) {
  throw ParseError(what + " '" + std::string(text) + "' at position " + std::to_string(start) +
                       (why.empty() ? "" : ": " + why),
                   start);
}

// A number as Python writes it: 42, 1_000, 0x1F, 0o17, 0b101, 2.5, .5, 1e-3. Advances `i` past
// it.
Token read_number(std::string_view s, std::size_t& i) {
  const std::size_t start = i;
  const auto at = [&](std::size_t k) { return k < s.size() ? s[k] : '\0'; };
  int base = 10;
  if (s[i] == '0') {
    switch (at(i + 1)) {
      case 'x':
      case 'X':
        base = 16;
        break;
      case 'o':
      case 'O':
        base = 8;
        break;
      case 'b':
      case 'B':
        base = 2;
        break;
      default:
        break;
    }
  }
  const std::size_t digits_from = base == 10 ? start : start + 2;
  i = digits_from;
  bool is_real = false;
  while (i < s.size()) {
    const char ch = s[i];
    const bool part = base == 10
                          ? std::isdigit(static_cast<unsigned char>(ch)) || ch == '_' ||
                                ch == '.' || ch == 'e' || ch == 'E' ||
                                ((ch == '+' || ch == '-') && (s[i - 1] == 'e' || s[i - 1] == 'E'))
                          : std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
    if (!part) break;
    if (base == 10 && (ch == '.' || ch == 'e' || ch == 'E')) is_real = true;
    ++i;
  }
  const std::string_view text = s.substr(start, i - start);
  // Python: an underscore stands between two digits (or after a base prefix): 1_000, 0x_ff.
  const auto is_digit = [&](char ch) {
    return base == 16 ? std::isxdigit(static_cast<unsigned char>(ch)) != 0
                      : std::isdigit(static_cast<unsigned char>(ch)) != 0;
  };
  std::string digits;
  for (std::size_t k = digits_from; k < i; ++k) {
    if (s[k] != '_') {
      digits += s[k];
      continue;
    }
    const bool after_prefix = base != 10 && k == digits_from;
    if (!(after_prefix || is_digit(s[k - 1])) || !is_digit(at(k + 1)) || k + 1 >= i) {
      number_error("malformed number", text, start,
                   "an underscore may only separate digits, as in 1_000");
    }
  }
  Token t{TokenKind::number, std::string(text), std::int64_t{0}, start};
  const char* const first = digits.data();
  const char* const last = digits.data() + digits.size();
  if (is_real) {
    double d = 0;
    auto [p, ec] = std::from_chars(first, last, d);
    if (ec == std::errc::result_out_of_range) {
      number_error("number", text, start,
                   "out of range; floats are 64-bit doubles, whose magnitude is at most about "
                   "1.8e308 and, unless 0, at least about 2.2e-308");
    }
    if (ec != std::errc() || p != last) number_error("malformed number", text, start, "");
    t.value = d;
    return t;
  }
  // Python refuses 07 (a C programmer's octal) rather than guess; 0, 00 and 0_0 are zero.
  if (base == 10 && digits.size() > 1 && digits.front() == '0' &&
      digits.find_first_not_of('0') != std::string::npos) {
    const auto significant = digits.substr(digits.find_first_not_of('0'));
    const bool octal = significant.find_first_not_of("01234567") == std::string::npos;
    number_error("integer", text, start,
                 "leading zeros are not allowed in a decimal integer (as in Python); write " +
                     significant + (octal ? ", or 0o" + significant + " for an octal number" : ""));
  }
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(first, last, v, base);
  if (ec == std::errc::result_out_of_range) {
    number_error("integer", text, start,
                 "too large; integers must fit in 64 bits (at most 9223372036854775807)");
  }
  if (ec != std::errc() || p != last || digits.empty()) {
    number_error("malformed integer", text, start,
                 base == 10 ? "" : "digits in base " + std::to_string(base) + " expected");
  }
  t.value = v;
  return t;
}

std::vector<Token> tokenize(std::string_view s) {
  // Longest operators first so that `**` wins over `*` and `<=` over `<`.
  static const char* const kOperators[] = {"**", "//", "<=", ">=", "==", "!=", "&&",
                                           "||", "+",  "-",  "*",  "/",  "%",  "<",
                                           ">",  "(",  ")",  ",",  "[",  "]",  "!"};
  std::vector<Token> tokens;
  std::size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    const std::size_t start = i;
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      tokens.push_back(read_number(s, i));
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
      tokens.push_back({TokenKind::name, std::string(s.substr(start, i - start)), {}, start});
      continue;
    }
    if (c == '"' || c == '\'') {
      ++i;
      std::string text;
      while (i < s.size() && s[i] != c) text += s[i++];
      if (i >= s.size()) {
        throw ParseError("unterminated string starting at position " + std::to_string(start),
                         start);
      }
      ++i;
      tokens.push_back({TokenKind::string, text, text, start});
      continue;
    }
    // Python's bitwise operators: `&&` and `||` are matched above, `<<` and `>>` must not
    // become two comparisons.
    const std::string_view two = s.substr(i, 2);
    const bool shift = two == "<<" || two == ">>";
    if (shift || ((c == '&' || c == '|') && two != "&&" && two != "||") || c == '^' || c == '~') {
      throw ParseError("bitwise operator '" + std::string(shift ? two : s.substr(i, 1)) +
                           "' at position " + std::to_string(start) +
                           " is not supported; use and / or / not for conditions, and //, % "
                           "and ** for arithmetic on bits (x >> k is x // 2**k, x << k is "
                           "x * 2**k, x & (2**k - 1) is x % 2**k)",
                       start);
    }
    bool matched = false;
    for (const char* op : kOperators) {
      const std::string_view o(op);
      if (s.substr(i, o.size()) == o) {
        tokens.push_back({TokenKind::op, std::string(o), {}, start});
        i += o.size();
        matched = true;
        break;
      }
    }
    if (!matched) {
      if (static_cast<unsigned char>(c) >= 0x80) {
        // A UTF-8 sequence: quoted whole, since only ASCII makes up names and operators.
        std::size_t end = start + 1;
        while (end < s.size() && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) ++end;
        throw ParseError("unexpected character '" + std::string(s.substr(start, end - start)) +
                             "' at position " + std::to_string(start) +
                             ": names in constraints are ASCII letters, digits and _",
                         start);
      }
      throw ParseError(
          "unexpected character '" + std::string(1, c) + "' at position " + std::to_string(start),
          start);
    }
  }
  tokens.push_back({TokenKind::end, "", {}, s.size()});
  return tokens;
}

}  // namespace

struct Expression::Node {
  enum class Kind {
    constant,
    name,
    unary,
    binary,
    compare,
    logical_and,
    logical_or,
    logical_not,
    call,
    list
  };
  Kind kind = Kind::constant;
  Value constant;
  std::size_t name_index = 0;
  Op op = Op::add;
  std::vector<Op> compare_ops;
  std::string function;
  std::vector<std::shared_ptr<const Node>> children;
  std::size_t depth = 1;  ///< of the subtree: evaluation recurses this deep
};

namespace {

using NodePtr = std::shared_ptr<const Expression::Node>;
using Node = Expression::Node;

class Parser {
 public:
  Parser(std::string_view text, std::vector<std::string>& names)
      : text_(text), tokens_(tokenize(text)), names_(names) {}

  NodePtr parse() {
    auto root = parse_or();
    if (peek().kind != TokenKind::end) fail("unexpected '" + peek().text + "'");
    return root;
  }

 private:
  const Token& peek() const { return tokens_[pos_]; }
  Token next() { return tokens_[pos_++]; }
  bool accept_op(std::string_view op) {
    if (peek().kind == TokenKind::op && peek().text == op) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool accept_word(std::string_view word) {
    if (peek().kind == TokenKind::name && peek().text == word) {
      ++pos_;
      return true;
    }
    return false;
  }
  [[noreturn]] void fail(const std::string& what) const {
    const auto p = peek().pos;
    // A long expression is quoted around the error only.
    constexpr std::size_t kContext = 40;
    std::string quoted(text_);
    if (text_.size() > 3 * kContext) {
      const std::size_t from = p > kContext ? p - kContext : 0;
      quoted = (from > 0 ? "..." : "") + std::string(text_.substr(from, 2 * kContext)) +
               (from + 2 * kContext < text_.size() ? "..." : "");
    }
    throw ParseError(
        "syntax error in \"" + quoted + "\" at position " + std::to_string(p) + ": " + what, p);
  }

  // Parsing and evaluation recurse; a bound keeps "((((...x...))))" or a chain of 100,000
  // terms from exhausting the stack of a server thread.
  static constexpr std::size_t kMaxDepth = 200;
  [[noreturn]] void too_deep() const {
    fail("the expression nests more than " + std::to_string(kMaxDepth) +
         " levels deep (parentheses, operators or chained terms); split it into several "
         "constraints");
  }
  struct Nesting {
    explicit Nesting(const Parser& p) : parser(p) {
      if (++parser.nesting_ > kMaxDepth) parser.too_deep();
    }
    ~Nesting() { --parser.nesting_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;
    const Parser& parser;
  };

  NodePtr make(Node n) const {
    for (const auto& c : n.children) n.depth = std::max(n.depth, c->depth + 1);
    if (n.depth > kMaxDepth) too_deep();
    return std::make_shared<const Node>(std::move(n));
  }

  NodePtr parse_or() {
    auto left = parse_and();
    while (accept_word("or") || accept_op("||")) {
      Node n;
      n.kind = Node::Kind::logical_or;
      n.children = {left, parse_and()};
      left = make(std::move(n));
    }
    if (peek().kind == TokenKind::name && peek().text == "if") {
      fail(
          "conditional expressions (x if c else y) are not supported; write (c and x) or "
          "(not c and y)");
    }
    return left;
  }
  NodePtr parse_and() {
    auto left = parse_not();
    while (accept_word("and") || accept_op("&&")) {
      Node n;
      n.kind = Node::Kind::logical_and;
      n.children = {left, parse_not()};
      left = make(std::move(n));
    }
    return left;
  }
  NodePtr parse_not() {
    if (accept_word("not") || accept_op("!")) {
      const Nesting nesting(*this);
      Node n;
      n.kind = Node::Kind::logical_not;
      n.children = {parse_not()};
      return make(std::move(n));
    }
    return parse_comparison();
  }
  std::optional<Op> comparison_op() {
    static const std::pair<const char*, Op> kOps[] = {{"<", Op::lt},  {"<=", Op::le},
                                                      {">", Op::gt},  {">=", Op::ge},
                                                      {"==", Op::eq}, {"!=", Op::ne}};
    if (peek().kind == TokenKind::op) {
      for (auto [text, op] : kOps) {
        if (peek().text == text) {
          ++pos_;
          return op;
        }
      }
    }
    if (accept_word("in")) return Op::in;
    if (peek().kind == TokenKind::name && peek().text == "not" &&
        tokens_[pos_ + 1].kind == TokenKind::name && tokens_[pos_ + 1].text == "in") {
      pos_ += 2;
      return Op::not_in;
    }
    return std::nullopt;
  }
  NodePtr parse_comparison() {
    auto first = parse_sum();
    Node n;
    n.kind = Node::Kind::compare;
    n.children.push_back(first);
    while (auto op = comparison_op()) {
      n.compare_ops.push_back(*op);
      n.children.push_back(parse_sum());
    }
    if (n.compare_ops.empty()) return first;
    return make(std::move(n));
  }
  NodePtr binary(Op op, NodePtr a, NodePtr b) {
    Node n;
    n.kind = Node::Kind::binary;
    n.op = op;
    n.children = {std::move(a), std::move(b)};
    return make(std::move(n));
  }
  NodePtr parse_sum() {
    auto left = parse_term();
    for (;;) {
      if (accept_op("+"))
        left = binary(Op::add, left, parse_term());
      else if (accept_op("-"))
        left = binary(Op::sub, left, parse_term());
      else
        return left;
    }
  }
  NodePtr parse_term() {
    auto left = parse_factor();
    for (;;) {
      if (accept_op("*"))
        left = binary(Op::mul, left, parse_factor());
      else if (accept_op("//"))
        left = binary(Op::floordiv, left, parse_factor());
      else if (accept_op("/"))
        left = binary(Op::truediv, left, parse_factor());
      else if (accept_op("%"))
        left = binary(Op::mod, left, parse_factor());
      else
        return left;
    }
  }
  NodePtr parse_factor() {
    const bool negate = accept_op("-");
    if (negate || accept_op("+")) {
      const Nesting nesting(*this);
      Node n;
      n.kind = Node::Kind::unary;
      n.op = negate ? Op::neg : Op::pos;
      n.children = {parse_factor()};
      return make(std::move(n));
    }
    auto base = parse_atom();
    if (accept_op("**")) {
      const Nesting nesting(*this);
      return binary(Op::pow, base, parse_factor());
    }
    return base;
  }
  // Every bracket, parenthesis and argument list nests one level.
  std::vector<NodePtr> parse_list(std::string_view close) {
    const Nesting nesting(*this);
    std::vector<NodePtr> items;
    if (accept_op(close)) return items;
    for (;;) {
      items.push_back(parse_or());
      if (accept_op(close)) return items;
      if (!accept_op(",")) fail("expected ',' or '" + std::string(close) + "'");
      if (accept_op(close)) return items;
    }
  }
  NodePtr parse_atom() {
    const Token& t = peek();
    if (t.kind == TokenKind::number || t.kind == TokenKind::string) {
      Node n;
      n.kind = Node::Kind::constant;
      n.constant = next().value;
      return make(std::move(n));
    }
    if (t.kind == TokenKind::name) {
      static const char* const kReserved[] = {"and", "or", "not", "in"};
      for (const char* r : kReserved) {
        if (t.text == r) fail("unexpected keyword '" + t.text + "'");
      }
      const std::string name = next().text;
      if (name == "True" || name == "False") {
        Node n;
        n.kind = Node::Kind::constant;
        n.constant = std::int64_t{name == "True" ? 1 : 0};
        return make(std::move(n));
      }
      if (accept_op("(")) {
        static const char* const kFunctions[] = {"min",   "max",   "abs", "int",
                                                 "float", "round", "pow"};
        bool known = false;
        for (const char* f : kFunctions) known = known || name == f;
        if (!known) {
          fail("unknown function '" + name + "'; allowed: min, max, abs, int, float, round, pow");
        }
        Node n;
        n.kind = Node::Kind::call;
        n.function = name;
        n.children = parse_list(")");
        if (n.children.empty()) fail("function '" + name + "' needs at least one argument");
        return make(std::move(n));
      }
      Node n;
      n.kind = Node::Kind::name;
      auto it = std::find(names_.begin(), names_.end(), name);
      n.name_index = static_cast<std::size_t>(it - names_.begin());
      if (it == names_.end()) names_.push_back(name);
      return make(std::move(n));
    }
    if (accept_op("(")) {
      const Nesting nesting(*this);
      auto inner = parse_or();
      if (accept_op(",")) {  // a tuple, used with `in`
        Node n;
        n.kind = Node::Kind::list;
        n.children.push_back(inner);
        for (auto& item : parse_list(")")) n.children.push_back(item);
        return make(std::move(n));
      }
      if (!accept_op(")")) fail("expected ')'");
      return inner;
    }
    if (accept_op("[")) {
      Node n;
      n.kind = Node::Kind::list;
      n.children = parse_list("]");
      return make(std::move(n));
    }
    if (t.kind == TokenKind::end) fail("unexpected end of expression");
    fail("unexpected '" + t.text + "'");
  }

  std::string_view text_;
  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  std::vector<std::string>& names_;
  mutable std::size_t nesting_ = 0;
};

bool truthy(const Value& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i != 0;
  if (const auto* d = std::get_if<double>(&v)) return *d != 0.0;
  return !std::get<std::string>(v).empty();
}

[[noreturn]] void type_error(const char* op, const Value& a, const Value& b) {
  throw InvalidInput(std::string("cannot apply '") + op + "' to " + to_string(a) + " and " +
                     to_string(b));
}

// b != 0 and not (a == INT64_MIN and b == -1): the caller checks.
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// Python's integers never overflow; ours are 64 bits. A result beyond them is an error rather
// than a wrapped or rounded number: as a double, `a * 2**60 + 1 > a * 2**60` was false.
[[noreturn]] void integer_overflow(const std::string& what) {
  throw InvalidInput("integer overflow in " + what +
                     " (values beyond 64 bits, -2^63 .. 2^63-1, are not supported; Python's "
                     "integers are unbounded)");
}

[[noreturn]] void integer_overflow(const char* op, std::int64_t x, std::int64_t y) {
  integer_overflow(std::to_string(x) + " " + op + " " + std::to_string(y));
}

std::int64_t negate(std::int64_t x) {
  if (x == std::numeric_limits<std::int64_t>::min())
    integer_overflow("-(" + std::to_string(x) + ")");
  return -x;
}

std::int64_t int_pow(std::int64_t base, std::int64_t exponent) {
  // 0, 1 and -1 stay small whatever the exponent (and 2 ** 10**12 need not loop).
  if (base == 0 || base == 1) return exponent == 0 ? 1 : base;
  if (base == -1) return exponent % 2 == 0 ? 1 : -1;
  std::int64_t result = 1;
  std::int64_t b = base;
  for (std::int64_t e = exponent; e > 0; e >>= 1) {  // by squaring: 63 steps at most
    if ((e & 1) && __builtin_mul_overflow(result, b, &result))
      integer_overflow("**", base, exponent);
    if (e > 1 && __builtin_mul_overflow(b, b, &b)) integer_overflow("**", base, exponent);
  }
  return result;
}

// Python's float floor division (CPython's float_divmod): from the remainder, not floor(x / y),
// whose rounded quotient can land on the next whole number (1 // 0.1 is 9.0, not 10).
double python_float_floordiv(double x, double y) {
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0 && ((y < 0) != (mod < 0))) div -= 1.0;
  if (div == 0) return std::copysign(0.0, x / y);
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

Value checked_pow(double x, double y) {
  if (x == 0.0 && y < 0.0) {
    throw InvalidInput("0 cannot be raised to a negative power");
  }
  return std::pow(x, y);
}

Value arithmetic(Op op, const Value& a, const Value& b) {
  const char* names[] = {"+", "-", "*", "/", "//", "%", "**"};
  const char* name = names[static_cast<int>(op)];
  if (!is_number(a) || !is_number(b)) {
    if (op == Op::add && !is_number(a) && !is_number(b)) {
      return std::get<std::string>(a) + std::get<std::string>(b);
    }
    type_error(name, a, b);
  }
  const bool ints =
      std::holds_alternative<std::int64_t>(a) && std::holds_alternative<std::int64_t>(b);
  if (ints) {
    const auto x = std::get<std::int64_t>(a);
    const auto y = std::get<std::int64_t>(b);
    const auto dx = static_cast<double>(x);
    const auto dy = static_cast<double>(y);
    std::int64_t r = 0;
    switch (op) {
      case Op::add:
        if (__builtin_add_overflow(x, y, &r)) integer_overflow(name, x, y);
        return r;
      case Op::sub:
        if (__builtin_sub_overflow(x, y, &r)) integer_overflow(name, x, y);
        return r;
      case Op::mul:
        if (__builtin_mul_overflow(x, y, &r)) integer_overflow(name, x, y);
        return r;
      case Op::truediv:
        if (y == 0) throw InvalidInput("division by zero");
        // Python divides integers exactly, then rounds once; dx / dy rounded the operands
        // first (past 2^53). A long double holds every int64 exactly.
        return static_cast<double>(static_cast<long double>(x) / static_cast<long double>(y));
      case Op::floordiv:
        if (y == 0) throw InvalidInput("integer division by zero");
        if (y == -1) {
          if (x == std::numeric_limits<std::int64_t>::min()) integer_overflow(name, x, y);
          return -x;
        }
        return floor_div(x, y);
      case Op::mod:
        if (y == 0) throw InvalidInput("modulo by zero");
        if (y == -1) return std::int64_t{0};
        // Python: the result takes the sign of the divisor (x - floor(x / y) * y, whose product
        // can overflow for x near -2^63).
        r = x % y;
        return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
      case Op::pow:
        if (y >= 0) return Value(int_pow(x, y));
        return checked_pow(dx, dy);
      default:
        break;
    }
  }
  const double x = as_double(a);
  const double y = as_double(b);
  switch (op) {
    case Op::add:
      return x + y;
    case Op::sub:
      return x - y;
    case Op::mul:
      return x * y;
    case Op::truediv:
      if (y == 0) throw InvalidInput("division by zero");
      return x / y;
    case Op::floordiv:
      if (y == 0) throw InvalidInput("division by zero");
      return python_float_floordiv(x, y);
    case Op::mod: {
      if (y == 0) throw InvalidInput("modulo by zero");
      const double r = std::fmod(x, y);
      return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
    }
    case Op::pow:
      return checked_pow(x, y);
    default:
      break;
  }
  type_error(name, a, b);
}

// An ordering comparison of two numbers (or strings) of one type.
template <typename T>
bool ordered(Op op, const T& x, const T& y) {
  switch (op) {
    case Op::lt:
      return x < y;
    case Op::le:
      return x <= y;
    case Op::gt:
      return x > y;
    case Op::ge:
      return x >= y;
    default:
      return false;
  }
}

bool compare(Op op, const Value& a, const Value& b) {
  if (op == Op::eq) return same_value(a, b);
  if (op == Op::ne) return !same_value(a, b);
  if (is_number(a) && is_number(b)) {
    // Exact between an integer and a real, as Python compares them.
    const auto order = compare_numbers(a, b);
    switch (op) {
      case Op::lt:
        return order < 0;
      case Op::le:
        return order <= 0;
      case Op::gt:
        return order > 0;
      case Op::ge:
        return order >= 0;
      default:
        return false;
    }
  }
  if (!is_number(a) && !is_number(b)) {
    return ordered(op, std::get<std::string>(a), std::get<std::string>(b));
  }
  throw InvalidInput("cannot compare " + to_string(a) + " with " + to_string(b));
}

struct Evaluator {
  const std::vector<Value>& values;
  const std::vector<std::size_t>& slots;

  Value eval(const Node& n) const {
    switch (n.kind) {
      case Node::Kind::constant:
        return n.constant;
      case Node::Kind::name:
        return values[slots[n.name_index]];
      case Node::Kind::unary: {
        Value v = eval(*n.children[0]);
        if (n.op == Op::pos) return v;
        if (const auto* i = std::get_if<std::int64_t>(&v)) return negate(*i);
        if (const auto* d = std::get_if<double>(&v)) return -*d;
        throw InvalidInput("cannot negate the string " + to_string(v));
      }
      case Node::Kind::binary:
        return arithmetic(n.op, eval(*n.children[0]), eval(*n.children[1]));
      case Node::Kind::compare: {
        Value left = eval(*n.children[0]);
        for (std::size_t k = 0; k < n.compare_ops.size(); ++k) {
          const Op op = n.compare_ops[k];
          if (op == Op::in || op == Op::not_in) {
            const Node& list = *n.children[k + 1];
            if (list.kind != Node::Kind::list) {
              throw InvalidInput("'in' needs a list such as [1, 2, 4]");
            }
            bool found = false;
            for (const auto& item : list.children) found = found || same_value(left, eval(*item));
            if (found != (op == Op::in)) return std::int64_t{0};
            continue;
          }
          Value right = eval(*n.children[k + 1]);
          if (!compare(op, left, right)) return std::int64_t{0};
          left = std::move(right);
        }
        return std::int64_t{1};
      }
      // Python: `x and y` is x when x is false, else y; `x or y` is x when x is true, else y.
      // The operand itself, not True/False (`(c > 0 and a // c or 0) > 4`); the right one is
      // evaluated only when needed.
      case Node::Kind::logical_and: {
        Value left = eval(*n.children[0]);
        return truthy(left) ? eval(*n.children[1]) : left;
      }
      case Node::Kind::logical_or: {
        Value left = eval(*n.children[0]);
        return truthy(left) ? left : eval(*n.children[1]);
      }
      case Node::Kind::logical_not:
        return std::int64_t{!truthy(eval(*n.children[0]))};
      case Node::Kind::call:
        return call(n);
      case Node::Kind::list:
        throw InvalidInput("a list can only stand after 'in'");
    }
    return std::int64_t{0};
  }

  Value call(const Node& n) const {
    std::vector<Value> args;
    for (const auto& c : n.children) args.push_back(eval(*c));
    const std::string& f = n.function;
    if (f == "min" || f == "max") {
      Value best = args[0];
      for (std::size_t k = 1; k < args.size(); ++k) {
        const bool better = compare(f == "min" ? Op::lt : Op::gt, args[k], best);
        if (better) best = args[k];
      }
      return best;
    }
    if (f == "pow") {
      if (args.size() != 2) throw InvalidInput("pow takes two arguments");
      return arithmetic(Op::pow, args[0], args[1]);
    }
    if (args.size() != 1) throw InvalidInput(f + " takes one argument");
    const Value& v = args[0];
    if (f == "abs") {
      if (const auto* i = std::get_if<std::int64_t>(&v)) return *i < 0 ? negate(*i) : *i;
      return std::fabs(as_double(v));
    }
    if (f == "float") return as_double(v);
    if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
    // int truncates, round rounds half to even (as Python); infinity and NaN have no integer,
    // and a whole number beyond int64 is an overflow as in arithmetic.
    const double d = as_double(v);
    if (!std::isfinite(d))
      throw InvalidInput(f + "() of " + to_string(v) + " has no integer value");
    const double whole = f == "int" ? std::trunc(d) : std::nearbyint(d);
    constexpr double kInt64Bound = 9223372036854775808.0;  // 2^63
    if (whole >= kInt64Bound || whole < -kInt64Bound)
      integer_overflow(f + "(" + to_string(v) + ")");
    return static_cast<std::int64_t>(whole);
  }
};

}  // namespace

Expression Expression::parse(std::string_view text) {
  Expression e;
  e.text_ = std::string(text);
  Parser parser(text, e.names_);
  e.root_ = parser.parse();
  auto slots = std::make_shared<std::vector<std::size_t>>(e.names_.size());
  for (std::size_t i = 0; i < slots->size(); ++i) (*slots)[i] = i;
  e.slots_ = std::move(slots);
  return e;
}

void Expression::bind(const std::function<std::size_t(const std::string&)>& slot_of) {
  auto slots = std::make_shared<std::vector<std::size_t>>(names_.size());
  for (std::size_t i = 0; i < names_.size(); ++i) (*slots)[i] = slot_of(names_[i]);
  slots_ = std::move(slots);
}

Value Expression::evaluate(const std::vector<Value>& values) const {
  if (!root_) throw InvalidInput("empty expression");
  try {
    return Evaluator{values, *slots_}.eval(*root_);
  } catch (const ParseError&) {
    throw;
  } catch (const InvalidInput& e) {
    throw InvalidInput("evaluating \"" + text_ + "\": " + e.what());
  }
}

bool Expression::holds(const std::vector<Value>& values) const { return truthy(evaluate(values)); }

}  // namespace tunebase
