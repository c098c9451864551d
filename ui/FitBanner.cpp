// Live model-against-data check on the Model screen.
#include "FitBanner.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>

#include "DataCache.h"
#include "ProjectDocument.h"
#include "Theme.h"

namespace mlui {

FitBanner::FitBanner(ProjectDocument* doc, QWidget* parent) : QFrame(parent), doc_(doc) {
  setObjectName(QStringLiteral("FitBanner"));
  setRole(this, "fitBanner");
  auto* h = new QHBoxLayout(this);
  h->setContentsMargins(8, 4, 8, 4);
  text_ = new QLabel(this);
  text_->setObjectName(QStringLiteral("FitMessage"));
  text_->setWordWrap(true);
  text_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  fit_ = new QPushButton(tr("Fit to data"), this);
  fit_->setObjectName(QStringLiteral("FitToData"));
  fit_->setToolTip(
      tr("Set the input shape and the last layer's units (and a matching loss) from the data, as one step "
         "you can undo"));
  h->addWidget(text_, 1);
  h->addWidget(fit_, 0, Qt::AlignTop);
  connect(fit_, &QPushButton::clicked, this, &FitBanner::fitToData);
  connect(doc_, &ProjectDocument::changed, this, &FitBanner::recheck);
  hide();
}

void FitBanner::setDataCache(std::shared_ptr<DataCache> cache) {
  cache_ = std::move(cache);
  recheck();
}

QString FitBanner::reason() const { return QString::fromStdString(check_.summary()); }

void FitBanner::recheck() {
  const auto& p = doc_->project();
  facts_ = cache_ ? cache_->facts(p) : ml::knownFacts(p.data);
  check_ = facts_ ? ml::checkFit(p, *facts_) : ml::FitCheck{};
  text_->setText(QStringLiteral("⚠ ") + reason().toHtmlEscaped().replace(QLatin1Char('\n'), QStringLiteral("<br>⚠ ")));
  setVisible(!check_.fits());
  Q_EMIT checked(reason());
}

void FitBanner::fitToData() {
  if (!facts_ || check_.fits()) return;
  doc_->edit(tr("Fit the model to the data"), ml::fitToData(doc_->project(), *facts_));
}

}  // namespace mlui
