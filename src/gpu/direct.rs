//! GPUDirect: whether rows are read straight into (and served from) a buffer
//! through libfabric's FI_HMEM, staged through host memory, or refused.
//!
//! The choice is a pure function of what the chosen provider offers (the
//! FI_HMEM capability, the FI_MR_HMEM and FI_MR_LOCAL mode bits), what the
//! buffer is, `DDSTORE_GPU_DIRECT` and `DDSTORE_GPU_STAGING`, so every
//! combination is table-tested here; the store applies it (store/direct.rs).

use super::MemKind;
use crate::config::auto_or_switch;
use crate::error::{bail, err, Result};

/// `DDSTORE_GPU_DIRECT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Direct {
    /// Never: device buffers are staged (or refused), as without FI_HMEM.
    Off,
    /// Always: a device buffer the provider cannot take is refused, never staged.
    On,
    /// Where the provider reports FI_HMEM; staging otherwise and per buffer
    /// when a registration is refused (default).
    #[default]
    Auto,
}

impl Direct {
    /// Parses `DDSTORE_GPU_DIRECT`: the switch words, or `auto`.
    pub fn parse(v: &str) -> Result<Direct> {
        auto_or_switch(v, [Direct::Auto, Direct::On, Direct::Off]).ok_or_else(|| {
            err!(InvalidArgument, "DDSTORE_GPU_DIRECT={v:?} is not auto or a switch (1/0, on/off, true/false, yes/no)")
        })
    }
}

/// A libfabric memory interface (`enum fi_hmem_iface`; the values are the ABI's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Iface {
    System = 0,
    Cuda = 1,
    Rocr = 2,
    Ze = 3,
}

impl Iface {
    /// Every interface, with the name `DDSTORE_TEST_GPU_DIRECT_HOST_IFACE` and
    /// `dds_var_info.transport` use (one list).
    pub const ALL: [(Iface, &'static str); 4] =
        [(Iface::System, "system"), (Iface::Cuda, "cuda"), (Iface::Rocr, "rocr"), (Iface::Ze, "ze")];

    pub fn name(self) -> &'static str {
        Iface::ALL.iter().find(|(i, _)| *i == self).map_or("?", |(_, n)| n)
    }

    /// Parses `DDSTORE_TEST_GPU_DIRECT_HOST_IFACE`.
    pub fn parse(v: &str) -> Result<Iface> {
        let t = v.trim().to_ascii_lowercase();
        match Iface::ALL.iter().find(|(_, n)| *n == t) {
            Some((i, _)) => Ok(*i),
            None => {
                let names: Vec<&str> = Iface::ALL.iter().map(|(_, n)| *n).collect();
                bail!(InvalidArgument, "DDSTORE_TEST_GPU_DIRECT_HOST_IFACE={v:?} is not one of {}", names.join(", "))
            }
        }
    }
}

/// A buffer as the choice sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mem {
    /// Host memory, read and served as always.
    Host,
    /// CUDA or ROCm device memory of device `device`.
    Device { iface: Iface, device: i32 },
    /// Host memory presented to the provider as memory of an interface (the
    /// testing aid `DDSTORE_TEST_GPU_DIRECT_HOST_IFACE`): the GPUDirect calls
    /// without a GPU; without GPUDirect it is plain host memory again.
    HostAs(Iface),
}

impl Mem {
    /// A classified pointer; `host_as` is the testing aid's interface.
    pub fn of(kind: MemKind, host_as: Option<Iface>) -> Mem {
        match (kind, host_as) {
            (MemKind::Cuda(d), _) => Mem::Device { iface: Iface::Cuda, device: d },
            (MemKind::Rocm(d), _) => Mem::Device { iface: Iface::Rocr, device: d },
            (MemKind::Host, Some(i)) => Mem::HostAs(i),
            (MemKind::Host, None) => Mem::Host,
        }
    }

