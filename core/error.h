// Errors: one root, mapped to HTTP status codes in api/ and to exit codes in apps/.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace tunebase {

/// Root of every error tunebase throws. The message says what was wrong, where, and what is
/// allowed, so that a user can act on it without reading the source.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Input from a user (a file, a flag, a request body) that is malformed or inconsistent.
class InvalidInput : public Error {
 public:
  using Error::Error;
};

/// A syntax error in an expression or a file, with the 0-based character offset.
class ParseError : public InvalidInput {
 public:
  ParseError(const std::string& message, std::size_t position)
      : InvalidInput(message), position_(position) {}
  std::size_t position() const { return position_; }

 private:
  std::size_t position_;
};

/// A named thing (study, trial, kernel, machine, file) that does not exist.
class NotFound : public Error {
 public:
  using Error::Error;
};

/// A request that contradicts the stored state (a trial already completed, a duplicate name).
class Conflict : public Error {
 public:
  using Error::Error;
};

/// A missing or invalid credential.
class Unauthorized : public Error {
 public:
  using Error::Error;
};

/// A valid credential that may not do this (a result for another client's trial).
class Forbidden : public Unauthorized {
 public:
  using Unauthorized::Unauthorized;
};

/// Reading or writing a file failed (permissions, missing, truncated).
class IoError : public Error {
 public:
  using Error::Error;
};

/// The database refused an operation (locked, read-only, not a database, corrupt).
class StorageError : public Error {
 public:
  using Error::Error;
};

/// An evaluation back end (compiler, device, solver library) failed for a reason other than
/// the configuration being evaluated.
class BackendError : public Error {
 public:
  using Error::Error;
};

/// The evaluator cannot evaluate any configuration (its set-up failed: a solver process that
/// does not start, a broken environment). No trial is stored for it, unlike a failed
/// evaluation: measured after the set-up is fixed, the configurations would not have failed.
class EvaluatorUnavailable : public Error {
 public:
  using Error::Error;
};

/// An evaluation cut short because tunebase itself is being stopped: the stop signal reached
/// the program measured too (a service manager stopping the whole group, `kill 0`). It says
/// nothing of the configuration: no trial is stored for it, its lease goes back, and the sweep
/// or worker stops as interrupted.
class EvaluationInterrupted : public Error {
 public:
  using Error::Error;
};

}  // namespace tunebase
