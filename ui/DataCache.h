// Keeps the most recently loaded data set, shared between the Data preview and training runs, so
// switching screens or training twice does not read Fashion-MNIST again. Thread-safe: loading
// happens on worker threads, never on the UI thread.
#pragma once
#include <memory>
#include <mutex>
#include <string>

#include "data/Dataset.h"
#include "project/Project.h"
#include "train/FitCheck.h"

namespace mlui {

class DataCache {
 public:
  // Loads (or returns the cached) data for the project's data section; throws ml::UserError.
  std::shared_ptr<const ml::DataSplit> get(const ml::Project& project);
  // The cached split when it matches, else nullptr (never loads).
  std::shared_ptr<const ml::DataSplit> peek(const ml::Project& project) const;
  static std::string keyOf(const ml::Project& project);
  // What the fit checks need: from the loaded data when cached, else what the data section fixes
  // (generated sets, Fashion-MNIST); nullopt for a file not loaded yet.
  std::optional<ml::DataFacts> facts(const ml::Project& project) const;

 private:
  mutable std::mutex mu_;
  std::mutex loadMu_;  // one load at a time: two screens asking for the same set share it
  std::string key_;
  std::shared_ptr<const ml::DataSplit> data_;
};

}  // namespace mlui
