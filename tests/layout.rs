//! The shape of the code: no import cycle among the modules of the crates
//! whose layering docs/design.md §2 describes (a module reaches another
//! through `crate::` or `super::` paths outside its tests).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// For each module of the crate at `src` (one file each), the modules its
/// non-test code names.
fn uses(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut modules = BTreeMap::new();
    for e in std::fs::read_dir(src).expect("crate sources") {
        let p = e.expect("entry").path();
        let name = p.file_stem().expect("name").to_string_lossy().into_owned();
        if p.extension().is_some_and(|x| x == "rs") && name != "lib" && name != "main" {
            let text = std::fs::read_to_string(&p).expect("source");
            let code = text.split("#[cfg(test)]").next().unwrap_or("").to_string();
            modules.insert(name, code);
        }
    }
    let names: BTreeSet<String> = modules.keys().cloned().collect();
    modules
        .iter()
        .map(|(m, code)| {
            let mut to = BTreeSet::new();
            for prefix in ["crate::", "super::"] {
                for (at, _) in code.match_indices(prefix) {
                    let rest = &code[at + prefix.len()..];
                    let end = rest
                        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .unwrap_or(rest.len());
                    let target = &rest[..end];
                    if target != m && names.contains(target) {
                        to.insert(target.to_string());
                    }
                }
            }
            (m.clone(), to)
        })
        .collect()
}

/// A cycle through the modules, if there is one (depth-first search).
fn cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == m) {
            let mut c = path[at..].to_vec();
            c.push(m.to_string());
            return Some(c);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for next in &g[m] {
            if let Some(c) = visit(next, g, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|m| visit(m, g, &mut Vec::new(), &mut done))
}

fn check(krate: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../crates")
        .join(krate)
        .join("src");
    let g = uses(&src);
    assert!(g.len() > 3, "{}: too few modules found", src.display());
    if let Some(c) = cycle(&g) {
        panic!(
            "crates/{krate}: modules import each other in a circle: {}",
            c.join(" → ")
        );
    }
}

#[test]
fn the_engines_modules_import_each_other_in_no_circle() {
    check("engine");
}

#[test]
fn the_fuse_adapters_modules_import_each_other_in_no_circle() {
    check("fuse");
}

#[test]
fn the_cycle_finder_finds_a_circle() {
    let g: BTreeMap<String, BTreeSet<String>> = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")]
        .iter()
        .map(|(m, to)| (m.to_string(), BTreeSet::from([to.to_string()])))
        .collect();
    assert_eq!(cycle(&g).map(|c| c.len()), Some(4));
    let mut acyclic = g.clone();
    acyclic.insert("c".into(), BTreeSet::new());
    assert_eq!(cycle(&acyclic), None);
}
