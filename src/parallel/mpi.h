#pragma once
// The MPI world rinfer runs in when `mpirun` starts it. Nothing here touches
// MPI unless the process was launched by mpirun and a command asks for more
// than one rank, so a plain `rinfer run` never initializes it.
#include <memory>

#include "parallel/communicator.h"

namespace rinfer::mpi {

// Whether mpirun started this process (Open MPI's or PMIx's environment).
bool launched();
// Ranks of the job and on this host, from the launcher's environment (1 and 1
// without mpirun); no MPI call.
int env_world_size();
int env_rank();
int env_local_size();

// The communicator of all the job's ranks over MPI_COMM_WORLD; initializes
// MPI on the first call (finalized at exit). Only under mpirun.
Communicator& world();

// A communicator of the ranks that pass the same `color`, ranked by `key`
// (a pipeline stage's tensor-parallel ranks); every rank must call it.
std::unique_ptr<Communicator> split(int color, int key);

// Ends the whole job now (every rank), after a rank has failed in a way the
// others cannot learn of (they would wait in a collective forever).
[[noreturn]] void abort_job(int code);
// Whether MPI was initialized by world().
bool active();

}  // namespace rinfer::mpi
