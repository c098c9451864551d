// One cached data set, keyed by the project's data section.
#include "DataCache.h"

namespace mlui {

std::string DataCache::keyOf(const ml::Project& p) {
  const auto j = p.toJson();
  return j.contains("data") ? j.at("data").dump() : std::string();
}

std::shared_ptr<const ml::DataSplit> DataCache::peek(const ml::Project& p) const {
  const std::string key = keyOf(p);
  std::lock_guard lock(mu_);
  return key == key_ ? data_ : nullptr;
}

std::shared_ptr<const ml::DataSplit> DataCache::get(const ml::Project& p) {
  std::lock_guard load(loadMu_);
  if (auto d = peek(p)) return d;
  auto data = std::make_shared<const ml::DataSplit>(ml::loadData(p.data));
  std::lock_guard lock(mu_);
  key_ = keyOf(p);
  data_ = data;
  return data;
}

std::optional<ml::DataFacts> DataCache::facts(const ml::Project& p) const {
  if (auto d = peek(p)) return ml::factsOf(d->train);
  return ml::knownFacts(p.data);
}

}  // namespace mlui
