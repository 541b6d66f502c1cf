//! Epochs, `dds_fail_collective`, and the end of a store (release before
//! MPI_Finalize, destroy).

use std::sync::Arc;

use super::{Collective, Store};
use crate::error::{bail, Error, Result};
use crate::mpi::{self, agree};

impl Store {
    /// Collective: opens (`open` true) or closes a read epoch. Makes local
    /// updates visible to remote readers and synchronises the ranks.
    /// `local` carries a failure a binding found on this rank
    /// (`dds_fail_collective`); it fails the call on every rank.
    pub fn epoch(&self, open: bool, local: Result<()>) -> Result<()> {
        self.check_running()?;
        self.drain_requests();
        let mut state = self.epoch_open.lock();
        let local = local.and_then(|()| {
            if *state == open {
                bail!(
                    BadState,
                    "{}",
                    if open {
                        "an epoch is already open (call dds_epoch_end first)"
                    } else {
                        "no epoch is open (call dds_epoch_begin first)"
                    }
                );
            }
            Ok(())
        });
        self.enter(if open { Collective::EpochBegin } else { Collective::EpochEnd }, "", local)?;
        // A rank whose window sync fails must still reach the agreement that
        // replaces the closing barrier, or the others would wait for it.
        let mut synced = Ok(());
        for v in self.vars.read().values() {
            if let Err(e) = v.transport.sync() {
                synced = Err(Error::new(e.kind, format!("variable '{}': {}", v.name, e.msg)));
                break;
            }
        }
        agree(&self.comm, synced)?;
        *state = open;
        Ok(())
    }

    /// Collective: takes part in `call` as the other ranks do, contributing
    /// `failure`, so every rank fails together with the lowest failing
    /// rank's status and message (`dds_fail_collective`). One-sided batches
    /// (methods 1 and 2, method 0 in the one-sided batch mode) are not
    /// collective: the failure is only returned here.
    pub fn fail_collective(self: &Arc<Self>, call: Collective, name: &str, failure: Error) -> Result<()> {
        let none = std::ptr::null_mut();
        match call {
            Collective::Add | Collective::Init => self.register(call, name, Err(failure), None),
            Collective::GetBatch => self.get_batch(name, none, 0, Err(failure)),
            Collective::GetBatchStart => self.get_batch_start(name, none, 0, Err(failure)).map(|_| ()),
            Collective::Remove => self.remove(Err(failure)),
            Collective::EpochBegin => self.epoch(true, Err(failure)),
            Collective::EpochEnd => self.epoch(false, Err(failure)),
            Collective::WaitExtras => self.wait_extras_checked(Err(failure)),
            Collective::AddRagged => self.register_ragged(name, Err(failure), &[], &[]),
            Collective::GetRaggedBatch => self.get_ragged_batch(name, none, 0, Err(failure), None).map(|_| ()),
            Collective::RaggedLengths => self.ragged_lengths(name, Err(failure)),
            Collective::Save => self.save(Err(failure), Ok(Vec::new())),
            Collective::Load => self.load(Err(failure), Ok(Vec::new())),
            Collective::Create | Collective::Destroy => {
                bail!(InvalidArgument, "{} cannot be failed through dds_fail_collective", call.entry())
            }
        }
    }

    /// Releases the MPI objects of every variable (windows) and the store's
    /// communicators while MPI still runs; local memory stays until
    /// `destroy`. Called from the
    /// finalisation hook for stores the program never destroyed: every rank
    /// runs it for its live stores in creation order, which is the order the
    /// collective creations happened in.
    pub fn release_mpi(&self) {
        // No request thread may call MPI once this returns (request.rs).
        self.requests.finalize();
        // The progress thread calls MPI: it stops before anything is freed.
        if let Some(mut p) = self.mpi_progress.lock().take() {
            p.stop();
        }
        for v in self.vars.write().values_mut() {
            let _ = v.free();
        }
        // The communicators too: MPI does not free them at MPI_Finalize.
        self.node.release_before_finalize();
        self.comm.release_before_finalize();
        if let Some(c) = &self.async_comm {
            c.release_before_finalize();
        }
    }

    /// The agreement `dds_destroy` makes before it takes a core store's
    /// handle, so that ranks in another collective call fail it and the
    /// store stays. None for a method-2 extra member (its destroy is local)
    /// or once MPI_Finalize has begun (the communicator is gone).
    pub fn enter_destroy(&self) -> Result<()> {
        if self.is_extra() || !mpi::running() || mpi::finalize_began() {
            return Ok(());
        }
        self.enter(Collective::Destroy, "", Ok(()))
    }

    /// Collective: releases every variable in name order (the same on every
    /// rank). Method 1 first waits at a barrier, so no peer is still reading
    /// this rank's memory when it is deregistered. After MPI_Finalize only
    /// local memory is released.
    pub fn destroy(&self) -> Result<()> {
        // Requests in flight finish first (their reads use the variables).
        self.requests.close();
        // Method 2 core: extras that join from now on learn it is gone.
        let mut first_err = self.withdraw_all().err();
        if let Some(mut p) = self.mpi_progress.lock().take() {
            p.stop();
        }
        if self.network.peers_read_unannounced() && mpi::running() {
            if let Err(e) = self.comm.barrier() {
                first_err.get_or_insert(e);
            }
        }
        for (_, mut v) in std::mem::take(&mut *self.vars.write()) {
            if let Err(e) = v.free() {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}
