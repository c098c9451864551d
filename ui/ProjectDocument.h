// The open project: the ml::Project value every screen edits, its file, the unsaved-changes
// state and the undo stack. Views never keep their own copy: they read project() and change it
// through edit(), which records an undoable step and emits changed().
#pragma once
#include <QObject>
#include <QString>
#include <QUndoStack>

#include "project/Project.h"

namespace mlui {

class ProjectDocument : public QObject {
  Q_OBJECT
 public:
  explicit ProjectDocument(QObject* parent = nullptr);

  const ml::Project& project() const { return project_; }
  const QString& path() const { return path_; }
  bool isModified() const { return !undo_.isClean(); }
  QUndoStack* undoStack() { return &undo_; }
  QString displayName() const;

  // Records one undoable change. Edits with the same non-empty mergeKey in a row merge into one
  // step (typing in a spin box is one undo, not twenty).
  void edit(const QString& text, const ml::Project& after, const QString& mergeKey = {});

  // Replace the whole document (no undo). load() throws ml::UserError naming the file.
  void load(const QString& path);
  void reset(const ml::Project& p, const QString& path = {});
  void save(const QString& path);  // throws ml::UserError

  // Called by the undo commands.
  void apply(const ml::Project& p);

 Q_SIGNALS:
  void changed();   // the project value changed (edit, undo, redo, load)
  void replaced();  // a different project was loaded or created
  void pathChanged(const QString& path);
  void modifiedChanged(bool modified);

 private:
  ml::Project project_;
  QString path_;
  QUndoStack undo_;
};

// A new, valid project (a small MLP on the spirals) for File > New.
ml::Project newProject();

}  // namespace mlui
