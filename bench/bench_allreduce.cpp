// All-reduce cost between ranks, at the message sizes tensor parallelism
// sends: a decode step reduces one row of the hidden size per row-parallel
// layer, a prefill chunk `chunk` rows of it. Run under mpirun, e.g.
//   mpirun -np 2 build/bin/bench_allreduce                        (shared memory)
//   mpirun -np 2 --mca btl tcp,self build/bin/bench_allreduce     (TCP, as between hosts)
// and read latency (median per call) and bus bandwidth (what a ring
// all-reduce moves per rank: 2 (n - 1) / n of the message, per second).
// Through rinfer's Communicator, as the layers call it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "parallel/mpi.h"

int main(int argc, char** argv) {
  int iters = 200, chunk = 512;
  std::vector<long> hidden = {896, 2048, 4096, 8192};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (a == "--chunk" && i + 1 < argc) chunk = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: mpirun -np N bench_allreduce [--iters N] [--chunk ROWS]\n");
      return 2;
    }
  }
  if (!rinfer::mpi::launched()) {
    std::fprintf(stderr, "bench_allreduce: run it under mpirun (e.g. mpirun -np 2 bench_allreduce)\n");
    return 2;
  }
  rinfer::Communicator& comm = rinfer::mpi::world();
  const int n = comm.world();
  if (comm.rank() == 0)
    std::printf("all-reduce over %d ranks, %d calls per size (median)\n%-10s %-8s %12s %12s %14s\n", n, iters,
                "hidden", "rows", "bytes", "latency us", "bus GB/s");
  for (long H : hidden)
    for (long rows : {1L, long(chunk)}) {
      const long count = H * rows;
      std::vector<float> buf(size_t(count), 1.0f);
      const int reps = rows == 1 ? iters : std::max(10, iters / 10);
      std::vector<double> us;
      for (int w = 0; w < 3; ++w) comm.all_reduce_sum(buf.data(), count);
      for (int r = 0; r < reps; ++r) {
        std::fill(buf.begin(), buf.begin() + std::min<long>(count, 16), 1.0f);
        comm.broadcast(&r, sizeof r, 0);  // every rank starts the call together
        const auto t0 = std::chrono::steady_clock::now();
        comm.all_reduce_sum(buf.data(), count);
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      }
      std::nth_element(us.begin(), us.begin() + long(us.size() / 2), us.end());
      const double med = us[us.size() / 2];
      const double bytes = double(count) * sizeof(float);
      if (comm.rank() == 0)
        std::printf("%-10ld %-8ld %12.0f %12.1f %14.2f\n", H, rows, bytes, med,
                    bytes * 2.0 * double(n - 1) / double(n) / (med * 1e3));
    }
  return 0;
}
