#include "parallel/mpi.h"

#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "core/error.h"

namespace rinfer::mpi {

namespace {

int env_int(const char* const* names, int fallback) {
  for (const char* const* n = names; *n; ++n)
    if (const char* v = std::getenv(*n)) return std::atoi(v);
  return fallback;
}

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fail("MPI ", what, " failed: ", std::string(msg, size_t(len)));
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &world_);
  }
  ~MpiCommunicator() override {
    // Sends still on their way complete before their buffers go.
    for (auto& p : pending_) MPI_Wait(&p.request, MPI_STATUS_IGNORE);
  }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  void all_reduce_sum(float* data, int64_t n) override {
    // MPI counts are ints: large messages go in pieces.
    for (int64_t i = 0; i < n; i += kMaxCount)
      check(MPI_Allreduce(MPI_IN_PLACE, data + i, int(std::min(kMaxCount, n - i)), MPI_FLOAT, MPI_SUM, comm_),
            "all-reduce");
  }
  void all_gather_columns(const float* send, int64_t rows, std::span<const int64_t> counts, float* recv) override {
    RINFER_CHECK(int(counts.size()) == world_, "all_gather_columns: ", counts.size(), " shards for ", world_, " ranks");
    // Each rank's rows x count block, then the blocks interleaved into rows.
    std::vector<int> sizes(static_cast<size_t>(world_)), offsets(static_cast<size_t>(world_));
    int64_t total = 0, cols = 0;
    for (int r = 0; r < world_; ++r) {
      RINFER_CHECK(rows * counts[size_t(r)] < kMaxCount, "all_gather_columns: message too large");
      sizes[size_t(r)] = int(rows * counts[size_t(r)]);
      offsets[size_t(r)] = int(total);
      total += sizes[size_t(r)];
      RINFER_CHECK(total < kMaxCount, "all_gather_columns: message too large");
      cols += counts[size_t(r)];
    }
    staging_.resize(size_t(total));
    check(MPI_Allgatherv(send, sizes[size_t(rank_)], MPI_FLOAT, staging_.data(), sizes.data(), offsets.data(),
                         MPI_FLOAT, comm_),
          "all-gather");
    int64_t col = 0;
    for (int r = 0; r < world_; ++r) {
      const int64_t c = counts[size_t(r)];
      for (int64_t i = 0; i < rows; ++i)
        std::memcpy(recv + i * cols + col, staging_.data() + offsets[size_t(r)] + i * c, size_t(c) * sizeof(float));
      col += c;
    }
  }
  void broadcast(void* data, int64_t bytes, int root) override {
    auto* p = static_cast<char*>(data);
    for (int64_t i = 0; i < bytes; i += kMaxCount)
      check(MPI_Bcast(p + i, int(std::min(kMaxCount, bytes - i)), MPI_BYTE, root, comm_), "broadcast");
  }
  void send(const void* data, int64_t bytes, int to) override {
    RINFER_CHECK(bytes < kMaxCount, "send: message of ", bytes, " bytes is too large");
    // Completed sends give their buffers back; the message is copied so the
    // caller may reuse `data` at once.
    while (!pending_.empty()) {
      int done = 0;
      check(MPI_Test(&pending_.front().request, &done, MPI_STATUS_IGNORE), "send");
      if (!done) break;
      free_.push_back(std::move(pending_.front().bytes));
      pending_.pop_front();
    }
    Pending p;
    if (!free_.empty()) {
      p.bytes = std::move(free_.back());
      free_.pop_back();
    }
    p.bytes.assign(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
    check(MPI_Isend(p.bytes.data(), int(bytes), MPI_BYTE, to, kTag, comm_, &p.request), "send");
    pending_.push_back(std::move(p));
  }
  void recv(void* data, int64_t bytes, int from) override {
    RINFER_CHECK(bytes < kMaxCount, "recv: message of ", bytes, " bytes is too large");
    MPI_Status st;
    check(MPI_Recv(data, int(bytes), MPI_BYTE, from, kTag, comm_, &st), "receive");
    int got = 0;
    MPI_Get_count(&st, MPI_BYTE, &got);
    RINFER_CHECK(got == bytes, "rank ", rank_, " expected ", bytes, " bytes from rank ", from, ", got ", got);
  }

 private:
  static constexpr int64_t kMaxCount = int64_t(1) << 30;
  static constexpr int kTag = 7;
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<char> bytes;
  };
  MPI_Comm comm_;
  int rank_ = 0, world_ = 1;
  std::vector<float> staging_;
  std::deque<Pending> pending_;
  std::vector<std::vector<char>> free_;
};

bool g_active = false;

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

bool launched() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

int env_world_size() {
  static const char* const names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", nullptr};
  return env_int(names, 1);
}
int env_rank() {
  static const char* const names[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", nullptr};
  return env_int(names, 0);
}
int env_local_size() {
  static const char* const names[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", nullptr};
  return env_int(names, 1);
}

Communicator& world() {
  RINFER_CHECK(launched(), "more than one rank needs mpirun (e.g. mpirun -np 2 rinfer ...)");
  if (!g_active) {
    int provided = 0;
    // The serving engine calls the collectives from its own thread, one
    // thread at a time.
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "init");
    RINFER_CHECK(provided >= MPI_THREAD_SERIALIZED, "this MPI library does not allow MPI calls from a second thread");
    // Errors come back as return codes (one-line messages), not aborts.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    g_active = true;
    std::atexit(finalize_at_exit);
  }
  static MpiCommunicator comm(MPI_COMM_WORLD);
  return comm;
}

std::unique_ptr<Communicator> split(int color, int key) {
  world();
  MPI_Comm sub;
  check(MPI_Comm_split(MPI_COMM_WORLD, color, key, &sub), "communicator split");
  MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
  return std::make_unique<MpiCommunicator>(sub);
}

bool active() { return g_active; }

void abort_job(int code) {
  if (g_active) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace rinfer::mpi
