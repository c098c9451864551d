// See FakeStreams.h. One lock over everything: the API calls of every replica thread enqueue under
// it, and whichever thread synchronises runs queued work (its own or another thread's) under it.
#include "FakeStreams.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <string>

namespace fake {

namespace {

// Vector clock: stream id -> how many of that stream's works are ordered before this point.
using Clock = std::map<int, uint64_t>;

void merge(Clock& into, const Clock& from) {
  for (const auto& [id, n] : from) {
    uint64_t& x = into[id];
    x = std::max(x, n);
  }
}

bool orderedBefore(const Clock& c, int stream, uint64_t stamp) {
  const auto it = c.find(stream);
  return it != c.end() && it->second >= stamp;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Collective {
  std::vector<Stream*> streams;
  std::function<void()> run;
};

}  // namespace

struct Signal {
  bool done = false;
  Clock clock;  // what is ordered before it
  double time = 0;
};

namespace {

struct Op {
  uint64_t seq = 0;  // global enqueue order (the parts of a collective share one)
  Work work;
  std::shared_ptr<Signal> waitFor;   // a stream wait
  std::shared_ptr<Collective> coll;  // a part of a collective
  Clock host;                        // what the enqueuing thread had seen finish
  std::shared_ptr<Signal> done = std::make_shared<Signal>();
};

}  // namespace

struct Stream {
  int id = 0;
  std::string label;
  std::deque<Op> queue;
  Clock clock;
};

namespace {

struct Write {  // the newest write of a byte range
  uintptr_t begin, end;
  int stream;
  uint64_t stamp;  // the writer's position on its stream
  std::string by;
};
struct Pending {  // a write enqueued and not yet run
  uintptr_t begin, end;
  int stream;
  uint64_t seq;
  std::string by;
};

struct State {
  std::mutex mutex;
  std::vector<Stream*> streams;
  int nextStream = 0;
  uint64_t nextSeq = 1;
  std::vector<Write> writes;
  std::vector<Pending> pending;
  std::mt19937_64 rng{[] {
    const char* e = std::getenv("FAKE_SCHEDULE_SEED");
    return e ? std::strtoull(e, nullptr, 10) : 20261207ull;
  }()};
  uint64_t unordered = 0;
};

State& state() {
  static State* s = [] {
    auto* st = new State;  // never destroyed: contexts may be torn down during exit
    // FAKE_UNORDERED_FATAL=1 (the training and CLI tests): a process whose GPU work had a read or
    // write that nothing ordered exits 3 at the end, even if the NaN it got changed no result.
    const char* fatal = std::getenv("FAKE_UNORDERED_FATAL");
    if (fatal && std::string(fatal) == "1")
      std::atexit([] {
        if (state().unordered == 0) return;
        std::fprintf(stderr, "fake plugin: %llu unordered reads or writes of GPU memory (FAKE_UNORDERED_FATAL=1)\n",
                     static_cast<unsigned long long>(state().unordered));
        std::_Exit(3);
      });
    return st;
  }();
  return *s;
}

thread_local Clock hostClock;  // what this thread has seen finish (stream and event synchronisations)

uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// Drops [b, e) from the recorded writes, cutting the ones that overlap it.
void cut(std::vector<Write>& writes, uintptr_t b, uintptr_t e) {
  std::vector<Write> kept;
  kept.reserve(writes.size() + 1);
  for (const Write& w : writes) {
    if (w.end <= b || w.begin >= e) {
      kept.push_back(w);
      continue;
    }
    if (w.begin < b) kept.push_back(Write{w.begin, b, w.stream, w.stamp, w.by});
    if (w.end > e) kept.push_back(Write{e, w.end, w.stream, w.stamp, w.by});
  }
  writes.swap(kept);
}

// Gives [b, e) NaN (every byte 0xFF: NaN as float and as double) and says why.
void poison(State& st, uintptr_t b, uintptr_t e, const std::string& why) {
  std::memset(reinterpret_cast<void*>(b), 0xFF, e - b);
  if (++st.unordered <= 20)
    std::fprintf(stderr, "fake plugin: %s (%zu bytes at %p): nothing orders them (no event, wait or synchronisation): NaN\n",
                 why.c_str(), static_cast<size_t>(e - b), reinterpret_cast<void*>(b));
}

void checkReads(State& st, const Stream& s, Op& op) {
  if (op.work.lateReads) {
    auto more = op.work.lateReads();
    op.work.reads.insert(op.work.reads.end(), more.begin(), more.end());
  }
  for (const Span& r : op.work.reads) {
    if (!r.p || r.bytes == 0) continue;
    const uintptr_t b = addr(r.p), e = b + r.bytes;
    for (const Write& w : st.writes)
      if (w.stream != s.id && w.begin < e && w.end > b && !orderedBefore(s.clock, w.stream, w.stamp))
        poison(st, std::max(b, w.begin), std::min(e, w.end), op.work.what + " on " + s.label + " reads what " + w.by + " wrote");
    for (const Pending& w : st.pending)
      if (w.stream != s.id && w.seq < op.seq && w.begin < e && w.end > b)
        poison(st, std::max(b, w.begin), std::min(e, w.end),
               op.work.what + " on " + s.label + " reads what " + w.by + " writes, enqueued before it and not yet run");
  }
}

// After the work ran. Two writes of the same bytes that nothing orders leave whichever came last on
// a GPU: the fake leaves NaN, so that neither order passes a test.
void recordWrites(State& st, const Stream& s, const Op& op) {
  const uint64_t stamp = s.clock.at(s.id);
  for (const Span& w : op.work.writes) {
    if (!w.p || w.bytes == 0) continue;
    const uintptr_t b = addr(w.p), e = b + w.bytes;
    for (const Write& o : st.writes)
      if (o.stream != s.id && o.begin < e && o.end > b && !orderedBefore(s.clock, o.stream, o.stamp))
        poison(st, std::max(b, o.begin), std::min(e, o.end), op.work.what + " on " + s.label + " writes what " + o.by + " wrote");
    cut(st.writes, b, e);
    st.writes.push_back(Write{b, e, s.id, stamp, op.work.what + " on " + s.label});
  }
  std::erase_if(st.pending, [&](const Pending& p) { return p.seq == op.seq && p.stream == s.id; });
}

void finish(Stream& s, Op& op) {
  op.done->done = true;
  op.done->clock = s.clock;
  op.done->time = now();
}

bool headIsPartOf(const Stream* s, const std::shared_ptr<Collective>& c) {
  return !s->queue.empty() && s->queue.front().coll == c;
}

bool runnable(const Stream* s) {
  if (s->queue.empty()) return false;
  const Op& op = s->queue.front();
  if (op.waitFor && !op.waitFor->done) return false;
  if (op.coll)
    return std::all_of(op.coll->streams.begin(), op.coll->streams.end(), [&](Stream* t) { return headIsPartOf(t, op.coll); });
  return true;
}

void runHead(State& st, Stream* s) {
  if (auto coll = s->queue.front().coll) {
    std::vector<Op> parts;
    Clock joined;
    for (Stream* t : coll->streams) {
      parts.push_back(std::move(t->queue.front()));
      t->queue.pop_front();
      merge(t->clock, parts.back().host);
      ++t->clock[t->id];
      checkReads(st, *t, parts.back());
    }
    coll->run();
    for (Stream* t : coll->streams) merge(joined, t->clock);
    for (size_t i = 0; i < coll->streams.size(); ++i) {
      Stream* t = coll->streams[i];
      recordWrites(st, *t, parts[i]);
      t->clock = joined;
      finish(*t, parts[i]);
    }
    return;
  }
  Op op = std::move(s->queue.front());
  s->queue.pop_front();
  merge(s->clock, op.host);
  if (op.waitFor) merge(s->clock, op.waitFor->clock);
  ++s->clock[s->id];
  checkReads(st, *s, op);
  if (op.work.run) op.work.run();
  recordWrites(st, *s, op);
  finish(*s, op);
}

// Runs queued work, one piece at a time from a randomly chosen stream that may run, until done().
template <typename Done>
bool runUntil(State& st, Done done, std::string* why) {
  std::vector<Stream*> ready;
  while (!done()) {
    ready.clear();
    for (Stream* s : st.streams)
      if (runnable(s)) ready.push_back(s);
    if (ready.empty()) {
      if (why) {
        *why = "fake plugin: queued work can never run (a wait or a collective part blocks every stream):";
        for (Stream* s : st.streams)
          if (!s->queue.empty()) *why += " " + s->label + " waits at " + s->queue.front().work.what + ";";
      }
      return false;
    }
    runHead(st, ready[std::uniform_int_distribution<size_t>(0, ready.size() - 1)(st.rng)]);
  }
  return true;
}

Op makeOp(State& st, Stream* s, Work w, uint64_t seq) {
  Op op;
  op.seq = seq;
  op.work = std::move(w);
  op.host = hostClock;
  for (const Span& x : op.work.writes)
    if (x.p && x.bytes)
      st.pending.push_back(Pending{addr(x.p), addr(x.p) + x.bytes, s->id, op.seq, op.work.what + " on " + s->label});
  return op;
}

}  // namespace

Stream* newStream(const std::string& label) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  auto* s = new Stream;
  s->id = st.nextStream++;
  s->label = label;
  st.streams.push_back(s);
  return s;
}

void dropStream(Stream* s) {
  if (!s) return;
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  std::string why;
  if (!runUntil(
          st, [&] { return s->queue.empty(); }, &why))
    std::fprintf(stderr, "%s\n", why.c_str());
  std::erase(st.streams, s);
  delete s;
}

std::shared_ptr<Signal> enqueue(Stream* s, Work w) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  s->queue.push_back(makeOp(st, s, std::move(w), st.nextSeq++));
  return s->queue.back().done;
}

