// A project for a user's CSV table (see CsvImport.h).
#include "welcome/CsvImport.h"

#include <QFile>
#include <QFileInfo>
#include <QStringList>

#include "Error.h"
#include "ProjectDocument.h"
#include "data/Csv.h"
#include "train/FitCheck.h"

namespace mlui {

static QString labelColumnOf(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly))
    throw ml::UserError("cannot open CSV file '" + path.toStdString() + "': check the path and its permissions");
  QStringList cols;
  for (const QString& c : QString::fromUtf8(f.readLine()).trimmed().split(QLatin1Char(',')))
    cols << c.trimmed().remove(QLatin1Char('"'));
  if (cols.size() < 2)
    throw ml::UserError(path.toStdString() + ": the first row must name at least two columns (features and a label)");
  for (const char* name : {"label", "class", "target", "y"})
    for (const QString& c : cols)
      if (c.compare(QLatin1String(name), Qt::CaseInsensitive) == 0) return c;
  return cols.back();
}

ml::Project csvProject(const QString& path) {
  const QString label = labelColumnOf(path);
  const ml::Dataset d = ml::readCsv(path.toStdString(), label.toStdString(), false, false);
  std::vector<float> labels(d.y.begin(), d.y.end());
  const bool classes = ml::looksLikeClassLabels(labels);
  int numClasses = 0;
  for (float v : labels) numClasses = std::max(numClasses, static_cast<int>(v) + 1);
  ml::Project p = newProject();
  p.name = QFileInfo(path).completeBaseName().toStdString();
  p.data = {};
  p.data.kind = ml::DataKind::Csv;
  p.data.path = QFileInfo(path).absoluteFilePath().toStdString();
  p.data.labelColumn = label.toStdString();
  p.data.standardize = true;
  p.data.validationSplit = 0.2;
  p.model.inputShape = {d.featureCount()};
  p.model.layers = {{"", ml::DenseSpec{.units = 64, .activation = ml::Act::Relu}}, {"", ml::DenseSpec{.units = 1}}};
  // The last layer and the loss as Fit to data chooses them (train/FitCheck.h): one sigmoid output
  // with binary_crossentropy for 0/1 labels, a softmax per class, or a linear output to regress.
  ml::DataFacts facts{QFileInfo(path).fileName().toStdString(), {d.featureCount()}, classes ? numClasses : 0, 1};
  if (classes && numClasses == 2) p.training.loss = ml::LossKind::BinaryCrossentropy;
  return ml::fitToData(p, facts);
}

}  // namespace mlui
