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

}  // namespace memsim::cli

#endif  // MEMSIM_SIM_OPTIONS_PARSE_ERROR_H_
