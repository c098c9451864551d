// Formatting of the stored runs for the Runs table.
#include "RunTableModel.h"

#include <QColor>
#include <QDateTime>

namespace mlui {

static QString q(const std::string& s) { return QString::fromStdString(s); }

void RunTableModel::setRuns(std::vector<ml::RunSummary> runs) {
  beginResetModel();
  runs_ = std::move(runs);
  endResetModel();
}

int RunTableModel::rowOf(int64_t id) const {
  for (size_t i = 0; i < runs_.size(); ++i)
    if (runs_[i].id == id) return static_cast<int>(i);
  return -1;
}

QVariant RunTableModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || (role != Qt::DisplayRole && role != Qt::ToolTipRole)) return {};
  // Short headers keep every column in view in a 1024 px window; the tooltip spells them out.
  static const char* names[] = {"ID",          "Name",      "Status",    "Devices", "Replicas", "Batch", "LR",
                                "Val. metric", "Val. loss", "s / epoch", "Epochs",  "Created",  "Tags"};
  static const char* tips[] = {"Run number in the store",
                               "Run name",
                               "How the run ended",
                               "Devices the run used",
                               "Mirrored copies of the model (one per device)",
                               "Global batch: samples per optimizer step over all devices",
                               "Learning rate the optimizer used (after scaling)",
                               "Validation metric after the last epoch",
                               "Validation loss after the last epoch",
                               "Seconds per epoch, paused time excluded",
                               "Epochs done",
                               "When the run started",
                               "Tags you gave the run"};
  return role == Qt::ToolTipRole ? tr(tips[section]) : tr(names[section]);
}

QVariant RunTableModel::data(const QModelIndex& index, int role) const {
  const ml::RunSummary* r = run(index.row());
  if (!r) return {};
  const int c = index.column();
  if (role == Qt::UserRole) {  // sort keys
    switch (c) {
      case Id: return QVariant::fromValue<qlonglong>(r->id);
      case Replicas: return r->replicas;
      case Batch: return QVariant::fromValue<qlonglong>(r->globalBatch);
      case Lr: return r->lr.value_or(-1);
      case ValMetric: return r->finalValMetric.value_or(-1);
      case ValLoss: return r->finalValLoss.value_or(1e300);
      case SecPerEpoch: return r->secondsPerEpoch.value_or(1e300);
      case Epochs: return r->epochsDone;
      case Created: return r->created;
      default: return data(index, Qt::DisplayRole);
    }
  }
  if (role == Qt::TextAlignmentRole) {
    if (c == Name || c == Status || c == Devices || c == Tags || c == Created) return QVariant(Qt::AlignLeft | Qt::AlignVCenter);
    return QVariant(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role == Qt::ForegroundRole && c == Status) {
    if (r->status == "finished") return QColor(0x1d, 0x5e, 0x2e);
    if (r->status == "running") return QColor(0x1d, 0x44, 0x70);
    if (r->status == "failed" || r->status == "diverged") return QColor(0x8b, 0x1d, 0x13);
    return QColor(0x8a, 0x5a, 0x00);
  }
  if (role != Qt::DisplayRole && role != Qt::ToolTipRole) return {};
  auto opt = [](const std::optional<double>& v, int prec, bool percent = false) -> QVariant {
    if (!v) return QStringLiteral("—");
    return percent ? QStringLiteral("%1%").arg(*v * 100, 0, 'f', prec) : QString::number(*v, 'g', prec);
  };
  switch (c) {
    case Id: return QVariant::fromValue<qlonglong>(r->id);
    case Name: return q(r->name);
    case Status: return q(r->status);
    case Devices: return q(r->devices);
    case Replicas: return r->replicas;
    case Batch: return QVariant::fromValue<qlonglong>(r->globalBatch);
    case Lr: return opt(r->lr, 4);
    case ValMetric:
      return r->finalValMetric && *r->finalValMetric <= 1.0 ? opt(r->finalValMetric, 2, true) : opt(r->finalValMetric, 4);
    case ValLoss: return opt(r->finalValLoss, 4);
    case SecPerEpoch:  // three significant digits: a 12 ms epoch reads 0.0123, not 0.00
      return r->secondsPerEpoch
                 ? QString::number(*r->secondsPerEpoch, *r->secondsPerEpoch < 1 ? 'g' : 'f', *r->secondsPerEpoch < 1 ? 3 : 2)
                 : QStringLiteral("—");
    case Epochs: return r->epochsDone;
    case Created: {  // this year's runs without the year: the column stays narrow
      const QDateTime t = QDateTime::fromSecsSinceEpoch(static_cast<qint64>(r->created));
      return t.toString(t.date().year() == QDate::currentDate().year() ? QStringLiteral("MM-dd hh:mm")
                                                                       : QStringLiteral("yyyy-MM-dd hh:mm"));
    }
    case Tags: {
      QStringList t;
      for (const auto& s : r->tags) t << q(s);
      return t.join(QStringLiteral(", "));
    }
  }
  return {};
}

}  // namespace mlui
