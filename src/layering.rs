//! The layers of the crate, written once, and the test that keeps calls
//! one way (docs/dev/architecture.md points here): a module may name its own
//! module, the modules of the layer directly below its own, and the leaves
//! (`crate::x` in any form, `use` or a path); never a module of its own
//! layer or one above it, and not one further down: what a layer needs from
//! deeper down comes through the layer below it (capi reaches gpu and mpi
//! through store::process, for instance). EXCEPTIONS lists the uses that
//! skip layers, each with its reason. A module with a FACADE is named from
//! outside only by its root and the submodules listed there: the store
//! hands requests to a variable's transport and never names a concrete
//! transport (MPI windows, the exchange, the fabric, node-local maps).

/// Top-level modules, from the C boundary down. A module's layer is its
/// index here; the last `LEAF_LAYERS` layers are the leaves, which every
/// layer above them may use.
const LAYERS: &[&[&str]] = &[
    // The only extern "C" items.
    &["capi"],
    // A store: registry, dispatch, agreement of collectives.
    &["store"],
    // One variable; the method-2 hand-shake record format.
    &["var", "handshake"],
    // Moving rows between ranks (MPI windows and exchange, libfabric, node-local).
    &["transport"],
    // Row ownership; shard memory.
    &["layout", "shard"],
    // mpi-sys wrappers; device memory.
    &["mpi", "gpu"],
    // Leaves.
    &["config", "profile", "copy", "hash", "trust"],
    &["error"],
];

const LEAF_LAYERS: usize = 2;

/// Uses that skip layers (or run against the table), each with its reason.
/// Each is a whole pair of modules: a new use between them needs no entry.
const EXCEPTIONS: &[(&str, &str)] = &[
    // config parses DDSTORE_GPU, DDSTORE_GPU_DIRECT and
    // DDSTORE_TEST_GPU_DIRECT_HOST_IFACE into gpu's option types (gpu::Mode,
    // gpu::direct::{Direct, Iface}), which live with the code that acts on
    // them; gpu::direct in turn reads config's switch words.
    ("config", "gpu"),
    // The store builds each variable's parts before var holds them: its
    // transport (through transport::Network, which chooses it) and the
    // node-local view, and hands the transport checked reads, one-sided or
    // collective. Only through the transport's facade (FACADES).
    ("store", "transport"),
    // dds_add and the method-2 joins compute a new variable's layout and
    // map or allocate its shard, then hand both to var::Variable.
    ("store", "layout"),
    ("store", "shard"),
    // The store owns the communicator: collectives agree over it (agree,
    // Comm), request threads mark themselves for MPI's thread gate, and
    // process.rs carries capi's finalisation hook.
    ("store", "mpi"),
    // Device destinations: routes (gpu::direct), staging, stream order, and
    // process.rs carries capi's pointer and driver queries.
    ("store", "gpu"),
    // A variable owns its layout and shard next to its transport.
    ("var", "layout"),
    ("var", "shard"),
    // MPI RMA windows and the exchange are MPI calls; the node-local and
    // fabric set-ups agree over the communicator.
    ("transport", "mpi"),
    // The fabric registers device memory by its interface (gpu::direct).
    ("transport", "gpu"),
];

/// Modules that other modules may name only through their root and the
/// submodules listed: a transport's protocol is its own (docs/dev/architecture.md).
const FACADES: &[(&str, &[&str])] = &[("transport", &["network", "waiting"])];

/// Whether a module of layer `mine` may name one of layer `used` by the
/// layer rule alone: the layer directly below, or a leaf below it.
fn rule_allows(mine: usize, used: usize) -> bool {
    used == mine + 1 || (used > mine && used >= LAYERS.len() - LEAF_LAYERS)
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The names a source text puts right after `head` (each name of a
/// `head{a, b::c}` group too) that `keep` accepts, with the line of each
/// (comment lines skipped).
fn names_after(text: &str, head: &str, keep: impl Fn(&str) -> bool) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find(head) {
            rest = &rest[at + head.len()..];
            // `crate::{a, b::c}` names several modules.
            let names: Vec<&str> = match rest.strip_prefix('{') {
                Some(group) => group.split('}').next().unwrap_or("").split(',').collect(),
                None => vec![rest],
            };
            for name in names {
                let name = name.trim_start();
                let end = name.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(name.len());
                if end > 0 && keep(name) {
                    out.push((n + 1, name[..end].to_string()));
                }
            }
        }
    }
    out
}

/// The top-level modules a source text names through `crate::`, with the
/// line of each (comment lines skipped).
fn crate_refs(text: &str) -> Vec<(usize, String)> {
    names_after(text, "crate::", |_| true)
}

