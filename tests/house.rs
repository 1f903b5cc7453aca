//! The house's rule for the studies' folders, held to the code: inside each folder of
//! src/bench/, no module imports one that imports it, directly or through the folder's mod.rs
//! (docs/building.md). Imports are read as text: `super::NAME` in a module's code (its doc
//! comments and unit tests left out) names a sibling where NAME is one, else the folder's mod.rs;
//! a mod.rs's `NAME::` names its module NAME.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's code: its unit tests and its comments left out.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// The first names after each `super::` of `code` that is not `super::super` (`super::{a, b::c}`
/// gives a and b).
fn supers(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in code.match_indices("super::") {
        let before = code[..at].chars().next_back();
        let rest = &code[at + "super::".len()..];
        if before == Some(':') || rest.starts_with("super::") {
            continue;
        }
        let word = |text: &str| -> String {
            text.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
        };
        match rest.strip_prefix('{') {
            Some(group) => {
                let (mut depth, mut part) = (0, String::new());
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            names.insert(word(&part));
                            part.clear();
                            continue;
                        }
                        _ => {}
                    }
                    part.push(c);
                }
                names.insert(word(&part));
            }
            None => {
                names.insert(word(rest));
            }
        }
    }
    names.remove("");
    names
}

/// The modules of the folder `dir` (its `NAME.rs` and `NAME/mod.rs`, not mod.rs or tests.rs).
fn modules_of(dir: &Path) -> BTreeMap<String, PathBuf> {
    let mut modules = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.is_dir() && path.join("mod.rs").is_file() {
            modules.insert(name, path.join("mod.rs"));
        } else if path.extension().is_some_and(|e| e == "rs") && name != "mod" && name != "tests" {
            modules.insert(name, path);
        }
    }
    modules
}

/// The imports inside the folder `dir`, as edges from a module (or `mod`) to the ones it names.
fn imports_in(dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules_of(dir);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let own = code(&dir.join("mod.rs"));
    let named = |text: &str, name: &str| {
        text.match_indices(&format!("{name}::")).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
                || text[..at].ends_with("self::")
        })
    };
    edges.insert("mod".into(), modules.keys().filter(|name| named(&own, name)).cloned().collect());
    for (name, path) in &modules {
        let to = supers(&code(path))
            .into_iter()
            .filter(|other| other != name)
            .map(|other| if modules.contains_key(&other) { other } else { "mod".into() })
            .collect();
        edges.insert(name.clone(), to);
    }
    edges
}

/// Each import `a -> b` of `edges` from which `a` is reached again.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let reaches = |from: &str, to: &str| {
        let (mut seen, mut next) = (BTreeSet::new(), vec![from.to_string()]);
        while let Some(at) = next.pop() {
            if at == to {
                return true;
            }
            if seen.insert(at.clone()) {
                next.extend(edges.get(&at).into_iter().flatten().cloned());
            }
        }
        false
    };
    let mut found = Vec::new();
    for (a, to) in edges {
        for b in to {
            if reaches(b, a) {
                found.push(format!("{a} -> {b}"));
            }
        }
    }
    found
}

/// Every folder under `dir` with a mod.rs, `dir` included.
fn folders(dir: &Path, found: &mut Vec<PathBuf>) {
    if dir.join("mod.rs").is_file() {
        found.push(dir.to_path_buf());
    }
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            folders(&path, found);
        }
    }
}

#[test]
fn no_module_of_a_bench_folder_imports_one_that_imports_it() {
    let bench = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/bench");
    let mut dirs = Vec::new();
    folders(&bench, &mut dirs);
    assert!(dirs.len() >= 8, "{} folders found", dirs.len());
    let mut found = Vec::new();
    for dir in &dirs {
        for circle in circles(&imports_in(dir)) {
            found.push(format!("{}: {circle}", dir.strip_prefix(&bench).unwrap().display()));
        }
    }
    assert!(found.is_empty(), "imports that come back round: {found:#?}");

    // The rule's reading finds a circle where there is one: directly, and through a mod.rs.
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    write("mod.rs", "mod a;\nmod b;\npub use a::Thing;\n");
    write("a.rs", "/// Not super::b in a comment.\nuse super::b::Other;\n");
    write("b.rs", "use super::super::Elsewhere;\n");
    assert!(circles(&imports_in(dir.path())).is_empty(), "one way, and a grandparent");
    write("b.rs", "use super::{a::{Thing, Other}};\n");
    assert_eq!(circles(&imports_in(dir.path())), ["a -> b", "b -> a"]);
    write("b.rs", "use super::Thing;\n");
    assert_eq!(circles(&imports_in(dir.path())), ["a -> b", "b -> mod", "mod -> a"]);
}
