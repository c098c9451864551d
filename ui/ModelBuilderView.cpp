// The Model screen. Every change goes through ProjectDocument::edit (undoable); refresh() redraws
// everything from the document and core's analysis of it.
#include "ModelBuilderView.h"

#include <algorithm>

#include <QDragEnterEvent>
#include <QFontDatabase>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QRegularExpressionValidator>
#include <QScrollArea>
#include <QScrollBar>
#include <QSplitter>
#include <QTableWidget>
#include <QToolButton>
#include <QVBoxLayout>

#include "DataCache.h"
#include "FitBanner.h"
#include "LayerInspector.h"
#include "MirroredCopiesWidget.h"
#include "ProjectDocument.h"
#include "ProjectHeader.h"
#include "Theme.h"
#include "nn/LayerKind.h"
#include "nn/Summary.h"

namespace mlui {

static QString q(const std::string& s) { return QString::fromStdString(s); }

LayerStackList::LayerStackList(QListWidget* palette, QWidget* parent) : QListWidget(parent), palette_(palette) {
  setDragDropMode(QAbstractItemView::DragDrop);
  setDefaultDropAction(Qt::MoveAction);
  setDropIndicatorShown(true);
  setSelectionMode(QAbstractItemView::SingleSelection);
}

void LayerStackList::dragEnterEvent(QDragEnterEvent* e) {
  if (e->source() == this || e->source() == palette_)
    e->acceptProposedAction();
  else
    e->ignore();
}

void LayerStackList::dragMoveEvent(QDragMoveEvent* e) {
  QListWidget::dragMoveEvent(e);
  if (e->source() == this || e->source() == palette_) e->accept();
}

void LayerStackList::dropEvent(QDropEvent* e) {
  const QModelIndex at = indexAt(e->position().toPoint());
  int row = at.isValid() ? at.row() : count();
  if (at.isValid() && dropIndicatorPosition() == QAbstractItemView::BelowItem) ++row;
  // Copy, not move: the list must not rearrange itself; the document does and we redraw.
  e->setDropAction(Qt::CopyAction);
  e->accept();
  if (e->source() == palette_ && palette_->currentItem()) {
    Q_EMIT insertRequested(palette_->currentItem()->data(Qt::UserRole).toString(), row);
  } else if (e->source() == this && currentRow() >= 0) {
    const int from = currentRow();
    Q_EMIT moveRequested(from, row > from ? row - 1 : row);
  }
}

static QToolButton* toolButton(const QString& iconName, const QString& text, const QString& tip, QWidget* parent) {
  auto* b = new QToolButton(parent);
  b->setIcon(icon(iconName));
  b->setText(text);
  b->setToolTip(tip);
  b->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  b->setAutoRaise(true);
  return b;
}

ModelBuilderView::ModelBuilderView(ProjectDocument* doc, QWidget* parent) : QWidget(parent), doc_(doc) {
  auto* root = new QVBoxLayout(this);
  root->setContentsMargins(16, 12, 16, 12);
  root->setSpacing(8);
  root->addWidget(pageTitle(tr("Model")));
  root->addWidget(
      pageHint(tr("Stack layers from the palette. The summary updates as you edit; every device gets a "
                  "full copy of these weights.")));
  root->addWidget(new ProjectHeader(doc_, this));
  fit_ = new FitBanner(doc_, this);
  root->addWidget(fit_);

  // Palette.
  palette_ = new QListWidget(this);
  palette_->setObjectName(QStringLiteral("Palette"));
  palette_->setDragEnabled(true);
  palette_->setDragDropMode(QAbstractItemView::DragOnly);
  palette_->setAccessibleName(tr("Layer palette"));
  for (const ml::LayerKind* k : ml::layerKinds()) {
    const QString type = q(std::string(k->type));
    auto* item = new QListWidgetItem(icon(k->icon.empty() ? QStringLiteral("model") : q(std::string(k->icon))), type, palette_);
    item->setData(Qt::UserRole, type);
    item->setToolTip(q(std::string(k->help)));
  }
  palette_->setCurrentRow(0);
  // Wide enough for the longest layer name ("BatchNormalization"): the palette never scrolls sideways.
  palette_->setMinimumWidth(palette_->sizeHintForColumn(0) + 2 * palette_->frameWidth() +
                            palette_->verticalScrollBar()->sizeHint().width() + 4);
  paletteHelp_ = pageHint(QString(), this);
  auto* paletteBox = new QWidget(this);
  auto* pv = new QVBoxLayout(paletteBox);
  pv->setContentsMargins(0, 0, 0, 0);
  pv->addWidget(sectionTitle(tr("Palette")));
  pv->addWidget(palette_, 1);
  pv->addWidget(paletteHelp_);
  connect(palette_, &QListWidget::currentItemChanged, this, [this](QListWidgetItem* it) {
    if (it) paletteHelp_->setText(it->toolTip() + tr(" — double-click or drag into the stack."));
  });
  paletteHelp_->setText(palette_->item(0)->toolTip() + tr(" — double-click or drag into the stack."));
  connect(palette_, &QListWidget::itemDoubleClicked, this,
          [this](QListWidgetItem* it) { addLayer(it->data(Qt::UserRole).toString()); });

  // Layer stack.
  stack_ = new LayerStackList(palette_, this);
  stack_->setObjectName(QStringLiteral("LayerStack"));
  stack_->setAccessibleName(tr("Layer stack"));
  // A long entry ("6. batch_normalization_1   BatchNormalization(synchronized)") wraps instead of
  // making the list scroll sideways.
  stack_->setWordWrap(true);
  stack_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  inputShape_ = new QLineEdit(this);
  inputShape_->setObjectName(QStringLiteral("InputShape"));
  inputShape_->setToolTip(tr("The shape of one sample, e.g. 28, 28 for an image or 2 for a point"));
  connect(inputShape_, &QLineEdit::editingFinished, this, &ModelBuilderView::editInputShape);
  add_ = toolButton(QStringLiteral("add"), tr("Add"), tr("Add the palette's selected layer after the selected layer"), this);
  up_ = toolButton(QStringLiteral("up"), tr("Up"), tr("Move the layer up (Ctrl+Up)"), this);
  down_ = toolButton(QStringLiteral("down"), tr("Down"), tr("Move the layer down (Ctrl+Down)"), this);
  remove_ = toolButton(QStringLiteral("remove"), tr("Delete"), tr("Delete the layer (Del)"), this);
  up_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Up));
  down_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Down));
  remove_->setShortcut(QKeySequence::Delete);
  connect(add_, &QToolButton::clicked, this, [this] {
    if (palette_->currentItem()) addLayer(palette_->currentItem()->data(Qt::UserRole).toString());
  });
  connect(up_, &QToolButton::clicked, this, [this] { moveLayer(stack_->currentRow(), stack_->currentRow() - 1); });
  connect(down_, &QToolButton::clicked, this, [this] { moveLayer(stack_->currentRow(), stack_->currentRow() + 1); });
  connect(remove_, &QToolButton::clicked, this, [this] { removeLayer(stack_->currentRow()); });
  connect(stack_, &LayerStackList::insertRequested, this, [this](const QString& t, int row) { addLayer(t, row); });
  connect(stack_, &LayerStackList::moveRequested, this, &ModelBuilderView::moveLayer);
  connect(stack_, &QListWidget::currentRowChanged, this, [this] {
    if (!refreshing_) refreshSelection();
  });
  auto* stackBox = new QWidget(this);
  auto* sv = new QVBoxLayout(stackBox);
  sv->setContentsMargins(0, 0, 0, 0);
  sv->addWidget(sectionTitle(tr("Layers")));
  auto* inputRow = new QHBoxLayout;
  inputRow->addWidget(new QLabel(tr("Input shape"), this));
  inputRow->addWidget(inputShape_, 1);
  sv->addLayout(inputRow);
  inputError_ = new QLabel(this);
  inputError_->setObjectName(QStringLiteral("InputShapeError"));
  inputError_->setWordWrap(true);
  setRole(inputError_, "error");
  inputError_->hide();
  sv->addWidget(inputError_);
  sv->addWidget(stack_, 1);
  auto* buttons = new QHBoxLayout;
  for (auto* b : {add_, up_, down_, remove_}) buttons->addWidget(b);
  buttons->addStretch(1);
  sv->addLayout(buttons);

  inspector_ = new LayerInspector(this);
  connect(inspector_, &LayerInspector::layerEdited, this, &ModelBuilderView::onLayerEdited);

  auto* top = new QSplitter(Qt::Horizontal, this);
  top->addWidget(paletteBox);
  top->addWidget(stackBox);
  top->addWidget(inspector_);
  top->setStretchFactor(0, 1);  // the palette has its minimum: the longest kind's name
  top->setStretchFactor(1, 3);
  top->setStretchFactor(2, 3);
  top->setChildrenCollapsible(false);

  // Summary.
  modelError_ = new QLabel(this);
  modelError_->setObjectName(QStringLiteral("ModelError"));
  modelError_->setWordWrap(true);
  setRole(modelError_, "error");
  modelError_->hide();
  summary_ = new QTableWidget(0, 3, this);
  summary_->setObjectName(QStringLiteral("SummaryTable"));
  summary_->setHorizontalHeaderLabels({tr("Layer (type)"), tr("Output shape"), tr("Param #")});
  summary_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  summary_->horizontalHeader()->setSectionResizeMode(1, QHeaderView::ResizeToContents);
  summary_->horizontalHeader()->setSectionResizeMode(2, QHeaderView::ResizeToContents);
  summary_->horizontalHeaderItem(2)->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  summary_->verticalHeader()->hide();
  summary_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  summary_->setSelectionMode(QAbstractItemView::NoSelection);
  summary_->setShowGrid(false);
  summary_->setAlternatingRowColors(true);
  totals_ = new QLabel(this);
  totals_->setObjectName(QStringLiteral("TotalParams"));
  totals_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  memory_ = new QLabel(this);
  memory_->setObjectName(QStringLiteral("MemoryPerReplica"));
  memory_->setWordWrap(true);
  memory_->setTextFormat(Qt::RichText);
  auto* summaryBox = new QWidget(this);
  auto* smv = new QVBoxLayout(summaryBox);
  smv->setContentsMargins(0, 0, 0, 0);
  smv->addWidget(sectionTitle(tr("Summary")));
  smv->addWidget(modelError_);
  smv->addWidget(summary_, 1);
  smv->addWidget(totals_);
  smv->addWidget(memory_);

  copies_ = new MirroredCopiesWidget(this);
  copies_->setObjectName(QStringLiteral("MirroredCopies"));
  auto* copiesScroll = new QScrollArea(this);
  copiesScroll->setWidget(copies_);
  copiesScroll->setWidgetResizable(true);
  copiesScroll->setFrameShape(QFrame::NoFrame);
  // It scrolls down through many layers, never sideways: the widget draws as many device columns
  // as its width holds and says how many more there are.
  copies_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  auto* copiesBox = new QWidget(this);
  auto* cv = new QVBoxLayout(copiesBox);
  cv->setContentsMargins(0, 0, 0, 0);
  cv->addWidget(sectionTitle(tr("Mirrored copies — one per device")));
  cv->addWidget(copiesScroll, 1);

  auto* bottom = new QSplitter(Qt::Horizontal, this);
  bottom->addWidget(summaryBox);
  bottom->addWidget(copiesBox);
  bottom->setStretchFactor(0, 3);
  bottom->setStretchFactor(1, 2);
  bottom->setChildrenCollapsible(false);

  auto* vsplit = new QSplitter(Qt::Vertical, this);
  vsplit->addWidget(top);
  vsplit->addWidget(bottom);
  vsplit->setStretchFactor(0, 1);
  vsplit->setStretchFactor(1, 1);
  vsplit->setChildrenCollapsible(false);
  root->addWidget(vsplit, 1);

  connect(doc_, &ProjectDocument::changed, this, &ModelBuilderView::refresh);
  // Another project: its input shape, even while the field keeps the focus (File > Open Example
  // is used from the menu, and the field kept showing the previous project's shape).
  connect(doc_, &ProjectDocument::replaced, this, [this] { showInputShape(); });
  refresh();
}

