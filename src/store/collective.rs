//! The one list of a store's collective calls, and the one agreement every
//! collective call makes first.
//!
//! Ranks may only meet in MPI if they make the same MPI calls in the same
//! order, and two collective calls of the library differ after their first
//! step (a batch moves rows on the store's communicator, a started batch on
//! its request communicator, a ragged read agrees on rounds...). So every
//! collective call begins with the same step, `enter`: one all-reduce of a
//! fixed number of words on the store's communicator, carrying the call,
//! the variable and whether this rank's arguments were valid. Ranks in
//! different calls (or naming different variables) find out there, before
//! either moves data, and all fail with a message naming each rank's call.

use super::fingerprint;
use crate::error::{err, Error, Kind, Result};
use crate::mpi::{self, Comm};

/// Every collective entry point of the C API (the calls a rank must make
/// in the same order as every other rank of its store). Variants of one
/// call are the same entry here: `dds_get_batch_stream` is `GetBatch`,
/// `dds_get_ragged` is `GetRaggedBatch`. `dds_join`, `dds_get`, `dds_update`,
/// `dds_info` and the other calls not listed are local.
///
/// Collective only where they are: the reads (`GetBatch`, `GetBatchStart`,
/// `GetRaggedBatch`, `RaggedLengths`) in the method-0 collective batch mode;
/// `WaitExtras` for method-2 cores; `Destroy` while MPI runs, for every
/// store but a method-2 extra member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Collective {
    Create,
    Add,
    /// Matches `Add`: `dds_init` is `dds_add` of zero-filled rows, and
    /// `DDS_CALL_ADD` stands for both.
    Init,
    AddRagged,
    Remove,
    EpochBegin,
    EpochEnd,
    WaitExtras,
    GetBatch,
    /// A started batch (`dds_get_batch_start`) moves its rows on the
    /// request communicator: it never matches a blocking batch. (Without
    /// MPI_THREAD_MULTIPLE it runs as `dds_get_batch` and matches that.)
    GetBatchStart,
    GetRaggedBatch,
    RaggedLengths,
    Destroy,
    /// `dds_save` and `dds_load` name a list of variables, not one: their
    /// names are agreed by the snapshot code (store/snapshot.rs).
    Save,
    Load,
}

impl Collective {
    pub const ALL: [Collective; 15] = [
        Collective::Create,
        Collective::Add,
        Collective::Init,
        Collective::AddRagged,
        Collective::Remove,
        Collective::EpochBegin,
        Collective::EpochEnd,
        Collective::WaitExtras,
        Collective::GetBatch,
        Collective::GetBatchStart,
        Collective::GetRaggedBatch,
        Collective::RaggedLengths,
        Collective::Destroy,
        Collective::Save,
        Collective::Load,
    ];

    /// The entry point's name, as messages show it.
    pub fn entry(self) -> &'static str {
        match self {
            Collective::Create => "dds_create",
            Collective::Add => "dds_add",
            Collective::Init => "dds_init",
            Collective::AddRagged => "dds_add_ragged",
            Collective::Remove => "dds_remove",
            Collective::EpochBegin => "dds_epoch_begin",
            Collective::EpochEnd => "dds_epoch_end",
            Collective::WaitExtras => "dds_wait_extras",
            Collective::GetBatch => "dds_get_batch",
            Collective::GetBatchStart => "dds_get_batch_start",
            Collective::GetRaggedBatch => "dds_get_ragged_batch",
            Collective::RaggedLengths => "dds_ragged_lengths",
            Collective::Destroy => "dds_destroy",
            Collective::Save => "dds_save",
            Collective::Load => "dds_load",
        }
    }

    fn code(self) -> i64 {
        Collective::ALL.iter().position(|&c| c == self).unwrap_or(0) as i64 + 1
    }

    fn from_code(code: i64) -> Option<Collective> {
        Collective::ALL.get((code - 1) as usize).copied()
    }

    /// What must be equal on every rank for two calls to match.
    fn class(self) -> i64 {
        match self {
            Collective::Init => Collective::Add.code(),
            c => c.code(),
        }
    }

    /// Calls that name a variable (which every rank must name alike).
    fn names_variable(self) -> bool {
        !matches!(
            self,
            Collective::Create
                | Collective::EpochBegin
                | Collective::EpochEnd
                | Collective::WaitExtras
                | Collective::Destroy
                | Collective::Save
                | Collective::Load
        )
    }
}

/// Words of a call's own that ride on the agreement (minimum over ranks):
/// as many as the auto batch mode's deciding call needs
/// (store/auto_check.rs).
pub(crate) const PAYLOAD: usize = super::auto_check::WORDS;
/// For calls with nothing of their own to agree on.
pub(crate) const NO_PAYLOAD: [i64; PAYLOAD] = [0; PAYLOAD];

