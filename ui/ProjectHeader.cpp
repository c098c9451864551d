// Name and description of the open project.
#include "ProjectHeader.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>

#include "ProjectDocument.h"

namespace mlui {

ProjectHeader::ProjectHeader(ProjectDocument* doc, QWidget* parent) : QWidget(parent), doc_(doc) {
  auto* h = new QHBoxLayout(this);
  h->setContentsMargins(0, 0, 0, 0);
  name_ = new QLineEdit(this);
  name_->setObjectName(QStringLiteral("ProjectName"));
  name_->setPlaceholderText(tr("Project name"));
  name_->setToolTip(tr("The project's name: new runs, scaling runs and exported programs are named after it"));
  name_->setMaximumWidth(320);
  description_ = new QLineEdit(this);
  description_->setObjectName(QStringLiteral("ProjectDescription"));
  description_->setPlaceholderText(tr("What this project is for (optional)"));
  h->addWidget(new QLabel(tr("Name"), this));
  h->addWidget(name_, 2);
  h->addWidget(new QLabel(tr("Description"), this));
  h->addWidget(description_, 3);
  connect(name_, &QLineEdit::editingFinished, this, &ProjectHeader::commit);
  connect(description_, &QLineEdit::editingFinished, this, &ProjectHeader::commit);
  connect(doc_, &ProjectDocument::changed, this, &ProjectHeader::refresh);
  refresh();
}

void ProjectHeader::refresh() {
  if (!name_->hasFocus()) name_->setText(QString::fromStdString(doc_->project().name));
  if (!description_->hasFocus()) description_->setText(QString::fromStdString(doc_->project().description));
}

void ProjectHeader::commit() {
  const std::string name = name_->text().trimmed().toStdString(), desc = description_->text().trimmed().toStdString();
  const auto& cur = doc_->project();
  if (name.empty()) {  // a project always has a name: put the old one back
    name_->setText(QString::fromStdString(cur.name));
    return;
  }
  if (name == cur.name && desc == cur.description) return;
  ml::Project p = cur;
  const bool renamed = name != cur.name;
  p.name = name;
  p.description = desc;
  doc_->edit(renamed ? tr("Rename the project") : tr("Change the description"), p);
}

}  // namespace mlui
