//! The rule of the interface agreement (pure functions, unit-tested; the
//! collective that gathers its input is `iface.rs`): with ranks on several
//! nodes and no interface named, each rank's `(interface, address)`
//! candidates are gathered, and every rank computes the same answer from
//! them. An interface whose address is the same on two nodes (a container
//! or VM bridge such as `docker0`, loopback) reaches no other node, so it is
//! never taken; the same interface name on every rank where one fits, else
//! each rank's first fitting one; none on some rank fails the create on
//! every rank ([`choose_iface`]). The provider and domain choice is
//! `select.rs`.

/// One rank's candidates for the interface agreement, as fingerprints (the
/// all-gather carries fixed-size records; each rank maps the result back to
/// its own names).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Seen {
    /// This rank named no interface and asks for a choice.
    pub choose: bool,
    /// Its node (the same value for every rank of one shared-memory domain).
    pub node: u64,
    /// `(interface, address)` in the provider's order of preference;
    /// link-local addresses are left out (they do not name a node).
    pub entries: Vec<(u64, u64)>,
}

/// Addresses held by ranks of two different nodes: an interface carrying one
/// reaches no other node through it.
pub fn shared_addresses(all: &[Seen]) -> std::collections::HashSet<u64> {
    let mut first_node = std::collections::HashMap::new();
    let mut shared = std::collections::HashSet::new();
    for s in all {
        for &(_, a) in &s.entries {
            if *first_node.entry(a).or_insert(s.node) != s.node {
                shared.insert(a);
            }
        }
    }
    shared
}

/// Interfaces of `s` (in its order, each once) none of whose addresses is in
/// `shared`.
fn clean(s: &Seen, shared: &std::collections::HashSet<u64>) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    for &(i, _) in &s.entries {
        if !out.contains(&i) && s.entries.iter().all(|&(j, a)| j != i || !shared.contains(&a)) {
            out.push(i);
        }
    }
    out
}

/// The interface each choosing rank uses (None for ranks that named one):
/// the first interface of the first choosing rank that is clean (no address
/// shared across nodes) on every choosing rank; failing that, each rank's
/// own first clean interface. `Err`: the choosing ranks that have none.
/// Deterministic in `all`, so every rank computes the same answer.
pub fn choose_iface(all: &[Seen]) -> Result<Vec<Option<u64>>, Vec<usize>> {
    let shared = shared_addresses(all);
    let cleans: Vec<Option<Vec<u64>>> = all.iter().map(|s| s.choose.then(|| clean(s, &shared))).collect();
    let none: Vec<usize> =
        cleans.iter().enumerate().filter(|(_, c)| matches!(c, Some(c) if c.is_empty())).map(|(r, _)| r).collect();
    if !none.is_empty() {
        return Err(none);
    }
    let first = cleans.iter().flatten().next();
    let common = first.and_then(|f| f.iter().find(|i| cleans.iter().flatten().all(|c| c.contains(i))).copied());
    Ok(cleans.iter().map(|c| c.as_ref().map(|c| common.unwrap_or(c[0]))).collect())
}

