// The property editor of one layer: a form generated from the layer kind's arguments (spin boxes,
// check boxes, choice lists), so only valid values can be typed; the core's reason is shown below
// when the layer still does not fit.
#pragma once
#include <QMap>
#include <QWidget>

#include "project/Project.h"

class QFormLayout;
class QLabel;
class QLineEdit;

namespace mlui {

class LayerInspector : public QWidget {
  Q_OBJECT
 public:
  explicit LayerInspector(QWidget* parent = nullptr);

  // index -1 shows nothing. Rebuilds the form only when the layer or its type changes, so the
  // field being typed into keeps its focus.
  void setLayer(int index, const ml::LayerSpec& layer, const QString& shownName, const QString& error);
  int layerIndex() const { return index_; }

 Q_SIGNALS:
  // A new spec for the layer at index; mergeKey groups edits of one field into one undo step.
  void layerEdited(int index, const ml::LayerSpec& layer, const QString& mergeKey);

 private:
  void rebuild();
  void setArg(const QString& key, const nlohmann::json& value);
  // Reads args_ back into layer_ and sends it; a value the kind refuses is shown instead.
  void commitArgs(const QString& key);
  nlohmann::json valueOf(const std::string& key) const;
  QWidget* windowEditor(const QString& key, const nlohmann::json& value);

  int index_ = -1;
  ml::LayerSpec layer_;
  nlohmann::json args_;  // every argument of layer_ as the project file writes it (project/LayerJson.h)
  QString shownName_;
  QLabel* title_;
  QLabel* help_;
  QLabel* error_;
  QWidget* formHost_;
  QFormLayout* form_ = nullptr;
  QLineEdit* name_ = nullptr;
  QMap<QString, QWidget*> editors_;
};

// The arguments a freshly added layer gets: its kind's example (nn/LayerKind.h).
ml::LayerArgs initialArgs(const std::string& type);
QStringList activationNames();

}  // namespace mlui
