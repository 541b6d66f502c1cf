//! Between a record and the transport's descriptor of a variable
//! (`transport::Remote`): the store hands one to the other and never looks
//! at addresses, keys or bases.

use super::record::{now_ns, RankRecord, Record, STATE_PUBLISHED};
use crate::transport::{Remote, RemoteRank};

/// The shape of a published variable as its record states it.
pub struct Published<'a> {
    pub name: &'a str,
    pub session: u64,
    pub row_elems: i64,
    pub item_size: i32,
    /// Rows of each core rank, in rank order (as many as `remote.ranks`).
    pub rows: &'a [i64],
}

impl Record {
    /// The record of a variable published now, reachable through `remote`.
    pub fn published(p: Published<'_>, remote: Remote) -> Record {
        let ranks = remote
            .ranks
            .into_iter()
            .zip(p.rows)
            .map(|(r, &rows)| RankRecord { addr: r.addr, key: r.key, base: r.base, rows })
            .collect();
        Record {
            state: STATE_PUBLISHED,
            session: p.session,
            written_ns: now_ns(),
            name: p.name.to_string(),
            provider: remote.provider,
            domain: remote.domain,
            addr_format: remote.addr_format,
            row_elems: p.row_elems,
            item_size: p.item_size,
            ranks,
        }
    }

    /// How to reach the shards this record describes.
    pub fn remote(&self) -> Remote {
        Remote {
            provider: self.provider.clone(),
            domain: self.domain.clone(),
            addr_format: self.addr_format,
            ranks: self.ranks.iter().map(|r| RemoteRank { addr: r.addr.clone(), key: r.key, base: r.base }).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_published_record_gives_back_its_descriptor() {
        let remote = Remote {
            provider: "tcp;ofi_rxm".into(),
            domain: "lo".into(),
            addr_format: 3,
            ranks: vec![
                RemoteRank { addr: vec![1, 2, 3], key: 7, base: 0x1000 },
                RemoteRank { addr: vec![], key: 9, base: 0 },
            ],
        };
        let p = Published { name: "x", session: 5, row_elems: 4, item_size: 8, rows: &[10, 0] };
        let rec = Record::published(p, remote.clone());
        assert_eq!((rec.state, rec.session, rec.name.as_str()), (STATE_PUBLISHED, 5, "x"));
        assert_eq!(rec.ranks.iter().map(|r| r.rows).collect::<Vec<_>>(), [10, 0]);
        let back = rec.remote();
        assert_eq!((back.provider, back.domain, back.addr_format), (remote.provider, remote.domain, 3));
        let pairs = |r: &[RemoteRank]| r.iter().map(|r| (r.addr.clone(), r.key, r.base)).collect::<Vec<_>>();
        assert_eq!(pairs(&back.ranks), pairs(&remote.ranks));
    }
}
