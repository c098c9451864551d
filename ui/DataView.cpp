// The Data screen. Loading runs on a worker thread through the shared DataCache.
#include "DataView.h"

#include <qcustomplot.h>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileDialog>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPainter>
#include <QPushButton>
#include <QSpinBox>
#include <QStackedWidget>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

#include "Async.h"
#include "DataCache.h"
#include "ProjectDocument.h"
#include "Theme.h"
#include "charts/ChartInteraction.h"
#include "nn/Summary.h"
#include "project/Settings.h"

namespace mlui {

static QString q(const std::string& s) { return QString::fromStdString(s); }

ImageGridWidget::ImageGridWidget(QWidget* parent) : QWidget(parent) {
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

void ImageGridWidget::setData(std::shared_ptr<const ml::DataSplit> data) {
  images_.clear();
  labels_.clear();
  const auto& d = data->train;
  // Grey images: (h, w) or channels-last (h, w, 1).
  const bool grey = d.sampleShape.size() == 2 || (d.sampleShape.size() == 3 && d.sampleShape[2] == 1);
  if (!grey || d.size == 0) {
    update();
    return;
  }
  const int h = static_cast<int>(d.sampleShape[0]), w = static_cast<int>(d.sampleShape[1]);
  const int64_t n = std::min<int64_t>(d.size, 40);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t idx = (i * 7919) % d.size;  // spread over the set, not just the first rows
    const float* px = d.sample(idx);
    float lo = px[0], hi = px[0];
    for (int k = 0; k < w * h; ++k) lo = std::min(lo, px[k]), hi = std::max(hi, px[k]);
    QImage img(w, h, QImage::Format_Grayscale8);
    for (int y = 0; y < h; ++y) {
      uchar* row = img.scanLine(y);
      for (int x = 0; x < w; ++x) {
        const float v = hi > lo ? (px[y * w + x] - lo) / (hi - lo) : 0.f;
        row[x] = static_cast<uchar>(255 - std::clamp(v, 0.f, 1.f) * 255);  // dark ink on white
      }
    }
    images_.push_back(img);
    const int label = static_cast<int>(*d.target(idx));
    labels_ << (label >= 0 && label < static_cast<int>(d.classNames.size()) ? q(d.classNames[static_cast<size_t>(label)])
                                                                            : QString::number(label));
  }
  update();
}

void ImageGridWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  if (images_.empty()) return;
  const int cellW = 84, cellH = 100, cols = std::max(1, width() / cellW);
  p.setRenderHint(QPainter::SmoothPixmapTransform, false);  // crisp pixels
  QFont f = font();
  f.setPointSizeF(f.pointSizeF() * 0.85);
  p.setFont(f);
  for (size_t i = 0; i < images_.size(); ++i) {
    const int c = static_cast<int>(i) % cols, r = static_cast<int>(i) / cols;
    const QRect cell(c * cellW, r * cellH, cellW, cellH);
    if (cell.top() > height()) break;
    const QRect img(cell.x() + 8, cell.y() + 6, 68, 68);
    p.drawImage(img, images_[i]);
    p.setPen(QColor(0xdd, 0xe3, 0xea));
    p.drawRect(img.adjusted(0, 0, -1, -1));
    p.setPen(QColor(0x3b, 0x4a, 0x5a));
    p.drawText(QRect(cell.x(), img.bottom() + 3, cellW, 18), Qt::AlignHCenter | Qt::AlignTop,
               p.fontMetrics().elidedText(labels_[static_cast<int>(i)], Qt::ElideRight, cellW - 4));
  }
}

QWidget* DataView::fileRow(QLineEdit** edit, const QString& filter, bool folder) {
  auto* w = new QWidget(this);
  auto* h = new QHBoxLayout(w);
  h->setContentsMargins(0, 0, 0, 0);
  *edit = new QLineEdit(w);
  auto* browse = new QToolButton(w);
  browse->setText(tr("Browse…"));
  h->addWidget(*edit, 1);
  h->addWidget(browse);
  QLineEdit* e = *edit;
  connect(browse, &QToolButton::clicked, this, [this, e, filter, folder] {
    const QString path = folder ? QFileDialog::getExistingDirectory(this, tr("Choose a folder"), e->text())
                                : QFileDialog::getOpenFileName(this, tr("Choose a file"), e->text(), filter);
    if (!path.isEmpty()) {
      e->setText(path);
      write(tr("data file"));
    }
  });
  connect(e, &QLineEdit::editingFinished, this, [this] { write(tr("data file")); });
  return w;
}

