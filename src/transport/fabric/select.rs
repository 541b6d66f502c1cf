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
//!   agreed by every rank (`iface_choice`): an interface whose address is
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
}
