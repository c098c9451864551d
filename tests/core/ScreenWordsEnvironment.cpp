// Linked into every core test program that checks core's messages as the CLI and the studio print
// them: installs the screens' words (project/ScreenWords.h) before the first test, as their main() does.
#include <gtest/gtest.h>

#include "project/ScreenWords.h"

namespace {

class ScreenWordsEnvironment : public testing::Environment {
 public:
  void SetUp() override { ml::setFieldWords(&ml::screenWords()); }
};

[[maybe_unused]] testing::Environment* const kScreenWords = testing::AddGlobalTestEnvironment(new ScreenWordsEnvironment);

}  // namespace