/// True for addresses that do not name a node: IPv4 169.254/16, IPv6
/// fe80::/10.
pub fn link_local(ip: &std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(a) => a.is_link_local(),
        std::net::IpAddr::V6(a) => a.segments()[0] & 0xffc0 == 0xfe80,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(s: &str) -> u64 {
        crate::hash::fnv1a(s.as_bytes())
    }

    fn seen(choose: bool, node: u64, list: &[(&str, &str)]) -> Seen {
        Seen { choose, node, entries: list.iter().map(|(i, a)| (fp(i), fp(a))).collect() }
    }

    #[test]
    fn iface_choice_examples() {
        // A bridge with the same address on both nodes, found first: eth0.
        let node = |n: u64, eth: &str| seen(true, n, &[("docker0", "172.17.0.1"), ("eth0", eth), ("lo", "127.0.0.1")]);
        let all = [node(1, "10.0.0.1"), node(1, "10.0.0.1"), node(2, "10.0.0.2"), node(2, "10.0.0.2")];
        assert_eq!(choose_iface(&all), Ok(vec![Some(fp("eth0")); 4]));
        assert_eq!(shared_addresses(&all).len(), 2);
        // One node: nothing is shared, the provider's first is kept.
        assert_eq!(choose_iface(&all[..2]), Ok(vec![Some(fp("docker0")); 2]));
        // Different names on different nodes: each its own.
        let all = [
            seen(true, 1, &[("virbr0", "192.168.122.1"), ("eno1", "10.0.0.1")]),
            seen(true, 2, &[("virbr0", "192.168.122.1"), ("ens3", "10.0.0.2")]),
        ];
        assert_eq!(choose_iface(&all), Ok(vec![Some(fp("eno1")), Some(fp("ens3"))]));
        // An interface with one shared address (of two) is not clean.
        let all = [
            seen(true, 1, &[("br0", "172.17.0.1"), ("br0", "fd00::1"), ("eth0", "10.0.0.1")]),
            seen(true, 2, &[("br0", "172.17.0.1"), ("br0", "fd00::2"), ("eth0", "10.0.0.2")]),
        ];
        assert_eq!(choose_iface(&all), Ok(vec![Some(fp("eth0")); 2]));
        // Only the duplicate: both ranks fail; a rank that named one does not.
        let all = [seen(true, 1, &[("dup0", "172.31.0.1")]), seen(true, 2, &[("dup0", "172.31.0.1")])];
        assert_eq!(choose_iface(&all), Err(vec![0, 1]));
        let all = [seen(false, 1, &[("dup0", "172.31.0.1")]), seen(true, 2, &[("dup0", "172.31.0.1")])];
        assert_eq!(choose_iface(&all), Err(vec![1]));
        let all = [seen(false, 1, &[("dup0", "172.31.0.1")]), seen(false, 2, &[("dup0", "172.31.0.1")])];
        assert_eq!(choose_iface(&all), Ok(vec![None, None]));
        assert!(link_local(&"fe80::1".parse().unwrap()) && link_local(&"169.254.3.4".parse().unwrap()));
        assert!(!link_local(&"fd00::1".parse().unwrap()) && !link_local(&"10.0.0.1".parse().unwrap()));
    }

    /// xorshift64*: a deterministic generator for the tables below.
    struct Gen(u64);
    impl Gen {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) % n
        }
    }

    /// Generated clusters (1 to 4 nodes of 1 to 3 ranks, bridges with the
    /// same address on every node, NICs with per-node addresses, names that
    /// differ between nodes, addresses reused under other names), checked
    /// against the rules stated independently of `choose_iface`.
    #[test]
    fn iface_choice_generated_tables() {
        let mut g = Gen(0x9e37_79b9_7f4a_7c15);
        let (mut common, mut per_rank, mut failed) = (0, 0, 0);
        for _ in 0..3000 {
            let nodes = 1 + g.below(4);
            let mut table: Vec<(u64, Vec<(String, String)>)> = Vec::new();
            for n in 0..nodes {
                let mut list: Vec<(String, String)> = Vec::new();
                let mut add = |i: &str, a: String| list.push((i.to_string(), a));
                add("lo", "127.0.0.1".into());
                if g.below(2) == 0 {
                    add("docker0", "172.17.0.1".into());
                }
                if g.below(3) == 0 {
                    add("virbr0", "192.168.122.1".into());
                }
                if g.below(4) != 0 {
                    add("eth0", format!("10.0.0.{n}"));
                    if g.below(2) == 0 {
                        add("eth0", format!("fd00::{n}"));
                    }
                }
                if g.below(2) == 0 {
                    add("ib0", format!("10.1.0.{n}"));
                }
                if g.below(3) == 0 {
                    add(&format!("enp{n}s0"), format!("10.2.0.{n}"));
                }
                if g.below(4) == 0 {
                    // The same address on two nodes under different names.
                    add(&format!("bond{}", g.below(2)), format!("10.9.0.{}", n % 2));
                }
                // The provider's order: a rotation, interfaces kept together.
                let k = g.below(list.len() as u64) as usize;
                list.rotate_left(k);
                let per = 1 + g.below(3);
                for _ in 0..per {
                    table.push((n, list.clone()));
                }
            }
            let all: Vec<Seen> = table
                .iter()
                .map(|(n, l)| Seen {
                    choose: g.below(6) != 0,
                    node: *n,
                    entries: l.iter().map(|(i, a)| (fp(i), fp(a))).collect(),
                })
                .collect();
            // The rules, from the named table.
            let nodes_of = |a: &str| {
                let mut v: Vec<u64> =
                    table.iter().filter(|(_, l)| l.iter().any(|(_, b)| b == a)).map(|t| t.0).collect();
                v.dedup();
                v.len()
            };
            let clean_names = |l: &[(String, String)]| {
                let mut v: Vec<String> = Vec::new();
                for (i, _) in l {
                    if !v.contains(i) && l.iter().filter(|(j, _)| j == i).all(|(_, a)| nodes_of(a) == 1) {
                        v.push(i.clone());
                    }
                }
                v
            };
            let choosing: Vec<usize> = (0..all.len()).filter(|&r| all[r].choose).collect();
            let without: Vec<usize> =
                choosing.iter().copied().filter(|&r| clean_names(&table[r].1).is_empty()).collect();
            match choose_iface(&all) {
                Err(ranks) => {
                    assert_eq!(ranks, without);
                    failed += 1;
                }
                Ok(got) => {
                    assert!(without.is_empty());
                    let everywhere = choosing.first().and_then(|&r0| {
                        clean_names(&table[r0].1)
                            .into_iter()
                            .find(|i| choosing.iter().all(|&r| clean_names(&table[r].1).contains(i)))
                    });
                    for (r, c) in got.iter().enumerate() {
                        if !all[r].choose {
                            assert_eq!(*c, None);
                            continue;
                        }
                        let want = everywhere.clone().unwrap_or_else(|| clean_names(&table[r].1)[0].clone());
                        assert_eq!(*c, Some(fp(&want)), "rank {r} of {table:?}");
                    }
                    if everywhere.is_some() {
                        common += 1;
                    } else {
                        per_rank += 1;
                    }
                }
            }
        }
        // Every branch was exercised.
        assert!(common > 100 && per_rank > 10 && failed > 100, "{common} {per_rank} {failed}");
    }
}
