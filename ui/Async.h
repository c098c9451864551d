// Runs work off the UI thread and delivers the result back on it: the caller keeps a
// QFutureWatcher (a child of the widget), so a widget closed meanwhile is simply not called.
// The work returns an Outcome: a value or the error message, never an exception across threads.
#pragma once
#include <exception>
#include <optional>
#include <thread>

#include <QFuture>
#include <QFutureWatcher>
#include <QPromise>
#include <QString>

namespace mlui {

template <typename T>
struct Outcome {
  std::optional<T> value;
  QString error;
};

template <typename T, typename F>
QFuture<Outcome<T>> runAsync(F work) {
  QPromise<Outcome<T>> promise;
  QFuture<Outcome<T>> future = promise.future();
  std::thread([p = std::move(promise), work = std::move(work)]() mutable {
    p.start();
    Outcome<T> out;
    try {
      out.value = work();
    } catch (const std::exception& e) {
      out.error = QString::fromStdString(e.what());
    }
    p.addResult(std::move(out));
    p.finish();
  }).detach();
  return future;
}

// Starts work and calls done(outcome) on the context's thread when it finishes.
template <typename T, typename F, typename Done>
void runAsync(QObject* context, F work, Done done) {
  auto* watcher = new QFutureWatcher<Outcome<T>>(context);
  QObject::connect(watcher, &QFutureWatcherBase::finished, context, [watcher, done = std::move(done)]() mutable {
    done(watcher->result());
    watcher->deleteLater();
  });
  watcher->setFuture(runAsync<T>(std::move(work)));
}

}  // namespace mlui
