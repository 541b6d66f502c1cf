//! Transports that move rows between ranks. Nothing above this module knows
//! about MPI windows or fabric endpoints.

pub mod fabric;
pub mod local;
pub mod ranges;
pub mod rma;
pub mod rma_progress;
pub mod split;