DataView::DataView(ProjectDocument* doc, std::shared_ptr<DataCache> cache, QWidget* parent)
    : QWidget(parent), doc_(doc), cache_(std::move(cache)) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(16, 12, 16, 12);
  v->setSpacing(10);
  v->addWidget(pageTitle(tr("Data")));
  v->addWidget(
      pageHint(tr("Every step the global batch is cut into one shard per device; the data set itself is "
                  "shared, read-only, by all replicas.")));
  auto* top = new QHBoxLayout;
  top->setSpacing(24);
  auto* form = new QFormLayout;
  form->setFieldGrowthPolicy(QFormLayout::ExpandingFieldsGrow);
  kind_ = new QComboBox(this);
  kind_->setObjectName(QStringLiteral("DataKind"));
  kind_->addItem(tr("Fashion-MNIST (28×28 clothing images, 10 classes)"), QStringLiteral("fashion-mnist"));
  kind_->addItem(tr("CSV file (one row per sample, a label column)"), QStringLiteral("csv"));
  kind_->addItem(tr("IDX files (MNIST format image/label pair)"), QStringLiteral("idx"));
  kind_->addItem(tr("Spirals (synthetic, 2-D)"), QStringLiteral("spirals"));
  kind_->addItem(tr("Blobs (synthetic Gaussian clusters)"), QStringLiteral("blobs"));
  form->addRow(tr("Data set"), kind_);
  forms_ = new QStackedWidget(this);
  // Fashion-MNIST.
  auto* fashion = new QWidget(forms_);
  auto* ff = new QFormLayout(fashion);
  ff->setContentsMargins(0, 0, 0, 0);
  ff->addRow(tr("Folder"), fileRow(&fashionPath_, QString(), true));
  forms_->addWidget(fashion);
  // CSV.
  auto* csv = new QWidget(forms_);
  auto* cf = new QFormLayout(csv);
  cf->setContentsMargins(0, 0, 0, 0);
  cf->addRow(tr("Training file"), fileRow(&csvPath_, tr("CSV files (*.csv);;All files (*)"), false));
  cf->addRow(tr("Test file (optional)"), fileRow(&csvTest_, tr("CSV files (*.csv);;All files (*)"), false));
  labelColumn_ = new QComboBox(csv);
  labelColumn_->setEditable(true);
  labelColumn_->setToolTip(tr("The column that holds the class (or the target); the others are the features"));
  connect(labelColumn_, &QComboBox::currentTextChanged, this, [this] { write(tr("label column")); });
  cf->addRow(tr("Label column"), labelColumn_);
  standardize_ = new QCheckBox(tr("Standardize features (zero mean, unit variance)"), csv);
  connect(standardize_, &QCheckBox::toggled, this, [this] { write(tr("standardize")); });
  cf->addRow(QString(), standardize_);
  forms_->addWidget(csv);
  // IDX.
  auto* idx = new QWidget(forms_);
  auto* xf = new QFormLayout(idx);
  xf->setContentsMargins(0, 0, 0, 0);
  const QString idxFilter = tr("IDX files (*-ubyte *-ubyte.gz *.idx *.gz);;All files (*)");
  xf->addRow(tr("Train images"), fileRow(&trainImages_, idxFilter, false));
  xf->addRow(tr("Train labels"), fileRow(&trainLabels_, idxFilter, false));
  xf->addRow(tr("Test images"), fileRow(&testImages_, idxFilter, false));
  xf->addRow(tr("Test labels"), fileRow(&testLabels_, idxFilter, false));
  forms_->addWidget(idx);
  // Synthetic.
  auto* syn = new QWidget(forms_);
  auto* sf = new QFormLayout(syn);
  sf->setContentsMargins(0, 0, 0, 0);
  samples_ = new QSpinBox(syn);
  samples_->setRange(10, 10000000);
  samples_->setGroupSeparatorShown(true);
  classes_ = new QSpinBox(syn);
  classes_->setRange(2, 100);
  features_ = new QSpinBox(syn);
  features_->setRange(1, 10000);
  noise_ = new QDoubleSpinBox(syn);
  noise_->setRange(0, 100);
  noise_->setDecimals(3);
  noise_->setSingleStep(0.05);
  sf->addRow(tr("Samples"), samples_);
  sf->addRow(tr("Classes"), classes_);
  sf->addRow(tr("Features"), features_);
  sf->addRow(tr("Noise"), noise_);
  forms_->addWidget(syn);
  form->addRow(QString(), forms_);
  split_ = new QDoubleSpinBox(this);
  split_->setRange(0, 0.9);
  split_->setSingleStep(0.05);
  split_->setDecimals(2);
  split_->setToolTip(tr("Share of the training set held out for validation when there is no test set"));
  seed_ = new QSpinBox(this);
  seed_->setRange(0, std::numeric_limits<int>::max());
  form->addRow(tr("Validation split"), split_);
  form->addRow(tr("Seed"), seed_);
  for (QSpinBox* s : {samples_, classes_, features_, seed_})
    connect(s, &QSpinBox::valueChanged, this, [this] { write(tr("data arguments")); });
  for (QDoubleSpinBox* s : {noise_, split_})
    connect(s, &QDoubleSpinBox::valueChanged, this, [this] { write(tr("data arguments")); });
  connect(kind_, &QComboBox::currentIndexChanged, this, [this] { write(tr("data set")); });
  top->addLayout(form, 3);

  auto* infoBox = new QVBoxLayout;
  info_ = new QLabel(this);
  info_->setObjectName(QStringLiteral("DataInfo"));
  info_->setWordWrap(true);
  info_->setTextFormat(Qt::RichText);
  info_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  error_ = new QLabel(this);
  error_->setObjectName(QStringLiteral("DataError"));
  error_->setWordWrap(true);
  setRole(error_, "error");
  error_->hide();
  auto* load = new QPushButton(icon(QStringLiteral("refresh")), tr("Load preview"), this);
  connect(load, &QPushButton::clicked, this, &DataView::loadPreview);
  infoBox->addWidget(sectionTitle(tr("What the model will see")));
  infoBox->addWidget(info_);
  infoBox->addWidget(error_);
  infoBox->addWidget(load, 0, Qt::AlignLeft);
  infoBox->addStretch(1);
  top->addLayout(infoBox, 2);
  v->addLayout(top);

  preview_ = new QStackedWidget(this);
  nothing_ = pageHint(tr("No preview yet."), preview_);
  nothing_->setAlignment(Qt::AlignCenter);
  grid_ = new ImageGridWidget(preview_);
  scatter_ = new QCustomPlot(preview_);
  styleChart(scatter_, tr("Samples by class"), tr("x₁"), tr("x₂"));
  scatter_->legend->setVisible(true);
  new ChartInteraction(scatter_, QStringLiteral("data"));
  preview_->addWidget(nothing_);
  preview_->addWidget(grid_);
  preview_->addWidget(scatter_);
  v->addWidget(sectionTitle(tr("Preview")));
  v->addWidget(preview_, 1);

  debounce_ = new QTimer(this);
  debounce_->setSingleShot(true);
  debounce_->setInterval(400);
  connect(debounce_, &QTimer::timeout, this, [this] {
    if (isVisible()) loadPreview();
  });
  connect(doc_, &ProjectDocument::changed, this, &DataView::refresh);
  refresh();
}