/// The first step of every collective call, on every rank of `comm`:
/// settles, in this order, that every rank is in the same call (`call`),
/// that no rank's arguments failed (`local`; the lowest failing rank's
/// error wins), that every rank names the same variable (`name`), and the
/// minimum of each `payload` word. Returns this rank's value and the
/// agreed payload, or the error every rank returns. On an error every rank
/// has dropped its `local` value (a shard, say) before any rank returns,
/// and no rank makes another collective call of this one, so ranks in
/// different calls all return.
pub(crate) fn enter<T>(
    comm: &Comm,
    call: Collective,
    name: &str,
    local: Result<T>,
    payload: [i64; PAYLOAD],
) -> Result<(T, [i64; PAYLOAD])> {
    let (me, p) = (comm.rank() as i64, comm.size() as i64);
    let fp = if call.names_variable() { fingerprint(name) } else { 0 };
    let class = call.class();
    let mut w = [0; 5 + PAYLOAD];
    w[..5].copy_from_slice(&[if local.is_err() { me } else { p }, class, !class, fp, !fp]);
    w[5..].copy_from_slice(&payload);
    comm.allreduce_min(&mut w)?;
    let same_call = w[1] == !w[2];
    if !same_call || (w[0] == p && w[3] != !w[4]) {
        drop(local);
        return Err(mismatch(comm, call, name, same_call)?);
    }
    if w[0] < p {
        let mine = local.err();
        let e = mpi::share_error(comm, w[0] as usize, mine.as_ref())?;
        // Whatever the others made for this call (a shard in shared
        // memory) is gone once this barrier ends.
        comm.barrier()?;
        return Err(e);
    }
    let v = local?;
    let mut agreed = [0; PAYLOAD];
    agreed.copy_from_slice(&w[5..]);
    Ok((v, agreed))
}

/// What a rank of a mismatched call tells the others: its call, the
/// length of the name shown, and the name (cut to what fits).
type Told = [[u8; 32]; 3];
const SHOWN_NAME: usize = 32 * 3 - 2;

/// Collective (every rank of a mismatched call): which call and variable
/// each rank is in, as one message every rank returns.
fn mismatch(comm: &Comm, call: Collective, name: &str, same_call: bool) -> Result<Error> {
    let n = if call.names_variable() { name.len().min(SHOWN_NAME) } else { 0 };
    let mut bytes = vec![call.code() as u8, n as u8];
    bytes.extend_from_slice(&name.as_bytes()[..n]);
    bytes.resize(SHOWN_NAME + 2, 0);
    let mut mine = Told::default();
    for (chunk, part) in mine.iter_mut().zip(bytes.chunks(32)) {
        chunk.copy_from_slice(part);
    }
    let all = comm.allgather(&mine)?;
    let describe = |t: &Told| {
        let m = t.concat();
        let c = Collective::from_code(m[0] as i64);
        let shown = String::from_utf8_lossy(&m[2..2 + (m[1] as usize).min(SHOWN_NAME)]).into_owned();
        let named = c.is_some_and(|c| c.names_variable());
        (c.map_or("an unknown call", |c| c.entry()), if named { format!("'{shown}'") } else { String::new() })
    };
    // Consecutive ranks in the same call on the same variable, as one run.
    let mut runs: Vec<(usize, usize, (&str, String))> = Vec::new();
    for (r, m) in all.iter().enumerate() {
        let d = describe(m);
        match runs.last_mut() {
            Some(last) if last.2 == d => last.1 = r,
            _ => runs.push((r, r, d)),
        }
    }
    const SHOWN_RUNS: usize = 8;
    let mut parts: Vec<String> = runs
        .iter()
        .take(SHOWN_RUNS)
        .enumerate()
        .map(|(i, (lo, hi, (c, v)))| {
            let who = if lo == hi { format!("rank {lo}") } else { format!("ranks {lo}-{hi}") };
            let verb = match (i, lo == hi) {
                (0, true) => " is in ",
                (0, false) => " are in ",
                _ => " in ",
            };
            let args = if v.is_empty() { String::new() } else { format!("({v})") };
            format!("{who}{verb}{c}{args}")
        })
        .collect();
    if runs.len() > SHOWN_RUNS {
        parts.push(format!("and {} more groups of ranks", runs.len() - SHOWN_RUNS));
    }
    let list = parts.join(", ");
    Ok(if same_call {
        err!(
            InvalidArgument,
            "collective call mismatch: ranks called {} on different variables (different variable names): {list}",
            runs[0].2 .0
        )
    } else {
        Error::new(
            Kind::InvalidArgument,
            format!(
                "collective call mismatch: {list}; every rank of a store must make the same collective calls, in \
                 the same order"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_only_init_shares_a_class() {
        for c in Collective::ALL {
            assert_eq!(Collective::from_code(c.code()), Some(c));
            for d in Collective::ALL {
                let same = c == d
                    || matches!((c, d), (Collective::Add, Collective::Init) | (Collective::Init, Collective::Add));
                assert_eq!(c.class() == d.class(), same, "{c:?} {d:?}");
            }
        }
        assert_eq!(Collective::from_code(0), None);
        assert_eq!(Collective::from_code(16), None);
    }
}
