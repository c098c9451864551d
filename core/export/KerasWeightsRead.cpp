// Reads the weights of a Keras 3 archive (model.weights.h5) from memory through HDF5's core
// driver: every group under /layers with its "vars" datasets, converted to float32 by HDF5.
#include "export/KerasImport.h"

#if MIRRORLAB_HAVE_HDF5
#include "export/Hdf5Handle.h"
#endif

#include "Error.h"

namespace ml {

#if MIRRORLAB_HAVE_HDF5

namespace {

// Names of a group's links in name order.
std::vector<std::string> children(hid_t group, const std::string& what) {
  H5G_info_t info;
  if (H5Gget_info(group, &info) < 0) throw UserError(what + " is damaged: its weights cannot be listed");
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t n = H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (n < 0) throw UserError(what + " is damaged: its weights cannot be listed");
    std::string name(static_cast<size_t>(n), '\0');
    H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), static_cast<size_t>(n) + 1, H5P_DEFAULT);
    names.push_back(std::move(name));
  }
  return names;
}

KerasArray readArray(hid_t vars, const std::string& name, const std::string& what) {
  const std::string where = what + " (weights '" + name + "')";
  Hdf5Handle set(H5Dopen2(vars, name.c_str(), H5P_DEFAULT), H5Dclose, where + " is damaged: the dataset cannot be opened");
  Hdf5Handle type(H5Dget_type(set.get()), H5Tclose, where + " is damaged: the dataset has no type");
  if (H5Tget_class(type.get()) != H5T_FLOAT)
    throw UserError(where + " does not hold floating-point values: Mirrorlab imports float weights");
  Hdf5Handle space(H5Dget_space(set.get()), H5Sclose, where + " is damaged: the dataset has no shape");
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0 || rank > 8) throw UserError(where + " is damaged: its shape cannot be read");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  KerasArray a;
  hsize_t n = 1;
  for (hsize_t d : dims) {
    a.shape.push_back(static_cast<int64_t>(d));
    n *= d;
  }
  if (n > (hsize_t{1} << 34)) throw UserError(where + " is damaged: it claims " + std::to_string(n) + " values");
  a.data.resize(static_cast<size_t>(n));
  if (n > 0 && H5Dread(set.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, a.data.data()) < 0)
    throw UserError(where + " is damaged: its values cannot be read");
  return a;
}

}  // namespace

std::map<std::string, std::vector<KerasArray>> readKerasWeights(const std::string& h5Bytes, const std::string& what) {
  QuietHdf5 quiet;
  const std::string damaged = what + " is damaged: its model.weights.h5 is not a readable HDF5 file";
  Hdf5Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, damaged);
  if (H5Pset_fapl_core(fapl.get(), 1 << 20, false) < 0 ||
      H5Pset_file_image(fapl.get(), const_cast<char*>(h5Bytes.data()), h5Bytes.size()) < 0)
    throw UserError(damaged);
  Hdf5Handle file(H5Fopen("model.weights.h5", H5F_ACC_RDONLY, fapl.get()), H5Fclose, damaged);
  std::map<std::string, std::vector<KerasArray>> out;
  if (H5Lexists(file.get(), "layers", H5P_DEFAULT) <= 0) return out;  // a model without layers' variables
  Hdf5Handle layers(H5Gopen2(file.get(), "layers", H5P_DEFAULT), H5Gclose, damaged);
  for (const auto& name : children(layers.get(), what)) {
    auto& arrays = out[name];
    const std::string vars = name + "/vars";
    if (H5Lexists(layers.get(), name.c_str(), H5P_DEFAULT) <= 0 || H5Lexists(layers.get(), vars.c_str(), H5P_DEFAULT) <= 0)
      continue;
    Hdf5Handle group(H5Gopen2(layers.get(), vars.c_str(), H5P_DEFAULT), H5Gclose, damaged);
    // Variables are "0", "1", ... "10": in number order, not name order.
    const size_t count = children(group.get(), what).size();
    for (size_t i = 0; i < count; ++i) {
      const std::string v = std::to_string(i);
      if (H5Lexists(group.get(), v.c_str(), H5P_DEFAULT) <= 0)
        throw UserError(what + " is damaged: layer group '" + name + "' lacks variable " + v);
      arrays.push_back(readArray(group.get(), v, what));
    }
  }
  return out;
}

#else

std::map<std::string, std::vector<KerasArray>> readKerasWeights(const std::string&, const std::string&) {
  throw UserError(
      "this Mirrorlab was built without HDF5: install libhdf5-dev (scripts/deps.sh does) and rebuild to import Keras "
      "models");
}

#endif

}  // namespace ml
