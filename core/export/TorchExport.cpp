// PyTorch weights: the .npz the generated PyTorch program loads with --weights FILE, in the names
// and shapes WeightsNpz gives them (the file `train --save-weights FILE.npz` writes too): per Dense
// layer "<name>/kernel" (in, units) and "<name>/bias" (units,), Mirrorlab's layer names as in the
// program's comments. The program copies kernel.T into nn.Linear.weight (out, in), bias into .bias.
#include "export/ExportWriters.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "Error.h"
#include "export/WeightsNpz.h"

namespace fs = std::filesystem;

namespace ml {

std::string torchWeightsBytes(const Sequential& model) {
  // writeNpz writes by name: a scratch file in the temporary folder, read back and removed.
  std::random_device rd;
  const fs::path scratch = fs::temp_directory_path() / ("mirrorlab-export-" + std::to_string(rd()) + ".npz");
  struct Remove {
    fs::path p;
    ~Remove() {
      std::error_code ec;
      fs::remove(p, ec);
    }
  } remove{scratch};
  writeNpz(scratch.string(), weightArrays(model), NpzCompression::Stored);  // weights barely deflate
  std::ifstream in(scratch, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) throw UserError("cannot read back the PyTorch weights from '" + scratch.string() + "'");
  return bytes;
}

}  // namespace ml
