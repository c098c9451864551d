// The readers a hostile or damaged file reaches, as functions of raw bytes: the project, IDX,
// CSV, weights (.mlw, .npz and .npy), checkpoint and lesson readers and the run store opener.
// libFuzzer drives them (fuzz_<name>, built with MIRRORLAB_FUZZ), and the corpus replay test runs
// every file of tests/corpus/ through them in the ordinary and the sanitizer builds.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mlfuzz {

// The message of the refusal (a UserError, or the store's sql::Error), or "" when the input was
// accepted. Anything else (another exception, a crash, a sanitizer report) is a finding: an
// unexpected exception aborts, so that libFuzzer keeps the input.
using Target = std::string (*)(const uint8_t* data, size_t size);

struct NamedTarget {
  const char* name;  // also the folder of its corpus: tests/corpus/<name>/
  Target run;
};

const std::vector<NamedTarget>& targets();
const NamedTarget* findTarget(const std::string& name);

// Writes small valid inputs for every target into dir/<target>/ (made with the real writers: a
// saved weights file, a recorded store, IDX and CSV files) as libFuzzer's seed corpus.
void writeSeeds(const std::string& dir);

// Set once before the first input: keeps allocation plans under what libFuzzer allows (2 GiB)
// and puts temporary files in a private folder.
void initialize();

}  // namespace mlfuzz
