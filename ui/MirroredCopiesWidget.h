// "The model is copied, not split": each parameterised layer drawn as N identical weight tiles,
// one per device in the device's colour.
#pragma once
#include <QWidget>

#include "ModelAnalysis.h"

namespace mlui {

class MirroredCopiesWidget : public QWidget {
  Q_OBJECT
 public:
  explicit MirroredCopiesWidget(QWidget* parent = nullptr);
  void setAnalysis(const ModelAnalysis& a);
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override { return {240, 120}; }
  int tileCount() const;  // for tests: parameterised layers x devices

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  ModelAnalysis a_;
};

}  // namespace mlui
