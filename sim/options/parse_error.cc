#include "sim/options/parse_error.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include <set>
#include <string_view>
#include <vector>

#include "lib/util/nearest.h"
#include "lib/util/text_limits.h"

namespace memsim::cli {
namespace {

/// The subcommand |app| parsed, or |app| itself.
CLI::App* Parsed(CLI::App& app) {
  std::vector<CLI::App*> subs = app.get_subcommands();
  return subs.empty() ? &app : subs.front();
}

/// "memsim run --help" (or "memsim --help" at the root).
std::string HelpOf(const CLI::App* cmd) {
  return cmd->get_parent() == nullptr ? "memsim --help" : "memsim " + cmd->get_name() + " --help";
}

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = std::min(s.find(sep, start), s.size());
    out.emplace_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string Join(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

/// ": did you mean X?" for the nearest of |names| to |word| (2 edits, 3 for words of 9 letters
/// or more, 1 for words of 1 or 2), or "".
std::string DidYouMean(std::string_view word, const std::vector<std::string>& names) {
  std::vector<std::string_view> views(names.begin(), names.end());
  const size_t max_edits = word.size() <= 2 ? 1 : std::min<size_t>(3, std::max<size_t>(2, word.size() / 3));
  const std::string near = NearestName(word, views, max_edits);
  return near.empty() ? "" : ": did you mean " + near + "?";
}

std::vector<std::string> OptionNames(const CLI::App* cmd) {
  std::vector<std::string> names;
  for (const CLI::Option* o : cmd->get_options())
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
  return names;
}

std::vector<std::string> CommandNames(const CLI::App* root) {
  std::vector<std::string> names;
  for (const CLI::App* s : root->get_subcommands([](const CLI::App*) { return true; })) names.push_back(s->get_name());
  return names;
}

/// An argument no option or positional takes: an unknown command, an unknown option or a
/// second positional.
std::string Unexpected(CLI::App* cmd, const std::string& arg) {
  if (arg.rfind("-", 0) == 0 && arg.size() > 1) {
    const std::string flag = arg.substr(0, arg.find('='));
    const std::string near = DidYouMean(flag, OptionNames(cmd));
    return "unknown option " + Excerpt(flag) + near + (near.empty() ? " (" + HelpOf(cmd) + " lists the options)" : "");
  }
  if (cmd->get_parent() == nullptr) {
    const std::vector<std::string> commands = CommandNames(cmd);
    const std::string near = DidYouMean(arg, commands);
    return "unknown command \"" + Excerpt(arg) + "\"" + (near.empty() ? ": the commands are " + Join(commands) : near);
  }
  return "unexpected argument \"" + Excerpt(arg) + "\": " + cmd->get_name() +
         " takes one file (repeat an option, or give it a comma-separated list, for several values)";
}

/// The choices in a CLI11 validator's message: "{a,b}" (IsMember) or "{k->v,...} OR {v,...}"
/// (CheckedTransformer): "a, b", or the values then the other names ("fp16, bf16 (also half, ...)").
std::string Choices(const std::string& msg, std::vector<std::string>* names) {
  const size_t open = msg.find('{'), close = msg.find('}', open);
  if (open == std::string::npos || close == std::string::npos) return "";
  std::vector<std::string> values, aliases;
  for (const std::string& item : Split(std::string_view(msg).substr(open + 1, close - open - 1), ',')) {
    const size_t arrow = item.find("->");
    const std::string key = item.substr(0, arrow), value = arrow == std::string::npos ? key : item.substr(arrow + 2);
    names->push_back(key);
    if (std::find(values.begin(), values.end(), value) == values.end()) values.push_back(value);
    if (key != value) aliases.push_back(key);
  }
  return Join(values) + (aliases.empty() ? "" : " (also " + Join(aliases) + ")");
}

/// "--amp: Check x value in {...} OR {...} FAILED" / "--profile: x not in {cuda,cpu}".
std::string BadChoice(const std::string& msg) {
  const size_t colon = msg.find(": ");
  if (colon == std::string::npos || msg.find('{') == std::string::npos) return msg;
  const std::string option = msg.substr(0, colon);
  std::string value = msg.substr(colon + 2);
  if (value.rfind("Check ", 0) == 0) value = value.substr(6, value.find(" value in {") - 6);
  else value = value.substr(0, value.find(" not in {"));
  std::vector<std::string> names;
  const std::string choices = Choices(msg, &names);
  const std::string near = DidYouMean(value, names);
  return option + " \"" + Excerpt(value) + "\"" + near + (near.empty() ? ": " : " ") + "expected " + choices;
}

/// "Could not convert: --batch = x": the option and the type it takes.
std::string NotConverted(CLI::App* cmd, const std::string& msg) {
  const std::string rest = msg.substr(std::string("Could not convert: ").size());
  const size_t eq = rest.find(" = ");
  if (eq == std::string::npos) return msg;
  const std::string option = rest.substr(0, eq), value = rest.substr(eq + 3);
  std::string type = "a value of another type";
  if (const CLI::Option* o = cmd->get_option_no_throw(option)) {
    const std::string t = o->get_type_name();
    if (o->get_expected_max() == 0) type = "no value: it is a flag, given or left out";
    else if (t.find("INT") != std::string::npos) type = "an integer";
    else if (t.find("FLOAT") != std::string::npos) type = "a number";
  }
  return option + " \"" + Excerpt(value) + "\": expected " + type;
}

/// Whether |e| is a |T| (by class: get_name() is the subcommand's name for some errors).
template <typename T>
bool Is(const CLI::ParseError& e) {
  return dynamic_cast<const T*>(&e) != nullptr;
}

}  // namespace

std::string ParseErrorMessage(CLI::App& app, const CLI::ParseError& e) {
  CLI::App* cmd = Parsed(app);
  const std::string msg = e.what();
  if (Is<CLI::ExtrasError>(e)) {
    // "The following argument(s) was/were not expected: A B": an option first, if any.
    const size_t colon = msg.find("expected: ");
    if (colon != std::string::npos) {
      std::vector<std::string> rest = Split(std::string_view(msg).substr(colon + 10), ' ');
      auto flag = std::find_if(rest.begin(), rest.end(), [](const std::string& a) { return a.rfind("-", 0) == 0; });
      return Unexpected(cmd, flag != rest.end() ? *flag : rest.front());
    }
  }
  if (Is<CLI::RequiredError>(e) && cmd == &app && app.get_subcommands().empty() && !app.get_subcommands({}).empty()) {
    const std::vector<std::string> rest = app.remaining();
    for (const std::string& arg : rest)
      if (arg.rfind("-", 0) != 0) return Unexpected(&app, arg);
    return "a command is needed: memsim COMMAND, one of " + Join(CommandNames(&app)) + " (memsim --help)";
  }
  if (Is<CLI::RequiredError>(e) && msg.ends_with(" is required")) {
    const std::string what = msg.substr(0, msg.size() - 12);
    return (cmd->get_parent() ? cmd->get_name() + " " : "") + "needs " +
           (what == "graph" ? "a graph file: memsim " + cmd->get_name() + " GRAPH.json [OPTIONS]"
                            : what + " (" + HelpOf(cmd) + ")");
  }
  if (Is<CLI::ValidationError>(e)) return BadChoice(msg);
  if (Is<CLI::ConversionError>(e) && msg.rfind("Could not convert: ", 0) == 0) return NotConverted(cmd, msg);
  if (Is<CLI::ArgumentMismatch>(e) && msg.find(" required ") != std::string::npos && msg.ends_with(" missing"))
    return msg.substr(0, msg.find(':')) + " needs a value";
  return Excerpt(msg) + " (" + HelpOf(cmd) + ")";
}

void GuardIntegerText(CLI::App* app) {
  const CLI::Validator in_range(
      [](std::string& text) -> std::string {
        const char* b = text.data() + (text.starts_with('+') ? 1 : 0);
        const char* e = text.data() + text.size();
        if (b == e || !std::all_of(b + (*b == '-'), e, ::isdigit)) return "";  // not an integer: the conversion says
        int64_t v = 0;
        if (std::from_chars(b, e, v).ec == std::errc::result_out_of_range)
          return "'" + text + "' does not fit in 64 bits (the largest integer is 9223372036854775807)";
        return "";
      },
      "", "64-bit integer");
  for (CLI::Option* o : app->get_options())
    if (o->get_type_name().find("INT") != std::string::npos) o->check(in_range);
  for (CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; })) GuardIntegerText(sub);
}

}  // namespace memsim::cli
