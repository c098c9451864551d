// The redraw budget of a live view: it measures what its frames cost and picks the frame rate so
// that drawing takes at most a stated share of one core while a run keeps every core busy (down
// to a floor rate), and the full rate when a core is free. Plain C++, no Qt: tested with numbers.
#pragma once
#include <cstdint>

namespace mlui {

class FrameBudget {
 public:
  struct Options {
    double share = 0.02;  // of one core, while the run uses every core
    double maxFps = 25;   // the display rate when drawing competes with nothing
    double floorFps = 4;  // never slower: the charts must still look alive
  };
  FrameBudget() : FrameBudget(Options{}) {}
  explicit FrameBudget(Options o);

  // busyThreads: threads the run keeps busy (its replicas); cores: the machine's. With a core free,
  // drawing takes nothing from the run and the view draws at the full rate.
  void setLoad(int busyThreads, int cores);
  bool contended() const { return contended_; }
  // One frame drew for `ms` milliseconds (replot, paint, labels): updates the cost estimate.
  void recordFrame(double ms);
  // The frame rate and interval to use now.
  double fps() const;
  int intervalMs() const;
  // The estimated cost of one frame (ms), an exponential average robust to one slow frame.
  double frameCostMs() const { return costMs_; }

  // Totals since reset(), for the run's telemetry: frames drawn and ms spent drawing.
  int64_t frames() const { return frames_; }
  double drawMs() const { return drawMs_; }
  void reset();
  const Options& options() const { return o_; }
  // Views that measure speed (lessons, scaling experiments) draw at the default floor rate while
  // their runs execute: the interval and a sentence that says so.
  static int floorIntervalMs();
  // CPU time of the calling thread, in ms: frames are costed in CPU, not wall time, so a machine
  // busy with other work does not make drawing look dearer than it is.
  static double threadCpuMs();
  static const char* floorNote();

 private:
  Options o_;
  bool contended_ = true;  // until told otherwise, assume the run uses every core
  double costMs_ = 0;
  bool measured_ = false;
  int64_t frames_ = 0;
  double drawMs_ = 0;
};

}  // namespace mlui
