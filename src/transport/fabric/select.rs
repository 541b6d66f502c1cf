//! Provider and domain choice for method 1 (pure functions, unit-tested).
//!
//! The candidates are the `(provider, domain)` pairs that one `fi_getinfo`
//! (RDM endpoint, RMA read as initiator and target) returns. Rules:
//!
//! * `DDSTORE_FABRIC` (or `dds_options.fabric_provider`) names a provider.
//!   `hsn` and `tcp` mean `tcp;ofi_rxm`; a name without `;` also matches
//!   `<name>;ofi_rxm` (so `verbs` finds `verbs;ofi_rxm`). Matching ignores case.
//! * `FABRIC_IFACE` (or `dds_options.fabric_iface`) names a domain. It applies
//!   to network providers only: `shm` (whose domain is not an interface)
//!   ignores it. For `cxi`, an `hsnN` interface name means domain `cxiN`.
//!   When it applies and no domain of the provider has that name, the
//!   choice fails (with an explicit provider) or the provider is skipped
//!   (automatic choice; `tcp;ofi_rxm`, the last resort, fails).
//! * With no provider named: native high-speed providers first (`cxi`,
//!   `verbs;ofi_rxm`, `efa`, `psm3`, `opx`), then `shm` when every rank of the
//!   store runs on one node, then `tcp;ofi_rxm`.
//! * Without `FABRIC_IFACE`, `DDSTORE_NIC_MAP` (`nic=cpus;nic=cpus`, CPUs as
//!   single numbers or `lo-hi` ranges separated by commas) picks the NIC whose
//!   CPUs overlap this process's CPU affinity (the alphabetically first when
//!   several do); it then acts as `FABRIC_IFACE`. No match: no interface
//!   constraint (never an exit).
//! * With no interface named (neither of the above) and ranks on several
//!   nodes, the interface of an address-based provider (`tcp;ofi_rxm`) is
//!   agreed by every rank ([`choose_iface`]): an interface whose address is
//!   the same on two nodes (a container or VM bridge such as `docker0`,
//!   loopback) reaches no other node, so it is never taken; the same
//!   interface name on every rank where one fits, else each rank's first
//!   fitting one; none on some rank fails the create on every rank.

/// Native providers in order of preference for the automatic choice.
pub const NATIVE: [&str; 6] = ["cxi", "verbs;ofi_rxm", "verbs", "efa", "psm3", "opx"];

/// The canonical spelling of a requested provider name.
pub fn normalize_provider(name: &str) -> String {
    let n = name.trim().to_ascii_lowercase();
    match n.as_str() {
        "hsn" | "tcp" | "tcp;rxm" => "tcp;ofi_rxm".to_string(),
        _ => n,
    }
}

/// True when the candidate provider `prov` satisfies the request `want`
/// (already normalised).
pub fn provider_matches(want: &str, prov: &str) -> bool {
    let p = prov.to_ascii_lowercase();
    p == want || (!want.contains(';') && p == format!("{want};ofi_rxm"))
}

/// Whether `FABRIC_IFACE` constrains the domain of provider `prov`.
pub fn iface_applies(prov: &str) -> bool {
    !prov.eq_ignore_ascii_case("shm")
}

/// The domain name an interface stands for with provider `prov` (`hsnN` is
/// `cxiN` for the cxi provider).
pub fn domain_for_iface(prov: &str, iface: &str) -> String {
    if prov.eq_ignore_ascii_case("cxi") {
        if let Some(n) = iface.strip_prefix("hsn") {
            return format!("cxi{n}");
        }
    }
    iface.to_string()
}

/// What the caller asked for.
#[derive(Clone, Debug, Default)]
pub struct Request {
    pub provider: Option<String>,
    pub iface: Option<String>,
    pub single_node: bool,
}

fn domains_of(cands: &[(String, String)], pred: impl Fn(&str) -> bool) -> Vec<String> {
    let mut d: Vec<String> = cands.iter().filter(|c| pred(&c.0)).map(|c| c.1.clone()).collect();
    d.dedup();
    d
}

/// First candidate of a provider matching `want`, honouring the interface.
/// `Ok(None)`: the provider is absent; `Err(domains)`: present, but no domain
/// matches the interface.
fn pick(cands: &[(String, String)], want: &str, iface: Option<&str>) -> Result<Option<usize>, Vec<String>> {
    let mut seen = false;
    for (i, (p, d)) in cands.iter().enumerate() {
        if !provider_matches(want, p) {
            continue;
        }
        seen = true;
        match iface {
            Some(f) if iface_applies(p) && *d != domain_for_iface(p, f) => continue,
            _ => return Ok(Some(i)),
        }
    }
    if seen {
        Err(domains_of(cands, |p| provider_matches(want, p)))
    } else {
        Ok(None)
    }
}

