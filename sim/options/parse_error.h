// CLI11's parse errors as memsim's one-line messages: an unknown command or option with the
// nearest name ("did you mean"), a value outside an option's choices with the choices, a value of
// the wrong type with the type expected. Used by the command line (tools/memsim/main.cc) and by
// the Python module (python/), so both say the same.
#ifndef MEMSIM_SIM_OPTIONS_PARSE_ERROR_H_
#define MEMSIM_SIM_OPTIONS_PARSE_ERROR_H_

#include <CLI/CLI.hpp>
#include <string>

namespace memsim::cli {

/// The message (one line, without "memsim: ") for |e|, thrown by |app|.parse(); |app| is the
/// root app, whose parsed subcommand (if any) is the one the error belongs to.
std::string ParseErrorMessage(CLI::App& app, const CLI::ParseError& e);

/// Makes every integer option of |app| and of its subcommands (their type name INT) refuse an
/// integer written beyond 64 bits ("99999999999999999999") instead of CLI11's conversion
/// saturating it to INT64_MAX. Call after the options are added.
void GuardIntegerText(CLI::App* app);

}  // namespace memsim::cli

#endif  // MEMSIM_SIM_OPTIONS_PARSE_ERROR_H_
