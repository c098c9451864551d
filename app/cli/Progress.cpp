#include "Progress.h"

#include <unistd.h>

#include <cmath>
#include <variant>

namespace mlcli {

static std::string dur(double s) {
  char b[32];
  if (s < 60)
    std::snprintf(b, sizeof b, "%.1fs", s);
  else if (s < 3600)
    std::snprintf(b, sizeof b, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else
    std::snprintf(b, sizeof b, "%dh%02dm", static_cast<int>(s) / 3600, (static_cast<int>(s) / 60) % 60);
  return b;
}

Progress::Progress(FILE* out, bool quiet, std::string metricName)
    : out_(out), quiet_(quiet), tty_(isatty(fileno(out)) != 0), metric_(std::move(metricName)) {}

void Progress::drawBar(const ml::StepEvent& s, bool final) {
  const double elapsed = s.wallTime - epochStartWall_;
  const int width = 30;
  const int done = static_cast<int>(width * s.stepInEpoch / std::max<int64_t>(1, s.stepsPerEpoch));
  std::string bar(static_cast<size_t>(done), '=');
  if (done < width) bar += '>';
  bar.resize(width, '.');
  const double perStep = elapsed / static_cast<double>(std::max<int64_t>(1, s.stepInEpoch));
  char timing[64];
  if (final)
    std::snprintf(timing, sizeof timing, "%s %.1fms/step", dur(elapsed).c_str(), perStep * 1e3);
  else
    std::snprintf(timing, sizeof timing, "%s ETA: %s", dur(elapsed).c_str(),
                  dur(perStep * static_cast<double>(s.stepsPerEpoch - s.stepInEpoch)).c_str());
  const double n = static_cast<double>(std::max<int64_t>(1, samples_));
  std::fprintf(out_, "%s%ld/%ld [%s] - %s - loss: %.4f - %s: %.4f - %.0f samples/s", tty_ ? "\r\033[K" : "",
               static_cast<long>(s.stepInEpoch), static_cast<long>(s.stepsPerEpoch), bar.c_str(), timing, lossSum_ / n,
               metric_.c_str(), metricSum_ / n, elapsed > 0 ? static_cast<double>(samples_) / elapsed : 0.0);
  if (s.lossScale > 0) std::fprintf(out_, " - loss scale: %.10g (%lld skipped)", s.lossScale, static_cast<long long>(skipped_));
  barOpen_ = true;
  std::fflush(out_);
}

void Progress::onEvent(const ml::Event& e) {
  if (const auto* st = std::get_if<ml::RunStarted>(&e)) {
    replicas_ = st->replicas;
    epochs_ = st->epochs;
    if (!quiet_) std::fprintf(out_, "%s", st->description.c_str());
    if (!quiet_ && st->resumeRun)
      std::fprintf(out_, "resuming run %lld after step %lld (epoch %d)\n", static_cast<long long>(*st->resumeRun),
                   static_cast<long long>(st->resumeStep), st->resumeEpochsDone + 1);
    epochStartWall_ = 0;
  } else if (const auto* s = std::get_if<ml::StepEvent>(&e)) {
    if (s->stepInEpoch == 1 || s->epoch != last_.epoch) {
      epochStartWall_ = s->wallTime - s->stepTime;
      lossSum_ = metricSum_ = 0;
      samples_ = 0;
      skipped_ = 0;
      lastDraw_ = -1;
      if (!quiet_) std::fprintf(out_, "Epoch %d/%d\n", s->epoch, epochs_);
    }
    lossSum_ += s->loss * static_cast<double>(s->samples);
    metricSum_ += s->metric * static_cast<double>(s->samples);
    samples_ += s->samples;
    last_ = *s;
    if (s->skipped) {
      ++skipped_;
      if (!quiet_) {
        std::fprintf(out_, "%sstep %lld: a gradient overflowed at loss scale %.10g: update skipped, scale halved\n",
                     tty_ && barOpen_ ? "\r\033[K" : "", static_cast<long long>(s->step), s->lossScale);
        barOpen_ = false;
      }
    }
    if (!quiet_ && tty_ && (s->wallTime - lastDraw_ >= 0.1 || s->stepInEpoch == s->stepsPerEpoch)) {
      drawBar(*s, false);
      lastDraw_ = s->wallTime;
    }
  } else if (const auto* ep = std::get_if<ml::EpochEvent>(&e)) {
    if (quiet_) return;
    drawBar(last_, true);
    if (ep->valLoss) std::fprintf(out_, " - val_loss: %.4f - val_%s: %.4f", *ep->valLoss, metric_.c_str(), *ep->valMetric);
    std::fprintf(out_, "\n");
    barOpen_ = false;
    if (replicas_ > 1) {
      std::fprintf(out_,
                   "  epoch %d: %.2fs, %.0f samples/s, sync overhead %.1f%% (all-reduce %.1f%%, waiting for the slowest replica "
                   "%.1f%%), replicas %s\n",
                   ep->epoch, ep->seconds, ep->samplesPerSec, 100 * (ep->allreduceShare + ep->waitShare),
                   100 * ep->allreduceShare, 100 * ep->waitShare,
                   ep->inSync ? "in sync (equal weight checksums)" : "OUT OF SYNC");
    }
  } else if (const auto* w = std::get_if<ml::WatchdogWarning>(&e)) {
    if (barOpen_) std::fprintf(out_, "\n");
    barOpen_ = false;
    std::fprintf(stderr, "warning: %s\n", w->message.c_str());
  } else if (const auto* c = std::get_if<ml::CheckpointSaved>(&e)) {
    if (quiet_) return;
    if (barOpen_ && tty_) return;  // the bar's line stays; the store lists every checkpoint
    std::fprintf(out_, "  checkpoint after step %ld: %s\n", static_cast<long>(c->step), c->path.c_str());
  } else if (const auto* f = std::get_if<ml::RunFinished>(&e)) {
    if (barOpen_) std::fprintf(out_, "\n");
    barOpen_ = false;
    if (f->status != ml::RunStatus::Finished)
      std::fprintf(stderr, "run %s: %s\n", ml::toString(f->status), f->message.c_str());
    else if (!quiet_)
      std::fprintf(out_, "finished %ld steps in %s\n", static_cast<long>(f->steps), dur(f->seconds).c_str());
  }
  std::fflush(out_);
}

}  // namespace mlcli
