// The plugin defines every entry point of CudaPluginEntryPoints.def: this table takes the address
// of each, so one left out is an undefined symbol that the link refuses (--no-undefined) rather
// than a "lacks mlcuda_..." when a program first loads the plugin. Exports nothing of its own.
#include "backend/cuda/CudaPluginApi.h"

namespace {
using EntryPoint = void (*)();
#define MLCUDA_ENTRY(ret, name, field, params) reinterpret_cast<EntryPoint>(&mlcuda_##name),
[[gnu::used]] const EntryPoint kEveryEntryPoint[] = {
#include "backend/cuda/CudaPluginEntryPoints.def"
};
#undef MLCUDA_ENTRY
}  // namespace
