// Guards for text inputs read with nlohmann::json (graph files, alloc_data): a recursion-free
// nesting check run before parsing (so no recursive copy, dump or destructor can overflow the
// stack), a short excerpt of an offending value for messages, and file reading that reports a
// directory or an unreadable file clearly. Pure functions; thread-safe.
#ifndef MEMSIM_LIB_UTIL_TEXT_LIMITS_H_
#define MEMSIM_LIB_UTIL_TEXT_LIMITS_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "lib/util/status.h"

namespace memsim {

/// Deepest JSON nesting any memsim input needs (graph files use 4 levels, alloc_data 3).
inline constexpr int kMaxJsonDepth = 64;

/// "line L:C" of byte |offset| of |text| (1-based), for messages.
std::string LineColumn(std::string_view text, size_t offset);

/// Scans |text| without recursion and returns an error ("<source>:L:C: JSON nested deeper than
/// 64 levels") if arrays/objects nest deeper than |max_depth|; strings are skipped.
Status CheckJsonDepth(std::string_view text, const std::string& source,
                      int max_depth = kMaxJsonDepth);

/// At most |max_chars| of |text|, with "..." appended when cut (never splits a UTF-8 sequence).
std::string Excerpt(std::string_view text, size_t max_chars = 48);

/// |text| with every control character (bytes < 0x20 and 0x7f) written as \\xNN and a
/// backslash as \\\\, so a name read from input stays on one line of a metadata line or message.
std::string EscapeControl(std::string_view text);

/// One CSV field as RFC 4180 writes it: as is, or between double quotes (each quote doubled)
/// when it holds a comma, a quote, a CR or LF, or starts or ends with a space.
std::string CsvField(std::string_view text);

/// The largest input read from a pipe, device or other non-regular file, whose size is not
/// known before reading it (graph files, snapshots: save a larger one to a file first).
inline constexpr size_t kMaxStreamInputBytes = size_t{64} << 20;

/// Reads the whole regular file at |path|. Errors: NotFound (missing or unreadable) or
/// InvalidArgument ("is a directory", "is not a regular file", larger than |max_bytes|, or than
/// kMaxStreamInputBytes for a pipe or device, checked while reading); every
/// message starts with |path|.
Result<std::string> ReadInputFile(const std::string& path, size_t max_bytes = size_t{1} << 31);

}  // namespace memsim

#endif  // MEMSIM_LIB_UTIL_TEXT_LIMITS_H_
