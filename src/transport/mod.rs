//! Transports that move rows between ranks. Nothing above this module knows
//! about MPI windows or fabric endpoints.
//!
//! * [`mpi_rma`]: method 0, MPI windows and pipelined passive-target gets;
//! * [`exchange`]: method 0, the collective (two-sided) batch exchange;
//!   [`ranges`] the same for ragged samples;
//! * [`fabric`]: methods 1 and 2, libfabric;
//! * [`local`]: node-local reads (same-node shards mapped read-only);
//! * [`rma_progress`]: the optional thread that turns MPI's progress engine.

pub mod exchange;
pub mod fabric;
pub mod local;
pub mod mpi_rma;
pub mod ranges;
pub mod rma_progress;