    /// The interface and device a registration names.
    fn hmem(self) -> Option<(Iface, i32)> {
        match self {
            Mem::Host => None,
            Mem::Device { iface, device } => Some((iface, device)),
            Mem::HostAs(iface) => Some((iface, 0)),
        }
    }
}

/// What the store's provider offers (from its `fi_info`); None for method 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Caps {
    /// `caps` has FI_HMEM (the domain was opened with it).
    pub hmem: bool,
    /// `mr_mode` has FI_MR_HMEM: device buffers must be registered and their
    /// descriptor passed, even as local read destinations.
    pub mr_hmem: bool,
    /// Destinations need a registration anyway (FI_MR_LOCAL).
    pub mr_local: bool,
}

/// Why a buffer is refused (the message is the store's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No GPUDirect for it and `DDSTORE_GPU_STAGING=0`.
    StagingOff,
    /// `DDSTORE_GPU_DIRECT=1`, but the transport has no FI_HMEM (method 0,
    /// or a provider without it), or its registration was refused.
    DirectUnavailable,
}

/// How one buffer is read into (or served from).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// As host memory.
    Host,
    /// In place through FI_HMEM, registered with `iface` and `device`
    /// (`fi_mr_regattr`); `desc`: reads pass the registration's descriptor.
    Direct {
        iface: Iface,
        device: i32,
        desc: bool,
    },
    /// Through pinned host bounce buffers.
    Staged,
    Refused(Refusal),
}

/// The route of a buffer `mem` on a store whose transport offers `caps`.
pub fn route(caps: Option<Caps>, mem: Mem, want: Direct, staging: bool) -> Route {
    let Some((iface, device)) = mem.hmem() else { return Route::Host };
    match caps {
        Some(c) if c.hmem && want != Direct::Off => {
            // FI_MR_HMEM (or FI_MR_LOCAL) requires the descriptor; without
            // either the provider identifies the memory itself.
            Route::Direct { iface, device, desc: c.mr_hmem || c.mr_local }
        }
        _ if want == Direct::On => Route::Refused(Refusal::DirectUnavailable),
        _ => without_direct(mem, staging),
    }
}

/// The route of a buffer whose GPUDirect registration the provider refused.
pub fn on_refusal(mem: Mem, want: Direct, staging: bool) -> Route {
    if want == Direct::On {
        return Route::Refused(Refusal::DirectUnavailable);
    }
    without_direct(mem, staging)
}

fn without_direct(mem: Mem, staging: bool) -> Route {
    if !matches!(mem, Mem::Device { .. }) {
        Route::Host
    } else if staging {
        Route::Staged
    } else {
        Route::Refused(Refusal::StagingOff)
    }
}

