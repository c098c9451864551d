// Limits checked before allocating or multiplying sizes that a user (or a file) controls: a
// size is refused with the memory it would need instead of ending in std::bad_alloc, a wrapped
// product or a read that never ends; values quoted in messages are cut to a readable length.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ml {

// The largest batch (samples per update) and sample size (values per sample) Mirrorlab accepts:
// far beyond any machine's memory, and small enough that their products fit int64_t.
inline constexpr int64_t kMaxBatch = int64_t{1} << 31;
inline constexpr int64_t kMaxFeatures = int64_t{1} << 31;

// The most memory one plan (a data set, a model's parameters) may ask for: this machine's
// physical memory, or MIRRORLAB_MEMORY_LIMIT_MB when it is set (the fuzz targets set it lower).
uint64_t memoryLimitBytes();
// "1.50 GiB", "512 B".
std::string humanBytes(double bytes);
// Throws UserError "<what> needs <bytes> of memory, more than this machine has (<limit>): <fix>".
void requireMemory(double bytes, const std::string& what, const std::string& fix);

// a * b and a + b for non-negative sizes, or nullopt when the result does not fit int64.
std::optional<int64_t> mulChecked(int64_t a, int64_t b);
std::optional<int64_t> addChecked(int64_t a, int64_t b);

// s itself when short, else its first max characters and "... (N characters)": a message
// never repeats a megabyte of bad input on one line. Control bytes (NUL, newline, ESC...) are
// written as \xNN, so that binary data quoted in a message is neither cut at its first NUL
// nor able to rearrange the terminal.
std::string clipText(std::string_view s, size_t max = 80);

// Refuses what is not a regular file (a folder, a device such as /dev/zero, a pipe), naming it.
void requireRegularFile(const std::string& path, const std::string& what, const std::string& missingHint);
// The whole of a regular file, refused beyond maxBytes (0: memoryLimitBytes()).
std::string readRegularFile(const std::string& path, const std::string& what, const std::string& missingHint,
                            uint64_t maxBytes = 0);

}  // namespace ml
