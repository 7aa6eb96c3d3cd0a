#include "lib/util/text_limits.h"

#include <sys/stat.h>

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

Result<std::string> ReadInputFile(const std::string& path, size_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return Status::NotFound(path + ": cannot open file (" + std::strerror(errno) + ")");
  if (S_ISDIR(st.st_mode)) return Status::InvalidArgument(path + ": is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open file");
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes)
    return Status::InvalidArgument(path + ": file too large (" + std::to_string(st.st_size) +
                                   " bytes; the limit is " + std::to_string(max_bytes) + ")");
  std::string out;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    out.append(buf, static_cast<size_t>(in.gcount()));
    if (out.size() > max_bytes)
      return Status::InvalidArgument(path + ": input larger than " + std::to_string(max_bytes) +
                                     " bytes");
  }
  if (in.bad()) return Status::NotFound(path + ": read error");
  return out;
}

}  // namespace memsim