void DataView::refresh() {
  refreshing_ = true;
  const auto& d = doc_->project().data;
  const QString kind = QLatin1String(ml::toString(d.kind));
  kind_->setCurrentIndex(std::max(0, kind_->findData(kind)));
  forms_->setCurrentIndex(kind == QLatin1String("csv")                                           ? 1
                          : kind == QLatin1String("idx")                                         ? 2
                          : (kind == QLatin1String("spirals") || kind == QLatin1String("blobs")) ? 3
                                                                                                 : 0);
  // The stack takes the height of the shown form only, not of the tallest one.
  for (int i = 0; i < forms_->count(); ++i)
    forms_->widget(i)->setSizePolicy(QSizePolicy::Preferred,
                                     i == forms_->currentIndex() ? QSizePolicy::Preferred : QSizePolicy::Ignored);
  forms_->adjustSize();
  // One path field in the project, two on the screen: each shows it only for its own kind, so a
  // switch to CSV never carries the Fashion-MNIST folder into "Training file".
  fashionPath_->setText(kind == QLatin1String("fashion-mnist") ? q(d.path) : QString());
  csvPath_->setText(kind == QLatin1String("csv") ? q(d.path) : QString());
  csvTest_->setText(q(d.testPath));
  if (kind == QLatin1String("csv")) readCsvHeader(q(d.path));
  labelColumn_->setCurrentText(q(d.labelColumn));
  standardize_->setChecked(d.standardize);
  trainImages_->setText(q(d.trainImages));
  trainLabels_->setText(q(d.trainLabels));
  testImages_->setText(q(d.testImages));
  testLabels_->setText(q(d.testLabels));
  samples_->setValue(static_cast<int>(d.samples));
  classes_->setValue(d.classes);
  features_->setValue(d.features);
  features_->setEnabled(kind == QLatin1String("blobs"));
  noise_->setValue(d.noise);
  split_->setValue(d.validationSplit);
  seed_->setValue(static_cast<int>(d.seed));
  refreshing_ = false;
  if (DataCache::keyOf(doc_->project()) != shownKey_) debounce_->start();
}

