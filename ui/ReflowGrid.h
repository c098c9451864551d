// A row of widgets that wraps into more rows when the window is narrow: the studio must fit a
// 1024x700 screen, so charts, tables and stat cards stack instead of scrolling sideways.
#pragma once
#include <QWidget>

class QGridLayout;

namespace mlui {

class ReflowGrid : public QWidget {
  Q_OBJECT
 public:
  // Up to maxColumns side by side, as many as fit by the widest child's minimum width.
  explicit ReflowGrid(int maxColumns, QWidget* parent = nullptr);
  // Adds w (reparented) with a row stretch: stretch 0 keeps the row at its size hint's height.
  void addWidget(QWidget* w, int stretch = 1);
  void setSpacing(int px);
  // Shows or hides an added widget; a hidden one takes no cell (the others close up).
  void setItemVisible(QWidget* w, bool visible);
  void setMaxColumns(int columns);
  int columns() const { return columns_; }
  // Only the widest child has to fit: narrower windows get fewer columns.
  QSize minimumSizeHint() const override;

 protected:
  void resizeEvent(QResizeEvent* e) override;

 private:
  int columnsFor(int width) const;
  int currentColumns() const;
  void place(int columns, bool force = false);

  QGridLayout* grid_;
  QList<QWidget*> items_;
  QList<int> stretches_;
  int maxColumns_;
  int columns_ = 0;
};

}  // namespace mlui
