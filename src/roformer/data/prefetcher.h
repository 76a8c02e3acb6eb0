// Background production of batches: a worker thread calls make(i) for i = first, first+1, ...
// up to `depth` items ahead of the consumer, so loading overlaps the training step. Items come
// out in order; an exception in the worker is rethrown by next().
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace roformer::data {

template <class T>
class Prefetcher {
 public:
  Prefetcher(std::function<T(int64_t)> make, int64_t first, int64_t last, size_t depth = 2)
      : make_(std::move(make)), next_(first), last_(last), depth_(depth), worker_([this] { run(); }) {}

  ~Prefetcher() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The next item in order; blocks until it is ready.
  T next() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return !queue_.empty() || error_; });
    if (queue_.empty() && error_) std::rethrow_exception(error_);
    T item = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
    return item;
  }

 private:
  void run() {
    while (true) {
      int64_t index;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return stop_ || queue_.size() < depth_; });
        if (stop_ || next_ >= last_) return;
        index = next_++;
      }
      try {
        T item = make_(index);
        std::lock_guard<std::mutex> lock(mutex_);
        queue_.push_back(std::move(item));
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        error_ = std::current_exception();
        cv_.notify_all();
        return;
      }
      cv_.notify_all();
    }
  }

  std::function<T(int64_t)> make_;
  int64_t next_, last_;
  size_t depth_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<T> queue_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread worker_;  // last: starts after every other member is ready
};

}  // namespace roformer::data
