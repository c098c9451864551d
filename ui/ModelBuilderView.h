// The Model screen: a palette of layer kinds, the ordered layer stack (drag, buttons, delete),
// the inspector, a live summary like Keras' model.summary() with memory per replica, and the
// model drawn as mirrored copies, one per device.
#pragma once
#include <QListWidget>
#include <QWidget>
#include <memory>

#include "ModelAnalysis.h"

class QLabel;
class QLineEdit;
class QTableWidget;
class QToolButton;

namespace mlui {

class DataCache;
class FitBanner;
class ProjectDocument;
class LayerInspector;
class MirroredCopiesWidget;

// The layer stack: accepts drops from the palette (insert) and from itself (reorder), and turns
// both into requests; the document, not the list, owns the order.
class LayerStackList : public QListWidget {
  Q_OBJECT
 public:
  LayerStackList(QListWidget* palette, QWidget* parent);
 Q_SIGNALS:
  void insertRequested(const QString& type, int row);
  void moveRequested(int from, int to);

 protected:
  void dragEnterEvent(QDragEnterEvent* e) override;
  void dragMoveEvent(QDragMoveEvent* e) override;
  void dropEvent(QDropEvent* e) override;

 private:
  QListWidget* palette_;
};

class ModelBuilderView : public QWidget {
  Q_OBJECT
 public:
  explicit ModelBuilderView(ProjectDocument* doc, QWidget* parent = nullptr);

  const ModelAnalysis& analysis() const { return analysis_; }
  // Actions, also used by the tests: row -1 appends (or inserts after the selection).
  void addLayer(const QString& type, int row = -1);
  void removeLayer(int row);
  void moveLayer(int from, int to);
  void selectLayer(int row);
  QTableWidget* summaryTable() const { return summary_; }
  FitBanner* fitBanner() const { return fit_; }
  QLineEdit* inputShapeEdit() const { return inputShape_; }
  // The loaded data the fit checks compare with (generated sets and Fashion-MNIST need none).
  void setDataCache(std::shared_ptr<DataCache> cache);
  QString totalsText() const;

 private:
  void refresh();
  void refreshSummary();
  void refreshSelection();
  void editInputShape();
  void showInputShape();
  void onLayerEdited(int index, const ml::LayerSpec& layer, const QString& mergeKey);
  void updateButtons();

  ProjectDocument* doc_;
  ModelAnalysis analysis_;
  QListWidget* palette_;
  QLabel* paletteHelp_;
  LayerStackList* stack_;
  QLineEdit* inputShape_;
  QLabel* inputError_;
  FitBanner* fit_;
  QToolButton *add_, *remove_, *up_, *down_;
  LayerInspector* inspector_;
  QLabel* modelError_;
  QTableWidget* summary_;
  QLabel* totals_;
  QLabel* memory_;
  MirroredCopiesWidget* copies_;
  bool refreshing_ = false;
};

}  // namespace mlui
