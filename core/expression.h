// Constraint expressions in the syntax of Kernel Tuner restrictions (a subset of Python).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"

namespace tunebase {

/// A parsed expression. Grammar (Python precedence):
///   or_expr   := and_expr ('or' and_expr)*
///   and_expr  := not_expr ('and' not_expr)*
///   not_expr  := 'not' not_expr | comparison
///   comparison:= sum (('<'|'<='|'>'|'>='|'=='|'!=') sum)*      (chained: a < b <= c)
///   sum       := term (('+'|'-') term)*
///   term      := factor (('*'|'/'|'//'|'%') factor)*
///   factor    := ('-'|'+') factor | power
///   power     := atom ('**' factor)?
///   atom      := number | string | name | 'True' | 'False' | '(' or_expr ')'
///              | name '(' args ')'     (min, max, abs, int, float, round, pow)
/// Arithmetic follows Python: `//` floors, `%` takes the divisor's sign, `/` is true division,
/// integers stay exact. `and` / `or` return one of their operands (`c or 1` is c when c is not
/// 0), `not` and comparisons True or False (1 or 0). `&&`, `||` and `!` are accepted as aliases
/// of and / or / not.
class Expression {
 public:
  Expression() = default;
  /// Parses `text`; throws ParseError with the character offset of the problem.
  static Expression parse(std::string_view text);

  /// Names the expression refers to, in order of first appearance.
  const std::vector<std::string>& names() const { return names_; }
  /// Binds each name to a slot: `slot_of(name)` returns the index used by evaluate(), or throws.
  void bind(const std::function<std::size_t(const std::string&)>& slot_of);
  /// Evaluates with name i bound to values[slot]; the result is Python-truthy or a value.
  Value evaluate(const std::vector<Value>& values) const;
  bool holds(const std::vector<Value>& values) const;
  const std::string& text() const { return text_; }

  struct Node;

 private:
  std::string text_;
  std::shared_ptr<const Node> root_;
  std::vector<std::string> names_;
  std::shared_ptr<std::vector<std::size_t>> slots_;
};

}  // namespace tunebase
