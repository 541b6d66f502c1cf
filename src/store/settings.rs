//! The settings a store runs with once its options and the environment are
//! resolved (`dds_store_settings`). Bindings ask for them instead of parsing
//! the environment a second time, so they cannot disagree with the library.

use std::path::PathBuf;

use super::split::Role;
use super::{Method, Store};
use crate::config::{BatchMode, Config};
use crate::error::Result;
use crate::gpu::Mode;

pub struct Settings {
    pub method: Method,
    pub extra: bool,
    pub batch_mode: BatchMode,
    pub gpu: Mode,
    pub gpu_staging: bool,
    pub profiling: bool,
    pub node_local: bool,
    pub mpi_progress: bool,
    /// Method 2's directory; for other methods, the one it would use.
    pub handshake_dir: PathBuf,
}

impl Settings {
    /// What a store created now with default options would use.
    pub fn defaults() -> Result<Settings> {
        let cfg = Config::from_env()?;
        Ok(Settings {
            method: Method::Mpi,
            extra: false,
            batch_mode: cfg.batch_mode,
            gpu: cfg.gpu,
            gpu_staging: cfg.gpu_staging,
            profiling: cfg.profile,
            node_local: cfg.node_local,
            // Without a store, `auto` cannot know the nodes: 1 only when forced on.
            mpi_progress: cfg.mpi_progress == crate::config::MpiProgress::On,
            handshake_dir: crate::handshake::resolve_dir(None, cfg.handshake_dir.as_deref()),
        })
    }
}

impl Store {
    pub fn settings(&self) -> Settings {
        let cfg = &self.cfg;
        Settings {
            method: self.method,
            extra: matches!(&self.split, Some(s) if s.role == Role::Extra),
            // Methods 1 and 2 read one-sided whatever the option says.
            batch_mode: if self.method == Method::Mpi { self.batch_mode } else { BatchMode::Onesided },
            gpu: self.gpu.mode,
            gpu_staging: self.gpu.staging,
            profiling: cfg.profile,
            // Agreed at create: off when any rank turned it off.
            node_local: self.node.on,
            mpi_progress: self.mpi_progress.lock().is_some(),
            handshake_dir: match &self.split {
                Some(s) => s.dir.clone(),
                None => crate::handshake::resolve_dir(None, cfg.handshake_dir.as_deref()),
            },
        }
    }
}
