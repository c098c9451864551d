// The fake plugin's streams: work is queued per stream and runs only when the host synchronises
// (a copy to or from the host, a stream or event synchronisation, a free), in an order that respects
// each stream's own order, recorded events and the waits on them, but otherwise varies (a seeded
// random choice among the streams whose next work may run, FAKE_SCHEDULE_SEED). Every read of
// fake device memory is checked against the writes of other streams with vector clocks: a read
// that no event, wait or host synchronisation orders after a write it overlaps (one enqueued
// earlier on another stream, finished or not) gets NaN instead (every byte 0xFF), and the fake
// counts it and says so on stderr. So a missing cudaStreamWaitEvent in the GPU path turns into NaN
// in the weights, which the invariant tests see, instead of passing because the fake ran in order.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fake {

struct Stream;
struct Signal;  // one recording of an event, or the completion of one piece of work

// Fake device memory a piece of work reads or writes.
struct Span {
  const void* p = nullptr;
  size_t bytes = 0;
};

struct Work {
  std::string what;  // "dense_forward" (messages name the stream too)
  std::vector<Span> reads, writes;
  std::function<void()> run;
  // Reads known only when the work runs (a gather reads the rows its device-side indices name).
  std::function<std::vector<Span>()> lateReads;
};

Stream* newStream(const std::string& label);
// Runs what is queued on it (and whatever that needs), then forgets it.
void dropStream(Stream* s);

std::shared_ptr<Signal> enqueue(Stream* s, Work w);
// cudaEventRecord: the returned signal completes when the stream reaches this point.
std::shared_ptr<Signal> enqueueRecord(Stream* s);
// cudaStreamWaitEvent: later work on s waits for `recorded` (null: never recorded, no wait).
void enqueueWait(Stream* s, std::shared_ptr<Signal> recorded);
// One collective: parts[i] is queued on streams[i]; `run` runs once every part has reached the
// head of its stream, and orders every later work of those streams after all parts.
void enqueueCollective(const std::vector<Stream*>& streams, std::vector<Work> parts, std::function<void()> run);

// Host synchronisation; false (and *why) if the queued work can never finish, which cannot happen
// with work enqueued through the API, but the fake says so rather than hang.
bool waitFor(const std::shared_ptr<Signal>& s, std::string* why);
bool drainStreams(const std::vector<Stream*>& streams, std::string* why);
bool drainAll(std::string* why);
double completedAt(const std::shared_ptr<Signal>& s);  // steady-clock seconds; 0 if not done

// mlcuda_free: later reads of these bytes have no writer to be ordered after.
void forgetMemory(const void* base, size_t bytes);

// Reads given NaN so far (for tests of the fake itself).
uint64_t unorderedReads();

}  // namespace fake