/// The submodules of `module` a source text names through
/// `crate::module::` (lower-case path segments: items at its root, which
/// are types and functions, are not modules), with the line of each.
fn submodule_refs(text: &str, module: &str) -> Vec<(usize, String)> {
    names_after(text, &format!("crate::{module}::"), |name| name.starts_with(|c: char| c.is_ascii_lowercase()))
}

/// Every use in the sources under `src` that breaks the table, as
/// "file:line: a uses b".
fn violations(src: &std::path::Path) -> Vec<String> {
    let mut files = vec![src.to_path_buf()];
    let mut found = Vec::new();
    while let Some(p) = files.pop() {
        if p.is_dir() {
            files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if p.extension() != Some(std::ffi::OsStr::new("rs")) {
            continue;
        }
        let rel = p.strip_prefix(src).unwrap();
        let top = rel.components().next().unwrap().as_os_str().to_str().unwrap().trim_end_matches(".rs");
        if top == "lib" || top == "layering" {
            continue;
        }
        let Some(mine) = layer_of(top) else {
            found.push(format!("{}: module '{top}' is not in layering::LAYERS", rel.display()));
            continue;
        };
        let text = std::fs::read_to_string(&p).unwrap();
        for (module, open) in FACADES.iter().filter(|(m, _)| *m != top) {
            for (line, sub) in submodule_refs(&text, module).into_iter().filter(|(_, s)| !open.contains(&s.as_str())) {
                found.push(format!(
                    "src/{}:{line}: '{top}' names {module}::{sub}, which is behind {module}'s facade \
                     (reach it through {module}'s root or {}; see layering::FACADES)",
                    rel.display(),
                    open.join(", ")
                ));
            }
        }
        for (line, used) in crate_refs(&text) {
            if used == top || EXCEPTIONS.contains(&(top, used.as_str())) {
                continue;
            }
            match layer_of(&used) {
                Some(l) if rule_allows(mine, l) => {}
                Some(l) if l > mine => found.push(format!(
                    "src/{}:{line}: '{top}' uses '{used}', which is neither the layer directly below it nor a leaf \
                     (reach it through that layer, or add a reasoned entry to layering::EXCEPTIONS)",
                    rel.display()
                )),
                Some(_) => {
                    found.push(format!("src/{}:{line}: '{top}' uses '{used}', which is not below it", rel.display()))
                }
                None => found.push(format!("src/{}:{line}: '{used}' is not in layering::LAYERS", rel.display())),
            }
        }
    }
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_use_follows_the_layers() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let bad = violations(&src);
        assert!(bad.is_empty(), "uses against the layers of src/layering.rs:\n{}", bad.join("\n"));
    }

    #[test]
    fn references_are_found_in_every_form() {
        let text = "use crate::store::Store;\n// crate::capi in a comment\nlet x = crate::copy::copy_rows;\n\
                    use crate::{mpi::Comm, gpu};\n";
        let got: Vec<String> = crate_refs(text).into_iter().map(|(_, m)| m).collect();
        assert_eq!(got, ["store", "copy", "mpi", "gpu"]);
    }

    #[test]
    fn submodules_behind_a_facade_are_found() {
        let text = "use crate::transport::{network, Near, fabric::Fabric};\n// crate::transport::local\n\
                    let r = crate::transport::mpi_rma::RmaVar::new;\nuse crate::transport::Transport;\n";
        let got: Vec<(usize, String)> = submodule_refs(text, "transport");
        let want = [(1, "network"), (1, "fabric"), (3, "mpi_rma")].map(|(l, s)| (l, s.to_string()));
        assert_eq!(got, want);
    }

    #[test]
    fn only_the_layer_below_and_the_leaves_are_allowed() {
        let may = |a: &str, b: &str| rule_allows(layer_of(a).unwrap(), layer_of(b).unwrap());
        assert!(may("capi", "store") && may("capi", "error") && may("capi", "config") && may("store", "var"));
        assert!(may("transport", "layout") && may("config", "error"));
        assert!(!may("capi", "gpu") && !may("capi", "mpi") && !may("capi", "var") && !may("store", "store"));
        assert!(!may("store", "capi") && !may("error", "config") && !may("copy", "hash"));
        // Every exception is a use the rule alone refuses.
        for (a, b) in EXCEPTIONS {
            assert!(!may(a, b), "layering::EXCEPTIONS: '{a}' may use '{b}' anyway");
        }
    }

    #[test]
    fn every_top_level_module_has_one_layer() {
        let all: Vec<&str> = LAYERS.iter().flat_map(|l| l.iter().copied()).collect();
        for (i, m) in all.iter().enumerate() {
            assert!(!all[i + 1..].contains(m), "'{m}' is in two layers");
        }
    }
}