/// Chooses the index of the candidate to use, or says why none fits.
pub fn choose(cands: &[(String, String)], req: &Request) -> Result<usize, String> {
    let iface = req.iface.as_deref();
    let all_provs = || {
        let mut p: Vec<&str> = cands.iter().map(|c| c.0.as_str()).collect();
        p.dedup();
        if p.is_empty() {
            "none".to_string()
        } else {
            p.join(", ")
        }
    };
    if let Some(want) = &req.provider {
        let want = normalize_provider(want);
        return match pick(cands, &want, iface) {
            Ok(Some(i)) => Ok(i),
            Ok(None) => Err(format!(
                "libfabric provider '{want}' is not available for RDM endpoints with RMA read \
                 (available: {}); check DDSTORE_FABRIC",
                all_provs()
            )),
            Err(domains) => Err(format!(
                "libfabric provider '{want}' has no domain '{}' (FABRIC_IFACE={}; its domains: {})",
                domain_for_iface(&want, iface.unwrap_or("")),
                iface.unwrap_or(""),
                domains.join(", ")
            )),
        };
    }
    for want in NATIVE {
        if let Ok(Some(i)) = pick(cands, want, iface) {
            return Ok(i);
        }
    }
    if req.single_node {
        if let Ok(Some(i)) = pick(cands, "shm", iface) {
            return Ok(i);
        }
    }
    match pick(cands, "tcp;ofi_rxm", iface) {
        Ok(Some(i)) => Ok(i),
        Ok(None) => Err(format!(
            "no usable libfabric provider for RDM endpoints with RMA read (available: {}); \
             set DDSTORE_FABRIC",
            all_provs()
        )),
        Err(domains) => Err(format!(
            "no usable libfabric provider: FABRIC_IFACE={} matches no domain of tcp;ofi_rxm \
             (its domains: {}); set FABRIC_IFACE or DDSTORE_FABRIC",
            iface.unwrap_or(""),
            domains.join(", ")
        )),
    }
}

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

    fn c(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(p, d)| (p.to_string(), d.to_string())).collect()
    }

    fn req(p: Option<&str>, i: Option<&str>, single: bool) -> Request {
        Request { provider: p.map(String::from), iface: i.map(String::from), single_node: single }
    }

    #[test]
    fn names_normalise() {
        assert_eq!(normalize_provider("hsn"), "tcp;ofi_rxm");
        assert_eq!(normalize_provider(" TCP "), "tcp;ofi_rxm");
        assert_eq!(normalize_provider("shm"), "shm");
        assert!(provider_matches("verbs", "verbs;ofi_rxm"));
        assert!(provider_matches("tcp;ofi_rxm", "tcp;ofi_rxm"));
        assert!(!provider_matches("tcp;ofi_rxm", "tcp"));
        assert!(!provider_matches("shm", "sockets"));
        assert_eq!(domain_for_iface("cxi", "hsn1"), "cxi1");
        assert_eq!(domain_for_iface("tcp;ofi_rxm", "hsn1"), "hsn1");
    }

    #[test]
    fn explicit_provider_and_iface() {
        let cands = c(&[("tcp;ofi_rxm", "eth0"), ("tcp;ofi_rxm", "lo"), ("shm", "shm"), ("sockets", "lo")]);
        assert_eq!(choose(&cands, &req(Some("tcp"), Some("lo"), false)), Ok(1));
        assert_eq!(choose(&cands, &req(Some("hsn"), None, false)), Ok(0));
        // The interface does not apply to shm.
        assert_eq!(choose(&cands, &req(Some("shm"), Some("lo"), true)), Ok(2));
        let e = choose(&cands, &req(Some("tcp"), Some("nosuchif"), false)).unwrap_err();
        assert!(e.contains("nosuchif") && e.contains("eth0, lo"), "{e}");
        let e = choose(&cands, &req(Some("nosuchprov"), None, false)).unwrap_err();
        assert!(e.contains("'nosuchprov'") && e.contains("shm"), "{e}");
    }

    #[test]
    fn automatic_order() {
        let cands = c(&[("tcp;ofi_rxm", "lo"), ("shm", "shm"), ("verbs;ofi_rxm", "mlx5_0")]);
        assert_eq!(choose(&cands, &req(None, None, true)), Ok(2));
        // A native provider whose domain does not match the interface is skipped.
        assert_eq!(choose(&cands, &req(None, Some("lo"), true)), Ok(1));
        assert_eq!(choose(&cands, &req(None, Some("lo"), false)), Ok(0));
        let e = choose(&cands, &req(None, Some("eth9"), false)).unwrap_err();
        assert!(e.contains("eth9"), "{e}");
        assert!(choose(&c(&[("udp;ofi_rxd", "lo")]), &req(None, None, false)).is_err());
        let cxi = c(&[("tcp;ofi_rxm", "hsn0"), ("cxi", "cxi0"), ("cxi", "cxi1")]);
        assert_eq!(choose(&cxi, &req(None, Some("hsn1"), false)), Ok(2));
    }

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