void DataView::write(const QString& what) {
  if (refreshing_) return;
  ml::Project p = doc_->project();
  auto& d = p.data;
  const std::string kind = kind_->currentData().toString().toStdString();
  const ml::DataKind typed = ml::dataKindSetting(kind, "Data screen");
  const bool kindChanged = typed != d.kind;
  d.kind = typed;
  if (kind == "fashion-mnist") d.path = fashionPath_->text().toStdString();
  if (kind == "csv") {
    d.path = csvPath_->text().toStdString();
    d.testPath = csvTest_->text().toStdString();
    d.labelColumn = labelColumn_->currentText().toStdString();
    d.standardize = standardize_->isChecked();
  }
  if (kind == "idx") {
    d.trainImages = trainImages_->text().toStdString();
    d.trainLabels = trainLabels_->text().toStdString();
    d.testImages = testImages_->text().toStdString();
    d.testLabels = testLabels_->text().toStdString();
  }
  if (kindChanged && kind == "fashion-mnist" && d.path.empty()) d.path = "/usr/share/datasets/fashion-mnist";
  d.samples = samples_->value();
  d.classes = classes_->value();
  d.features = features_->value();
  d.noise = noise_->value();
  d.validationSplit = split_->value();
  d.seed = static_cast<uint64_t>(seed_->value());
  if (DataCache::keyOf(p) == DataCache::keyOf(doc_->project())) return;
  doc_->edit(tr("Change %1").arg(what), p, kindChanged ? QString() : QStringLiteral("data"));
}

void DataView::readCsvHeader(const QString& path) {
  if (path == headerOf_ || path.isEmpty()) return;
  headerOf_ = path;
  // The header is read off the UI thread (the file may sit on a slow disk).
  runAsync<QStringList>(
      this,
      [path] {
        QFile f(path);
        if (!f.open(QIODevice::ReadOnly)) return QStringList();
        QStringList cols;
        for (const QString& c : QString::fromUtf8(f.readLine()).trimmed().split(QLatin1Char(',')))
          cols << c.trimmed().remove(QLatin1Char('"'));
        return cols;
      },
      [this](const Outcome<QStringList>& r) {
        if (!r.value || r.value->isEmpty()) return;
        const QString current = labelColumn_->currentText();
        refreshing_ = true;
        labelColumn_->clear();
        labelColumn_->addItems(*r.value);
        labelColumn_->setCurrentText(current);
        refreshing_ = false;
      });
}