void ModelBuilderView::addLayer(const QString& type, int row) {
  ml::Project p = doc_->project();
  auto& layers = p.model.layers;
  if (row < 0) row = stack_->currentRow() >= 0 ? stack_->currentRow() + 1 : static_cast<int>(layers.size());
  row = std::clamp(row, 0, static_cast<int>(layers.size()));
  layers.insert(layers.begin() + row, ml::LayerSpec{"", initialArgs(type.toStdString())});
  doc_->edit(tr("Add %1").arg(type), p);
  selectLayer(row);
}

void ModelBuilderView::removeLayer(int row) {
  ml::Project p = doc_->project();
  if (row < 0 || row >= static_cast<int>(p.model.layers.size())) return;
  const QString type = q(std::string(p.model.layers[static_cast<size_t>(row)].type()));
  p.model.layers.erase(p.model.layers.begin() + row);
  doc_->edit(tr("Delete %1").arg(type), p);
  selectLayer(std::min(row, static_cast<int>(p.model.layers.size()) - 1));
}

void ModelBuilderView::moveLayer(int from, int to) {
  ml::Project p = doc_->project();
  const int n = static_cast<int>(p.model.layers.size());
  if (from < 0 || from >= n || to < 0 || to >= n || from == to) return;
  auto layer = p.model.layers[static_cast<size_t>(from)];
  p.model.layers.erase(p.model.layers.begin() + from);
  p.model.layers.insert(p.model.layers.begin() + to, layer);
  doc_->edit(tr("Move %1").arg(q(std::string(layer.type()))), p);
  selectLayer(to);
}