/// The interface a shard (host memory) is registered with: with FI_HMEM,
/// through `fi_mr_regattr` (FI_HMEM_SYSTEM, or the testing aid's
/// interface), so device and host memory take the same registration call;
/// None: plain `fi_mr_reg`.
pub fn shard_iface(caps: Option<Caps>, want: Direct, host_as: Option<Iface>) -> Option<Iface> {
    match caps {
        Some(c) if c.hmem && want != Direct::Off => Some(host_as.unwrap_or(Iface::System)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{SWITCH_OFF, SWITCH_ON};

    const WANTS: [Direct; 3] = [Direct::Off, Direct::On, Direct::Auto];

    fn all_caps() -> Vec<Option<Caps>> {
        let mut v = vec![None];
        for bits in 0..8u8 {
            v.push(Some(Caps { hmem: bits & 1 != 0, mr_hmem: bits & 2 != 0, mr_local: bits & 4 != 0 }));
        }
        v
    }

    fn all_mems() -> Vec<Mem> {
        let mut v = vec![Mem::Host];
        for (i, _) in Iface::ALL {
            v.push(Mem::HostAs(i));
            for device in [0, 3] {
                v.push(Mem::Device { iface: i, device });
            }
        }
        v
    }

    /// Every combination of provider caps and mode bits, buffer kind,
    /// device, DDSTORE_GPU_DIRECT and DDSTORE_GPU_STAGING, against the
    /// rules stated case by case.
    #[test]
    fn every_combination_follows_the_rules() {
        let mut n = 0;
        for caps in all_caps() {
            for mem in all_mems() {
                for want in WANTS {
                    for staging in [false, true] {
                        n += 1;
                        let r = route(caps, mem, want, staging);
                        let hmem = caps.is_some_and(|c| c.hmem);
                        let why = format!("{caps:?} {mem:?} {want:?} staging={staging}: {r:?}");
                        let (iface, device, gpu) = match mem {
                            Mem::Host => {
                                assert_eq!(r, Route::Host, "host memory never changes path: {why}");
                                continue;
                            }
                            Mem::Device { iface, device } => (iface, device, true),
                            Mem::HostAs(iface) => (iface, 0, false),
                        };
                        let expect = if hmem && want != Direct::Off {
                            let c = caps.unwrap();
                            Route::Direct { iface, device, desc: c.mr_hmem || c.mr_local }
                        } else if want == Direct::On {
                            Route::Refused(Refusal::DirectUnavailable)
                        } else if !gpu {
                            Route::Host
                        } else if staging {
                            Route::Staged
                        } else {
                            Route::Refused(Refusal::StagingOff)
                        };
                        assert_eq!(r, expect, "{why}");
                        // Invariants beside the table.
                        if let Route::Direct { iface: i, device: d, desc } = r {
                            assert!(hmem && (i, d) == (iface, device), "{why}");
                            assert!(!caps.unwrap().mr_hmem || desc, "FI_MR_HMEM without a descriptor: {why}");
                        }
                        if r == Route::Staged {
                            assert!(gpu && staging && want != Direct::On, "{why}");
                        }
                        // A refused registration never goes direct and never
                        // stages what DDSTORE_GPU_DIRECT=1 forces.
                        let f = on_refusal(mem, want, staging);
                        assert!(!matches!(f, Route::Direct { .. }), "{why} -> {f:?}");
                        if want == Direct::On {
                            assert_eq!(f, Route::Refused(Refusal::DirectUnavailable), "{why}");
                        } else {
                            assert_eq!(f, route(None, mem, want, staging), "fallback = no FI_HMEM: {why}");
                        }
                        let s = shard_iface(caps, want, None);
                        assert_eq!(s.is_some(), hmem && want != Direct::Off, "{why}");
                    }
                }
            }
        }
        assert_eq!(n, 9 * 13 * 3 * 2);
    }

    #[test]
    fn settings_parse() {
        for v in ["auto", " AUTO "] {
            assert_eq!(Direct::parse(v).unwrap(), Direct::Auto);
        }
        for v in SWITCH_ON {
            assert_eq!(Direct::parse(v).unwrap(), Direct::On);
        }
        for v in SWITCH_OFF {
            assert_eq!(Direct::parse(v).unwrap(), Direct::Off);
        }
        for v in ["2", "maybe", "direct", ""] {
            assert!(Direct::parse(v).unwrap_err().msg.contains("DDSTORE_GPU_DIRECT"), "{v}");
        }
        for (i, n) in Iface::ALL {
            assert_eq!(Iface::parse(n).unwrap(), i);
            assert_eq!(i.name(), n);
        }
        let e = Iface::parse("neuron").unwrap_err();
        assert!(
            e.msg.contains("DDSTORE_TEST_GPU_DIRECT_HOST_IFACE") && e.msg.contains("system, cuda, rocr, ze"),
            "{e}"
        );
        assert_eq!(Mem::of(MemKind::Cuda(2), None), Mem::Device { iface: Iface::Cuda, device: 2 });
        assert_eq!(Mem::of(MemKind::Rocm(1), Some(Iface::System)), Mem::Device { iface: Iface::Rocr, device: 1 });
        assert_eq!(Mem::of(MemKind::Host, Some(Iface::Cuda)), Mem::HostAs(Iface::Cuda));
        assert_eq!(Mem::of(MemKind::Host, None), Mem::Host);
    }
}
