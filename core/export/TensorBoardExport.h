// Stored runs as TensorBoard logs: one sub-folder per run holding one event file with the run's
// scalars per step and per epoch and its configuration as the HParams plugin's hyper-parameters.
// The tags and what each value is are listed in docs/EXPORTING.md.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ml {

class RunStore;

struct TensorBoardRun {
  int64_t run = 0;
  std::string folder;  // DIR/run-<id>-<name>
  std::string file;    // the event file in it
  int64_t scalars = 0;
};

// Checks that every run exists and DIR can be made before writing anything; each event file is
// written atomically. Throws UserError naming the run or the folder and the fix.
std::vector<TensorBoardRun> exportTensorBoard(RunStore& store, const std::vector<int64_t>& runs, const std::string& dir);

// The folder name of a run under DIR: "run-<id>" and its name in lower case, letters and digits.
std::string tensorBoardFolder(int64_t run, const std::string& name);

}  // namespace ml