std::shared_ptr<Signal> enqueueRecord(Stream* s) { return enqueue(s, Work{"event record", {}, {}, {}}); }

void enqueueWait(Stream* s, std::shared_ptr<Signal> recorded) {
  if (!recorded) return;  // waiting on an event never recorded does nothing, as in CUDA
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  Op op = makeOp(st, s, Work{"stream wait", {}, {}, {}}, st.nextSeq++);
  op.waitFor = std::move(recorded);
  s->queue.push_back(std::move(op));
}

void enqueueCollective(const std::vector<Stream*>& streams, std::vector<Work> parts, std::function<void()> run) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  auto coll = std::make_shared<Collective>(Collective{streams, std::move(run)});
  const uint64_t seq = st.nextSeq++;  // one for all parts: they run as one
  for (size_t i = 0; i < streams.size(); ++i) {
    Op op = makeOp(st, streams[i], std::move(parts[i]), seq);
    op.coll = coll;
    streams[i]->queue.push_back(std::move(op));
  }
}

bool waitFor(const std::shared_ptr<Signal>& s, std::string* why) {
  if (!s) return true;
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  if (!runUntil(
          st, [&] { return s->done; }, why))
    return false;
  merge(hostClock, s->clock);
  return true;
}

bool drainStreams(const std::vector<Stream*>& streams, std::string* why) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  const auto empty = [&] { return std::all_of(streams.begin(), streams.end(), [](Stream* s) { return s->queue.empty(); }); };
  if (!runUntil(st, empty, why)) return false;
  for (Stream* s : streams) merge(hostClock, s->clock);
  return true;
}

bool drainAll(std::string* why) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  const auto empty = [&] {
    return std::all_of(st.streams.begin(), st.streams.end(), [](Stream* s) { return s->queue.empty(); });
  };
  if (!runUntil(st, empty, why)) return false;
  for (Stream* s : st.streams) merge(hostClock, s->clock);
  return true;
}

double completedAt(const std::shared_ptr<Signal>& s) { return s && s->done ? s->time : 0.0; }

void forgetMemory(const void* base, size_t bytes) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  cut(st.writes, addr(base), addr(base) + bytes);
}

uint64_t unorderedReads() {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  return st.unordered;
}

}  // namespace fake
