// ReflowGrid: a grid whose column count follows its width (see the header).
#include "ReflowGrid.h"

#include <QGridLayout>
#include <QResizeEvent>

#include <algorithm>

namespace mlui {

ReflowGrid::ReflowGrid(int maxColumns, QWidget* parent) : QWidget(parent), grid_(new QGridLayout(this)), maxColumns_(maxColumns) {
  grid_->setContentsMargins(0, 0, 0, 0);
}

void ReflowGrid::addWidget(QWidget* w, int stretch) {
  items_.append(w);
  stretches_.append(stretch);
  place(maxColumns_, true);
}

void ReflowGrid::setSpacing(int px) { grid_->setSpacing(px); }

// Before the grid is shown its width means nothing yet (the first resize places it again).
int ReflowGrid::currentColumns() const { return isVisible() ? columnsFor(width()) : maxColumns_; }

void ReflowGrid::setMaxColumns(int columns) {
  if (columns == maxColumns_) return;
  maxColumns_ = columns;
  place(currentColumns(), true);
}

void ReflowGrid::setItemVisible(QWidget* w, bool visible) {
  if (w->isHidden() == !visible) return;
  w->setVisible(visible);
  place(currentColumns(), true);
}

int ReflowGrid::columnsFor(int width) const {
  int cell = 0;
  for (QWidget* w : items_)
    if (!w->isHidden()) cell = std::max(cell, std::max(w->minimumSizeHint().width(), w->minimumWidth()));
  const int gap = std::max(0, grid_->horizontalSpacing());
  const int fit = cell > 0 ? (width + gap) / (cell + gap) : maxColumns_;
  const int n =
      std::max(1, static_cast<int>(std::count_if(items_.begin(), items_.end(), [](QWidget* w) { return !w->isHidden(); })));
  const int cols = std::clamp(fit, 1, std::max(1, std::min(maxColumns_, n)));
  // Balanced rows: seven cards in 4 + 3, not 6 + 1.
  const int rows = (n + cols - 1) / cols;
  return (n + rows - 1) / rows;
}

QSize ReflowGrid::minimumSizeHint() const {
  const QSize laid = grid_->minimumSize();
  int cell = 0;
  for (QWidget* w : items_)
    if (!w->isHidden()) cell = std::max(cell, std::max(w->minimumSizeHint().width(), w->minimumWidth()));
  return {std::min(laid.width(), cell), laid.height()};
}

void ReflowGrid::place(int columns, bool force) {
  if (columns == columns_ && !force) return;
  for (QWidget* w : items_) grid_->removeWidget(w);
  for (int c = 0; c < grid_->columnCount(); ++c) grid_->setColumnStretch(c, 0);
  for (int r = 0; r < grid_->rowCount(); ++r) grid_->setRowStretch(r, 0);
  int cell = 0;  // hidden widgets take no cell
  for (int i = 0; i < items_.size(); ++i) {
    if (items_[i]->isHidden()) continue;
    const int row = cell / columns;
    grid_->addWidget(items_[i], row, cell % columns);
    grid_->setRowStretch(row, std::max(grid_->rowStretch(row), stretches_[i]));
    ++cell;
  }
  for (int c = 0; c < columns; ++c) grid_->setColumnStretch(c, 1);
  columns_ = columns;
  updateGeometry();
}

void ReflowGrid::resizeEvent(QResizeEvent* e) {
  QWidget::resizeEvent(e);
  place(columnsFor(e->size().width()));
}

}  // namespace mlui
