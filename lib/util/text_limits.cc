#include "lib/util/text_limits.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace memsim {

std::string LineColumn(std::string_view text, size_t offset) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

Status CheckJsonDepth(std::string_view text, const std::string& source, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        return Status::ParseError(source + ":" + LineColumn(text, i) + ": JSON nested deeper than " +
                                  std::to_string(max_depth) + " levels");
    } else if (c == ']' || c == '}') {
      --depth;  // a stray closer is the JSON parser's to report
    }
  }
  return Status::OK();
}

std::string Excerpt(std::string_view text, size_t max_chars) {
  if (text.size() <= max_chars) return std::string(text);
  size_t cut = max_chars;
  // Back up over UTF-8 continuation bytes so the excerpt stays valid UTF-8.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

std::string EscapeControl(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string CsvField(std::string_view text) {
  const bool quote = text.find_first_of(",\"\r\n") != std::string_view::npos ||
                     (!text.empty() && (text.front() == ' ' || text.back() == ' '));
  if (!quote) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

Result<std::string> ReadInputFile(const std::string& path, size_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return Status::NotFound(path + ": cannot open file (" + std::strerror(errno) + ")");
  if (S_ISDIR(st.st_mode)) return Status::InvalidArgument(path + ": is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open file");
  // A pipe or device has no size to check first: a small cap, checked while reading.
  if (!S_ISREG(st.st_mode)) max_bytes = std::min(max_bytes, kMaxStreamInputBytes);
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes)
    return Status::InvalidArgument(path + ": file too large (" + std::to_string(st.st_size) +
                                   " bytes; the limit is " + std::to_string(max_bytes) + ")");
  std::string out;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    out.append(buf, static_cast<size_t>(in.gcount()));
    if (out.size() > max_bytes)
      return Status::InvalidArgument(path + ": input larger than " + std::to_string(max_bytes) + " bytes" +
                                     (S_ISREG(st.st_mode) ? "" : " (the limit for a pipe or device: save it to a file)"));
  }
  if (in.bad()) return Status::NotFound(path + ": read error");
  return out;
}

}  // namespace memsim
