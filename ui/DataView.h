// The Data screen: choose Fashion-MNIST, a CSV file (label column), an IDX pair or a synthetic
// set (spirals, blobs) with its arguments; see sample count, input shape and classes, a grid of
// sample images with their labels, or a scatter plot of 2-D points coloured by class.
#pragma once
#include <memory>

#include <QWidget>

#include "data/Dataset.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QSpinBox;
class QStackedWidget;
class QTimer;
class QCustomPlot;

namespace mlui {

class DataCache;
class ProjectDocument;

// A grid of sample images (float pixels -> grey QImage) with their labels.
class ImageGridWidget : public QWidget {
  Q_OBJECT
 public:
  explicit ImageGridWidget(QWidget* parent = nullptr);
  void setData(std::shared_ptr<const ml::DataSplit> data);
  int imageCount() const { return static_cast<int>(images_.size()); }
  QSize sizeHint() const override { return {560, 320}; }

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  std::vector<QImage> images_;
  QStringList labels_;
};

class DataView : public QWidget {
  Q_OBJECT
 public:
  DataView(ProjectDocument* doc, std::shared_ptr<DataCache> cache, QWidget* parent = nullptr);
  // Loads the data set on a worker thread and shows it (also on a timer after edits).
  void loadPreview();
  bool isLoading() const { return loading_; }
  QLabel* infoLabel() const { return info_; }
  ImageGridWidget* imageGrid() const { return grid_; }
  QCustomPlot* scatter() const { return scatter_; }

 Q_SIGNALS:
  void previewLoaded();
  void dataLoaded();  // a data set entered the cache (the Training plan can be exact now)

 protected:
  void showEvent(QShowEvent* e) override;

 private:
  void refresh();
  void write(const QString& what);
  void show(std::shared_ptr<const ml::DataSplit> data);
  void readCsvHeader(const QString& path);
  QWidget* fileRow(QLineEdit** edit, const QString& filter, bool folder);

  ProjectDocument* doc_;
  std::shared_ptr<DataCache> cache_;
  bool refreshing_ = false, loading_ = false, pending_ = false;
  std::string shownKey_;
  QComboBox* kind_;
  QStackedWidget* forms_;
  QLineEdit *fashionPath_, *csvPath_, *csvTest_, *trainImages_, *trainLabels_, *testImages_, *testLabels_;
  QComboBox* labelColumn_;  // editable; filled with the CSV file's header
  QString headerOf_;
  QCheckBox* standardize_;
  QSpinBox *samples_, *classes_, *features_, *seed_;
  QDoubleSpinBox *noise_, *split_;
  QLabel* info_;
  QLabel* error_;
  QStackedWidget* preview_;
  ImageGridWidget* grid_;
  QCustomPlot* scatter_;
  QLabel* nothing_;
  QTimer* debounce_;
};

}  // namespace mlui