void ModelBuilderView::selectLayer(int row) {
  stack_->setCurrentRow(row);
  refresh();
}

void ModelBuilderView::onLayerEdited(int index, const ml::LayerSpec& layer, const QString& mergeKey) {
  ml::Project p = doc_->project();
  if (index < 0 || index >= static_cast<int>(p.model.layers.size())) return;
  p.model.layers[static_cast<size_t>(index)] = layer;
  doc_->edit(tr("Edit %1").arg(q(std::string(layer.type()))), p, mergeKey);
}

void ModelBuilderView::editInputShape() {
  // Every size a whole number of at least 1; anything else stays on screen, marked, with the reason
  // (never silently replaced by what the model keeps using).
  ml::Shape shape;
  bool valid = true;
  for (const QString& part : inputShape_->text().split(QLatin1Char(','))) {
    bool ok = false;
    const qint64 d = part.trimmed().toLongLong(&ok);
    if (!ok || d < 1)
      valid = false;
    else
      shape.push_back(d);
  }
  inputError_->setVisible(!valid || shape.empty());
  setRole(inputShape_, inputError_->isHidden() ? "" : "invalid");
  if (!inputError_->isHidden()) {
    inputError_->setText(tr("Input shape “%1” is not a shape: give sizes of at least 1 separated by commas, e.g. 13 or 28, 28.")
                             .arg(inputShape_->text()));
    return;
  }
  if (shape == doc_->project().model.inputShape) return;
  ml::Project p = doc_->project();
  p.model.inputShape = shape;
  doc_->edit(tr("Change input shape"), p);
}

