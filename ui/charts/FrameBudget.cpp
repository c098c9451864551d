// The frame rate from measured frame costs: fps = share * 1000 ms / cost, clamped to the floor
// and the display rate. The cost is averaged so a single slow frame (a resize) does not halve it.
#include "charts/FrameBudget.h"

#include <algorithm>
#include <cmath>
#include <ctime>

namespace mlui {

FrameBudget::FrameBudget(Options o) : o_(o) {
  o_.floorFps = std::max(0.1, o_.floorFps);
  o_.maxFps = std::max(o_.floorFps, o_.maxFps);
}

void FrameBudget::setLoad(int busyThreads, int cores) { contended_ = cores <= 0 || busyThreads >= cores; }

void FrameBudget::recordFrame(double ms) {
  if (!(ms >= 0) || !std::isfinite(ms)) return;
  ++frames_;
  drawMs_ += ms;
  // The first frame sets the estimate; later ones move it by a quarter, so two or three frames
  // after the cost changes (a longer series, a larger window) the rate follows.
  costMs_ = measured_ ? 0.75 * costMs_ + 0.25 * ms : ms;
  measured_ = true;
}

double FrameBudget::fps() const {
  if (!contended_ || costMs_ <= 0) return o_.maxFps;
  return std::clamp(o_.share * 1000.0 / costMs_, o_.floorFps, o_.maxFps);
}

int FrameBudget::intervalMs() const { return static_cast<int>(std::lround(1000.0 / fps())); }

double FrameBudget::threadCpuMs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

int FrameBudget::floorIntervalMs() { return static_cast<int>(std::lround(1000.0 / Options{}.floorFps)); }

const char* FrameBudget::floorNote() {
  return "While runs execute, charts redraw at most 4 times a second, so drawing does not slow the speeds "
         "being measured; each run's results are drawn when it ends.";
}

void FrameBudget::reset() {
  frames_ = 0;
  drawMs_ = 0;
}

}  // namespace mlui
