#pragma once
// A world of `n` ranks inside one process, for tests: each rank runs on its
// own thread with its own FakeCommunicator, and the collectives meet at a
// barrier and exchange through memory. Sums run in rank order, so a result
// does not depend on which thread arrives first.
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "parallel/communicator.h"

namespace rinfer::test {

class FakeWorld {
 public:
  explicit FakeWorld(int n) : n_(n), barrier_(n), send_(size_t(n)) {}
  int size() const { return n_; }

  // Runs fn(rank, comm) on one thread per rank and waits for all of them.
  void run(const std::function<void(int rank, Communicator& comm)>& fn);

 private:
  friend class FakeCommunicator;
  int n_;
  std::barrier<> barrier_;
  std::vector<const float*> send_;
  const void* root_bytes_ = nullptr;
};

class FakeCommunicator final : public Communicator {
 public:
  FakeCommunicator(FakeWorld& world, int rank) : w_(world), rank_(rank) {}
  int rank() const override { return rank_; }
  int world() const override { return w_.n_; }
  void all_reduce_sum(float* data, int64_t n) override {
    w_.send_[size_t(rank_)] = data;
    w_.barrier_.arrive_and_wait();
    std::vector<float> sum(size_t(n), 0.0f);
    for (int r = 0; r < w_.n_; ++r)
      for (int64_t i = 0; i < n; ++i) sum[size_t(i)] += w_.send_[size_t(r)][i];
    w_.barrier_.arrive_and_wait();  // every rank has read every buffer
    std::memcpy(data, sum.data(), size_t(n) * sizeof(float));
  }
  void all_gather_columns(const float* send, int64_t rows, std::span<const int64_t> counts, float* recv) override {
    w_.send_[size_t(rank_)] = send;
    w_.barrier_.arrive_and_wait();
    int64_t total = 0;
    for (int64_t c : counts) total += c;
    int64_t off = 0;
    for (int r = 0; r < w_.n_; ++r) {
      for (int64_t i = 0; i < rows; ++i)
        std::memcpy(recv + i * total + off, w_.send_[size_t(r)] + i * counts[size_t(r)],
                    size_t(counts[size_t(r)]) * sizeof(float));
      off += counts[size_t(r)];
    }
    w_.barrier_.arrive_and_wait();
  }
  void broadcast(void* data, int64_t bytes, int root) override {
    if (rank_ == root) w_.root_bytes_ = data;
    w_.barrier_.arrive_and_wait();
    if (rank_ != root) std::memcpy(data, w_.root_bytes_, size_t(bytes));
    w_.barrier_.arrive_and_wait();
  }

 private:
  FakeWorld& w_;
  int rank_;
};

inline void FakeWorld::run(const std::function<void(int rank, Communicator& comm)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n_; ++r)
    threads.emplace_back([&, r] {
      FakeCommunicator comm(*this, r);
      try {
        fn(r, comm);
      } catch (const std::exception& e) {
        // The other ranks may be waiting for this one at a barrier: end the
        // test loudly rather than hang it.
        std::fprintf(stderr, "rank %d of the fake world failed: %s\n", r, e.what());
        std::abort();
      }
    });
  for (auto& t : threads) t.join();
}

}  // namespace rinfer::test
