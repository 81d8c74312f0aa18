#pragma once
// Communicator: how the ranks of one model exchange activations. A layer
// that holds a shard (row-parallel linears, vocab-parallel embedding and
// output layer) calls it through the forward context; it never knows who
// launched the ranks. SingleProcess is the world of one: every collective is
// the identity, so a model built for world 1 computes exactly what it did
// without one.
#include <cstdint>
#include <span>

namespace rinfer {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // data[i] = sum over ranks of data[i], on every rank (n floats each).
  virtual void all_reduce_sum(float* data, int64_t n) = 0;
  // Rows of shards, gathered: every rank sends `rows` rows of counts[rank]
  // floats (row-major, stride counts[rank]); recv gets `rows` rows of
  // sum(counts) floats, rank r's part at column offset sum(counts[0..r)).
  virtual void all_gather_columns(const float* send, int64_t rows, std::span<const int64_t> counts,
                                  float* recv) = 0;
  // data (bytes bytes) of rank `root`, on every rank.
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  // Point to point, between pipeline stages. send() returns as soon as data
  // may be reused (the message may still be on its way, so a stage goes on
  // with its next micro-batch); recv() waits for rank `from`'s next message,
  // which must be exactly `bytes` long. Messages between two ranks arrive in
  // the order they were sent.
  virtual void send(const void* data, int64_t bytes, int to);
  virtual void recv(void* data, int64_t bytes, int from);
};

class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world() const override { return 1; }
  void all_reduce_sum(float*, int64_t) override {}
  void all_gather_columns(const float* send, int64_t rows, std::span<const int64_t> counts, float* recv) override;
  void broadcast(void*, int64_t, int) override {}
};

// The communicator of a world of one, shared by every single-process model.
Communicator& single_process();

}  // namespace rinfer