void ModelBuilderView::setDataCache(std::shared_ptr<DataCache> cache) {
  fit_->setDataCache(std::move(cache));
  refresh();
}

QString ModelBuilderView::totalsText() const { return totals_->text(); }

void ModelBuilderView::showInputShape() {
  QStringList dims;
  for (auto d : doc_->project().model.inputShape) dims << QString::number(d);
  inputShape_->setText(dims.join(QStringLiteral(", ")));
  inputError_->hide();  // the field shows the model's shape again
  setRole(inputShape_, "");
}

void ModelBuilderView::refresh() {
  refreshing_ = true;
  const auto& p = doc_->project();
  analysis_ = analyzeModel(p);
  int selected = std::min(stack_->currentRow(), static_cast<int>(p.model.layers.size()) - 1);
  if (selected < 0 && !p.model.layers.empty()) selected = 0;  // the inspector always shows a layer
  if (!inputShape_->hasFocus()) showInputShape();
  // Reuse the items (no clear()): this can run inside the list's own signals.
  while (stack_->count() > static_cast<int>(analysis_.rows.size())) delete stack_->takeItem(stack_->count() - 1);
  while (stack_->count() < static_cast<int>(analysis_.rows.size())) new QListWidgetItem(stack_);
  for (size_t i = 0; i < analysis_.rows.size(); ++i) {
    const auto& r = analysis_.rows[i];
    QString text = QStringLiteral("%1.  %2   %3").arg(i + 1).arg(q(r.name), q(r.type));
    if (!r.describe.empty()) text += QStringLiteral("(%1)").arg(q(r.describe));
    auto* item = stack_->item(static_cast<int>(i));
    item->setText(text);
    item->setData(Qt::UserRole, static_cast<int>(i));
    item->setIcon(QIcon());
    item->setBackground(QBrush());
    item->setForeground(QBrush());
    if (!r.error.empty()) {
      item->setIcon(icon(QStringLiteral("warning")));
      item->setBackground(QColor(0xfd, 0xec, 0xea));
      item->setForeground(QColor(0x8b, 0x1d, 0x13));
      item->setToolTip(q(r.error));
    } else {
      item->setToolTip(tr("Output %1 · %2 parameters").arg(q(r.shape), q(ml::withThousands(r.params))));
    }
  }
  for (const auto& fp : fit_->check().problems) {
    if (fp.layer < 0 || fp.layer >= stack_->count()) continue;
    auto* item = stack_->item(fp.layer);
    item->setIcon(icon(QStringLiteral("warning")));
    item->setBackground(QColor(0xfd, 0xec, 0xea));
    item->setForeground(QColor(0x8b, 0x1d, 0x13));
    item->setToolTip(q(fp.message));
  }
  const bool inputBad = std::any_of(fit_->check().problems.begin(), fit_->check().problems.end(),
                                    [](const ml::FitProblem& fp) { return fp.where == ml::FitProblem::Where::Input; });
  if (inputError_->isHidden()) setRole(inputShape_, inputBad ? "invalid" : "");
  stack_->setCurrentRow(selected);
  refreshSelection();
  refreshSummary();
  copies_->setAnalysis(analysis_);
  refreshing_ = false;
}

