// Replays every file of a corpus folder (tests/corpus/<target>/...) through its fuzz target: each
// input that once crashed or misbehaved must now end in a refusal or be accepted, and when a
// FILE.expect sits beside it, the refusal must contain that text (the named error), or the input
// must be accepted when the file says "accepted". Exit 1 on a
// mismatch, on a target folder without inputs, or on an unknown folder.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include "FuzzTargets.h"

namespace fs = std::filesystem;

namespace {

std::string readAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [TARGET...] | --write-seeds DIR\n", argv[0]);
    return 2;
  }
  mlfuzz::initialize();
  if (std::string(argv[1]) == "--write-seeds" && argc == 3) {
    mlfuzz::writeSeeds(argv[2]);
    return 0;
  }
  const fs::path root = argv[1];
  std::set<std::string> only(argv + 2, argv + argc);
  int files = 0, failures = 0;
  for (const auto& t : mlfuzz::targets()) {
    if (!only.empty() && !only.count(t.name)) continue;
    const fs::path dir = root / t.name;
    int here = 0;
    if (fs::is_directory(dir)) {
      std::set<fs::path> inputs;
      for (const auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file() && e.path().extension() != ".expect" && e.path().filename() != "README.md")
          inputs.insert(e.path());
      for (const auto& p : inputs) {
        const std::string data = readAll(p);
        const std::string msg = t.run(reinterpret_cast<const uint8_t*>(data.data()), data.size());
        ++here;
        fs::path expectFile = p;
        expectFile += ".expect";
        if (!fs::exists(expectFile)) continue;
        const std::string want = trimmed(readAll(expectFile));
        if (want == "accepted") {  // a file the reader must take (an older format, a valid one)
          if (!msg.empty()) {
            std::fprintf(stderr, "FAIL %s: expected it to be accepted, got '%s'\n", p.string().c_str(),
                         msg.substr(0, 300).c_str());
            ++failures;
          }
        } else if (msg.find(want) == std::string::npos) {
          std::fprintf(stderr, "FAIL %s: expected a refusal containing '%s', got '%s'\n", p.string().c_str(), want.c_str(),
                       msg.empty() ? "(accepted)" : msg.substr(0, 300).c_str());
          ++failures;
        } else if (msg.size() > 2000) {
          std::fprintf(stderr, "FAIL %s: the message is %zu characters long (values must be cut)\n", p.string().c_str(),
                       msg.size());
          ++failures;
        }
      }
    }
    if (here == 0) {
      std::fprintf(stderr, "FAIL %s: no inputs in %s\n", t.name, dir.string().c_str());
      ++failures;
    }
    std::printf("%-8s %d input(s) replayed\n", t.name, here);
    files += here;
  }
  std::printf("%d input(s), %d failure(s)\n", files, failures);
  return failures == 0 ? 0 : 1;
}
