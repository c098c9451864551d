// A thin table model over the stored runs (a plain vector of RunSummary). Qt::UserRole gives the
// raw value for sorting; display text is formatted.
#pragma once
#include <vector>

#include <QAbstractTableModel>

#include "store/RunStore.h"

namespace mlui {

class RunTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    Id,
    Name,
    Status,
    Devices,
    Replicas,
    Batch,
    Lr,
    ValMetric,
    ValLoss,
    SecPerEpoch,
    Epochs,
    Created,
    Tags,
    ColumnCount
  };
  using QAbstractTableModel::QAbstractTableModel;

  void setRuns(std::vector<ml::RunSummary> runs);
  const std::vector<ml::RunSummary>& runs() const { return runs_; }
  const ml::RunSummary* run(int row) const {
    return row >= 0 && row < static_cast<int>(runs_.size()) ? &runs_[static_cast<size_t>(row)] : nullptr;
  }
  int rowOf(int64_t id) const;

  int rowCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : static_cast<int>(runs_.size()); }
  int columnCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : ColumnCount; }
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

 private:
  std::vector<ml::RunSummary> runs_;
};

}  // namespace mlui