void ModelBuilderView::refreshSelection() {
  const auto& p = doc_->project();
  const int selected = stack_->currentRow();
  if (selected >= 0 && selected < static_cast<int>(analysis_.rows.size())) {
    const auto& r = analysis_.rows[static_cast<size_t>(selected)];
    inspector_->setLayer(selected, p.model.layers[static_cast<size_t>(selected)], q(r.name), q(r.error));
  } else {
    inspector_->setLayer(-1, {}, {}, {});
  }
  updateButtons();
}

void ModelBuilderView::refreshSummary() {
  const auto& a = analysis_;
  modelError_->setText(q(a.error));
  modelError_->setVisible(!a.ok);
  summary_->setRowCount(static_cast<int>(a.rows.size()));
  for (size_t i = 0; i < a.rows.size(); ++i) {
    const auto& r = a.rows[i];
    const int row = static_cast<int>(i);
    auto* name = new QTableWidgetItem(QStringLiteral("%1 (%2)").arg(q(r.name), q(r.type)));
    auto* shape = new QTableWidgetItem(r.known ? q(r.shape) : QStringLiteral("?"));
    auto* params = new QTableWidgetItem(r.known ? q(ml::withThousands(r.params)) : QStringLiteral("?"));
    params->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    QFont mono = QFontDatabase::systemFont(QFontDatabase::FixedFont);
    shape->setFont(mono);
    params->setFont(mono);
    for (auto* it : {name, shape, params}) {
      if (!r.error.empty()) {
        it->setBackground(QColor(0xfd, 0xec, 0xea));
        it->setForeground(QColor(0x8b, 0x1d, 0x13));
        it->setToolTip(q(r.error));
      } else if (!r.known) {
        it->setForeground(QColor(0x9a, 0xa5, 0xb1));
      }
    }
    summary_->setItem(row, 0, name);
    summary_->setItem(row, 1, shape);
    summary_->setItem(row, 2, params);
  }
  const double pb = static_cast<double>(a.totalParams) * 4;
  // As model.summary() counts them (mirrorlab-cli summary): BatchNormalization's moving mean and
  // variance are parameters no optimizer changes.
  totals_->setText(tr("Total params: %1 (%2)  ·  Trainable: %3  ·  Non-trainable: %4")
                       .arg(q(ml::withThousands(a.totalParams)), q(ml::formatBytes(pb)),
                            q(ml::withThousands(a.totalParams - a.nonTrainableParams)),
                            q(ml::withThousands(a.nonTrainableParams))));
  if (!a.ok) {
    memory_->setText(tr("<span style='color:#8b1d13'>Memory per replica: unknown until every layer fits.</span>"));
    return;
  }
  const auto& opt = doc_->project().training.optimizer;
  const QString low = a.lowPrecisionBytes > 0
                          ? tr(" + %1 working copies %2").arg(q(a.precision), q(ml::formatBytes(a.lowPrecisionBytes)))
                          : QString();
  memory_->setText(tr("<b>Memory per replica</b> at batch %1 (%2): weights %3 + gradients %4 + optimizer state %5 "
                      "(%6, %7 slot%8%11) + activations %9%12 = <b>%10</b>")
                       .arg(a.perReplicaBatch)
                       .arg(a.replicas == 1 ? tr("1 replica") : tr("%1 replicas").arg(a.replicas))
                       .arg(q(ml::formatBytes(a.paramBytes)), q(ml::formatBytes(a.gradBytes)),
                            q(ml::formatBytes(a.optimizerBytes)), QLatin1String(ml::toString(opt.kind)))
                       .arg(a.optimizerSlots)
                       .arg(a.optimizerSlots == 1 ? QString() : QStringLiteral("s"))
                       .arg(q(ml::formatBytes(a.activationBytes)), q(ml::formatBytes(a.totalBytes())),
                            a.shardedOptimizer ? tr(", sharded: 1/%1 per replica").arg(a.replicas) : QString(), low));
}

void ModelBuilderView::updateButtons() {
  const int row = stack_->currentRow(), n = stack_->count();
  up_->setEnabled(row > 0);
  down_->setEnabled(row >= 0 && row + 1 < n);
  remove_->setEnabled(row >= 0);
}

}  // namespace mlui