void DataView::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  if (DataCache::keyOf(doc_->project()) != shownKey_) loadPreview();
}

void DataView::loadPreview() {
  if (loading_) {
    pending_ = true;  // load again when this one is done: the spec changed meanwhile
    return;
  }
  loading_ = true;
  pending_ = false;
  const ml::Project project = doc_->project();
  info_->setText(tr("Loading…"));
  error_->hide();
  runAsync<std::shared_ptr<const ml::DataSplit>>(
      this, [cache = cache_, project] { return cache->get(project); },
      [this, key = DataCache::keyOf(project)](const Outcome<std::shared_ptr<const ml::DataSplit>>& r) {
        loading_ = false;
        shownKey_ = key;
        if (r.value) {
          show(*r.value);
          Q_EMIT dataLoaded();
        } else {
          info_->setText(tr("No data loaded."));
          error_->setText(r.error);
          error_->show();
          preview_->setCurrentWidget(nothing_);
        }
        Q_EMIT previewLoaded();
        if (pending_ || key != DataCache::keyOf(doc_->project())) loadPreview();
      });
}

void DataView::show(std::shared_ptr<const ml::DataSplit> data) {
  const auto& t = data->train;
  QString classes;
  QStringList names;
  for (const auto& n : t.classNames) names << q(n).toHtmlEscaped();
  if (t.numClasses > 0)
    classes = tr("<b>%1 classes</b>%2")
                  .arg(t.numClasses)
                  .arg(names.isEmpty() ? QString() : QStringLiteral(": ") + names.join(QStringLiteral(", ")));
  else
    classes = tr("regression, %1 target value(s) per sample").arg(t.targetDim);
  info_->setText(tr("<b>%1</b><br><b>%2</b> training samples · <b>%3</b> validation samples<br>input shape "
                    "<b>%4</b> (%5 features)<br>%6")
                     .arg(q(t.name).toHtmlEscaped(), q(ml::withThousands(t.size)),
                          q(ml::withThousands(data->validation ? data->validation->size : 0)),
                          q(ml::shapeToString(t.sampleShape, false)), q(ml::withThousands(t.featureCount())), classes));
  if (t.sampleShape.size() == 2 || (t.sampleShape.size() == 3 && t.sampleShape[2] == 1)) {
    grid_->setData(data);
    preview_->setCurrentWidget(grid_);
    return;
  }
  if (t.featureCount() >= 2 && t.numClasses > 0) {
    scatter_->clearGraphs();
    const int64_t n = std::min<int64_t>(t.size, 5000);
    std::vector<QVector<double>> xs(static_cast<size_t>(t.numClasses)), ys(static_cast<size_t>(t.numClasses));
    for (int64_t i = 0; i < n; ++i) {
      const int c = static_cast<int>(*t.target(i));
      if (c < 0 || c >= t.numClasses) continue;
      xs[static_cast<size_t>(c)] << t.sample(i)[0];
      ys[static_cast<size_t>(c)] << t.sample(i)[1];
    }
    for (int c = 0; c < t.numClasses; ++c) {
      QCPGraph* g = scatter_->addGraph();
      g->setName(c < static_cast<int>(t.classNames.size()) ? q(t.classNames[static_cast<size_t>(c)]) : tr("class %1").arg(c));
      g->setLineStyle(QCPGraph::lsNone);
      const QColor col = deviceColor(c + 3);  // class colours, distinct from device 0/1/2
      g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, col, col, 4));
      g->setData(xs[static_cast<size_t>(c)], ys[static_cast<size_t>(c)]);
    }
    scatter_->rescaleAxes();
    // A margin of 4% so the outermost points are whole discs, not halves cut by the axes.
    for (QCPAxis* a : {scatter_->xAxis, scatter_->yAxis}) a->scaleRange(1.08, a->range().center());
    scatter_->replot(QCustomPlot::rpQueuedReplot);
    preview_->setCurrentWidget(scatter_);
    return;
  }
  preview_->setCurrentWidget(nothing_);
  nothing_->setText(tr("No picture for %1-feature samples.").arg(t.featureCount()));
}

}  // namespace mlui
