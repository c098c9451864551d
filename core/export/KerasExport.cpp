// Keras 3 weights (.weights.h5) for a Sequential model, through the HDF5 C library. Keras 3's
// saving_lib walks the model and gives every object a group with a "vars" subgroup holding its
// variables as datasets "0", "1", ... in creation order:
//   /vars                          the Sequential's own variables (none, but load_weights opens it)
//   /layers/<class>[_k]/vars/0     Dense: kernel (in, units) float32;  /vars/1: bias (units)
//                                  Conv2D: kernel (kh, kw, in, filters), bias (filters)
//                                  BatchNormalization: gamma, beta (each when used), moving_mean,
//                                  moving_variance (channels), in the order Keras' build() creates them
// Layers are named by their class in snake case (dense, dense_1, flatten, dropout, activation),
// numbered per class in model order, never by the layer's own name; layers without variables
// still get their (empty) group. The weights-only file holds no optimizer; the .keras archive holds
// a fresh one (optimizerGroup), matching its compile_config.
#include "export/ExportWriters.h"

#if MIRRORLAB_HAVE_HDF5
#include "export/Hdf5Handle.h"
#endif

#include <map>

#include "Error.h"

namespace ml {

#if MIRRORLAB_HAVE_HDF5

namespace {

// The writer's handles: a failure names the file being written.
class Handle : public Hdf5Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t), const std::string& what, const std::string& file)
      : Hdf5Handle(id, close, "cannot write the Keras weights file '" + file + "': HDF5 failed to " + what) {}
};

std::vector<hsize_t> dims(const Shape& s) { return std::vector<hsize_t>(s.begin(), s.end()); }

Handle group(hid_t parent, const std::string& name, const std::string& file) {
  return Handle(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                "create the group '" + name + "'", file);
}

void dataset(hid_t vars, const char* name, const std::vector<hsize_t>& dims, const float* data, const std::string& file) {
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose, "describe a dataset", file);
  Handle set(H5Dcreate2(vars, name, H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose,
             std::string("create the dataset '") + name + "'", file);
  if (H5Dwrite(set.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    throw UserError("cannot write the Keras weights file '" + file + "': HDF5 failed to write '" + name +
                    "' (is the disk full?)");
}

void scalar(hid_t vars, const char* name, hid_t fileType, hid_t memType, const void* value, const std::string& file) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "describe a scalar", file);
  Handle set(H5Dcreate2(vars, name, fileType, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose,
             std::string("create the dataset '") + name + "'", file);
  if (H5Dwrite(set.get(), memType, H5S_ALL, H5S_ALL, H5P_DEFAULT, value) < 0)
    throw UserError("cannot write the Keras weights file '" + file + "': HDF5 failed to write '" + name + "'");
}

// A fresh optimizer's variables, as Keras 3 builds them for the model's trainable variables:
// iterations (int64) and learning_rate, then per kind of slot (SGD: momentum when used; RMSprop:
// velocity, then momentum when used) one zero array per trainable variable, Adam's momentum and
// velocity interleaved per variable. With them load_model restores the optimizer instead of
// warning that it skips it; the state is the one a new optimizer starts from.
void optimizerGroup(hid_t f, const std::vector<ExportLayer>& layers, const OptimizerSpec& o, const std::string& file) {
  std::vector<std::vector<hsize_t>> trainable;
  for (const auto& l : layers)
    for (const auto& w : l.weights)
      if (w.array.trainable) trainable.push_back(dims(w.array.shape));
  std::vector<std::vector<hsize_t>> slots;
  if (o.kind == OptimizerKind::Adam) {
    for (const auto& t : trainable) slots.insert(slots.end(), {t, t});
  } else {
    const int kinds = o.kind == OptimizerKind::RmsProp ? 1 + (o.momentum > 0) : (o.momentum != 0);
    for (int k = 0; k < kinds; ++k) slots.insert(slots.end(), trainable.begin(), trainable.end());
  }
  Handle opt = group(f, "optimizer", file);
  Handle vars = group(opt.get(), "vars", file);
  const int64_t iterations = 0;
  const auto lr = static_cast<float>(o.learningRate);
  scalar(vars.get(), "0", H5T_STD_I64LE, H5T_NATIVE_INT64, &iterations, file);
  scalar(vars.get(), "1", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, &lr, file);
  for (size_t i = 0; i < slots.size(); ++i) {
    hsize_t n = 1;
    for (hsize_t d : slots[i]) n *= d;
    const std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
    dataset(vars.get(), std::to_string(i + 2).c_str(), slots[i], zeros.data(), file);
  }
}

}  // namespace

std::string kerasWeightsBytes(const std::vector<ExportLayer>& layers, const std::string& file, const OptimizerSpec* optimizer) {
  QuietHdf5 quiet;
  // The file is built in memory (HDF5's core driver, no backing store) and handed back as bytes,
  // so it reaches the disk through the same temporary-file-and-rename as every other export.
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "set up the file", file);
  if (H5Pset_fapl_core(fapl.get(), 1 << 20, false) < 0)
    throw UserError("cannot write the Keras weights file '" + file + "': HDF5 has no in-memory driver");
  Handle f(H5Fcreate("mirrorlab-keras-weights.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose, "create the file", file);
  group(f.get(), "vars", file);  // the model's own (empty) variables
  {
    Handle all = group(f.get(), "layers", file);
    std::map<std::string, int> used;  // per class: how many came before, as Keras counts
    for (const auto& l : layers) {
      std::string name = kerasLayerName(kerasClassOf(l));  // Keras' naming.to_snake_case
      const int k = used[name]++;
      if (k > 0) {
        name += '_';
        name += std::to_string(k);
      }
      Handle layer = group(all.get(), name, file);
      Handle vars = group(layer.get(), "vars", file);
      for (size_t k = 0; k < l.weights.size(); ++k)
        dataset(vars.get(), std::to_string(k).c_str(), dims(l.weights[k].array.shape), l.weights[k].data, file);
    }
  }
  if (optimizer) optimizerGroup(f.get(), layers, *optimizer, file);
  const ssize_t size = H5Fflush(f.get(), H5F_SCOPE_GLOBAL) < 0 ? -1 : H5Fget_file_image(f.get(), nullptr, 0);
  std::string bytes(size > 0 ? static_cast<size_t>(size) : 0, '\0');
  if (size <= 0 || H5Fget_file_image(f.get(), bytes.data(), bytes.size()) != size)
    throw UserError("cannot write the Keras weights file '" + file + "': HDF5 failed to finish it");
  return bytes;
}

#else

std::string kerasWeightsBytes(const std::vector<ExportLayer>&, const std::string&, const OptimizerSpec*) {
  throw UserError(
      "this Mirrorlab was built without HDF5: install libhdf5-dev (scripts/deps.sh does) and rebuild to "
      "export Keras weights");
}

#endif

}  // namespace ml
