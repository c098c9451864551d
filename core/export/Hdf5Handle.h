// HDF5 C handles for the Keras writer and reader: an hid_t closed by its H5?close when it goes out
// of scope, and the library's error printing turned off while we run (our messages say it once).
// Included only where MIRRORLAB_HAVE_HDF5 is set.
#pragma once
#include <hdf5.h>

#include <string>

#include "Error.h"

namespace ml {

class Hdf5Handle {
 public:
  // Throws UserError(message) when id is invalid (the call that made it failed).
  Hdf5Handle(hid_t id, herr_t (*close)(hid_t), const std::string& message) : id_(id), close_(close) {
    if (id_ < 0) throw UserError(message);
  }
  Hdf5Handle(const Hdf5Handle&) = delete;
  Hdf5Handle& operator=(const Hdf5Handle&) = delete;
  ~Hdf5Handle() {
    if (id_ >= 0) close_(id_);
  }
  hid_t get() const { return id_; }
  // Closes now and reports a failure (the last write of a file happens at close).
  bool close() {
    const herr_t r = close_(id_);
    id_ = -1;
    return r >= 0;
  }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

class QuietHdf5 {
 public:
  QuietHdf5() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietHdf5() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }
  QuietHdf5(const QuietHdf5&) = delete;
  QuietHdf5& operator=(const QuietHdf5&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

}  // namespace ml
