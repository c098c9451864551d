// PyTorch weights as a .npz (written with NpzFile, shared with the generated program's loader).
#include "export/ExportWriters.h"

#include "Error.h"

namespace ml {

std::string torchNpzBytes(const std::vector<ExportLayer>&, const ExportInfo&) {
  throw UserError("PyTorch export is not built yet (it waits for the .npz writer)");
}

}  // namespace ml
