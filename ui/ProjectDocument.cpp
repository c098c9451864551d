// The open project and its undo history.
#include "ProjectDocument.h"

#include <QFileInfo>
#include <QUndoCommand>

namespace mlui {

namespace {

class EditProjectCommand : public QUndoCommand {
 public:
  EditProjectCommand(ProjectDocument* doc, const QString& text, ml::Project before, ml::Project after, QString key)
      : QUndoCommand(text), doc_(doc), before_(std::move(before)), after_(std::move(after)), key_(std::move(key)) {}
  void undo() override { doc_->apply(before_); }
  void redo() override { doc_->apply(after_); }
  int id() const override { return key_.isEmpty() ? -1 : 1; }
  bool mergeWith(const QUndoCommand* other) override {
    auto* o = static_cast<const EditProjectCommand*>(other);
    if (o->key_ != key_) return false;
    after_ = o->after_;
    return true;
  }

 private:
  ProjectDocument* doc_;
  ml::Project before_, after_;
  QString key_;
};

}  // namespace

ProjectDocument::ProjectDocument(QObject* parent) : QObject(parent) {
  project_ = newProject();
  connect(&undo_, &QUndoStack::cleanChanged, this, [this](bool clean) { Q_EMIT modifiedChanged(!clean); });
}

QString ProjectDocument::displayName() const {
  if (path_.isEmpty()) return QString::fromStdString(project_.name);
  return QFileInfo(path_).fileName();
}

void ProjectDocument::edit(const QString& text, const ml::Project& after, const QString& mergeKey) {
  undo_.push(new EditProjectCommand(this, text, project_, after, mergeKey));
}

void ProjectDocument::apply(const ml::Project& p) {
  project_ = p;
  Q_EMIT changed();
}

void ProjectDocument::load(const QString& path) {
  ml::Project p = ml::Project::load(path.toStdString());
  reset(p, QFileInfo(path).absoluteFilePath());
}

void ProjectDocument::reset(const ml::Project& p, const QString& path) {
  project_ = p;
  path_ = path;
  undo_.clear();
  undo_.setClean();
  Q_EMIT pathChanged(path_);
  Q_EMIT replaced();
  Q_EMIT changed();
  Q_EMIT modifiedChanged(false);
}

void ProjectDocument::save(const QString& path) {
  project_.save(path.toStdString());
  path_ = QFileInfo(path).absoluteFilePath();
  undo_.setClean();
  Q_EMIT pathChanged(path_);
}

ml::Project newProject() {
  ml::Project p;
  p.name = "untitled";
  p.model.inputShape = {2};
  p.model.layers = {{"", ml::DenseSpec{.units = 32, .activation = ml::Act::Relu}},
                    {"", ml::DenseSpec{.units = 3, .activation = ml::Act::Softmax}}};
  p.data.kind = ml::DataKind::Spirals;
  p.data.samples = 2000;
  p.data.classes = 3;
  p.data.validationSplit = 0.2;
  p.training.epochs = 20;
  p.training.batchSize = 64;
  p.training.optimizer.learningRate = 0.01;
  p.distribute.devices = ml::parseDevices("cpu:2");
  return p;
}

}  // namespace mlui
