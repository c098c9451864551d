// A bounded, thread-safe event queue, and a hub that fans events out to every subscriber.
// The producer (training) never blocks: when a consumer's queue is full the event is dropped
// and counted, so a slow consumer can never slow training down.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "telemetry/Events.h"

namespace ml {

class Channel {
 public:
  explicit Channel(size_t capacity = 65536) : capacity_(capacity) {}

  // Never blocks for long: drops the event when full. Returns false when dropped.
  bool tryPush(const Event& e) {
    {
      std::lock_guard lock(mu_);
      if (closed_) return false;
      if (queue_.size() >= capacity_) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
      queue_.push_back(e);
      pushed_.fetch_add(1, std::memory_order_relaxed);
    }
    cv_.notify_one();
    return true;
  }

  // Moves every queued event into out (appends). Returns how many.
  size_t drain(std::vector<Event>& out) {
    std::lock_guard lock(mu_);
    size_t n = queue_.size();
    for (auto& e : queue_) out.push_back(std::move(e));
    queue_.clear();
    return n;
  }

  // Waits until an event is queued, the channel is closed, wake() is called, or the timeout
  // passes. Returns false only when closed and empty.
  bool waitFor(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return !queue_.empty() || closed_ || woken_; });
    woken_ = false;
    return !(closed_ && queue_.empty());
  }
  // Ends the consumer's current (or next) waitFor early: it has something else to do.
  void wake() {
    {
      std::lock_guard lock(mu_);
      woken_ = true;
    }
    cv_.notify_all();
  }

  void close() {
    {
      std::lock_guard lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }
  bool closed() const {
    std::lock_guard lock(mu_);
    return closed_;
  }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  // Events queued since the channel was made (not the dropped ones): what a consumer that has
  // drained this many has seen all of.
  uint64_t pushed() const {
    std::lock_guard lock(mu_);
    return pushed_.load(std::memory_order_relaxed);
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> queue_;
  size_t capacity_;
  bool closed_ = false;
  bool woken_ = false;
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> pushed_{0};
};

class TelemetryHub {
 public:
  std::shared_ptr<Channel> subscribe(size_t capacity = 65536) {
    auto ch = std::make_shared<Channel>(capacity);
    std::lock_guard lock(mu_);
    subscribers_.push_back(ch);
    return ch;
  }
  void publish(const Event& e) {
    std::lock_guard lock(mu_);
    for (auto& ch : subscribers_) ch->tryPush(e);
  }
  void closeAll() {
    std::lock_guard lock(mu_);
    for (auto& ch : subscribers_) ch->close();
  }
  bool hasSubscribers() const {
    std::lock_guard lock(mu_);
    return !subscribers_.empty();
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Channel>> subscribers_;
};

}  // namespace ml
